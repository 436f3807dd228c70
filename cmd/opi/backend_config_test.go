package main

import (
	"github.com/opi-bridge/opi/k8s"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("LoadConfig of the backend", func() {
	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	It("runs apps as Deployments by default", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.backendOptions().Workload).To(Equal(k8s.Deployments))
	})

	It("takes statefulsets from the file, and the flag over the file", func() {
		path := filepath.Join(GinkgoT().TempDir(), "opi.yml")
		Expect(os.WriteFile(path, []byte("backend: statefulsets\n"), 0o600)).To(Succeed())
		cfg, err := LoadConfig([]string{"--config", path})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.backendOptions().Workload).To(Equal(k8s.StatefulSets))

		cfg, err = LoadConfig([]string{"--config", path, "--backend", "deployments"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.backendOptions().Workload).To(Equal(k8s.Deployments))
	})

	It("rejects an unknown backend, naming the valid ones", func() {
		_, err := LoadConfig([]string{"--backend", "replicasets"})
		Expect(err).To(MatchError(`backend "replicasets" is not one of deployments, statefulsets`))
	})
})
