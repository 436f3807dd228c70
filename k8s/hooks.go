package k8s

import (
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// The backend's hooks are package k8s/internal/hooks's: the base interface, the optional event
// interfaces, the Set that runs them in registration order, and one file per concern there.
// They are registered in registerHooks: adding a concern is its file there plus one line here.

// registerHooks makes the backend's hooks from its options, in the order they act.
func (b *Backend) registerHooks(opts hooks.Options, gw gateway.Interface, lists hooks.MetadataLists) {
	// Tasks' policies are the network policy hook's too (DesireTask calls it).
	policies := opts.NetworkPolicy
	// gorouter reaches the pods themselves: the leader admits it on the routes' ports alone.
	policies.RouterPorts = opts.Routing.Mode == hooks.RoutingNATS
	b.policies = hooks.NewNetworkPolicy(b.client, lists, b.namespace, policies)
	var service hooks.Hook = hooks.Off("service")
	if hooks.MakesServices(opts.Routing.Mode) {
		service = hooks.NewService(b.client, lists, b.namespace, opts.HeadlessServices)
	}
	b.hooks = hooks.Set{
		service,
		hooks.NewRouting(gw, b.namespace, opts.Routing),
		b.policies,
		hooks.NewPlacement(opts.Placement),
		hooks.NewVolume(b.client, b.namespace),
		hooks.NewDisruption(b.client, lists, b.namespace, b.logger.Session("disruption-budget")),
	}
}
