package kube

import (
	"context"
	"errors"
	"fmt"

	"code.cloudfoundry.org/lager/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/opi"
)

// What the services' writes share: how a refusal is told from a failure, and conditional
// deletes.

// IsRefusal says whether err is Kubernetes refusing a write for what it holds rather than
// failing to carry it out: invalid (422, 400, 413) or forbidden (403: an admission webhook, a
// quota, a policy). Retrying the same request cannot succeed; CC gets a 400.
func IsRefusal(err error) bool {
	return Classify(err) == KindInvalid || apierrors.IsForbidden(err)
}

// Refusal is APIError for the writes of a desire or an update, where a 403 is a refusal of the
// request (opi.ErrInvalid) like a 422, never a 500.
func Refusal(err error, doing string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: %w: %w", doing, opi.ErrInvalid, err)
	}
	return APIError(err, doing)
}

// OwnershipError maps what EnsureControlled returned. ErrSuperseded is success: a stop deleted
// the owner while the write ran, so the write took effect and was then undone (or the object
// was desired again by another call, which completes it).
func OwnershipError(logger lager.Logger, err error, what string) error {
	if errors.Is(err, ErrSuperseded) {
		logger.Info("superseded-by-stop", lager.Data{"step": what})
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return Refusal(err, what)
	}
	// Contention that outlasted the attempts: CC retries later.
	return fmt.Errorf("%s: %w: %w", what, opi.ErrUnavailable, err)
}

// GoneOrChanged says a conditional delete found its object deleted or changed meanwhile.
func GoneOrChanged(err error) bool {
	k := Classify(err)
	return k == KindNotFound || k == KindConflict
}

// PreconditionUID deletes obj only if it is still the same object (not a namesake made since).
func PreconditionUID(obj metav1.Object) metav1.DeleteOptions {
	uid := obj.GetUID()
	if uid == "" {
		return metav1.DeleteOptions{}
	}
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// InBackground is opts with background propagation: the delete returns at once and the
// garbage collector removes what the object controls (a workload's pods, a Job's pod) after.
func InBackground(opts metav1.DeleteOptions) metav1.DeleteOptions {
	background := metav1.DeletePropagationBackground
	opts.PropagationPolicy = &background
	return opts
}

// DeleteAsListed deletes obj only if it is unchanged since it was listed (a desire may have
// given it an owner since). Gone or changed meanwhile is success: another writer acted on it.
func DeleteAsListed(ctx context.Context, del func(context.Context, string, metav1.DeleteOptions) error, obj metav1.Object) error {
	if err := del(ctx, obj.GetName(), Unchanged(obj)); err != nil && !GoneOrChanged(err) {
		return err
	}
	return nil
}
