package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/opi-bridge/opi/k8s"
)

// AppNetworkConfig is how apps are reached, isolated and placed: the Kubernetes backend's
// hooks. Its keys sit at the top level of the config file.
type AppNetworkConfig struct {
	// Routing is ingress (an Ingress per hostname of a space), gateway (an HTTPRoute per
	// hostname of a space), nats (a classic foundation's gorouters over NATS, the nats
	// section) or none.
	Routing string `json:"routing"`
	// IngressClass is the Ingresses' class ("": the cluster's default).
	IngressClass string `json:"ingress_class"`
	// Gateway names the Gateway that HTTPRoutes attach to (routing: gateway).
	Gateway GatewayConfig `json:"gateway"`
	// HeadlessServices gives app Services no cluster IP (default true: routers route to
	// endpoints; see docs/adr/0006-headless-services.md).
	HeadlessServices bool `json:"headless_services"`
	// NetworkPolicies keeps Cloud Foundry's isolation with NetworkPolicies (default true).
	NetworkPolicies bool `json:"network_policies"`
	// Routers are who may connect to apps (the ingress controller's or Gateway's pods, or the
	// gorouter VMs' address range).
	Routers []RouterConfig `json:"routers"`
	// NodeZones lets opi read nodes (a cluster rule, deploy/kustomize/components/node-zones)
	// for the availability_zone of its gorouter registrations (routing: nats).
	NodeZones bool `json:"node_zones"`
	// DNSNamespace is where the cluster DNS runs; apps may reach port 53 there ("" : no DNS).
	DNSNamespace string `json:"dns_namespace"`
	// Placement maps placement tags (isolation segments) to nodes.
	Placement PlacementConfig `json:"placement"`
}

// GatewayConfig names a Gateway.
type GatewayConfig struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// RouterConfig names the pods allowed to connect to apps: a namespace, and optionally labels;
// or an address range (CIDR), for routers that are not pods (a classic foundation's gorouter VMs).
type RouterConfig struct {
	Namespace string            `json:"namespace"`
	PodLabels map[string]string `json:"pod_labels"`
	CIDR      string            `json:"cidr"`
}

// PlacementConfig is the node label (and taint key) that names a node's isolation segment.
type PlacementConfig struct {
	NodeLabel string `json:"node_label"`
	TaintKey  string `json:"taint_key"`
}

// defaultAppNetworkConfig routes with Ingresses to headless Services (docs/adr/0006) and
// isolates apps.
func defaultAppNetworkConfig() AppNetworkConfig {
	return AppNetworkConfig{
		Routing:          k8s.RoutingIngress,
		HeadlessServices: true,
		NetworkPolicies:  true,
		DNSNamespace:     "kube-system",
		Placement:        PlacementConfig{NodeLabel: k8s.DefaultPlacementKey, TaintKey: k8s.DefaultPlacementKey},
	}
}

// bindFlags binds the section's flags. --router NAMESPACE[:k=v,...] adds a router.
func (c *AppNetworkConfig) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Routing, "routing", c.Routing, "how routes reach apps: ingress, gateway, nats (a foundation's gorouters, see --nats-url) or none")
	fs.StringVar(&c.IngressClass, "ingress-class", c.IngressClass, "ingress class of the route Ingresses (default: the cluster's)")
	fs.StringVar(&c.Gateway.Namespace, "gateway-namespace", c.Gateway.Namespace, "namespace of the Gateway HTTPRoutes attach to")
	fs.StringVar(&c.Gateway.Name, "gateway-name", c.Gateway.Name, "name of the Gateway HTTPRoutes attach to")
	fs.BoolVar(&c.HeadlessServices, "headless-services", c.HeadlessServices, "give app Services no cluster IP (--headless-services=false for routers that need one)")
	fs.BoolVar(&c.NetworkPolicies, "network-policies", c.NetworkPolicies, "isolate apps with NetworkPolicies")
	fs.BoolVar(&c.NodeZones, "node-zones", c.NodeZones, "read nodes' zone label for the gorouter registrations' availability_zone (needs the node-zones cluster rule)")
	fs.Func("router", "namespace[:label=value,...] of pods, or an address range (10.0.16.0/24), allowed to connect to apps (repeatable)", func(s string) error {
		r, err := parseRouter(s)
		c.Routers = append(c.Routers, r)
		return err
	})
	fs.StringVar(&c.DNSNamespace, "dns-namespace", c.DNSNamespace, "namespace of the cluster DNS apps may reach on port 53 (empty: none)")
	fs.StringVar(&c.Placement.NodeLabel, "placement-node-label", c.Placement.NodeLabel, "node label naming a node's isolation segment")
	fs.StringVar(&c.Placement.TaintKey, "placement-taint-key", c.Placement.TaintKey, "key of the NoSchedule taint on isolation segment nodes (empty: no toleration)")
}

func parseRouter(s string) (RouterConfig, error) {
	if strings.Contains(s, "/") {
		// A namespace has no "/": an address range (checked by validate).
		return RouterConfig{CIDR: s}, nil
	}
	ns, labels, _ := strings.Cut(s, ":")
	r := RouterConfig{Namespace: ns}
	if labels != "" {
		r.PodLabels = map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return r, fmt.Errorf("router %q: labels must be key=value", s)
			}
			r.PodLabels[k] = v
		}
	}
	if ns == "" {
		return r, fmt.Errorf("router %q: a namespace is required", s)
	}
	return r, nil
}

// validate reports the first mistake in the section.
func (c AppNetworkConfig) validate() error {
	switch c.Routing {
	case k8s.RoutingIngress, k8s.RoutingNone, k8s.RoutingNATS:
	case k8s.RoutingGateway:
		if c.Gateway.Name == "" {
			return fmt.Errorf("routing: gateway needs gateway.name (and gateway.namespace, default the apps' namespace)")
		}
	default:
		return fmt.Errorf("routing %q is not one of ingress, gateway, nats, none", c.Routing)
	}
	for i, r := range c.Routers {
		if err := r.peer().Validate(); err != nil {
			return fmt.Errorf("kubernetes.routers[%d] (namespace, pod_labels or cidr): %w", i, err)
		}
	}
	if c.NodeZones && c.Routing != k8s.RoutingNATS {
		return fmt.Errorf("kubernetes.node_zones is for routing: nats only (the zone goes into gorouter registrations)")
	}
	if c.Placement.NodeLabel == "" {
		return fmt.Errorf("placement.node_label must not be empty")
	}
	return nil
}

// applyTo sets the backend's options of the section.
func (c AppNetworkConfig) applyTo(opts *k8s.Options) {
	opts.Hooks.Routing = k8s.RoutingOptions{
		Mode:             c.Routing,
		IngressClass:     c.IngressClass,
		GatewayNamespace: c.Gateway.Namespace,
		GatewayName:      c.Gateway.Name,
	}
	opts.Hooks.HeadlessServices = c.HeadlessServices
	opts.Hooks.NetworkPolicy = k8s.NetworkPolicyOptions{Enabled: c.NetworkPolicies, DNSNamespace: c.DNSNamespace}
	for _, r := range c.Routers {
		opts.Hooks.NetworkPolicy.Routers = append(opts.Hooks.NetworkPolicy.Routers, r.peer())
	}
	opts.Hooks.Placement = k8s.PlacementOptions{NodeLabel: c.Placement.NodeLabel, TaintKey: c.Placement.TaintKey}
}

// peer is the router as the network policy hook's peer.
func (r RouterConfig) peer() k8s.PolicyPeer {
	return k8s.PolicyPeer{Namespace: r.Namespace, PodLabels: r.PodLabels, CIDR: r.CIDR}
}
