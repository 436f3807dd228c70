package integration_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/opi-bridge/opi/k8s/names"
)

// An operator switches an existing foundation from gateway to ingress mode: opi is restarted
// with the new mode, and its janitor removes the HTTPRoutes the old mode made (the cluster
// still serves HTTPRoutes), only opi's.
var _ = Describe("Switching a foundation's routing mode", func() {
	It("has the janitor of ingress mode delete opi's HTTPRoutes of gateway mode, keep anyone else's, and make the Ingresses", func() {
		ns := newNamespace()
		a := newApp()
		kubeconfig := restrictedKubeconfig(ns) // once: it makes the namespace
		gateway := startOpiWith(kubeconfig, ns, "--create-namespace=false", "--routing", "gateway", "--gateway-namespace", "gateways", "--gateway-name", "cf")
		desire(gateway, a)
		routes := func(selector string) []string {
			var list gatewayv1.HTTPRouteList
			kubectlJSON(&list, "get", "httproutes", "-n", ns, "-l", selector)
			out := []string{}
			for _, r := range list.Items {
				out = append(out, r.Name)
			}
			return out
		}
		Eventually(func() []string { return routes(names.RouteSelector) }).Should(HaveLen(1))
		gateway.stop()
		foreign := writeFile(GinkgoT().TempDir(), "route.yaml", []byte(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: not-opis
  labels: {app: not-opi}
spec:
  hostnames: [other.example.com]
`))
		kubectl("apply", "-n", ns, "-f", foreign)

		ingress := startOpiWith(kubeconfig, ns, "--create-namespace=false", "--janitor-period", "1s", "--janitor-grace", "2s", "--leader-election=false")
		Eventually(func() []string { return routes(names.RouteSelector) }).Should(BeEmpty())
		Expect(ingress.Logs()).To(ContainSubstring("deleted-other-mode-httproute"))
		Expect(routes("app=not-opi")).To(Equal([]string{"not-opis"}))
		Eventually(func() map[string][]string { return ingressHosts(ns, a) }).Should(HaveKey("dora.example.com"))
	})
})
