package main

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/handler"
)

var _ = Describe("LoadConfig", func() {
	writeConfig := func(yaml string) string {
		path := filepath.Join(GinkgoT().TempDir(), "opi.yml")
		Expect(os.WriteFile(path, []byte(yaml), 0o600)).To(Succeed())
		return path
	}

	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	It("has defaults that run on loopback", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Listen).To(Equal("127.0.0.1:8085"))
		Expect(cfg.Namespace).To(Equal("cf-workloads"))
		Expect(cfg.MaxBodyBytes).To(BeEquivalentTo(2 << 20))
		Expect(cfg.MaxInFlight).To(Equal(handler.DefaultMaxInFlight))
		Expect(cfg.KubeQPS).To(BeNumerically(">", 50))
		Expect(cfg.ReadWaitTimeout.Duration).To(Equal(5 * time.Second))
		Expect(cfg.CacheSyncTimeout.Duration).To(Equal(time.Minute))
		Expect(cfg.backendOptions().CacheSyncTimeout).To(Equal(time.Minute))
	})

	It("reads the cache-sync timeout from the kubernetes section, and its flag overrides it", func() {
		path := writeConfig("kubernetes:\n  cache_sync_timeout: 5m\n")
		cfg, err := LoadConfig([]string{"--config", path})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.CacheSyncTimeout.Duration).To(Equal(5 * time.Minute))
		Expect(cfg.backendOptions().CacheSyncTimeout).To(Equal(5 * time.Minute))
		cfg, err = LoadConfig([]string{"--config", path, "--cache-sync-timeout", "1ns"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.backendOptions().CacheSyncTimeout).To(Equal(time.Nanosecond))
	})

	It("reads the file, and flags override it", func() {
		path := writeConfig("listen: 127.0.0.1:9000\nkubernetes:\n  namespace: from-file\n  kubeconfig: /k\n  read_wait_timeout: 2s\nmax_body_bytes: 100\n")
		cfg, err := LoadConfig([]string{"--config", path, "--namespace", "from-flag"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Listen).To(Equal("127.0.0.1:9000"))
		Expect(cfg.Namespace).To(Equal("from-flag"))
		Expect(cfg.Kubeconfig).To(Equal("/k"))
		Expect(cfg.ReadWaitTimeout.Duration).To(Equal(2 * time.Second))
		Expect(cfg.MaxBodyBytes).To(BeEquivalentTo(100))
	})

	It("reads the backend's settings from their kubernetes section", func() {
		path := writeConfig("kubernetes:\n  namespace: apps\n  create_namespace: false\n  kube_qps: 7\n  kube_burst: 9\n  janitor_period: 3s\n  janitor_grace: 4s\n")
		cfg, err := LoadConfig([]string{"--config", path})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.KubernetesConfig).To(Equal(KubernetesConfig{
			Namespace: "apps", KubeQPS: 7, KubeBurst: 9,
			ReadWaitTimeout: Duration{5 * time.Second},
			JanitorPeriod:   Duration{3 * time.Second}, JanitorGrace: Duration{4 * time.Second},
			CacheSyncTimeout: Duration{time.Minute},
			AppNetworkConfig: defaultAppNetworkConfig(),
		}))
	})

	It("reads the manifests' config files", func() {
		for _, path := range []string{"../../deploy/kustomize/base/opi.yml", "../../deploy/kustomize/overlays/cf/opi.yml"} {
			cfg, err := LoadConfig([]string{"--config", path})
			Expect(err).NotTo(HaveOccurred(), path)
			Expect(cfg.Namespace).To(Equal("cf-workloads"), path)
			Expect(cfg.CreateNamespace).To(BeFalse(), path)
			Expect(cfg.OpsListen).To(Equal("0.0.0.0:8086"), path)
		}
	})

	It("falls back to $KUBECONFIG", func() {
		GinkgoT().Setenv("KUBECONFIG", "/env/kubeconfig")
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Kubeconfig).To(Equal("/env/kubeconfig"))
	})

	DescribeTable("rejects mistakes with a clear message",
		func(args []string, file, message string) {
			if file != "" {
				args = append(args, "--config", writeConfig(file))
			}
			_, err := LoadConfig(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("unknown key", nil, "namspace: x\n", "unknown field"),
		Entry("bad duration", nil, "kubernetes:\n  read_wait_timeout: soon\n", `invalid duration "soon"`),
		Entry("bad listen", []string{"--listen", "nope"}, "", "listen"),
		Entry("plaintext off loopback", []string{"--listen", "0.0.0.0:8085"}, "", "refusing to serve plain HTTP"),
		Entry("cert without key", []string{"--tls-cert", "c.pem"}, "", "tls_cert and tls_key go together"),
		Entry("client CA without cert", []string{"--tls-client-ca", "ca.pem"}, "", "tls_client_ca needs"),
		Entry("bad log level", []string{"--log-level", "loud"}, "", "log_level"),
		Entry("empty namespace", []string{"--namespace", ""}, "", "namespace"),
		Entry("no cache-sync timeout", []string{"--cache-sync-timeout", "0s"}, "", "kubernetes.cache_sync_timeout must be positive"),
		Entry("pprof without an operations listener", []string{"--pprof"}, "", "pprof needs ops_listen"),
		Entry("TLS off loopback without a client CA", []string{"--listen", "0.0.0.0:8085", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "", "refusing to serve on 0.0.0.0:8085 without client certificates"),
		Entry("plain HTTP off loopback without opting out of client certificates", []string{"--listen", "0.0.0.0:8085", "--plaintext"}, "", "insecure_skip_client_certificates"),
		Entry("mutual TLS off loopback without client names", []string{"--listen", "0.0.0.0:8085", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem"}, "", "refusing to serve on 0.0.0.0:8085 to any certificate the client CA signed"),
		Entry("mutual TLS off loopback with an empty list of client names", nil, "listen: 0.0.0.0:8085\ntls_cert: c.pem\ntls_key: k.pem\ntls_client_ca: ca.pem\ntls_client_names: []\n", "insecure_any_client_certificate"),
		Entry("client names without a client CA", []string{"--tls-client-names", "cloud-controller"}, "", "tls_client_names needs tls_client_ca"),
	)

	It("allows a non-loopback listen without a client CA only when the operator opts out in so many words", func() {
		_, err := LoadConfig([]string{"--listen", "0.0.0.0:8085", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--insecure-skip-client-certificates"})
		Expect(err).NotTo(HaveOccurred())
		_, err = LoadConfig([]string{"--config", writeConfig("listen: 0.0.0.0:8085\ntls_cert: c.pem\ntls_key: k.pem\ninsecure_skip_client_certificates: true\n")})
		Expect(err).NotTo(HaveOccurred())
		_, err = LoadConfig([]string{"--listen", "0.0.0.0:8085", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem", "--tls-client-names", "cloud-controller"})
		Expect(err).NotTo(HaveOccurred())
	})

	It("allows a non-loopback listen to any certificate of the client CA only when the operator opts out in so many words", func() {
		_, err := LoadConfig([]string{"--listen", "0.0.0.0:8085", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem", "--insecure-any-client-certificate"})
		Expect(err).NotTo(HaveOccurred())
		_, err = LoadConfig([]string{"--config", writeConfig("listen: 0.0.0.0:8085\ntls_cert: c.pem\ntls_key: k.pem\ntls_client_ca: ca.pem\ninsecure_any_client_certificate: true\n")})
		Expect(err).NotTo(HaveOccurred())
		_, err = LoadConfig([]string{"--listen", "127.0.0.1:8085", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem"})
		Expect(err).NotTo(HaveOccurred(), "loopback needs no names")
	})

	It("reads tls_client_names from the file, and the flag's comma-separated list replaces it", func() {
		path := writeConfig("tls_cert: c.pem\ntls_key: k.pem\ntls_client_ca: ca.pem\ntls_client_names: [cloud-controller, cc-worker]\n")
		cfg, err := LoadConfig([]string{"--config", path})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.TLSClientNames).To(Equal([]string{"cloud-controller", "cc-worker"}))
		cfg, err = LoadConfig([]string{"--config", path, "--tls-client-names", "a, b"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.TLSClientNames).To(Equal([]string{"a", "b"}))
	})

	It("allows plain HTTP off loopback only when asked", func() {
		_, err := LoadConfig([]string{"--listen", "0.0.0.0:8085", "--plaintext", "--insecure-skip-client-certificates"})
		Expect(err).NotTo(HaveOccurred())
		_, err = LoadConfig([]string{"--listen", "[::1]:8085"})
		Expect(err).NotTo(HaveOccurred())
		_, err = LoadConfig([]string{"--listen", "localhost:8085"})
		Expect(err).NotTo(HaveOccurred())
	})
})
