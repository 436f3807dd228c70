package k8s

import (
	"github.com/opi-bridge/opi/k8s/hooks"
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
