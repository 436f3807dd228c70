// Package hooks is the backend's hook set: the concerns (the Service, routing, network policy,
// placement, volumes, the disruption budget) that react to the lifecycle events of an LRP.
//
// A hook is a tiny base interface (Hook: its name) plus the optional event interfaces it
// implements (Starter, Checker, Shaper, Desirer, Updater, Janitor), as admission plugins are
// shaped; a Set runs them in registration order, asking each hook for an event by type
// assertion. The events, in the order a write calls them:
//
//   - Start (Start, once): namespace-wide objects the concern needs (a baseline policy);
//   - Check (desire and update): before anything is written, reject with opi.ErrInvalid what the
//     concern cannot serve, so that a refused request leaves nothing behind;
//   - Shape (desire): add what the concern needs to the workload before it is created (pod
//     spec fields: node selector, volumes);
//   - Desired (desire, after the workload exists, and the janitor): create the concern's
//     objects, each controlled by the workload (Target.Owner). It must be idempotent: an object
//     that exists is left as it is (or made controlled by Target.Owner, see kube.EnsureOwned), since
//     the next desire of the LRP and the janitor call it again to finish an interrupted desire;
//   - Updated (update, before the workload is patched): make the objects match the LRP as it
//     will be. The workload's patch (with CC's last_updated token) comes last, so an update
//     interrupted here is sent again by CC, whose sync sees the old token;
//   - stopped: nothing to do. Every object is controlled by the workload, so StopLRP's one
//     delete of the workload lets the garbage collector remove them;
//   - Missing (the janitor): of the workloads given (all older than the janitor's grace), those
//     whose objects of this concern are absent (one metadata-only LIST of them); the janitor
//     calls Desired for each of them.
//
// The hooks get what they need handed in (clients, the namespace, their settings, a narrow
// read interface); they never see the root package.
package hooks

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/opi"
)

// Hook is the base every hook implements: its name, for logs and refusals.
type Hook interface {
	Name() string
}

// Starter is a hook with namespace-wide objects to make at start-up.
type Starter interface {
	Hook
	Start(ctx context.Context) error
}

// Checker is a hook that refuses (opi.ErrInvalid) what it cannot serve, before anything is
// written.
type Checker interface {
	Hook
	Check(ctx context.Context, lrp *opi.LRP) error
}

// Shaper is a hook that adds to the workload (its metadata and pod template) before it is
// created.
type Shaper interface {
	Hook
	Shape(lrp *opi.LRP, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec)
}

// Desirer is a hook with objects of its own, made once the workload exists.
type Desirer interface {
	Hook
	Desired(ctx context.Context, t Target) error
}

// Updater is a hook whose objects follow an update, before the workload is patched.
type Updater interface {
	Hook
	Updated(ctx context.Context, t Target, before *opi.LRP, update opi.LRPUpdate) error
}

// Janitor is a hook that names the workloads whose objects of its concern are absent, for the
// janitor to complete them (with Desired).
type Janitor interface {
	Desirer
	Missing(ctx context.Context, workloads []Workload) ([]Workload, error)
}

// Target is the LRP a hook acts on, with its workload.
type Target struct {
	// LRP is as desired, or as it is once the update is applied. From a cached workload it
	// lacks env and registry credentials (hooks never need them).
	LRP *opi.LRP
	// Name is the workload's name; a hook's objects are named after it.
	Name      string
	Namespace string
	// Owner is the controller reference every object of the LRP carries.
	Owner metav1.OwnerReference
	// Live tells, from the API server, whether the owner is still the live workload.
	Live func(context.Context) (bool, error)
}

// Workload is what a hook's Missing reads of a cached workload (the read side's record).
type Workload interface {
	// GetName is the workload's name.
	GetName() string
	// Replicas is spec.replicas (1 when unset).
	Replicas() int32
	// HasPorts tells whether the LRP has ports.
	HasPorts() bool
	// EgressJSON is the egress rules' annotation, "" without rules.
	EgressJSON() string
	// RoutesJSON is the routes' annotation, "" or "[]" without routes.
	RoutesJSON() string
	// LRP is the LRP decoded from the workload (without env and registry credentials).
	LRP() *opi.LRP
}

// Off is the hook of a concern that is switched off: a name and no events.
type Off string

// Name is the concern's name.
func (o Off) Name() string { return string(o) }

// Set is the hooks in registration order: the order they act in.
type Set []Hook

// Starters is the hooks with a Start, in order.
func (s Set) Starters() []Starter { return only[Starter](s) }

// Desirers is the hooks with a Desired, in order.
func (s Set) Desirers() []Desirer { return only[Desirer](s) }

// Janitors is the hooks with a Missing, in order.
func (s Set) Janitors() []Janitor { return only[Janitor](s) }

// Check runs every hook's Check; the first refusal wins.
func (s Set) Check(ctx context.Context, lrp *opi.LRP) error {
	for _, h := range only[Checker](s) {
		if err := h.Check(ctx, lrp); err != nil {
			return err
		}
	}
	return nil
}

// Prepare is what a desire asks of the hooks before it writes: every hook's Check (the first
// refusal wins, and nothing is shaped), then every hook's Shape of the workload.
func (s Set) Prepare(ctx context.Context, lrp *opi.LRP, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec) error {
	if err := s.Check(ctx, lrp); err != nil {
		return err
	}
	s.Shape(lrp, meta, template)
	return nil
}

// Shape lets every hook add to the workload before it is created.
func (s Set) Shape(lrp *opi.LRP, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec) {
	for _, h := range only[Shaper](s) {
		h.Shape(lrp, meta, template)
	}
}

// Updated tells every hook about an update, in order, up to the first that fails: it returns
// that hook's name and error.
func (s Set) Updated(ctx context.Context, t Target, before *opi.LRP, update opi.LRPUpdate) (string, error) {
	for _, h := range only[Updater](s) {
		if err := h.Updated(ctx, t, before, update); err != nil {
			return h.Name(), err
		}
	}
	return "", nil
}

func only[T Hook](s Set) []T {
	var out []T
	for _, h := range s {
		if t, ok := h.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
