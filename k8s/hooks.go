package k8s

import (
	"context"
	"errors"
	"fmt"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/k8s/workload"
	"github.com/opi-bridge/opi/opi"
)

// A hook is one concern of the backend (the Service, routing, network policy, placement,
// volumes, ...) reacting to the lifecycle events of an LRP. Each lives in its own file
// (hook_*.go) and is registered in registerHooks; adding a concern is that file plus one line.
//
// The events, in the order a write calls them:
//
//   - started (Start, once): namespace-wide objects the concern needs (a baseline policy);
//   - check (desire and update): before anything is written, reject with opi.ErrInvalid what the
//     concern cannot serve, so that a refused request leaves nothing behind;
//   - shape (desire): add what the concern needs to the Deployment before it is created (pod
//     spec fields: node selector, volumes);
//   - desired (desire, after the Deployment exists, and the janitor): create the concern's
//     objects, each controlled by the Deployment (t.owner). It must be idempotent: an object
//     that exists is left as it is (or made controlled by t.owner, see ensureOwned), since the
//     next desire of the LRP and the janitor call it again to finish an interrupted desire;
//   - updated (update, before the Deployment is patched): make the objects match the LRP as it
//     will be. The Deployment's patch (with CC's last_updated token) comes last, so an update
//     interrupted here is sent again by CC, whose sync sees the old token;
//   - stopped: nothing to do. Every object is controlled by the Deployment, so StopLRP's one
//     delete of the Deployment lets the garbage collector remove them;
//   - missing (the janitor): of the Deployments given (all older than the janitor's grace), those
//     whose objects of this concern are absent (one metadata-only LIST of them, see
//     metadataLists); the janitor calls desired for each of them.
//
// A hook embeds noHook and implements only the events it reacts to.
type hook interface {
	hookName() string
	started(ctx context.Context) error
	check(ctx context.Context, lrp *opi.LRP) error
	shape(lrp *opi.LRP, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec)
	desired(ctx context.Context, t hookTarget) error
	updated(ctx context.Context, t hookTarget, before *opi.LRP, update opi.LRPUpdate) error
	missing(ctx context.Context, deployments []*workloadRecord) ([]*workloadRecord, error)
}

// hookTarget is the LRP a hook acts on, with its Deployment.
type hookTarget struct {
	// lrp is as desired, or as it is once the update is applied. From a cached Deployment it
	// lacks env and registry credentials (hooks never need them).
	lrp *opi.LRP
	// name is the Deployment's name; a hook's objects are named after it.
	name      string
	namespace string
	// owner is the controller reference every object of the LRP carries.
	owner metav1.OwnerReference
	// live tells, from the API server, whether the owner is still the live Deployment.
	live func(context.Context) (bool, error)
}

// noHook is the hook that reacts to nothing; hooks embed it.
type noHook struct{}

func (noHook) started(context.Context) error                               { return nil }
func (noHook) check(context.Context, *opi.LRP) error                       { return nil }
func (noHook) shape(*opi.LRP, *metav1.ObjectMeta, *corev1.PodTemplateSpec) {}
func (noHook) desired(context.Context, hookTarget) error                   { return nil }
func (noHook) missing(context.Context, []*workloadRecord) ([]*workloadRecord, error) {
	return nil, nil
}
func (noHook) updated(context.Context, hookTarget, *opi.LRP, opi.LRPUpdate) error {
	return nil
}

// registerHooks makes the backend's hooks from its options, in the order they act.
func (b *Backend) registerHooks(opts Options) {
	// Tasks' policies are the network policy hook's too (DesireTask calls it).
	b.policies = newNetworkPolicyHook(b.client, b.listMetadata, b.namespace, opts.NetworkPolicy)
	b.hooks = []hook{
		&serviceHook{client: b.client, list: b.listMetadata, namespace: b.namespace, headless: opts.HeadlessServices},
		newRoutingHook(b.client, b.gateway, b.listMetadata, b.namespace, opts.Routing),
		b.policies,
		&placementHook{opts: opts.Placement},
		&volumeHook{client: b.client, namespace: b.namespace},
		&disruptionHook{client: b.client, list: b.listMetadata, namespace: b.namespace, logger: b.logger.Session("disruption-budget")},
	}
}

// checkHooks runs every hook's check.
func (b *Backend) checkHooks(ctx context.Context, lrp *opi.LRP) error {
	for _, h := range b.hooks {
		if err := h.check(ctx, lrp); err != nil {
			return err
		}
	}
	return nil
}

// shapeWorkload lets every hook add to the workload (its metadata and pod template, the same
// for Deployments and StatefulSets) before it is created.
func (b *Backend) shapeWorkload(lrp *opi.LRP, w workload.Object) {
	for _, h := range b.hooks {
		h.shape(lrp, w.Meta, w.Template)
	}
}

// runUpdatedHooks tells every hook about an update, before the Deployment is patched.
func (b *Backend) runUpdatedHooks(ctx context.Context, logger lager.Logger, t hookTarget, before *opi.LRP, update opi.LRPUpdate) error {
	for _, h := range b.hooks {
		if err := h.updated(ctx, t, before, update); err != nil {
			return b.hookError(logger, err, h.hookName())
		}
	}
	return nil
}

// hookError maps what a hook's desired or updated returned: a stop that deleted the Deployment
// meanwhile (kube.ErrSuperseded) is success, as for the Secrets (ownershipError); Kubernetes
// refusing the object (422, 403) is opi.ErrInvalid (refusal).
func (b *Backend) hookError(logger lager.Logger, err error, hook string) error {
	var status apierrors.APIStatus
	if errors.Is(err, kube.ErrSuperseded) || !errors.As(err, &status) {
		return b.ownershipError(logger, err, hook)
	}
	var step *hookStepError
	if errors.As(err, &step) {
		return refusal(step.err, step.what)
	}
	return refusal(err, hook)
}

// targetOf is the hook target of a cached Deployment, for updates and the janitor.
func (b *Backend) targetOf(d *workloadRecord, lrp *opi.LRP) hookTarget {
	return hookTarget{
		lrp:       lrp,
		name:      d.Name,
		namespace: b.namespace,
		owner:     b.controllerRef(d),
		live:      b.liveCheck(d),
	}
}

// ensureOwned makes want exist controlled by t's Deployment: one create when it is absent (a
// first desire), else kube.EnsureControlled. An existing object's content is left as it is.
func ensureOwned[T interface {
	metav1.Object
	comparable
}](ctx context.Context, c kube.Client[T], want T, t hookTarget) (created bool, err error) {
	var zero T
	want.SetOwnerReferences([]metav1.OwnerReference{t.owner})
	if _, created, err = kube.CreateIfAbsent(ctx, c, deepCopy(want)); err != nil || created {
		return created, err
	}
	return false, kube.EnsureControlled(ctx, c, want, zero, t.owner, t.live)
}

// updater is the update call of a typed client-go client.
type updater[T any] interface {
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// syncOwned makes want's object exist, controlled by t's Deployment, with want's content
// (copyInto moves want's content into the current object and says whether anything
// changed): read, then created when absent, made controlled when it is not (kube.
// EnsureControlled), or rewritten when it differs; retried on conflict. Used where an event
// changes an existing object (a route update): a GET and at most one write.
func syncOwned[T interface {
	metav1.Object
	comparable
}](ctx context.Context, c interface {
	kube.Client[T]
	updater[T]
}, want T, t hookTarget, copyInto func(current, want T) bool) error {
	want.SetOwnerReferences([]metav1.OwnerReference{t.owner})
	name := want.GetName()
	again := apierrors.NewConflict(schema.GroupResource{}, name, errors.New("changed meanwhile"))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := c.Get(ctx, name, metav1.GetOptions{})
		if kube.Classify(err) == kube.KindNotFound {
			_, err = c.Create(ctx, deepCopy(want), metav1.CreateOptions{})
			if kube.Classify(err) == kube.KindAlreadyExists {
				return again
			}
			return err
		}
		if err != nil {
			return err
		}
		if ctrl := metav1.GetControllerOf(current); ctrl == nil || ctrl.UID != t.owner.UID {
			if err := kube.EnsureControlled(ctx, c, deepCopy(want), current, t.owner, t.live); err != nil {
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

// deleteIfPresent deletes name; absent is fine.
func deleteIfPresent(ctx context.Context, del func(context.Context, string, metav1.DeleteOptions) error, name string) error {
	if err := del(ctx, name, metav1.DeleteOptions{}); err != nil && kube.Classify(err) != kube.KindNotFound {
		return err
	}
	return nil
}

// ownerMeta is an object with owner's uid, for metav1.IsControlledBy.
func ownerMeta(owner metav1.OwnerReference) metav1.Object {
	return &metav1.ObjectMeta{UID: owner.UID}
}

// deleteAsListedErr deletes obj if it is unchanged since it was listed; gone or changed
// meanwhile is fine (another writer acted on it).
func deleteAsListedErr(ctx context.Context, del func(context.Context, string, metav1.DeleteOptions) error, obj metav1.Object) error {
	if err := del(ctx, obj.GetName(), kube.Unchanged(obj)); err != nil && !goneOrChanged(err) {
		return err
	}
	return nil
}

// deepCopy copies an API object (create calls may modify what they are given in fakes).
func deepCopy[T any](obj T) T {
	if c, ok := any(obj).(interface{ DeepCopyObject() runtime.Object }); ok {
		return c.DeepCopyObject().(T)
	}
	return obj
}

// completeHooks is the janitor's part for hooks: each hook names the Deployments (older than
// cutoff) whose objects it misses, and creates them. Failures are logged.
func (b *Backend) completeHooks(ctx context.Context, logger lager.Logger, old []*workloadRecord) {
	if len(old) == 0 {
		return
	}
	for _, h := range b.hooks {
		missing, err := h.missing(ctx, old)
		if err != nil {
			logger.Error("find-missing", err, lager.Data{"hook": h.hookName()})
			continue
		}
		for _, d := range missing {
			if err := h.desired(ctx, b.targetOf(d, d.lrp())); err != nil {
				logger.Error("create-missing", err, lager.Data{"hook": h.hookName(), "deployment": d.Name})
				continue
			}
			logger.Info("created-missing", lager.Data{"hook": h.hookName(), "deployment": d.Name})
		}
	}
}

// wrapHookErr says what a hook was doing; the caller maps the error (hookError).
func wrapHookErr(err error, what string) error {
	if err == nil {
		return nil
	}
	return &hookStepError{what: what, err: err}
}

// hookStepError is a hook's failed step: what it was doing, and the error.
type hookStepError struct {
	what string
	err  error
}

func (e *hookStepError) Error() string { return e.what + ": " + e.err.Error() }
func (e *hookStepError) Unwrap() error { return e.err }

// appSelector lists opi's app objects of the namespace.
func appSelector() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: spec.LabelSourceType + "=" + spec.SourceTypeApp}
}

// deploymentsWithout is the Deployments for which complete is false.
func deploymentsWithout(deployments []*workloadRecord, complete func(*workloadRecord) bool) []*workloadRecord {
	var out []*workloadRecord
	for _, d := range deployments {
		if !complete(d) {
			out = append(out, d)
		}
	}
	return out
}
