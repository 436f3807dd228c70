package main

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/metrics"
)

var _ = Describe("The nats configuration (routing: nats)", func() {
	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	writeFile := func(name, content string) string {
		path := filepath.Join(GinkgoT().TempDir(), name)
		Expect(os.WriteFile(path, []byte(content), 0o600)).To(Succeed())
		return path
	}

	It("maps the section to gorouter's Config, and --nats-url replaces the file's list (repeatable, comma-separated)", func() {
		passwordFile := writeFile("nats-password", "s3cret\n")
		path := writeConfigFile(`
kubernetes:
  routing: nats
  node_zones: true
  routers:
  - cidr: 10.0.16.0/24
nats:
  urls: [nats://10.0.0.1:4222]
  user: nats
  password_file: ` + passwordFile + `
  default_register_interval: 15s
  insecure_plaintext_password: true
`)
		cfg, err := LoadConfig([]string{"--config", path, "--nats-url", "nats://10.0.0.2:4222,nats://10.0.0.3:4222", "--nats-url", "nats://10.0.0.4:4222", "--router", "10.0.17.0/24"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.NATS.gorouter()).To(Equal(gorouter.Config{
			URLs:                    []string{"nats://10.0.0.2:4222", "nats://10.0.0.3:4222", "nats://10.0.0.4:4222"},
			User:                    "nats",
			PasswordFile:            passwordFile,
			DefaultRegisterInterval: 15 * time.Second,
			AllowPlaintextPassword:  true,
		}))
		Expect(cfg.NodeZones).To(BeTrue())
		opts := cfg.backendOptions()
		Expect(opts.Hooks.Routing.Mode).To(Equal(k8s.RoutingNATS))
		Expect(opts.Hooks.NetworkPolicy.Routers).To(Equal([]k8s.PolicyPeer{{CIDR: "10.0.16.0/24"}, {CIDR: "10.0.17.0/24"}}))
	})

	DescribeTable("lets a password go to NATS only over TLS, to loopback, or when the operator opts in in so many words",
		func(section string) {
			_, err := LoadConfig([]string{"--config", writeConfigFile("kubernetes: {routing: nats}\nnats:\n" + section)})
			Expect(err).NotTo(HaveOccurred())
		},
		Entry("tls://", "  urls: [tls://10.0.0.1:4224]\n  user: nats\n  password: s3cret\n"),
		Entry("loopback", "  urls:\n  - nats://127.0.0.1:4222\n  - nats://localhost:4222\n  - nats://[::1]:4222\n  user: nats\n  password: s3cret\n"),
		Entry("no password", "  urls: [nats://10.0.0.1:4222]\n"),
		Entry("opted in", "  urls: [nats://opi:s3cret@10.0.0.1:4222]\n  insecure_plaintext_password: true\n"),
	)

	It("takes the plaintext opt-in from its flag", func() {
		_, err := LoadConfig([]string{"--routing", "nats", "--nats-url", "nats://opi:s3cret@10.0.0.1:4222"})
		Expect(err).To(MatchError(ContainSubstring("nats.insecure_plaintext_password")))
		_, err = LoadConfig([]string{"--routing", "nats", "--nats-url", "nats://opi:s3cret@10.0.0.1:4222", "--nats-insecure-plaintext-password"})
		Expect(err).NotTo(HaveOccurred())
	})

	It("reads the TLS files", func() {
		ca := writeFile("ca.pem", "not a certificate")
		path := writeConfigFile(`
kubernetes: {routing: nats}
nats:
  urls: [tls://10.0.0.1:4224]
  tls: {ca_file: ` + ca + `}
`)
		_, err := LoadConfig([]string{"--config", path})
		Expect(err).To(MatchError(ContainSubstring("nats.tls.ca_file: nats: ca file " + ca + " holds no PEM certificate")))
	})

	DescribeTable("rejects mistakes, naming the key, never showing the password",
		func(args []string, message string) {
			_, err := LoadConfig(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
			Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
		},
		Entry("nats without urls", []string{"--routing", "nats"}, "kubernetes.routing: nats needs nats.urls (--nats-url)"),
		Entry("a url of another scheme", []string{"--routing", "nats", "--nats-url", "http://u:s3cret@10.0.0.1:4222"},
			"nats.urls: nats: server URL http://10.0.0.1:4222: the scheme must be nats:// or tls://"),
		Entry("a url without a port", []string{"--routing", "nats", "--nats-url", "nats://u:s3cret@10.0.0.1"}, "nats.urls: nats: server URL nats://10.0.0.1: host and port are required"),
		Entry("nats in another mode", []string{"--nats-url", "nats://10.0.0.1:4222"}, `nats is set but kubernetes.routing is "ingress": the nats section is for routing: nats only`),
		Entry("node zones in another mode", []string{"--node-zones"}, "kubernetes.node_zones is for routing: nats only"),
		Entry("a bad router range", []string{"--router", "10.0.16.1/99"}, `kubernetes.routers[0] (namespace, pod_labels or cidr): router cidr "10.0.16.1/99" is not an address range`),
	)

	DescribeTable("rejects mistakes in the file, naming the key",
		func(section, message string) {
			_, err := LoadConfig([]string{"--config", writeConfigFile("kubernetes: {routing: nats}\nnats:\n" + section)})
			Expect(err).To(MatchError(ContainSubstring(message)))
			Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
		},
		Entry("a password and a password file", "  urls: [nats://10.0.0.1:4222]\n  password: s3cret\n  password_file: /etc/nats-password\n",
			"nats.password and nats.password_file exclude each other"),
		Entry("a client certificate without its key", "  urls: [nats://10.0.0.1:4222]\n  tls: {cert_file: /etc/cert.pem}\n",
			"nats.tls.cert_file and nats.tls.key_file go together"),
		Entry("a negative interval", "  urls: [nats://10.0.0.1:4222]\n  default_register_interval: -1s\n",
			"nats.default_register_interval must not be negative"),
		Entry("an interval below the floor", "  urls: [nats://10.0.0.1:4222]\n  default_register_interval: 10ms\n",
			"nats.default_register_interval must be at least 1s"),
		Entry("a password in the clear off loopback", "  urls: [nats://10.0.0.1:4222]\n  user: nats\n  password: s3cret\n",
			"nats.urls: nats: refusing to send a password in the clear to 10.0.0.1: use tls:// (or a CA file), a loopback server, or opt in with nats.insecure_plaintext_password: true (--nats-insecure-plaintext-password)"),
		Entry("a URL's password in the clear off loopback", "  urls: [nats://127.0.0.1:4222, nats://opi:s3cret@nats.example.com:4222]\n",
			"refusing to send a password in the clear to nats.example.com"),
		Entry("a missing password file", "  urls: [nats://10.0.0.1:4222]\n  password_file: /nonexistent/nats-password\n",
			"nats.password_file: nats: read password file"),
	)

	It("hands the backend the emitter, and logs its servers without user and password", func() {
		cfg, err := LoadConfig([]string{"--routing", "nats", "--nats-url", "nats://opi:s3cret@127.0.0.1:4222"})
		Expect(err).NotTo(HaveOccurred())
		logger := lagertest.NewTestLogger("opi")
		var opts k8s.Options
		synced, err := wireNATS(context.Background(), cfg, nil, logger, metrics.New(), &opts)
		Expect(err).NotTo(HaveOccurred())
		Expect(synced).To(BeNil())
		Expect(opts.Clients.Routes).To(BeAssignableToTypeOf(&gorouter.Emitter{}))
		Expect(opts.Clients.Zone).To(BeNil())
		Expect(logger.LogMessages()).To(ContainElement("opi.routing-nats"))
		Expect(string(logger.Buffer().Contents())).To(ContainSubstring("nats://127.0.0.1:4222"))
		Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring("s3cret"))
	})

	It("reads a node's zone from its label in the nodes' cache", func() {
		nodes := cache.NewStore(cache.MetaNamespaceKeyFunc)
		Expect(nodes.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"topology.kubernetes.io/zone": "z1"}}})).To(Succeed())
		Expect(nodes.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}})).To(Succeed())
		zone := nodeZones(nodes)
		Expect(zone("node-1")).To(Equal("z1"))
		Expect(zone("node-2")).To(Equal(""))
		Expect(zone("node-3")).To(Equal(""))
	})
})
