package hooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/opi"
)

// Routing modes: how an LRP's cf-router routes reach its Service.
const (
	// RoutingIngress makes one networking.k8s.io/v1 Ingress per hostname of a space.
	RoutingIngress = "ingress"
	// RoutingGateway makes one Gateway API HTTPRoute per hostname of a space, attached to an
	// operator-named Gateway.
	RoutingGateway = "gateway"
	// RoutingNone makes no routing objects (routes are only recorded on the workload).
	RoutingNone = "none"
	// RoutingNATS makes no routing objects and no Services: a classic Cloud Foundry's gorouters
	// are told of each Ready instance's pod IP over NATS (package k8s/internal/routes), and reach the
	// pods directly. The routes are checked as in the other modes.
	RoutingNATS = "nats"
)

// MakesServices says whether LRPs get a Service in routing mode mode: in every mode but
// RoutingNATS, whose routers reach the pod IPs.
func MakesServices(mode string) bool { return mode != RoutingNATS }

// RoutingOptions configure the routing hook.
type RoutingOptions struct {
	// Mode is RoutingIngress, RoutingGateway, RoutingNATS or RoutingNone ("" is none).
	Mode string
	// IngressClass is the Ingresses' spec.ingressClassName ("": the cluster's default class).
	IngressClass string
	// GatewayNamespace and GatewayName name the Gateway HTTPRoutes attach to; the Gateway must
	// allow routes from the apps' namespace.
	GatewayNamespace string
	GatewayName      string
}

// routingHook is the routing hook of modes ingress and gateway. The routing objects of both
// are shared by every LRP of a space that carries a route (package k8s/internal/routeobjects
// keeps them, as the leader's work), so no LRP event writes one: the hook checks the routes
// (as routeChecks does) and, in gateway mode, Start checks that the cluster serves HTTPRoutes.
//
// tcp-router and other routers' routes never reach the backend (bifrost reads cf-router only,
// as the contract says unknown routers are ignored).
type routingHook struct {
	routeChecks
	gateway   gateway.Interface
	namespace string
	mode      string
}

// NewRouting is the routing hook of opts.Mode (a switched-off one without a mode or with
// RoutingNone, one that only checks the routes in the others); gw is needed in gateway mode
// only.
func NewRouting(gw gateway.Interface, namespace string, opts RoutingOptions) Hook {
	switch opts.Mode {
	case "", RoutingNone:
		return Off("routing")
	case RoutingIngress, RoutingGateway:
		return &routingHook{gateway: gw, namespace: namespace, mode: opts.Mode}
	}
	return routeChecks{}
}

func (h *routingHook) Name() string { return "routing" }

// started checks, in gateway mode, that the cluster serves HTTPRoutes (one LIST of at most one
// object): without the Gateway API CRDs every desire with a route would fail.
func (h *routingHook) Start(ctx context.Context) error {
	if h.mode != RoutingGateway {
		return nil
	}
	if h.gateway == nil {
		return errors.New("routing: gateway needs a Gateway API client (Options.Gateway)")
	}
	_, err := h.gateway.GatewayV1().HTTPRoutes(h.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if kube.Classify(err) == kube.KindNotFound {
		return fmt.Errorf("routing: gateway needs the Gateway API's HTTPRoute (gateway.networking.k8s.io/v1) installed in the cluster: %w", err)
	}
	return WrapErr(err, "list httproutes")
}

// routeTarget is one route split into what routing objects match on.
type routeTarget struct {
	host, path string
	port       int32
}

// SplitRoute splits a route's "host/path" into its lower-cased hostname and its path ("/"
// without one), as the routing objects match on them.
func SplitRoute(r opi.Route) (host, path string) {
	host, path, _ = strings.Cut(r.Hostname, "/")
	return strings.ToLower(host), "/" + path
}

// splitRoute is r split, with its port.
func splitRoute(r opi.Route) routeTarget {
	host, path := SplitRoute(r)
	return routeTarget{host: host, path: path, port: r.Port}
}

// routeChecks are the routes' checks of every mode that routes (gorouter, Ingresses and
// HTTPRoutes take the same hostnames and paths); alone, the routing hook of RoutingNATS.
type routeChecks struct{}

func (routeChecks) Name() string { return "routing" }

// Check refuses a route whose hostname is not a DNS name, whose path is not plain, whose port
// is not one of the LRP's, or whose hostname and path go to two ports.
func (routeChecks) Check(_ context.Context, lrp *opi.LRP) error {
	seen := map[string]int32{}
	for _, r := range lrp.Routes {
		t := splitRoute(r)
		if errs := hostErrors(t.host); len(errs) > 0 {
			return fmt.Errorf("%w: route %q: hostname %q is not a DNS name: %s", opi.ErrInvalid, r.Hostname, t.host, strings.Join(errs, "; "))
		}
		if !plainPath(t.path) {
			return fmt.Errorf("%w: route %q: path %q may hold only letters, digits and -._~!$&'()*+,;=:@%%/, with no empty, . or .. segment", opi.ErrInvalid, r.Hostname, t.path)
		}
		if !slices.Contains(lrp.Ports, r.Port) {
			return fmt.Errorf("%w: route %q: port %d is not one of the lrp's ports %v", opi.ErrInvalid, r.Hostname, r.Port, lrp.Ports)
		}
		key := t.host + t.path
		if p, ok := seen[key]; ok && p != r.Port {
			return fmt.Errorf("%w: route %q goes to two ports, %d and %d", opi.ErrInvalid, r.Hostname, p, r.Port)
		}
		seen[key] = r.Port
	}
	return nil
}

// hostErrors checks a hostname as Ingress and HTTPRoute hosts are checked.
func hostErrors(host string) []string {
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		return validation.IsWildcardDNS1123Subdomain("*." + rest)
	}
	return validation.IsDNS1123Subdomain(host)
}

// plainPath accepts what Ingress Prefix paths and HTTPRoute PathPrefix values both take.
func plainPath(p string) bool {
	if p == "/" {
		return true
	}
	for _, seg := range strings.Split(strings.TrimSuffix(p[1:], "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for _, c := range seg {
			ok := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strings.ContainsRune("-._~!$&'()*+,;=:@%", c)
			if !ok {
				return false
			}
		}
	}
	return true
}
