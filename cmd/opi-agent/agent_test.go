package main

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/agent"
)

var _ = Describe("opi agent's flags", func() {
	var dir, ca, cert, key string

	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		for _, f := range []string{ca, cert, key} {
			Expect(os.WriteFile(f, []byte("pem"), 0o600)).To(Succeed())
		}
		GinkgoT().Setenv("NODE_NAME", "")
		GinkgoT().Setenv("KUBECONFIG", "")
		GinkgoT().Setenv("NODE_IP", "")
		GinkgoT().Setenv("OPI_SERVICEACCOUNT_DIR", "")
	})

	valid := func(extra ...string) []string {
		return append([]string{
			"--node", "node-1", "--state-dir", filepath.Join(dir, "state"),
			"--loggregator-addr", "doppler.service.cf.internal:8082",
			"--loggregator-ca", ca, "--loggregator-cert", cert, "--loggregator-key", key,
		}, extra...)
	}

	It("reads every flag, with the defaults of those not given", func() {
		cfg, err := parseAgentFlags(valid())
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Node).To(Equal("node-1"))
		Expect(cfg.Namespace).To(Equal("cf-workloads"))
		Expect(cfg.Workload).To(Equal(agent.WorkloadDeployments))
		Expect(cfg.PodLogs).To(Equal("/var/log/pods"))
		Expect(cfg.LinesPerSecond).To(Equal(float64(agent.DefaultLinesPerSecond)))
		Expect(cfg.LineBurst).To(Equal(agent.DefaultLineBurst))
		Expect(cfg.BytesPerSecond).To(Equal(int64(agent.DefaultBytesPerSecond)))
		Expect(cfg.ByteBurst).To(Equal(int64(agent.DefaultByteBurst)))
		Expect(cfg.Loggregator.ServerName).To(Equal("metron"))
		Expect(cfg.Kubeconfig).To(BeEmpty())
		Expect(cfg.Kubelet.URL).To(BeEmpty(), "no kubelet, no container metrics")
		Expect(cfg.Kubelet.Interval).To(Equal(15*time.Second), "Diego's rep's interval")

		cfg, err = parseAgentFlags(valid("--namespace", "apps", "--backend", "statefulsets", "--pod-logs", "/logs",
			"--kubeconfig", "/kc", "--kubelet-url", "https://10.0.0.1:10250", "--kubelet-ca", ca, "--kubelet-token-file", key,
			"--loggregator-server-name", "doppler", "--log-rate", "50", "--log-burst", "200", "--log-level", "debug",
			"--log-bytes-rate", "4096", "--log-bytes-burst", "65536", "--metrics-interval", "1s"))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Namespace).To(Equal("apps"))
		Expect(cfg.Workload).To(Equal(agent.WorkloadStatefulSets))
		Expect(cfg.PodLogs).To(Equal("/logs"))
		Expect(cfg.Kubeconfig).To(Equal("/kc"))
		Expect(cfg.Kubelet).To(Equal(agent.Kubelet{URL: "https://10.0.0.1:10250", CAFile: ca, TokenFile: key, Interval: time.Second}))
		Expect(cfg.Loggregator.Addr).To(Equal("doppler.service.cf.internal:8082"))
		Expect([]string{cfg.Loggregator.CAFile, cfg.Loggregator.CertFile, cfg.Loggregator.KeyFile}).To(Equal([]string{ca, cert, key}))
		Expect(cfg.Loggregator.ServerName).To(Equal("doppler"))
		Expect(cfg.LinesPerSecond).To(Equal(50.0))
		Expect(cfg.LineBurst).To(Equal(200))
		Expect(cfg.BytesPerSecond).To(Equal(int64(4096)))
		Expect(cfg.ByteBurst).To(Equal(int64(65536)))
		Expect(cfg.LogLevel).To(Equal("debug"))
	})

	It("takes a metrics interval within its bounds", func() {
		for _, interval := range []string{"1s", "90s", "5m"} {
			cfg, err := parseAgentFlags(valid("--metrics-interval", interval))
			Expect(err).NotTo(HaveOccurred(), interval)
			want, _ := time.ParseDuration(interval)
			Expect(cfg.Kubelet.Interval).To(Equal(want))
		}
	})

	It("takes the node from $NODE_NAME (the downward API)", func() {
		GinkgoT().Setenv("NODE_NAME", "node-7")
		args := valid()[2:] // without --node
		cfg, err := parseAgentFlags(args)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Node).To(Equal("node-7"))
	})

	It("finds the kubelet at $NODE_IP (the downward API's status.hostIP) with the service account's token", func() {
		GinkgoT().Setenv("NODE_IP", "10.0.0.7")
		GinkgoT().Setenv("OPI_SERVICEACCOUNT_DIR", dir)
		Expect(os.WriteFile(filepath.Join(dir, "token"), []byte("t"), 0o600)).To(Succeed())
		cfg, err := parseAgentFlags(valid("--kubelet-ca", ca))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Kubelet).To(Equal(agent.Kubelet{URL: "https://10.0.0.7:10250", CAFile: ca, TokenFile: filepath.Join(dir, "token"), Interval: agent.DefaultMetricsInterval}))

		_, err = parseAgentFlags(valid())
		Expect(err).To(MatchError(ContainSubstring("--kubelet-ca is required with --kubelet-url")))
	})

	It("refuses what it cannot run with, naming each flag", func() {
		_, err := parseAgentFlags(nil)
		Expect(err).To(MatchError(And(
			ContainSubstring("--node (or $NODE_NAME) is required"),
			ContainSubstring("--state-dir is required"),
			ContainSubstring("--loggregator-addr is required"),
			ContainSubstring("--loggregator-ca is required"),
			ContainSubstring("--loggregator-cert is required"),
			ContainSubstring("--loggregator-key is required"),
		)))

		for want, args := range map[string][]string{
			`--loggregator-addr "doppler" is not HOST:PORT`:            valid("--loggregator-addr", "doppler"),
			"--loggregator-key: stat":                                  valid("--loggregator-key", filepath.Join(dir, "missing.pem")),
			`--kubelet-url "http://10.0.0.1:10250" is not https://`:    valid("--kubelet-url", "http://10.0.0.1:10250"),
			"--kubelet-ca: stat":                                       valid("--kubelet-url", "https://10.0.0.1:10250", "--kubelet-ca", filepath.Join(dir, "missing.pem")),
			"--kubelet-token-file: stat":                               valid("--kubelet-url", "https://10.0.0.1:10250", "--kubelet-ca", ca, "--kubelet-token-file", filepath.Join(dir, "missing")),
			`--backend "pods" is neither deployments nor statefulsets`: valid("--backend", "pods"),
			"--log-rate (0) must be above 0":                           valid("--log-rate", "0"),
			"--log-bytes-burst (0) at least 1":                         valid("--log-bytes-burst", "0"),
			"--metrics-interval 999ms is not within 1s and 5m0s":       valid("--metrics-interval", "999ms"),
			"--metrics-interval 5m1s is not within 1s and 5m0s":        valid("--metrics-interval", "5m1s"),
			"--metrics-interval 0s is not within":                      valid("--metrics-interval", "0"),
			"must not be in the pod log folder":                        valid("--pod-logs", dir, "--state-dir", filepath.Join(dir, "state")),
			"takes no arguments":                                       valid("extra"),
		} {
			_, err := parseAgentFlags(args)
			Expect(err).To(MatchError(ContainSubstring(want)), "%v", args)
		}
	})
})
