package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/agent"
	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/opi"
)

// scrape reads the Prometheus text of url's /metrics into "name" or `name{labels}` → value
// (the opi_agent_ series only).
func scrape(url string) map[string]float64 {
	resp, err := http.Get(url + "/metrics")
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "opi_agent_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		Expect(err).NotTo(HaveOccurred(), line)
		out[line[:i]] = v
	}
	Expect(s.Err()).NotTo(HaveOccurred())
	return out
}

// run runs a until the spec ends.
func run(a *agent.Agent) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	})
}

func status(url string) int {
	resp, err := http.Get(url)
	Expect(err).NotTo(HaveOccurred())
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

var _ = Describe("Agent ops endpoint", func() {
	It("is live at once, ready once its caches synced, and counts lines read, sent and dropped by the rate bound", func() {
		ingress, cfg := startIngress()
		cfg.LinesPerSecond, cfg.LineBurst = 0.001, 2
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		var lines []string
		for i := range 5 {
			lines = append(lines, cri(t0.Add(time.Duration(i)), "stdout", "F", fmt.Sprintf("line %d", i)))
		}
		writeLines(cfg.PodLogs, web, lines...)

		a, err := agent.New(cfg, sources(fake.NewClientset(deployment(1), web)), lagertest.NewTestLogger("agent"))
		Expect(err).NotTo(HaveOccurred())
		ops := httptest.NewServer(a.OpsHandler())
		DeferCleanup(ops.Close)
		// Before Run: alive, not ready.
		Expect(status(ops.URL + "/healthz")).To(Equal(http.StatusOK))
		Expect(status(ops.URL + "/readyz")).To(Equal(http.StatusServiceUnavailable))
		Expect(scrape(ops.URL)).To(HaveKeyWithValue("opi_agent_ready", 0.0))

		run(a)
		Eventually(func() int { return status(ops.URL + "/readyz") }, 10*time.Second).Should(Equal(http.StatusOK))
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"line 0", "line 1", linesNotice}))
		Eventually(func() map[string]float64 { return scrape(ops.URL) }, 10*time.Second).Should(And(
			HaveKeyWithValue("opi_agent_log_lines_read_total", 5.0),
			HaveKeyWithValue("opi_agent_envelopes_sent_total", 3.0), // and the notice
			HaveKeyWithValue(`opi_agent_envelopes_dropped_total{reason="rate"}`, 3.0),
			HaveKeyWithValue(`opi_agent_envelopes_dropped_total{reason="buffer"}`, 0.0),
			HaveKeyWithValue("opi_agent_send_errors_total", 0.0),
			HaveKeyWithValue("opi_agent_followed_containers", 1.0),
			HaveKeyWithValue("opi_agent_buffer_waits_total", 0.0),
			HaveKeyWithValue("opi_agent_lost_files_total", 0.0),
			HaveKeyWithValue("opi_agent_log_lines_malformed_total", 0.0),
			HaveKeyWithValue("opi_agent_checkpoints_unreadable_total", 0.0),
			HaveKeyWithValue("opi_agent_ready", 1.0),
		))
	})

	It("counts container metrics sent, kubelet errors, and while Loggregator is down send errors, waits for room and dropped gauges", func() {
		ingress, cfg := startIngress()
		kubelet := startKubelet(&cfg)
		cfg.Loggregator.MaxBufferedEnvelopes = 3
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		kubelet.SetSummary(statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{{
			PodRef:     statsv1alpha1.PodReference{Name: web.Name, Namespace: ns, UID: "web-uid"},
			Containers: []statsv1alpha1.ContainerStats{{Name: "opi", CPU: &statsv1alpha1.CPUStats{UsageNanoCores: ptr.To[uint64](1)}}},
		}}})

		a, err := agent.New(cfg, sources(fake.NewClientset(deployment(1), web)), lagertest.NewTestLogger("agent"))
		Expect(err).NotTo(HaveOccurred())
		ops := httptest.NewServer(a.OpsHandler())
		DeferCleanup(ops.Close)
		run(a)
		Eventually(func() float64 { return scrape(ops.URL)["opi_agent_container_metrics_sent_total"] }, 10*time.Second).Should(BeNumerically(">", 0))
		Expect(scrape(ops.URL)).To(HaveKeyWithValue("opi_agent_kubelet_errors_total", 0.0))

		// The kubelet refuses the token: counted.
		Expect(os.WriteFile(cfg.Kubelet.TokenFile, []byte("another-token\n"), 0o600)).To(Succeed())
		Eventually(func() float64 { return scrape(ops.URL)["opi_agent_kubelet_errors_total"] }, 10*time.Second).Should(BeNumerically(">", 0))

		Expect(os.WriteFile(cfg.Kubelet.TokenFile, []byte("sa-token\n"), 0o600)).To(Succeed())

		// Loggregator down: the Sender's failed attempts are counted; the buffer (a few envelopes
		// here) fills, so the log lines wait (back pressure) and the gauges, which do not wait,
		// are dropped.
		ingress.Stop()
		for i := range 10 {
			writeLines(cfg.PodLogs, web, cri(t0.Add(time.Duration(i)), "stdout", "F", fmt.Sprintf("during %d", i)))
		}
		Eventually(func() map[string]float64 { return scrape(ops.URL) }, 10*time.Second).Should(And(
			HaveKeyWithValue("opi_agent_send_errors_total", BeNumerically(">", 0)),
			HaveKeyWithValue("opi_agent_buffered_envelopes", 3.0),
			HaveKeyWithValue("opi_agent_buffer_waits_total", BeNumerically(">", 0)),
			HaveKeyWithValue(`opi_agent_envelopes_dropped_total{reason="buffer"}`, BeNumerically(">", 0)),
		))
	})

	It("counts and logs the lines that are no CRI log lines, sending the others", func() {
		ingress, cfg := startIngress()
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		writeLines(cfg.PodLogs, web,
			cri(t0.Add(1), "stdout", "F", "one"),
			"not a CRI line",
			cri(t0.Add(2), "stdout", "X", "unknown tag"),
			cri(t0.Add(3), "stdout", "F", "two"),
		)
		logger := lagertest.NewTestLogger("agent")
		a, err := agent.New(cfg, sources(fake.NewClientset(deployment(1), web)), logger)
		Expect(err).NotTo(HaveOccurred())
		ops := httptest.NewServer(a.OpsHandler())
		DeferCleanup(ops.Close)
		Expect(scrape(ops.URL)).To(HaveKeyWithValue("opi_agent_log_lines_malformed_total", 0.0))
		run(a)
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one", "two"}))
		Eventually(func() map[string]float64 { return scrape(ops.URL) }, 10*time.Second).Should(And(
			HaveKeyWithValue("opi_agent_log_lines_malformed_total", 2.0),
			HaveKeyWithValue("opi_agent_log_lines_read_total", 2.0),
		))
		Expect(logger.LogMessages()).To(ContainElement("agent.agent.follow.log-line-malformed"))
	})

	It("starts from a checkpoint file it cannot read back: every file from its start, logged and counted", func() {
		ingress, cfg := startIngress()
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		writeLines(cfg.PodLogs, web, cri(t0.Add(1), "stdout", "F", "one"), cri(t0.Add(2), "stdout", "F", "two"))
		// Torn: what a crash mid-write would leave, had the file been written in place.
		Expect(os.WriteFile(filepath.Join(cfg.StateDir, "positions.json"), []byte(`{"cf-workloads_dora-dev-b0c4a1e2-5d8f9-abcde_web-uid/opi":{"dev":1,"ino`), 0o600)).To(Succeed())
		logger := lagertest.NewTestLogger("agent")
		a, err := agent.New(cfg, sources(fake.NewClientset(deployment(1), web)), logger)
		Expect(err).NotTo(HaveOccurred())
		ops := httptest.NewServer(a.OpsHandler())
		DeferCleanup(ops.Close)
		run(a)
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one", "two"}))
		Expect(scrape(ops.URL)).To(HaveKeyWithValue("opi_agent_checkpoints_unreadable_total", 1.0))
		Expect(logger.LogMessages()).To(ContainElement("agent.agent.checkpoints-unreadable"))
		// Saved anew once the lines are acknowledged.
		Eventually(func() (string, error) {
			b, err := os.ReadFile(filepath.Join(cfg.StateDir, "positions.json"))
			return string(b), err
		}, 10*time.Second).Should(ContainSubstring(`"offset":`))
	})

	It("holds of the namespace's pods only what the instance ranking (and an SSH tunnel) reads", func() {
		_, cfg := startIngress()
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		web.Annotations = map[string]string{"big": strings.Repeat("x", 4096)}
		web.Spec.Containers[0].Image = "registry.example.com/dora@sha256:abc"
		web.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "VCAP_APPLICATION", Value: "{}"}}
		web.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
		web.Status.PodIP = "10.0.0.7"
		web.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "opi", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		a, err := agent.New(cfg, sources(fake.NewClientset(deployment(1), web)), lagertest.NewTestLogger("agent"))
		Expect(err).NotTo(HaveOccurred())
		run(a)
		Eventually(func() []any { return agent.HeldPods(a) }, 10*time.Second).Should(HaveLen(1))
		held := agent.HeldPods(a)[0]
		Expect(held).To(BeAssignableToTypeOf(&instances.Pod{}))
		r := held.(*instances.Pod)
		Expect(*r).To(Equal(instances.Pod{
			ObjectMeta: r.ObjectMeta,
			LRPRef:     instances.LRPRef{GUID: lrpGUID, Version: version},
			State:      opi.InstanceRunning,
			Image:      "registry.example.com/dora@sha256:abc",
			Ordinal:    -1,
			IP:         "10.0.0.7",
		}))
		Expect(r.Name).To(Equal(web.Name))
		Expect(string(r.UID)).To(Equal("web-uid"))
		Expect(r.CreationTimestamp.Time).To(BeTemporally("==", t0))
		Expect(r.Labels).To(BeEmpty())
		Expect(r.Annotations).To(BeEmpty())
	})
})
