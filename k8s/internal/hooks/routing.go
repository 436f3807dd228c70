package hooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Routing modes: how an LRP's cf-router routes reach its Service.
const (
	// RoutingIngress makes one networking.k8s.io/v1 Ingress per LRP.
	RoutingIngress = "ingress"
	// RoutingGateway makes Gateway API HTTPRoutes attached to an operator-named Gateway.
	RoutingGateway = "gateway"
	// RoutingNone makes no routing objects (routes are only recorded on the Deployment).
	RoutingNone = "none"
	// RoutingNATS makes no routing objects and no Services: a classic Cloud Foundry's gorouters
	// are told of each Ready instance's pod IP over NATS (package k8s/routes), and reach the
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

// routingHook turns an LRP's routes into routing objects that send each hostname (and path)
// to the LRP's Service port the route names.
//
//   - ingress mode: one Ingress named like the Deployment, one rule per hostname, one Prefix
//     path per route of that hostname (a route "example.com/docs" is host example.com, path
//     /docs; without a path, /), each to the Service port of the route;
//   - gateway mode: one HTTPRoute per hostname, named <deployment>-<first 8 hex digits of the
//     hostname's sha256>, with one PathPrefix rule per path of that hostname;
//
// Either is controlled by the Deployment. In gateway mode, Start checks that the cluster serves
// HTTPRoutes. Two LRPs (the old and the new version during a
// rolling deploy) may share a hostname: each has its own objects, and the ingress controller
// or Gateway balances across both. Events:
//
//   - check: every hostname must be a DNS name (a leading "*." allowed), every path plain,
//     every port one of the LRP's, and one hostname+path must not go to two ports;
//   - desired: create the objects (exists: made controlled, content left);
//   - updated (routes changed): objects for the new routes are created or rewritten, those of
//     hostnames no longer routed deleted (the Ingress when no route is left; HTTPRoutes of the
//     LRP listed by its labels, one LIST); the objects of other LRPs are never touched;
//   - missing: Deployments with routes whose objects are absent.
//
// tcp-router and other routers' routes never reach the backend (bifrost reads cf-router only,
// as the contract says unknown routers are ignored).
type routingHook struct {
	client    kubernetes.Interface
	gateway   gateway.Interface
	list      MetadataLists
	namespace string
	opts      RoutingOptions
}

// NewRouting is the routing hook of opts.Mode (a switched-off one without a mode or with
// RoutingNone, one that only checks the routes with RoutingNATS); gw is needed in gateway mode
// only.
func NewRouting(client kubernetes.Interface, gw gateway.Interface, list MetadataLists, namespace string, opts RoutingOptions) Hook {
	switch opts.Mode {
	case "", RoutingNone:
		return Off("routing")
	case RoutingNATS:
		return routeChecks{}
	}
	if opts.GatewayNamespace == "" {
		opts.GatewayNamespace = namespace
	}
	return &routingHook{client: client, gateway: gw, list: list, namespace: namespace, opts: opts}
}

func (h *routingHook) Name() string { return "routing" }

// started checks, in gateway mode, that the cluster serves HTTPRoutes (one LIST of at most one
// object): without the Gateway API CRDs every desire with a route would fail.
func (h *routingHook) Start(ctx context.Context) error {
	if h.opts.Mode != RoutingGateway {
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

// splitRoute splits "host/path" into host and path ("/" without one).
func splitRoute(r opi.Route) routeTarget {
	host, path, _ := strings.Cut(r.Hostname, "/")
	return routeTarget{host: strings.ToLower(host), path: "/" + path, port: r.Port}
}

func (h *routingHook) Check(ctx context.Context, lrp *opi.LRP) error {
	return routeChecks{}.Check(ctx, lrp)
}

// routeChecks is the routing hook of RoutingNATS: the routes' checks (gorouter takes the same
// hostnames and paths) and no objects.
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

func (h *routingHook) Desired(ctx context.Context, t Target) error {
	if len(t.LRP.Routes) == 0 {
		return nil
	}
	if h.opts.Mode == RoutingIngress {
		_, err := EnsureOwned(ctx, h.client.NetworkingV1().Ingresses(h.namespace), h.toIngress(t), t)
		return WrapErr(err, "create ingress")
	}
	routes := h.gateway.GatewayV1().HTTPRoutes(h.namespace)
	for _, r := range h.toHTTPRoutes(t) {
		if _, err := EnsureOwned(ctx, routes, r, t); err != nil {
			return WrapErr(err, "create httproute")
		}
	}
	return nil
}

func (h *routingHook) Updated(ctx context.Context, t Target, _ *opi.LRP, update opi.LRPUpdate) error {
	if update.Routes == nil {
		return nil
	}
	if h.opts.Mode == RoutingIngress {
		ingresses := h.client.NetworkingV1().Ingresses(h.namespace)
		if len(t.LRP.Routes) == 0 {
			return WrapErr(DeleteIfPresent(ctx, ingresses.Delete, t.Name), "delete ingress")
		}
		err := SyncOwned(ctx, ingresses, h.toIngress(t), t, func(current, want *networkingv1.Ingress) bool {
			if equality.Semantic.DeepEqual(current.Spec, want.Spec) {
				return false
			}
			current.Spec = want.Spec
			return true
		})
		return WrapErr(err, "update ingress")
	}
	routes := h.gateway.GatewayV1().HTTPRoutes(h.namespace)
	keep := map[string]bool{}
	for _, r := range h.toHTTPRoutes(t) {
		keep[r.Name] = true
		err := SyncOwned(ctx, routes, r, t, func(current, want *gatewayv1.HTTPRoute) bool {
			if equality.Semantic.DeepEqual(current.Spec, want.Spec) {
				return false
			}
			current.Spec = want.Spec
			return true
		})
		if err != nil {
			return WrapErr(err, "update httproute")
		}
	}
	// The HTTPRoutes of hostnames no longer routed: listed by the LRP's labels, not named from
	// the cache's routes, which may lag a concurrent update.
	list, err := routes.List(ctx, metav1.ListOptions{LabelSelector: names.LRPSelector(t.LRP.LRPIdentifier)})
	if err != nil {
		return WrapErr(err, "list httproutes")
	}
	for i := range list.Items {
		r := &list.Items[i]
		if !keep[r.Name] && metav1.IsControlledBy(r, OwnerMeta(t.Owner)) {
			if err := DeleteAsListed(ctx, routes.Delete, r); err != nil {
				return WrapErr(err, "delete httproute")
			}
		}
	}
	return nil
}

func (h *routingHook) Missing(ctx context.Context, deployments []Workload) ([]Workload, error) {
	var have map[string]bool
	var err error
	if h.opts.Mode == RoutingIngress {
		have, err = apiclient.ListNames(ctx, AppSelector(), h.list(IngressesResource))
	} else {
		have, err = apiclient.ListNames(ctx, AppSelector(), h.list(HTTPRoutesResource))
	}
	if err != nil {
		return nil, err
	}
	return Without(deployments, func(d Workload) bool {
		if d.RoutesJSON() == "" || d.RoutesJSON() == "[]" {
			return true
		}
		if h.opts.Mode == RoutingIngress {
			return have[d.GetName()]
		}
		for _, host := range routeHosts(d.LRP().Routes) {
			if !have[httpRouteName(d.GetName(), host)] {
				return false
			}
		}
		return true
	}), nil
}

// routeHosts is the distinct hostnames of routes, sorted.
func routeHosts(routes []opi.Route) []string {
	var hosts []string
	for _, r := range routes {
		hosts = append(hosts, splitRoute(r).host)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// pathsOf is the routes of host as path → port, in path order.
func pathsOf(routes []opi.Route, host string) []routeTarget {
	var out []routeTarget
	for _, r := range routes {
		if t := splitRoute(r); t.host == host && !slices.ContainsFunc(out, func(o routeTarget) bool { return o.path == t.path }) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b routeTarget) int { return strings.Compare(a.path, b.path) })
	return out
}

func (h *routingHook) toIngress(t Target) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{}
	ing.Name, ing.Namespace, ing.Labels = t.Name, t.Namespace, names.LRPLabels(t.LRP)
	if h.opts.IngressClass != "" {
		ing.Spec.IngressClassName = ptr.To(h.opts.IngressClass)
	}
	for _, host := range routeHosts(t.LRP.Routes) {
		rule := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}
		for _, p := range pathsOf(t.LRP.Routes, host) {
			rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{
				Path:     p.path,
				PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: t.Name,
					Port: networkingv1.ServiceBackendPort{Number: p.port},
				}},
			})
		}
		ing.Spec.Rules = append(ing.Spec.Rules, rule)
	}
	return ing
}

// httpRouteName names the HTTPRoute of one hostname of an LRP.
func httpRouteName(deployment, host string) string {
	sum := sha256.Sum256([]byte(host))
	return deployment + "-" + hex.EncodeToString(sum[:])[:8]
}

func (h *routingHook) toHTTPRoutes(t Target) []*gatewayv1.HTTPRoute {
	var out []*gatewayv1.HTTPRoute
	for _, host := range routeHosts(t.LRP.Routes) {
		r := &gatewayv1.HTTPRoute{}
		r.Name, r.Namespace, r.Labels = httpRouteName(t.Name, host), t.Namespace, names.LRPLabels(t.LRP)
		r.Spec.ParentRefs = []gatewayv1.ParentReference{{
			Group:     ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
			Kind:      ptr.To(gatewayv1.Kind("Gateway")),
			Namespace: ptr.To(gatewayv1.Namespace(h.opts.GatewayNamespace)),
			Name:      gatewayv1.ObjectName(h.opts.GatewayName),
		}}
		r.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(host)}
		for _, p := range pathsOf(t.LRP.Routes, host) {
			r.Spec.Rules = append(r.Spec.Rules, gatewayv1.HTTPRouteRule{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
					Type:  ptr.To(gatewayv1.PathMatchPathPrefix),
					Value: ptr.To(p.path),
				}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{
						Group: ptr.To(gatewayv1.Group("")),
						Kind:  ptr.To(gatewayv1.Kind("Service")),
						Name:  gatewayv1.ObjectName(t.Name),
						Port:  ptr.To(p.port),
					},
					Weight: ptr.To(int32(1)),
				}}},
			})
		}
		out = append(out, r)
	}
	return out
}
