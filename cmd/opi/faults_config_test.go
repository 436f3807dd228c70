package main

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("LoadConfig of the fault settings", func() {
	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	It("bounds writes at 50 s and sweeps leftovers every minute after 5 minutes by default", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.WriteTimeout.Duration).To(Equal(50 * time.Second))
		Expect(cfg.JanitorPeriod.Duration).To(Equal(time.Minute))
		Expect(cfg.JanitorGrace.Duration).To(Equal(5 * time.Minute))
	})

	It("takes them from flags", func() {
		cfg, err := LoadConfig([]string{"--write-timeout", "3s", "--janitor-period", "1s", "--janitor-grace", "2s"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.WriteTimeout.Duration).To(Equal(3 * time.Second))
		Expect(cfg.JanitorPeriod.Duration).To(Equal(time.Second))
		Expect(cfg.JanitorGrace.Duration).To(Equal(2 * time.Second))
	})

	It("lets an operator turn the janitor off", func() {
		cfg, err := LoadConfig([]string{"--janitor-period", "0s"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.JanitorPeriod.Duration).To(BeZero())
	})

	DescribeTable("rejects nonsense",
		func(args []string, message string) {
			_, err := LoadConfig(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("no write timeout", []string{"--write-timeout", "0s"}, "write_timeout"),
		Entry("negative janitor period", []string{"--janitor-period", "-1s"}, "janitor_period"),
		Entry("no grace", []string{"--janitor-grace", "0s"}, "janitor_grace"),
	)
})
