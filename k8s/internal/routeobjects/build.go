package routeobjects

import (
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
)

// maxEndpointsPerSlice is how many instances one EndpointSlice lists: the control plane's own
// default for the slices it keeps (the API takes up to 1,000).
const maxEndpointsPerSlice = 100

// carrier is one LRP carrying a path of a route, and the port the route sends it to.
type carrier struct {
	w    *store.WorkloadRecord
	port int32
}

// want are the objects a route key should have: its paths' Services (by path), each path's
// EndpointSlices (by Service name; their owner is set once the Service's UID is known) and
// the route's Ingress or HTTPRoute (nil when no LRP carries it).
type want struct {
	paths     []string
	services  map[string]*corev1.Service
	slices    map[string][]*discoveryv1.EndpointSlice
	ingress   *networkingv1.Ingress
	httpRoute *gatewayv1.HTTPRoute
}

// desired builds what route key should have from the cached workloads and pods of the LRPs
// that carry it.
func (c *Controller) desired(key, space, host string, lrps []string) want {
	byPath := map[string][]carrier{}
	for _, lrpKey := range lrps {
		w := c.carrying(lrpKey, space)
		if w == nil {
			continue
		}
		for _, p := range pathsOf(w, host) {
			byPath[p.path] = append(byPath[p.path], carrier{w: w, port: p.port})
		}
	}
	out := want{services: map[string]*corev1.Service{}, slices: map[string][]*discoveryv1.EndpointSlice{}}
	for path := range byPath {
		out.paths = append(out.paths, path)
	}
	slices.Sort(out.paths)
	if len(out.paths) == 0 {
		return out
	}
	for _, path := range out.paths {
		svc := c.service(key, space, host, path)
		out.services[path] = svc
		for _, cr := range byPath[path] {
			out.slices[svc.Name] = append(out.slices[svc.Name], c.endpointSlices(key, svc.Name, cr)...)
		}
	}
	if c.cfg.Routing.Mode == hooks.RoutingGateway {
		out.httpRoute = c.httpRoute(key, space, host, out)
	} else {
		out.ingress = c.ingress(key, space, host, out)
	}
	return out
}

// carrying is lrpKey's cached workload if it is alive and in space, else nil.
func (c *Controller) carrying(lrpKey, space string) *store.WorkloadRecord {
	w := c.cache.Workload(store.LRPFromKey(lrpKey))
	if w == nil || w.DeletionTimestamp != nil || w.SpaceGUID != space {
		return nil
	}
	return w
}

// pathPort is a path of a hostname an LRP carries and the port the route sends it to.
type pathPort struct {
	path string
	port int32
}

// pathsOf are the paths of host that w carries, each once (its first route to it gives the
// port).
func pathsOf(w *store.WorkloadRecord, host string) []pathPort {
	var out []pathPort
	for _, r := range w.Routes() {
		h, path := hooks.SplitRoute(r)
		if h == host && !slices.ContainsFunc(out, func(p pathPort) bool { return p.path == path }) {
			out = append(out, pathPort{path: path, port: r.Port})
		}
	}
	return out
}

// meta is a route object's metadata: the route's labels and what the key is of.
func (c *Controller) meta(name, key, space, host string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: c.cfg.Namespace,
		Labels: map[string]string{
			names.LabelSourceType: names.SourceTypeRoute,
			names.LabelRouteKey:   key,
			names.LabelManagedBy:  names.ManagedByOPI,
		},
		Annotations: map[string]string{
			names.AnnotationSpaceGUID: space,
			names.AnnotationRouteHost: host,
		},
	}
}

// service is the selector-less Service of one path of a route: its endpoints are the
// EndpointSlices opi keeps.
func (c *Controller) service(key, space, host, path string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: c.meta(names.RouteServiceName(key, path), key, space, host)}
	svc.Annotations[names.AnnotationRoutePath] = path
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if c.cfg.HeadlessServices {
		// Set once, at creation: a Service's cluster IP cannot change.
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	svc.Spec.Ports = []corev1.ServicePort{{
		Name:       names.RouteServicePortName,
		Protocol:   corev1.ProtocolTCP,
		Port:       names.RouteServicePort,
		TargetPort: intstr.FromInt32(names.RouteServicePort),
	}}
	return svc
}

// endpointSlices are the slices of one carrier of a route Service: its Ready instances, on the
// carrier's own port, at most maxEndpointsPerSlice per slice and one address family each. A
// carrier without a Ready instance has none: an absent slice routes nowhere as an empty one
// does, and a new LRP's slice is then written once, with its first instance, rather than
// created empty and updated moments later (a write more per app, in a burst, for the API server).
func (c *Controller) endpointSlices(key, service string, cr carrier) []*discoveryv1.EndpointSlice {
	byFamily := map[discoveryv1.AddressType][]discoveryv1.Endpoint{}
	pods := slices.Clone(c.cache.Pods(cr.w.ID()))
	slices.SortFunc(pods, func(a, b *store.PodRecord) int { return strings.Compare(a.Name, b.Name) })
	for _, pod := range pods {
		if !pod.Routable() {
			continue
		}
		family := discoveryv1.AddressTypeIPv4
		if ip := net.ParseIP(pod.IP); ip != nil && ip.To4() == nil {
			family = discoveryv1.AddressTypeIPv6
		}
		e := discoveryv1.Endpoint{
			Addresses: []string{pod.IP},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false),
			},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: c.cfg.Namespace, Name: pod.Name, UID: pod.UID},
		}
		if pod.Node != "" {
			e.NodeName = ptr.To(pod.Node)
		}
		byFamily[family] = append(byFamily[family], e)
	}
	lrpKey := cr.w.LRPKey()
	var out []*discoveryv1.EndpointSlice
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		endpoints, ok := byFamily[family]
		if !ok {
			continue
		}
		suffix := ""
		if family == discoveryv1.AddressTypeIPv6 {
			suffix = "v6"
		}
		for n := 0; n*maxEndpointsPerSlice < len(endpoints); n++ {
			chunk := endpoints[n*maxEndpointsPerSlice : min(len(endpoints), (n+1)*maxEndpointsPerSlice)]
			s := &discoveryv1.EndpointSlice{
				ObjectMeta:  c.meta(names.RouteSliceName(service, lrpKey, suffix, n), key, "", ""),
				AddressType: family,
				Endpoints:   chunk,
				Ports: []discoveryv1.EndpointPort{{
					Name:     ptr.To(names.RouteServicePortName),
					Protocol: ptr.To(corev1.ProtocolTCP),
					Port:     ptr.To(cr.port),
				}},
			}
			s.Annotations = nil
			s.Labels[discoveryv1.LabelServiceName] = service
			s.Labels[discoveryv1.LabelManagedBy] = names.EndpointSliceManager
			s.Labels[names.LabelGUID] = cr.w.GUID
			s.Labels[names.LabelVersion] = cr.w.Version
			out = append(out, s)
		}
	}
	return out
}

// ingress is the route's Ingress: one rule for the hostname, one Prefix path per route path,
// each to the path's Service.
func (c *Controller) ingress(key, space, host string, w want) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: c.meta(names.RouteObjectName(key), key, space, host)}
	if c.cfg.Routing.IngressClass != "" {
		ing.Spec.IngressClassName = ptr.To(c.cfg.Routing.IngressClass)
	}
	rule := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}
	for _, path := range w.paths {
		rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{
			Path:     path,
			PathType: ptr.To(networkingv1.PathTypePrefix),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: w.services[path].Name,
				Port: networkingv1.ServiceBackendPort{Number: names.RouteServicePort},
			}},
		})
	}
	ing.Spec.Rules = []networkingv1.IngressRule{rule}
	return ing
}

// httpRoute is the route's HTTPRoute on the operator's Gateway: one PathPrefix rule per route
// path, each to the path's Service.
func (c *Controller) httpRoute(key, space, host string, w want) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: c.meta(names.RouteObjectName(key), key, space, host)}
	r.Spec.ParentRefs = []gatewayv1.ParentReference{{
		Group:     ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
		Kind:      ptr.To(gatewayv1.Kind("Gateway")),
		Namespace: ptr.To(gatewayv1.Namespace(c.cfg.Routing.GatewayNamespace)),
		Name:      gatewayv1.ObjectName(c.cfg.Routing.GatewayName),
	}}
	r.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(host)}
	for _, path := range w.paths {
		r.Spec.Rules = append(r.Spec.Rules, gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
				Type:  ptr.To(gatewayv1.PathMatchPathPrefix),
				Value: ptr.To(path),
			}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{
					Group: ptr.To(gatewayv1.Group("")),
					Kind:  ptr.To(gatewayv1.Kind("Service")),
					Name:  gatewayv1.ObjectName(w.services[path].Name),
					Port:  ptr.To(gatewayv1.PortNumber(names.RouteServicePort)),
				},
				Weight: ptr.To(int32(1)),
			}}},
		})
	}
	return r
}
