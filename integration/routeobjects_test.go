package integration_test

import (
	"context"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/opi-bridge/opi/k8s/names"
)

// routeObject is what a route object of ingress or gateway mode says: its name, hostname,
// owners, and each path's Service.
type routeObject struct {
	Name, Host string
	Owned      bool
	Services   map[string]string // path -> Service
}

// routeObjects are the Ingresses (kind "ingresses") or HTTPRoutes ("httproutes") opi keeps for
// the routes of namespace ns, as kubectl shows them.
func routeObjects(ns, kind string) []routeObject {
	var out []routeObject
	if kind == "httproutes" {
		var list gatewayv1.HTTPRouteList
		kubectlJSON(&list, "get", kind, "-n", ns, "-l", names.RouteSelector)
		for _, r := range list.Items {
			o := routeObject{Name: r.Name, Host: string(r.Spec.Hostnames[0]), Owned: len(r.OwnerReferences) > 0, Services: map[string]string{}}
			for _, rule := range r.Spec.Rules {
				o.Services[*rule.Matches[0].Path.Value] = string(rule.BackendRefs[0].Name)
			}
			out = append(out, o)
		}
		return out
	}
	var list networkingv1.IngressList
	kubectlJSON(&list, "get", kind, "-n", ns, "-l", names.RouteSelector)
	for _, ing := range list.Items {
		o := routeObject{Name: ing.Name, Host: ing.Spec.Rules[0].Host, Owned: len(ing.OwnerReferences) > 0, Services: map[string]string{}}
		for _, p := range ing.Spec.Rules[0].HTTP.Paths {
			o.Services[p.Path] = p.Backend.Service.Name
		}
		out = append(out, o)
	}
	return out
}

// routeSlices are the EndpointSlices of the route Services of ns.
func routeSlices(ns string) []discoveryv1.EndpointSlice {
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: names.RouteSelector})
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
	return list.Items
}

// routedTo is, for each hostname whose route objects (kind "ingresses" or "httproutes") send a
// path to app a, that path and the port of a's EndpointSlices there ("path→port").
func routedTo(ns string, a *app, kind string) map[string][]string {
	slices := routeSlices(ns)
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

// routeEndpoints are the "<pod uid> ip:port" endpoints the route objects of ns give hostname host and
// path (kind "ingresses" or "httproutes"), sorted; nil when no object routes the path.
func routeEndpoints(ns, kind, host, path string) []string {
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
	for _, s := range routeSlices(ns) {
		if s.Labels[discoveryv1.LabelServiceName] != svc {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				out = append(out, string(e.TargetRef.UID)+" "+e.Addresses[0]+":"+itoa(*s.Ports[0].Port))
			}
		}
	}
	sort.Strings(out)
	return out
}

// readyEndpoints are "<pod uid> ip:port" of app a's Ready pods, sorted.
func readyEndpoints(ns string, a *app, port int32) []string {
	out := []string{}
	for _, p := range pods(ns, a) {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, string(p.UID)+" "+p.Status.PodIP+":"+itoa(port))
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
		Eventually(func() []string { return readyEndpoints(ns, a, 8080) }).Should(HaveLen(2))
		Eventually(func() []string { return routeEndpoints(ns, "ingresses", "dora.example.com", "/") }).Should(Equal(readyEndpoints(ns, a, 8080)))
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
		before := readyEndpoints(ns, a, 8080)
		kubectl("delete", "pod", pods(ns, a)[0].Name, "-n", ns, "--wait=false")
		Consistently(func() string { return uid() }, "2s").Should(Equal(ingressUID))
		Eventually(func() bool { return leading(follower) }, "30s").Should(BeTrue())
		Eventually(func() []string {
			now := readyEndpoints(ns, a, 8080)
			if len(now) != 2 || slices.Equal(now, before) {
				return nil
			}
			return routeEndpoints(ns, "ingresses", "dora.example.com", "/")
		}, "60s").Should(Equal(readyEndpoints(ns, a, 8080)))
		Expect(uid()).To(Equal(ingressUID), "never deleted")

		By("the only replica killed, an instance replaced while none runs, a new opi started")
		follower.kill()
		before = readyEndpoints(ns, a, 8080)
		kubectl("delete", "pod", pods(ns, a)[0].Name, "-n", ns, "--wait=false")
		Eventually(func() []string {
			now := readyEndpoints(ns, a, 8080)
			if len(now) != 2 || slices.Equal(now, before) {
				return nil
			}
			return now
		}, "60s").ShouldNot(BeNil())
		Expect(routeEndpoints(ns, "ingresses", "dora.example.com", "/")).NotTo(Equal(readyEndpoints(ns, a, 8080)), "no opi ran to follow it")
		follower.start()
		Eventually(func() []string { return routeEndpoints(ns, "ingresses", "dora.example.com", "/") }, "60s").Should(Equal(readyEndpoints(ns, a, 8080)))
		Expect(uid()).To(Equal(ingressUID), "never deleted")
		leader.start() // back as a follower, so that the spec's clean-up stops it as usual
	})
})
