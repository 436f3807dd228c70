package main

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

var _ = Describe("The in-cluster configuration", func() {
	var dir string

	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "token"), []byte("a-token"), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("a-ca"), 0o600)).To(Succeed())
		GinkgoT().Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
		GinkgoT().Setenv("KUBERNETES_SERVICE_PORT", "443")
	})

	It("reads the token and CA from OPI_SERVICEACCOUNT_DIR and the API server from KUBERNETES_SERVICE_*", func() {
		cfg, err := inClusterConfig(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Host).To(Equal("https://10.96.0.1:443"))
		Expect(cfg.BearerTokenFile).To(Equal(filepath.Join(dir, "token")))
		Expect(cfg.TLSClientConfig.CAFile).To(Equal(filepath.Join(dir, "ca.crt")))
	})

	It("brackets an IPv6 API server address", func() {
		GinkgoT().Setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
		cfg, err := inClusterConfig(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Host).To(Equal("https://[fd00::1]:443"))
	})

	It("is not in a cluster without KUBERNETES_SERVICE_*", func() {
		GinkgoT().Setenv("KUBERNETES_SERVICE_HOST", "")
		_, err := inClusterConfig(dir)
		Expect(err).To(MatchError(rest.ErrNotInCluster))
	})

	It("says which file is missing", func() {
		Expect(os.Remove(filepath.Join(dir, "token"))).To(Succeed())
		_, err := inClusterConfig(dir)
		Expect(err).To(MatchError(ContainSubstring("service account token")))
	})
})
