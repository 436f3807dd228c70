package integration_test

import (
	"context"
	"sort"

	. "github.com/onsi/gomega"
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
