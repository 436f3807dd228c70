package k8s

import (
	"context"

	"code.cloudfoundry.org/lager/v3"

	"github.com/opi-bridge/opi/k8s/hooks"
	"github.com/opi-bridge/opi/k8s/store"
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

// targetOf is the hook target of a cached Deployment, for updates and the janitor.
func (b *Backend) targetOf(d *store.WorkloadRecord, lrp *opi.LRP) hooks.Target {
	return hooks.Target{
		LRP:       lrp,
		Name:      d.Name,
		Namespace: b.namespace,
		Owner:     b.controllerRef(d),
		Live:      b.liveCheck(d),
	}
}

// completeHooks is the janitor's part for hooks: each hook names the Deployments (older than
// cutoff) whose objects it misses, and creates them. Failures are logged.
func (b *Backend) completeHooks(ctx context.Context, logger lager.Logger, old []*store.WorkloadRecord) {
	if len(old) == 0 {
		return
	}
	workloads := make([]hooks.Workload, len(old))
	for i, d := range old {
		workloads[i] = d
	}
	for _, h := range b.hooks.Janitors() {
		missing, err := h.Missing(ctx, workloads)
		if err != nil {
			logger.Error("find-missing", err, lager.Data{"hook": h.Name()})
			continue
		}
		for _, w := range missing {
			d := w.(*store.WorkloadRecord)
			if err := h.Desired(ctx, b.targetOf(d, d.LRP())); err != nil {
				logger.Error("create-missing", err, lager.Data{"hook": h.Name(), "deployment": d.Name})
				continue
			}
			logger.Info("created-missing", lager.Data{"hook": h.Name(), "deployment": d.Name})
		}
	}
}
