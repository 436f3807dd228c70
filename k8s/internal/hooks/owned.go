package hooks

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/opi"
)

// updater is the update call of a typed client-go client.
type updater[T any] interface {
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// SyncOwned makes want's object exist, controlled by t's workload, with want's content
// (copyInto moves want's content into the current object and says whether anything
// changed): read, then created when absent, made controlled when it is not (kube.
// EnsureControlled), or rewritten when it differs; retried on conflict. Used where an event
// changes an existing object (a route update): a GET and at most one write.
func SyncOwned[T interface {
	metav1.Object
	comparable
}](ctx context.Context, c interface {
	kube.Client[T]
	updater[T]
}, want T, t Target, copyInto func(current, want T) bool) error {
	want.SetOwnerReferences([]metav1.OwnerReference{t.Owner})
	name := want.GetName()
	again := apierrors.NewConflict(schema.GroupResource{}, name, errors.New("changed meanwhile"))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := c.Get(ctx, name, metav1.GetOptions{})
		if kube.Classify(err) == kube.KindNotFound {
			_, err = c.Create(ctx, kube.DeepCopy(want), metav1.CreateOptions{})
			if kube.Classify(err) == kube.KindAlreadyExists {
				return again
			}
			return err
		}
		if err != nil {
			return err
		}
		if ctrl := metav1.GetControllerOf(current); ctrl == nil || ctrl.UID != t.Owner.UID {
			if err := kube.EnsureControlled(ctx, c, kube.DeepCopy(want), current, t.Owner, t.Live); err != nil {
				return err
			}
			return again
		}
		if !copyInto(current, want) {
			return nil
		}
		_, err = c.Update(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if kube.Classify(err) == kube.KindConflict {
		// Other writers won every attempt: CC retries the update later.
		return fmt.Errorf("%s changed under every attempt to write it: %w", name, opi.ErrUnavailable)
	}
	return err
}

// DeleteIfPresent deletes name; absent is fine.
func DeleteIfPresent(ctx context.Context, del func(context.Context, string, metav1.DeleteOptions) error, name string) error {
	if err := del(ctx, name, metav1.DeleteOptions{}); err != nil && kube.Classify(err) != kube.KindNotFound {
		return err
	}
	return nil
}

// OwnerMeta is an object with owner's uid, for metav1.IsControlledBy.
func OwnerMeta(owner metav1.OwnerReference) metav1.Object {
	return &metav1.ObjectMeta{UID: owner.UID}
}

// WrapErr says what a hook was doing; the caller maps the error (as a refusal of what).
func WrapErr(err error, what string) error {
	if err == nil {
		return nil
	}
	return &StepError{What: what, Err: err}
}

// StepError is a hook's failed step: what it was doing, and the error.
type StepError struct {
	What string
	Err  error
}

func (e *StepError) Error() string { return e.What + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// Without is the workloads for which complete is false.
func Without(workloads []Workload, complete func(Workload) bool) []Workload {
	var out []Workload
	for _, w := range workloads {
		if !complete(w) {
			out = append(out, w)
		}
	}
	return out
}
