package kube

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ErrSuperseded says the owner an object was to be given is no longer the live object of its
// name: it was deleted (and perhaps created again) while the caller worked. What it owns is
// the garbage collector's; the caller has nothing left to do.
var ErrSuperseded = errors.New("owner was deleted meanwhile")

// maxEnsureAttempts bounds EnsureControlled's loop; each turn means another writer changed
// the object in between, which only a few writers racing on one name can do.
const maxEnsureAttempts = 5

// Client is what EnsureControlled needs of a typed client-go client (e.g. SecretInterface).
type Client[T any] interface {
	Creator[T]
	Getter[T]
	Patcher[T]
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// EnsureControlled makes want's name exist controlled by owner, safely against other writers
// of the same name, including ones holding an owner that was deleted meanwhile:
//
//   - absent: want is created with owner as its controller;
//   - without a controller: owner is set by a patch conditional on the version seen, so it
//     never overwrites what another writer set since;
//   - controlled by owner: done;
//   - controlled by another (an earlier object of owner's name, now deleted, or a later one):
//     only if live says owner is still the live object is the object deleted (conditional on
//     its uid) and created again; otherwise ErrSuperseded.
//
// An object is never moved from one controller to another: the garbage collector, which may
// be deleting it for its old controller, could then delete it under the new one.
//
// seen is the object as the caller last read or created it, or the zero value to read it
// first. want is modified (its owner references are set).
func EnsureControlled[T interface {
	metav1.Object
	comparable
}](ctx context.Context, c Client[T], want T, seen T, owner metav1.OwnerReference, live func(context.Context) (bool, error)) error {
	return ensureControlled(ctx, c, want, seen, owner, live, true)
}

// EnsureFreeOrControlled is EnsureControlled for an object that may as well be owned by
// nothing (an LRP's Secrets beside a workload that existed before the desire, see
// lrp.DesireLRP): one without a controller is left as it is, with no patch; one controlled by
// another object is made again controlled by owner, as by EnsureControlled.
func EnsureFreeOrControlled[T interface {
	metav1.Object
	comparable
}](ctx context.Context, c Client[T], want T, owner metav1.OwnerReference, live func(context.Context) (bool, error)) error {
	var zero T
	return ensureControlled(ctx, c, want, zero, owner, live, false)
}

// ensureControlled is EnsureControlled; adopt says an object without a controller is given
// owner (else it is left as it is).
func ensureControlled[T interface {
	metav1.Object
	comparable
}](ctx context.Context, c Client[T], want T, seen T, owner metav1.OwnerReference, live func(context.Context) (bool, error), adopt bool) error {
	var zero T
	want.SetOwnerReferences([]metav1.OwnerReference{owner})
	name := want.GetName()
	absent := false // known absent: create without reading first
	for range maxEnsureAttempts {
		current := seen
		seen = zero
		if current == zero && !absent {
			got, err := c.Get(ctx, name, metav1.GetOptions{})
			switch {
			case Classify(err) == KindNotFound:
				absent = true
			case err != nil:
				return err
			default:
				current = got
			}
		}
		if absent {
			absent = false
			_, err := c.Create(ctx, want, metav1.CreateOptions{})
			if err == nil {
				return nil
			}
			if Classify(err) == KindAlreadyExists {
				continue
			}
			return err
		}

		controller := metav1.GetControllerOf(current)
		switch {
		case controller != nil && controller.UID == owner.UID:
			return nil
		case controller == nil && !adopt:
			return nil
		case controller == nil && current.GetDeletionTimestamp() == nil:
			_, err := SetOwner(ctx, c, name, current.GetResourceVersion(), owner)
			if err == nil {
				return nil
			}
			if k := Classify(err); k != KindConflict && k != KindNotFound {
				return err
			}
		default:
			ok, err := live(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return ErrSuperseded
			}
			err = c.Delete(ctx, name, Unchanged(current))
			switch {
			case err == nil || Classify(err) == KindNotFound:
				absent = true
			case Classify(err) == KindConflict: // replaced meanwhile: look again
			default:
				return err
			}
		}
	}
	return fmt.Errorf("%s kept changing under %d attempts to own it", name, maxEnsureAttempts)
}

// EnsureOwned makes want exist controlled by owner: one create when it is absent (a first
// desire), else EnsureControlled on what exists, whose content is left as it is. created says
// whether this call made it; result is the created object (the zero value when it existed).
// want is modified (its owner references are set).
func EnsureOwned[T interface {
	metav1.Object
	comparable
}](ctx context.Context, c Client[T], want T, owner metav1.OwnerReference, live func(context.Context) (bool, error)) (result T, created bool, err error) {
	var zero T
	want.SetOwnerReferences([]metav1.OwnerReference{owner})
	if result, created, err = CreateIfAbsent(ctx, c, DeepCopy(want)); err != nil || created {
		return result, created, err
	}
	return zero, false, EnsureControlled(ctx, c, want, zero, owner, live)
}

// DeepCopy copies an API object (create calls may modify what they are given in fakes).
func DeepCopy[T any](obj T) T {
	if c, ok := any(obj).(interface{ DeepCopyObject() runtime.Object }); ok {
		return c.DeepCopyObject().(T)
	}
	return obj
}

// Unchanged is the options of a delete that happens only if obj is still as it was read: the
// same object (uid) at the same version. A delete decided on what an object looked like (no
// controller, say) must not hit it after another writer changed that.
func Unchanged(obj metav1.Object) metav1.DeleteOptions {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	pre := &metav1.Preconditions{}
	if uid != "" {
		pre.UID = &uid
	}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	return metav1.DeleteOptions{Preconditions: pre}
}
