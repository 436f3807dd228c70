package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/sshproxy"
)

var _ = Describe("opi ssh-proxy's configuration", func() {
	var dir, hostKey string

	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		Expect(err).NotTo(HaveOccurred())
		hostKey = filepath.Join(dir, "host-key.pem")
		Expect(os.WriteFile(hostKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)).To(Succeed())
		GinkgoT().Setenv("KUBECONFIG", "")
	})

	required := func(extra ...string) []string {
		return append([]string{
			"--host-key", hostKey, "--uaa-token-url", "https://uaa.example.com/oauth/token",
			"--uaa-client-id", "ssh-proxy", "--uaa-client-secret", "s3cret", "--cc-api-url", "https://api.example.com",
		}, extra...)
	}

	It("reads the flags, with the defaults of those not given", func() {
		cfg, err := LoadSSHProxyConfig(required())
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Listen).To(Equal(":2222"))
		Expect(cfg.Namespace).To(Equal("cf-workloads"))
		Expect(cfg.Backend).To(Equal("deployments"))
		Expect(cfg.OpsListen).To(Equal(":2223"))
		opts := cfg.options()
		Expect(opts.HostKey).NotTo(BeNil())
		Expect(opts.MaxSessions).To(Equal(sshproxy.DefaultMaxSessions))
		Expect(opts.MaxSessionsPerUser).To(Equal(sshproxy.DefaultMaxSessionsPerUser))
		Expect(opts.IdleTimeout).To(Equal(sshproxy.DefaultIdleTimeout))
		Expect(opts.AuthTimeout).To(Equal(sshproxy.DefaultAuthTimeout))
		Expect(opts.SFTPServerPaths).To(Equal(sshproxy.DefaultSFTPServerPaths))
		Expect(opts.Auth).To(Equal(sshproxy.AuthConfig{
			UAATokenURL: "https://uaa.example.com/oauth/token", UAAClientID: "ssh-proxy", UAAClientSecret: "s3cret",
			CCAPIURL: "https://api.example.com",
		}))

		cfg, err = LoadSSHProxyConfig(required("--max-sessions", "7", "--max-sessions-per-user", "2", "--idle-timeout", "90s",
			"--auth-timeout", "3s", "--backend", "statefulsets", "--namespace", "apps", "--listen", "127.0.0.1:2022"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.options()).To(HaveField("MaxSessions", 7))
		Expect(cfg.options()).To(HaveField("MaxSessionsPerUser", 2))
		Expect(cfg.options()).To(HaveField("IdleTimeout", 90*time.Second))
		Expect(cfg.options()).To(HaveField("AuthTimeout", 3*time.Second))
		Expect(cfg.Backend).To(Equal("statefulsets"))
		Expect(cfg.Namespace).To(Equal("apps"))
	})

	It("reads where the sftp subsystem looks for sftp-server, from the file or the flag, leaving the defaults as they are", func() {
		defaults := slices.Clone(sshproxy.DefaultSFTPServerPaths)
		file := filepath.Join(dir, "ssh-proxy.yml")
		Expect(os.WriteFile(file, []byte("sftp_server_paths: [/opt/a/sftp-server, /opt/b/sftp-server]\n"), 0o600)).To(Succeed())
		cfg, err := LoadSSHProxyConfig(required("--config", file))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.options().SFTPServerPaths).To(Equal([]string{"/opt/a/sftp-server", "/opt/b/sftp-server"}))
		Expect(sshproxy.DefaultSFTPServerPaths).To(Equal(defaults))

		cfg, err = LoadSSHProxyConfig(required("--config", file, "--sftp-server-paths", "/usr/lib/sftp-server, /opt/c/sftp-server"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.options().SFTPServerPaths).To(Equal([]string{"/usr/lib/sftp-server", "/opt/c/sftp-server"}))

		_, err = LoadSSHProxyConfig(required("--sftp-server-paths", "sftp-server"))
		Expect(err).To(MatchError(ContainSubstring(`sftp-server path "sftp-server" is not an absolute path`)))
	})

	It("allows tunnels to other hosts by default, through opi's binary at /opi, and reads the relay's flags", func() {
		cfg, err := LoadSSHProxyConfig(required())
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.OtherHostTunnels).To(BeTrue())
		Expect(cfg.RelayImage).To(BeEmpty(), "the proxy's own image")
		Expect(cfg.RelayBinary).To(Equal("/opi"))
		Expect(cfg.RelayDialTimeout.Duration).To(Equal(10 * time.Second))
		Expect(cfg.RelayStartTimeout.Duration).To(Equal(time.Minute))

		cfg, err = LoadSSHProxyConfig(required("--other-host-tunnels=false", "--relay-image", "registry.example.com/opi:1",
			"--relay-binary", "/usr/local/bin/opi", "--relay-dial-timeout", "3s", "--relay-start-timeout", "20s"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.OtherHostTunnels).To(BeFalse())
		Expect(cfg.RelayImage).To(Equal("registry.example.com/opi:1"))
		Expect(cfg.RelayBinary).To(Equal("/usr/local/bin/opi"))
		Expect(cfg.RelayDialTimeout.Duration).To(Equal(3 * time.Second))
		Expect(cfg.RelayStartTimeout.Duration).To(Equal(20 * time.Second))
	})

	Describe("the relay's image", func() {
		ownPod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "opi-ssh-proxy-7d9f-abcde", Namespace: "cf-workloads"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "istio-proxy", Image: "istio/proxyv2"},
				{Name: "opi-ssh-proxy", Image: "registry.example.com/opi@sha256:abc"},
			}},
		}

		It("is the configured one, else the proxy container's of the proxy's own pod", func() {
			client := fake.NewClientset(ownPod)
			Expect(relayImage(context.Background(), client, "opi:configured", ownPod.Name, "cf-workloads")).To(Equal("opi:configured"))
			Expect(relayImage(context.Background(), client, "", ownPod.Name, "cf-workloads")).To(Equal("registry.example.com/opi@sha256:abc"))
		})

		It("is unknown outside a pod, or when the own pod cannot be read", func() {
			client := fake.NewClientset()
			_, err := relayImage(context.Background(), client, "", "", "cf-workloads")
			Expect(err).To(MatchError("no relay_image configured and POD_NAME unset (not in a pod)"))
			_, err = relayImage(context.Background(), client, "", "gone", "cf-workloads")
			Expect(err).To(MatchError(ContainSubstring("reading the proxy's own pod for its image")))
		})
	})

	It("reads a YAML file whose keys the flags override, and the secret from a file", func() {
		secret := filepath.Join(dir, "secret")
		Expect(os.WriteFile(secret, []byte("from-file\n"), 0o600)).To(Succeed())
		file := filepath.Join(dir, "ssh-proxy.yml")
		Expect(os.WriteFile(file, []byte(`
listen: ":2022"
host_key: `+hostKey+`
uaa_token_url: https://uaa.example.com/oauth/token
uaa_client_id: ssh-proxy
uaa_client_secret_file: `+secret+`
cc_api_url: http://cloud-controller-ng.service.cf.internal:9022
allow_plain_http: true
max_sessions: 50
idle_timeout: 5m
`), 0o600)).To(Succeed())
		cfg, err := LoadSSHProxyConfig([]string{"--config", file, "--max-sessions", "60"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Listen).To(Equal(":2022"))
		Expect(cfg.options().Auth.UAAClientSecret).To(Equal("from-file"))
		Expect(cfg.options().Auth.AllowPlainHTTP).To(BeTrue())
		Expect(cfg.options().MaxSessions).To(Equal(60))
		Expect(cfg.options().IdleTimeout).To(Equal(5 * time.Minute))
	})

	It("reads the loggregator section with opi connect's keys and flags", func() {
		file := filepath.Join(dir, "ssh-proxy.yml")
		Expect(os.WriteFile(file, []byte(`
loggregator:
  addr: doppler.service.cf.internal:8082
  server_name: doppler
  tls:
    ca_file: /ca.pem
    cert_file: /cert.pem
    key_file: /key.pem
`), 0o600)).To(Succeed())
		cfg, err := LoadSSHProxyConfig(required("--config", file, "--loggregator-addr", "127.0.0.1:3458"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Loggregator.sender()).To(Equal(loggregator.SenderConfig{
			Addr: "127.0.0.1:3458", CAFile: "/ca.pem", CertFile: "/cert.pem", KeyFile: "/key.pem", ServerName: "doppler",
		}))

		cfg, err = LoadSSHProxyConfig(required())
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Loggregator.set()).To(BeFalse(), "no section: no lines")
	})

	DescribeTable("refuses a configuration it cannot run with",
		func(args func() []string, message string) {
			_, err := LoadSSHProxyConfig(args())
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("no host key", func() []string {
			return []string{"--uaa-token-url", "https://u/t", "--uaa-client-id", "i", "--uaa-client-secret", "s", "--cc-api-url", "https://c"}
		}, "host_key (--host-key) is required"),
		Entry("plain http to CC off loopback", func() []string { return required("--cc-api-url", "http://cc.internal:9022") }, "cc-api-url: refusing plain http to cc.internal:9022"),
		Entry("a secret twice", func() []string { return required("--uaa-client-secret-file", "/nonexistent") }, "give uaa_client_secret or uaa_client_secret_file, not both"),
		Entry("an unreadable host key", func() []string { return required("--host-key", "/nonexistent") }, "host_key: reading the host key"),
		Entry("no UAA client", func() []string {
			return []string{"--host-key", hostKey, "--cc-api-url", "https://c", "--uaa-token-url", "https://u/t"}
		},
			"the UAA client id and secret are required"),
		Entry("an unknown backend", func() []string { return required("--backend", "pods") }, `backend "pods" is not one of deployments, statefulsets`),
		Entry("no bound", func() []string { return required("--max-sessions", "0") }, "max-sessions (0) and max-sessions-per-user (20) must be at least 1"),
		Entry("a relative relay binary", func() []string { return required("--relay-binary", "opi") }, `relay_binary "opi" is not an absolute path`),
		Entry("an unbounded relay dial", func() []string { return required("--relay-dial-timeout", "5m") }, "relay_dial_timeout (5m0s) must be positive and at most 1m"),
		Entry("a loggregator address without TLS", func() []string { return required("--loggregator-addr", "127.0.0.1:3458") }, "loggregator needs mutual TLS"),
	)

	It("reads the kustomize component's config file and is run and probed as its Deployment says", func() {
		data, err := os.ReadFile("../../deploy/kustomize/components/ssh-proxy/ssh-proxy.yml")
		Expect(err).NotTo(HaveOccurred())
		cfg := DefaultSSHProxyConfig()
		Expect(yaml.UnmarshalStrict(data, &cfg)).To(Succeed())
		Expect(cfg.Listen).To(Equal(":2222"))
		Expect(cfg.OpsListen).To(Equal(":2223"))
		Expect(cfg.HostKey).To(Equal("/etc/opi-ssh-proxy/secret/host-key.pem"))
		Expect(cfg.UAAClientSecretFile).To(Equal("/etc/opi-ssh-proxy/secret/uaa-client-secret"))
		Expect(cfg.OtherHostTunnels).To(BeTrue())
		Expect(cfg.RelayBinary).To(Equal("/opi"))

		data, err = os.ReadFile("../../deploy/kustomize/components/ssh-proxy/deployment.yaml")
		Expect(err).NotTo(HaveOccurred())
		var d appsv1.Deployment
		Expect(yaml.Unmarshal(data, &d)).To(Succeed())
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Name).To(Equal(sshProxyContainer), "the relay's default image is this container's")
		Expect(c.Command).To(Equal([]string{"/opi", "ssh-proxy"}))
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		Expect(env).To(Equal(map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}))
		Expect(c.Args).To(Equal([]string{"--config", "/etc/opi-ssh-proxy/ssh-proxy.yml"}))
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		Expect(ports).To(Equal(map[string]int32{"ssh": 2222, "ops": 2223}))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(c.ReadinessProbe.HTTPGet.Port.String()).To(Equal("ops"))
		Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal("opi-ssh-proxy"))
	})
})
