package integration_test

import (
	"context"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/opi-bridge/opi/k8s/names"
)

// routeObject is what a route object of ingress or gateway mode says: its name, hostname,
// owners, and each path's Service; and the object itself, for a view's checks of its mode.
type routeObject struct {
	Name, Host string
	Owned      bool
	Services   map[string]string // path -> Service
	Meta       metav1.ObjectMeta
	Ingress    *networkingv1.Ingress
	HTTPRoute  *gatewayv1.HTTPRoute
}

// routeObjects are the Ingresses (kind "ingresses") or HTTPRoutes ("httproutes") opi keeps for
// the routes of namespace ns.
func routeObjects(ns, kind string) []routeObject {
	GinkgoHelper()
	return readRouteObjects(Default, ns, kind)
}

// readRouteObjects is routeObjects failing g.
func readRouteObjects(g Gomega, ns, kind string) []routeObject {
	ctx := context.Background()
	byRoute := metav1.ListOptions{LabelSelector: names.RouteSelector}
	var out []routeObject
	if kind == "httproutes" {
		list, err := gatewayClient().GatewayV1().HTTPRoutes(ns).List(ctx, byRoute)
		g.Expect(err).NotTo(HaveOccurred())
		for i := range list.Items {
			r := &list.Items[i]
			o := routeObject{Name: r.Name, Owned: len(r.OwnerReferences) > 0, Services: map[string]string{}, Meta: r.ObjectMeta, HTTPRoute: r}
			if len(r.Spec.Hostnames) > 0 {
				o.Host = string(r.Spec.Hostnames[0])
			}
			for _, rule := range r.Spec.Rules {
				if len(rule.Matches) > 0 && rule.Matches[0].Path != nil && rule.Matches[0].Path.Value != nil && len(rule.BackendRefs) > 0 {
					o.Services[*rule.Matches[0].Path.Value] = string(rule.BackendRefs[0].Name)
				}
			}
			out = append(out, o)
		}
		return out
	}
	list, err := kube.NetworkingV1().Ingresses(ns).List(ctx, byRoute)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range list.Items {
		ing := &list.Items[i]
		o := routeObject{Name: ing.Name, Owned: len(ing.OwnerReferences) > 0, Services: map[string]string{}, Meta: ing.ObjectMeta, Ingress: ing}
		if len(ing.Spec.Rules) > 0 {
			o.Host = ing.Spec.Rules[0].Host
			if http := ing.Spec.Rules[0].HTTP; http != nil {
				for _, p := range http.Paths {
					if p.Backend.Service != nil {
						o.Services[p.Path] = p.Backend.Service.Name
					}
				}
			}
		}
		out = append(out, o)
	}
	return out
}

// routeObjectOf is the route object of ns (kind as routeObjects') whose route-host annotation
// is host, nil if none; more than one fails g: a host has one Ingress or HTTPRoute per space.
func routeObjectOf(g Gomega, ns, kind, host string) *routeObject {
	var out []routeObject
	for _, o := range readRouteObjects(g, ns, kind) {
		if o.Meta.Annotations[names.AnnotationRouteHost] == host {
			out = append(out, o)
		}
	}
	g.Expect(len(out)).To(BeNumerically("<=", 1), "one route object for %s", host)
	if len(out) == 0 {
		return nil
	}
	return &out[0]
}

// routeSlices are the EndpointSlices of the route Services of ns; of Service service only,
// unless it is "".
func routeSlices(g Gomega, ns, service string) []discoveryv1.EndpointSlice {
	selector := names.RouteSelector
	if service != "" {
		selector = discoveryv1.LabelServiceName + "=" + service
	}
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	g.Expect(err).NotTo(HaveOccurred())
	return list.Items
}

// routeEndpoint is one endpoint of a route Service's EndpointSlice.
type routeEndpoint struct {
	// target is the endpoint as served: the guid its slice is labelled with, address, port and
	// pod uid.
	target string
	ready  bool
}

// sliceEndpoints are the endpoints of slice s, whose one port is its LRP's.
func sliceEndpoints(s discoveryv1.EndpointSlice) []routeEndpoint {
	var out []routeEndpoint
	for _, e := range s.Endpoints {
		out = append(out, routeEndpoint{
			target: served(s.Labels[names.LabelGUID], e.Addresses[0], *s.Ports[0].Port, string(e.TargetRef.UID)),
			ready:  e.Conditions.Ready != nil && *e.Conditions.Ready,
		})
	}
	return out
}

// routedTo is, for each hostname whose route objects (kind "ingresses" or "httproutes") send a
// path to app a, that path and the port of a's EndpointSlices there ("path→port").
func routedTo(ns string, a *app, kind string) map[string][]string {
	GinkgoHelper()
	slices := routeSlices(Default, ns, "")
	out := map[string][]string{}
	for _, o := range routeObjects(ns, kind) {
		for path, svc := range o.Services {
			for _, s := range slices {
				if s.Labels[discoveryv1.LabelServiceName] == svc && s.Labels[names.LabelGUID] == a.guid && s.Labels[names.LabelVersion] == a.version {
					out[o.Host] = append(out[o.Host], path+"→"+itoa(*s.Ports[0].Port))
				}
			}
		}
		sort.Strings(out[o.Host])
	}
	return out
}

// routeEndpoints are the Ready endpoints, as served, the route objects of ns give hostname host
// and path (kind "ingresses" or "httproutes"), sorted; nil when no object routes the path.
func routeEndpoints(ns, kind, host, path string) []string {
	GinkgoHelper()
	var svc string
	for _, o := range routeObjects(ns, kind) {
		if o.Host == host && o.Services[path] != "" {
			svc = o.Services[path]
		}
	}
	if svc == "" {
		return nil
	}
	out := []string{}
	for _, s := range routeSlices(Default, ns, svc) {
		for _, e := range sliceEndpoints(s) {
			if e.ready {
				out = append(out, e.target)
			}
		}
	}
	sort.Strings(out)
	return out
}

var _ = Describe("Route objects across terms", func() {
	It("keeps a route's objects through a hand-over and a restart: never deleted, and exact once a leader runs", func() {
		ns := newNamespace()
		a := newApp()
		kubeconfig := restrictedKubeconfig(ns)
		args := append([]string{"--create-namespace=false", "--routing", "ingress"}, quickLeaseFlags...)
		first := startOpiWith(kubeconfig, ns, args...)
		second := startOpiWith(kubeconfig, ns, args...)
		desire(first, a)
		// ready are a's Ready instances, whatever their count.
		ready := func() []string {
			out, _ := readyTargets(ns, carrier{lrp: a, port: 8080})
			return out
		}
		Eventually(ready).Should(HaveLen(2))
		Eventually(func() []string { return routeEndpoints(ns, "ingresses", "dora.example.com", "/") }).Should(Equal(ready()))
		objects := routeObjects(ns, "ingresses")
		Expect(objects).To(HaveLen(1))
		uid := func() string {
			var ing networkingv1.Ingress
			kubectlJSON(&ing, "get", "ingress", objects[0].Name, "-n", ns)
			return string(ing.UID)
		}
		ingressUID := uid()

		By("the leader killed: the route is served all along, and the new leader follows the instances")
		leading := func(o *opiServer) bool { return strings.Contains(o.Logs(), `leader-election.leading"`) }
		Eventually(func() bool { return leading(first) || leading(second) }).Should(BeTrue())
		leader, follower := first, second
		if !leading(first) {
			leader, follower = second, first
		}
		leader.kill()
		before := ready()
		kubectl("delete", "pod", pods(ns, a)[0].Name, "-n", ns, "--wait=false")
		Consistently(func() string { return uid() }, "2s").Should(Equal(ingressUID))
		Eventually(func() bool { return leading(follower) }, "30s").Should(BeTrue())
		Eventually(func() []string {
			now := ready()
			if len(now) != 2 || slices.Equal(now, before) {
				return nil
			}
			return routeEndpoints(ns, "ingresses", "dora.example.com", "/")
		}, "60s").Should(Equal(ready()))
		Expect(uid()).To(Equal(ingressUID), "never deleted")

		By("the only replica killed, an instance replaced while none runs, a new opi started")
		follower.kill()
		before = ready()
		kubectl("delete", "pod", pods(ns, a)[0].Name, "-n", ns, "--wait=false")
		Eventually(func() []string {
			now := ready()
			if len(now) != 2 || slices.Equal(now, before) {
				return nil
			}
			return now
		}, "60s").ShouldNot(BeNil())
		Expect(routeEndpoints(ns, "ingresses", "dora.example.com", "/")).NotTo(Equal(ready()), "no opi ran to follow it")
		follower.start()
		Eventually(func() []string { return routeEndpoints(ns, "ingresses", "dora.example.com", "/") }, "60s").Should(Equal(ready()))
		Expect(uid()).To(Equal(ingressUID), "never deleted")
		leader.start() // back as a follower, so that the spec's clean-up stops it as usual
	})
})
