package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var _ = Describe("opi agent's ops endpoint", func() {
	var dir, ca string
	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		ca = filepath.Join(dir, "ca.pem")
		Expect(os.WriteFile(ca, []byte("pem"), 0o600)).To(Succeed())
		GinkgoT().Setenv("NODE_NAME", "")
		GinkgoT().Setenv("NODE_IP", "")
	})
	args := func(extra ...string) []string {
		return append([]string{"--node", "node-1", "--state-dir", filepath.Join(dir, "state"),
			"--loggregator-addr", "doppler:8082", "--loggregator-ca", ca, "--loggregator-cert", ca, "--loggregator-key", ca}, extra...)
	}

	It("listens on :8090 unless told otherwise, and on nothing with an empty --ops-listen", func() {
		cfg, err := parseAgentFlags(args())
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.OpsListen).To(Equal(":8090"))
		cfg, err = parseAgentFlags(args("--ops-listen", "127.0.0.1:9100"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.OpsListen).To(Equal("127.0.0.1:9100"))
		cfg, err = parseAgentFlags(args("--ops-listen", ""))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.OpsListen).To(BeEmpty())
		_, err = parseAgentFlags(args("--ops-listen", "8090"))
		Expect(err).To(MatchError(ContainSubstring(`--ops-listen "8090" is not [HOST]:PORT`)))
	})

	It("serves the handler until the context ends", func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		addr, done, err := startAgentOps(ctx, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "served "+r.URL.Path)
		}), lagertest.NewTestLogger("ops"))
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.Get("http://" + addr.String() + "/healthz")
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(string(body)).To(Equal("served /healthz"))
		cancel()
		Eventually(done).Should(BeClosed())
		_, err = http.Get("http://" + addr.String() + "/healthz")
		Expect(err).To(HaveOccurred())

		_, _, err = startAgentOps(context.Background(), "256.0.0.1:1", http.NotFoundHandler(), lagertest.NewTestLogger("ops"))
		Expect(err).To(MatchError(ContainSubstring("--ops-listen")))
	})

	It("is probed where the DaemonSet says, with flags opi agent has", func() {
		data, err := os.ReadFile("../../deploy/kustomize/components/agent/daemonset.yaml")
		Expect(err).NotTo(HaveOccurred())
		var ds appsv1.DaemonSet
		Expect(yaml.Unmarshal(data, &ds)).To(Succeed())
		c := ds.Spec.Template.Spec.Containers[0]
		Expect(c.Command).To(Equal([]string{"/opi-agent"}))
		// Every argument is a flag of opi agent's (env references left as they are).
		var cfg AgentConfig
		fs := agentFlags(&cfg)
		Expect(fs.Parse(c.Args)).To(Succeed())
		Expect(fs.Args()).To(BeEmpty())
		Expect(c.Args).To(ContainElement("--ops-listen=:8090"))
		Expect(c.Ports).To(HaveLen(1))
		Expect(c.Ports[0].ContainerPort).To(BeEquivalentTo(8090))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		for _, probe := range []string{c.LivenessProbe.HTTPGet.Port.String(), c.ReadinessProbe.HTTPGet.Port.String()} {
			Expect(probe).To(Equal(c.Ports[0].Name))
		}
		Expect(strings.Join(c.Args, " ")).To(ContainSubstring("--state-dir=/var/lib/opi-agent"))
	})

	It("is reached, by the component's NetworkPolicy, on the ops port from the metrics scraper's namespace alone", func() {
		data, err := os.ReadFile("../../deploy/kustomize/components/agent/networkpolicy.yaml")
		Expect(err).NotTo(HaveOccurred())
		var np networkingv1.NetworkPolicy
		Expect(yaml.Unmarshal(data, &np)).To(Succeed())
		Expect(np.Spec.Ingress).To(HaveLen(1))
		rule := np.Spec.Ingress[0]
		Expect(rule.Ports).To(HaveLen(1))
		Expect(rule.Ports[0].Port.IntValue()).To(Equal(8090))
		// No rule for the kubelet's probes: a node's traffic to its own pods is always allowed.
		Expect(rule.From).To(Equal([]networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}))
	})
})
