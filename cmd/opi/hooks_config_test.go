package main

import (
	"github.com/opi-bridge/opi/k8s"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("The routing, isolation and placement configuration", func() {
	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	It("defaults to Ingresses, headless Services, network policies with DNS, and the isolation segment label", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		opts := cfg.backendOptions()
		Expect(opts.Hooks.Routing).To(Equal(k8s.RoutingOptions{Mode: "ingress"}))
		Expect(opts.Hooks.HeadlessServices).To(BeTrue())
		Expect(opts.Hooks.NetworkPolicy).To(Equal(k8s.NetworkPolicyOptions{Enabled: true, DNSNamespace: "kube-system"}))
		Expect(opts.Hooks.Placement).To(Equal(k8s.PlacementOptions{NodeLabel: k8s.DefaultPlacementKey, TaintKey: k8s.DefaultPlacementKey}))
	})

	It("reads the keys from the file, and flags override or add to them", func() {
		path := writeConfigFile(`
kubernetes:
  routing: gateway
  gateway: {namespace: gw, name: cf}
  headless_services: false
  network_policies: true
  routers:
  - namespace: cf-gateway
    pod_labels: {app: envoy}
  dns_namespace: ""
  placement: {node_label: seg, taint_key: ""}
`)
		cfg, err := LoadConfig([]string{"--config", path, "--router", "ingress-nginx:app=nginx,tier=edge", "--gateway-name", "cf2"})
		Expect(err).NotTo(HaveOccurred())
		opts := cfg.backendOptions()
		Expect(opts.Hooks.Routing).To(Equal(k8s.RoutingOptions{Mode: "gateway", GatewayNamespace: "gw", GatewayName: "cf2"}))
		Expect(opts.Hooks.HeadlessServices).To(BeFalse())
		Expect(opts.Hooks.NetworkPolicy).To(Equal(k8s.NetworkPolicyOptions{Enabled: true, Routers: []k8s.PolicyPeer{
			{Namespace: "cf-gateway", PodLabels: map[string]string{"app": "envoy"}},
			{Namespace: "ingress-nginx", PodLabels: map[string]string{"app": "nginx", "tier": "edge"}},
		}}))
		Expect(opts.Hooks.Placement).To(Equal(k8s.PlacementOptions{NodeLabel: "seg"}))
	})

	DescribeTable("rejects mistakes with a clear message",
		func(args []string, message string) {
			_, err := LoadConfig(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("unknown routing", []string{"--routing", "istio"}, `routing "istio" is not one of ingress, gateway, nats, none`),
		Entry("gateway without a name", []string{"--routing", "gateway"}, "routing: gateway needs gateway.name"),
		Entry("router without a namespace", []string{"--router", ":app=x"}, "a namespace is required"),
		Entry("router with a bad label", []string{"--router", "ns:app"}, "labels must be key=value"),
		Entry("no placement label", []string{"--placement-node-label", ""}, "placement.node_label"),
	)
})

func writeConfigFile(yaml string) string {
	path := filepath.Join(GinkgoT().TempDir(), "opi.yml")
	Expect(os.WriteFile(path, []byte(yaml), 0o600)).To(Succeed())
	return path
}
