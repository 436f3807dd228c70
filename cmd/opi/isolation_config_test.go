package main

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("The tenant isolation configuration", func() {
	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	It("allows CC's Prometheus annotations by default, and tasks DNS only", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.UserAnnotationPrefixes).To(BeNil(), "nil: bifrost.DefaultUserAnnotationPrefixes")
		Expect(bifrost.DefaultUserAnnotationPrefixes).To(Equal([]string{"prometheus.io/"}))
		Expect(cfg.backendOptions().Hooks.NetworkPolicy.TaskDefaultEgress).To(BeEmpty())
	})

	It("reads the allow-list and the tasks' default egress rules from the kubernetes section, and flags override them", func() {
		path := writeConfigFile(`
kubernetes:
  user_annotation_prefixes: [prometheus.io/, example.com/]
  task_default_egress_rules:
  - protocol: tcp
    destinations: [10.0.0.0/8]
    ports: [443]
`)
		cfg, err := LoadConfig([]string{"--config", path})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.UserAnnotationPrefixes).To(Equal([]string{"prometheus.io/", "example.com/"}))
		Expect(cfg.backendOptions().Hooks.NetworkPolicy.TaskDefaultEgress).To(Equal([]opi.EgressRule{{
			Protocol: "tcp", Destinations: []string{"10.0.0.0/8"}, Ports: []opi.PortRange{{Start: 443, End: 443}}, ICMPType: -1, ICMPCode: -1,
		}}))

		cfg, err = LoadConfig([]string{"--config", path, "--user-annotation-prefixes", "localkube.opi-bridge/,prometheus.io/",
			"--task-default-egress-rules", `[{"protocol":"all","destinations":["192.168.0.0/16"]}]`})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.UserAnnotationPrefixes).To(Equal([]string{"localkube.opi-bridge/", "prometheus.io/"}))
		Expect(cfg.backendOptions().Hooks.NetworkPolicy.TaskDefaultEgress).To(ConsistOf(HaveField("Destinations", []string{"192.168.0.0/16"})))

		cfg, err = LoadConfig([]string{"--user-annotation-prefixes", ""})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.UserAnnotationPrefixes).To(BeEmpty())
		Expect(cfg.UserAnnotationPrefixes).NotTo(BeNil(), "empty: no user annotation allowed")
	})

	DescribeTable("rejects mistakes with a clear message",
		func(args []string, message string) {
			_, err := LoadConfig(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("an empty prefix (every key)", []string{"--user-annotation-prefixes", "prometheus.io/,"}, `kubernetes.user_annotation_prefixes[1] ""`),
		Entry("a prefix covering opi's own annotations", []string{"--user-annotation-prefixes", "opi"}, `kubernetes.user_annotation_prefixes[0] "opi" must be a non-empty prefix that does not cover opi's own "opi-bridge.io/" annotations`),
		Entry("a prefix inside opi's own annotations", []string{"--user-annotation-prefixes", "opi-bridge.io/crashes"}, `does not cover opi's own`),
		Entry("a task egress rule CC would refuse", []string{"--task-default-egress-rules", `[{"protocol":"gre","destinations":["10.0.0.0/8"]}]`}, `kubernetes.task_default_egress_rules: egress_rules[0].protocol "gre"`),
		Entry("an icmp task egress rule", []string{"--task-default-egress-rules", `[{"protocol":"icmp","destinations":["10.0.0.0/8"]}]`}, `kubernetes.task_default_egress_rules[0]: icmp`),
		Entry("task egress rules that are no JSON list", []string{"--task-default-egress-rules", `{}`}, `task-default-egress-rules`),
	)
})
