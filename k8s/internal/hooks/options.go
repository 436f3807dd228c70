package hooks

import (
	"errors"
	"fmt"
)

// Options are the six concerns' settings, as the operator gives them (the backend's
// Options.Hooks).
type Options struct {
	// Routing says how routes reach apps (Ingress, Gateway API HTTPRoutes, gorouter over NATS,
	// or nothing).
	Routing RoutingOptions
	// NetworkPolicy configures container-to-container isolation.
	NetworkPolicy NetworkPolicyOptions
	// Placement configures isolation segments (placement tags).
	Placement PlacementOptions
	// HeadlessServices gives LRP Services no cluster IP (see docs/adr).
	HeadlessServices bool
}

// Validate reports a setting the hooks cannot work with.
func (o Options) Validate() error {
	switch o.Routing.Mode {
	case "", RoutingNone, RoutingIngress, RoutingNATS:
	case RoutingGateway:
		if o.Routing.GatewayName == "" {
			return errors.New("routing gateway needs the gateway's name")
		}
	default:
		return fmt.Errorf("routing %q is not one of %s, %s, %s, %s", o.Routing.Mode, RoutingIngress, RoutingGateway, RoutingNATS, RoutingNone)
	}
	for i, r := range o.NetworkPolicy.Routers {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("routers[%d]: %w", i, err)
		}
	}
	return nil
}
