package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// GetUpdater reads and updates one kind of object.
type GetUpdater[T any] interface {
	Getter[T]
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// UpdateOnConflict applies mutate to current and writes the result. current is typically a
// deep copy of a cached object, so the first attempt costs one call; when the API server
// answers Conflict (the object changed meanwhile) the object is read again from the API and
// mutate reapplied, with client-go's default retry backoff. mutate reports whether it changed
// anything: when it did not, nothing is written and updated is false.
func UpdateOnConflict[T any](ctx context.Context, c GetUpdater[T], name string, current T, mutate func(T) bool) (result T, updated bool, err error) {
	first := true
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := current
		if !first {
			fresh, getErr := c.Get(ctx, name, metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			obj = fresh
		}
		first = false
		if !mutate(obj) {
			result, updated = obj, false
			return nil
		}
		written, updateErr := c.Update(ctx, obj, metav1.UpdateOptions{})
		if updateErr != nil {
			return updateErr
		}
		result, updated = written, true
		return nil
	})
	if err != nil {
		var zero T
		return zero, false, err
	}
	return result, updated, nil
}
