package main

import (
	"github.com/opi-bridge/opi/k8s"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/testsupport/pki"
)

// The config file of deploy/kustomize/components/routing-nats (its kustomize build is the
// integration suite's "The routing-nats kustomize component").
var _ = Describe("The routing-nats component's config file", func() {
	It("loads as routing nats, with the files of the Secret opi-nats where it mounts them", func() {
		own, err := os.ReadFile("../../deploy/kustomize/components/routing-nats/opi.yml")
		Expect(err).NotTo(HaveOccurred())
		// The Secret's files, as the pod would see them at /etc/opi/nats, in a folder of the test's.
		files := GinkgoT().TempDir()
		ca, err := pki.NewCA("nats")
		Expect(err).NotTo(HaveOccurred())
		client, err := ca.Client("opi")
		Expect(err).NotTo(HaveOccurred())
		for name, content := range map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": client.CertPEM, "tls.key": client.KeyPEM, "password": []byte("s3cret\n")} {
			Expect(os.WriteFile(filepath.Join(files, name), content, 0o600)).To(Succeed())
		}
		Expect(string(own)).To(ContainSubstring("/etc/opi/nats/"))
		path := filepath.Join(files, "opi.yml")
		Expect(os.WriteFile(path, []byte(strings.ReplaceAll(string(own), "/etc/opi/nats/", files+"/")), 0o600)).To(Succeed())

		cfg, err := LoadConfig([]string{"--config", path})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Routing).To(Equal(k8s.RoutingNATS))
		Expect(cfg.NATS.URLs).To(Equal([]string{"tls://10.0.31.191:4224"}))
		Expect(cfg.NATS.PasswordFile).To(Equal(filepath.Join(files, "password")))
		Expect(cfg.NATS.TLS.CertFile).To(Equal(filepath.Join(files, "tls.crt")))
		Expect(cfg.Routers).To(ConsistOf(RouterConfig{CIDR: "10.0.16.0/24"}))
		Expect(cfg.Namespace).To(Equal("cf-workloads"))
		Expect(cfg.CreateNamespace).To(BeFalse())
	})
})
