package integration_test

import (
	"context"
	"slices"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/opi-bridge/opi/k8s/names"
)

// ingressView reads a route from its Ingress: the one of the host, the path's backend Service,
// that Service's EndpointSlices.
type ingressView struct{ ns string }

func (ingressView) routes() bool { return true }

func (v ingressView) read(g Gomega, host, path string) ([]string, string) {
	o := routeObjectOf(g, v.ns, "ingresses", host)
	g.Expect(o).NotTo(BeNil(), "an Ingress for %s", host)
	ing := o.Ingress
	key := routeGroupKey(g, o.Meta)
	g.Expect(ing.Spec.Rules).To(HaveLen(1))
	rule := ing.Spec.Rules[0]
	g.Expect(rule.Host).To(Equal(host))
	g.Expect(rule.HTTP).NotTo(BeNil())
	want := matchedPrefix(path)
	var backend *networkingv1.IngressServiceBackend
	for _, p := range rule.HTTP.Paths {
		if p.Path == want {
			g.Expect(p.PathType).To(HaveValue(Equal(networkingv1.PathTypePrefix)))
			backend = p.Backend.Service
		}
	}
	g.Expect(backend).NotTo(BeNil(), "a path %s in the Ingress of %s", want, host)
	g.Expect(backend.Port.Number).To(BeEquivalentTo(names.RouteServicePort))
	targets, svc := serviceTargets(g, v.ns, backend.Name, key, host, path)
	return targets, string(ing.UID) + "/" + svc
}

func (v ingressView) gone(g Gomega, _, _ string) {
	g.Expect(routingObjects(g, v.ns)).To(BeEmpty())
}

// gatewayView reads a route from its HTTPRoute: the one of the host, the path's backendRef,
// that Service's EndpointSlices.
type gatewayView struct{ ns string }

func (gatewayView) routes() bool { return true }

func (v gatewayView) read(g Gomega, host, path string) ([]string, string) {
	o := routeObjectOf(g, v.ns, "httproutes", host)
	g.Expect(o).NotTo(BeNil(), "an HTTPRoute for %s", host)
	route := o.HTTPRoute
	key := routeGroupKey(g, o.Meta)
	g.Expect(route.Spec.Hostnames).To(Equal([]gatewayv1.Hostname{gatewayv1.Hostname(host)}))
	want := matchedPrefix(path)
	var ref *gatewayv1.HTTPBackendRef
	for i, rule := range route.Spec.Rules {
		for _, m := range rule.Matches {
			if m.Path != nil && m.Path.Value != nil && *m.Path.Value == want {
				g.Expect(m.Path.Type).To(HaveValue(Equal(gatewayv1.PathMatchPathPrefix)))
				g.Expect(rule.BackendRefs).To(HaveLen(1), "one backend per path")
				ref = &route.Spec.Rules[i].BackendRefs[0]
			}
		}
	}
	g.Expect(ref).NotTo(BeNil(), "a rule for %s in the HTTPRoute of %s", want, host)
	g.Expect(ref.Port).To(HaveValue(BeEquivalentTo(names.RouteServicePort)))
	targets, svc := serviceTargets(g, v.ns, string(ref.Name), key, host, path)
	return targets, string(route.UID) + "/" + svc
}

func (v gatewayView) gone(g Gomega, _, _ string) {
	g.Expect(routingObjects(g, v.ns)).To(BeEmpty())
}

// routeGroupKey checks that meta is the route object of its (space, hostname) group, named by
// the group's key, of the specs' space, and returns the key.
func routeGroupKey(g Gomega, meta metav1.ObjectMeta) string {
	key := meta.Labels[names.LabelRouteKey]
	g.Expect(key).NotTo(BeEmpty())
	g.Expect(meta.Name).To(Equal(names.RouteObjectName(key)))
	g.Expect(meta.Annotations).To(HaveKeyWithValue(names.AnnotationSpaceGUID, "space-1"))
	return key
}

// matchedPrefix is the path prefix an Ingress or HTTPRoute matches for a CF route's path.
func matchedPrefix(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// serviceTargets checks that the Service name is the route's (host and path of the group key):
// selector-less, port http 8080; and returns what its EndpointSlices send to (only Ready
// endpoints count: any other is listed as such, so that it fails the comparison) and the
// Service's UID.
func serviceTargets(g Gomega, ns, name, key, host, path string) ([]string, string) {
	ctx := context.Background()
	svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(svc.Name).To(HavePrefix(names.RouteObjectName(key) + "-"))
	g.Expect(svc.Labels).To(And(HaveKeyWithValue(names.LabelRouteKey, key), HaveKeyWithValue(names.LabelSourceType, names.SourceTypeRoute)))
	g.Expect(svc.Annotations).To(HaveKeyWithValue(names.AnnotationRouteHost, host))
	if path != "" {
		g.Expect(svc.Annotations).To(HaveKeyWithValue(names.AnnotationRoutePath, path))
	}
	g.Expect(svc.Spec.Selector).To(BeEmpty(), "opi keeps the endpoints: no selector")
	g.Expect(svc.Spec.Ports).To(ConsistOf(And(HaveField("Name", "http"), HaveField("Port", BeEquivalentTo(names.RouteServicePort)))))
	out := []string{}
	for _, s := range routeSlices(g, ns, name) {
		g.Expect(s.Labels).To(And(HaveKeyWithValue(names.LabelRouteKey, key), HaveKeyWithValue(names.LabelSourceType, names.SourceTypeRoute)))
		g.Expect(s.Ports).To(HaveLen(1), "slice %s: one port, its LRP's", s.Name)
		g.Expect(s.Ports[0].Name).To(HaveValue(Equal("http")))
		g.Expect(s.Ports[0].Port).NotTo(BeNil())
		for _, e := range s.Endpoints {
			g.Expect(e.Addresses).To(HaveLen(1))
			g.Expect(e.TargetRef).NotTo(BeNil())
			g.Expect(e.TargetRef.Kind).To(Equal("Pod"))
		}
		for _, e := range sliceEndpoints(s) {
			t := e.target
			if !e.ready {
				t += " not ready"
			}
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, string(svc.UID)
}
