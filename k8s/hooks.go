package k8s

import (
	"context"
	"errors"

	"code.cloudfoundry.org/lager/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/opi-bridge/opi/k8s/hooks"
	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/store"
	"github.com/opi-bridge/opi/k8s/workload"
	"github.com/opi-bridge/opi/opi"
)

// The backend's hooks are package k8s/hooks's: the base interface, the optional event
// interfaces, the Set that runs them in registration order, and one file per concern there.
// They are registered in registerHooks: adding a concern is its file there plus one line here.

// The hooks' settings, names and labels, as Options and the backend's callers spell them.
type (
	RoutingOptions       = hooks.RoutingOptions
	NetworkPolicyOptions = hooks.NetworkPolicyOptions
	PolicyPeer           = hooks.PolicyPeer
	PlacementOptions     = hooks.PlacementOptions
)

const (
	RoutingIngress      = hooks.RoutingIngress
	RoutingGateway      = hooks.RoutingGateway
	RoutingNone         = hooks.RoutingNone
	BaselinePolicyName  = hooks.BaselinePolicyName
	RoutersPolicyName   = hooks.RoutersPolicyName
	DefaultPlacementKey = hooks.DefaultPlacementKey
	LabelPlacementTag   = hooks.LabelPlacementTag
	LabelClaimSpaceGUID = hooks.LabelClaimSpaceGUID
)

// registerHooks makes the backend's hooks from its options, in the order they act.
func (b *Backend) registerHooks(opts Options) {
	// Tasks' policies are the network policy hook's too (DesireTask calls it).
	b.policies = hooks.NewNetworkPolicy(b.client, b.listMetadata, b.namespace, opts.NetworkPolicy)
	b.hooks = hooks.Set{
		hooks.NewService(b.client, b.listMetadata, b.namespace, opts.HeadlessServices),
		hooks.NewRouting(b.client, b.gateway, b.listMetadata, b.namespace, opts.Routing),
		b.policies,
		hooks.NewPlacement(opts.Placement),
		hooks.NewVolume(b.client, b.namespace),
		hooks.NewDisruption(b.client, b.listMetadata, b.namespace, b.logger.Session("disruption-budget")),
	}
}

// checkHooks runs every hook's check.
func (b *Backend) checkHooks(ctx context.Context, lrp *opi.LRP) error {
	return b.hooks.Check(ctx, lrp)
}

// shapeWorkload lets every hook add to the workload (its metadata and pod template, the same
// for Deployments and StatefulSets) before it is created.
func (b *Backend) shapeWorkload(lrp *opi.LRP, w workload.Object) {
	b.hooks.Shape(lrp, w.Meta, w.Template)
}

// runUpdatedHooks tells every hook about an update, before the Deployment is patched.
func (b *Backend) runUpdatedHooks(ctx context.Context, logger lager.Logger, t hooks.Target, before *opi.LRP, update opi.LRPUpdate) error {
	if name, err := b.hooks.Updated(ctx, t, before, update); err != nil {
		return b.hookError(logger, err, name)
	}
	return nil
}

// hookError maps what a hook's desired or updated returned: a stop that deleted the Deployment
// meanwhile (kube.ErrSuperseded) is success, as for the Secrets (ownershipError); Kubernetes
// refusing the object (422, 403) is opi.ErrInvalid (refusal).
func (b *Backend) hookError(logger lager.Logger, err error, hook string) error {
	var status apierrors.APIStatus
	if errors.Is(err, kube.ErrSuperseded) || !errors.As(err, &status) {
		return kube.OwnershipError(logger, err, hook)
	}
	var step *hooks.StepError
	if errors.As(err, &step) {
		return kube.Refusal(step.Err, step.What)
	}
	return kube.Refusal(err, hook)
}

// targetOf is the hook target of a cached Deployment, for updates.
func (b *Backend) targetOf(d *store.WorkloadRecord, lrp *opi.LRP) hooks.Target {
	return hooks.Target{
		LRP:       lrp,
		Name:      d.Name,
		Namespace: b.namespace,
		Owner:     b.controllerRef(d),
		Live:      b.liveCheck(d),
	}
}
