package main

import (
	"github.com/opi-bridge/opi/k8s"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("LoadConfig of the workloads section", func() {
	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	It("checks each health check for a second, counts instances after 10 s Ready, and runs at baseline by default", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		opts := cfg.backendOptions()
		Expect(opts.Pods.ProbeTimeout).To(Equal(time.Second))
		Expect(opts.Pods.MinReady).To(Equal(10 * time.Second))
		Expect(opts.Pods.PodSecurity).To(Equal(k8s.PodSecurityBaseline))
	})

	It("takes them from the file and flags; a minimum ready time of 0 stays 0", func() {
		path := filepath.Join(GinkgoT().TempDir(), "opi.yml")
		Expect(os.WriteFile(path, []byte("workloads:\n  probe_timeout: 3s\n  pod_security: restricted\n"), 0o600)).To(Succeed())
		cfg, err := LoadConfig([]string{"--config", path, "--min-ready", "0s"})
		Expect(err).NotTo(HaveOccurred())
		opts := cfg.backendOptions()
		Expect(opts.Pods.ProbeTimeout).To(Equal(3 * time.Second))
		Expect(opts.Pods.PodSecurity).To(Equal(k8s.PodSecurityRestricted))
		Expect(opts.Pods.MinReady).To(BeNumerically("<", 0), "negative: none, where 0 would take the backend's default")
	})

	DescribeTable("rejects nonsense",
		func(args []string, message string) {
			_, err := LoadConfig(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("an unknown pod security level", []string{"--pod-security", "privileged"}, `pod security "privileged" is not one of baseline, restricted`),
		Entry("no probe timeout", []string{"--probe-timeout", "0s"}, "workloads.probe_timeout"),
		Entry("a negative minimum ready time", []string{"--min-ready", "-1s"}, "workloads.min_ready"),
	)
})
