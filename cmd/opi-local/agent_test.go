package main

import (
	"bytes"
	"os"
	"path/filepath"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/podlogs"
)

var _ = Describe("make run with the agent", func() {
	It("prints how to watch the envelopes and write a line by hand, after the rest of the guide", func() {
		var out bytes.Buffer
		printGuide(&out, guide{
			Base: "http://127.0.0.1:8085", Kubectl: "/bins/kubectl", Kubeconfig: ".local/kubeconfig", Namespace: "cf-workloads",
			CCURL: "https://127.0.0.1:9023", Image: "127.0.0.1:5000/sample/hello:latest",
			Agent: &agentGuide{
				Ingress: "127.0.0.1:41000", Nodes: []string{"localkube-node-0", "localkube-node-1"},
				PodLogs: "/run/agent/pod-logs", AgentLog: "/run/agent/opi-agent-<node>.log", Namespace: "cf-workloads",
			},
		})
		Expect(out.String()).To(And(
			ContainSubstring("opi agent runs for each node (localkube-node-0, localkube-node-1; log /run/agent/opi-agent-<node>.log)"),
			ContainSubstring("Loggregator v2\nstand-in at 127.0.0.1:41000 (mutual TLS)"),
			ContainSubstring("  loggregator-standin: <app guid> [<instance_id>] <source_type> OUT|ERR <text>\n"),
			ContainSubstring("  loggregator-standin: <process guid> [<instance_id>] gauges cpu=... "),
			ContainSubstring(`guid (the desire's "guid", 5d9c6d6d-3a3e-4c5f-9f2e-6b1c0e8a7f10 for the example app)`),
			ContainSubstring(`make run RUN_FLAGS="--agent" | grep --line-buffered loggregator-standin:`),
			ContainSubstring("  ls /run/agent/pod-logs\n"),
			ContainSubstring(`  echo "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ) stdout F hello from my terminal" >> /run/agent/pod-logs/cf-workloads_<pod>_<uid>/opi/0.log`),
			ContainSubstring("2% of a core"),
			ContainSubstring(`"sleep 3600" as its command`),
			ContainSubstring("opi's leader sends its lifecycle lines (source_type CELL, STG for docker staging) there too."),
		))
		Expect(out.String()).To(MatchRegexp(`(?s)Ctrl-C stops the ssh proxy, opi.*The node agent:`))
	})

	It("leaves the agent out of the guide without --agent", func() {
		var out bytes.Buffer
		printGuide(&out, guide{Base: "http://127.0.0.1:8085"})
		Expect(out.String()).NotTo(ContainSubstring("loggregator-standin"))
	})

	It("prints a log envelope and a gauge envelope on one line each", func() {
		log := &loggregator_v2.Envelope{
			SourceId: "app-guid", InstanceId: "1", Tags: map[string]string{"source_type": "APP/PROC/WEB"},
			Message: &loggregator_v2.Envelope_Log{Log: &loggregator_v2.Log{Payload: []byte("listening on 8080"), Type: loggregator_v2.Log_ERR}},
		}
		Expect(formatEnvelope(log)).To(Equal("loggregator-standin: app-guid [1] APP/PROC/WEB ERR listening on 8080"))
		gauge := &loggregator_v2.Envelope{
			SourceId: "app-guid", InstanceId: "0",
			Message: &loggregator_v2.Envelope_Gauge{Gauge: &loggregator_v2.Gauge{Metrics: map[string]*loggregator_v2.GaugeValue{
				"cpu": {Unit: "percentage", Value: 2}, "memory": {Unit: "bytes", Value: 24 << 20}, "disk": {Unit: "bytes", Value: 900},
				"memory_quota": {Unit: "bytes", Value: 256 << 20}, "disk_quota": {Unit: "bytes", Value: 1 << 30},
			}}},
		}
		Expect(formatEnvelope(gauge)).To(Equal("loggregator-standin: app-guid [0] gauges cpu=2.0% disk=900B disk_quota=1.0GiB memory=24.0MiB memory_quota=256.0MiB"))
	})

	Describe("the kubelet stand-in", func() {
		var (
			root    string
			indexer cache.Indexer
			w       *podLogWriter
			t0      = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		)
		pod := func(name, uid string, phase corev1.PodPhase) *corev1.Pod {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cf-workloads", UID: types.UID("uid-" + uid)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: names.ContainerName, Image: "busybox", Command: []string{"/bin/sh", "-c"}, Args: []string{"httpd -f -p 8080"},
				}}},
				Status: corev1.PodStatus{Phase: phase},
			}
		}
		read := func(p *corev1.Pod) []podlogs.Line {
			f := podlogs.NewFollower(filepath.Join(root, "cf-workloads_"+p.Name+"_"+string(p.UID), names.ContainerName), podlogs.Position{}, podlogs.Options{})
			defer f.Close()
			var got []podlogs.Line
			Expect(f.Next(func(l podlogs.Line, _ podlogs.Position) { got = append(got, l) })).To(Succeed())
			return got
		}

		BeforeEach(func() {
			root = GinkgoT().TempDir()
			indexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			w = &podLogWriter{root: root, pods: map[string]*writtenPod{}}
		})

		It("writes a Running pod's start command, then a line every interval, every third on stderr, and serves its stats", func() {
			running, pending := pod("web-0", "a", corev1.PodRunning), pod("web-1", "b", corev1.PodPending)
			Expect(indexer.Add(running)).To(Succeed())
			Expect(indexer.Add(pending)).To(Succeed())
			lister := listersv1.NewPodLister(indexer)

			summary := w.scan(lister, t0)
			for i := 1; i <= 3; i++ {
				w.scan(lister, t0.Add(time.Duration(i)*podLineInterval))
			}
			Expect(read(running)).To(Equal([]podlogs.Line{
				{Time: t0, Stream: podlogs.Stdout, Text: "$ /bin/sh -c httpd -f -p 8080"},
				{Time: t0.Add(podLineInterval), Stream: podlogs.Stdout, Text: "web-0: line 1 from the kubelet stand-in (stdout)"},
				{Time: t0.Add(2 * podLineInterval), Stream: podlogs.Stdout, Text: "web-0: line 2 from the kubelet stand-in (stdout)"},
				{Time: t0.Add(3 * podLineInterval), Stream: podlogs.Stderr, Text: "web-0: line 3 from the kubelet stand-in (stderr)"},
			}))
			_, err := os.Stat(filepath.Join(root, "cf-workloads_web-1_"+string(pending.UID)))
			Expect(err).To(MatchError(os.ErrNotExist), "nothing for a pod not Running")

			Expect(summary.Pods).To(HaveLen(1))
			Expect(summary.Pods[0].PodRef.UID).To(Equal(string(running.UID)))
			c := summary.Pods[0].Containers[0]
			Expect(c.Name).To(Equal(names.ContainerName))
			Expect(*c.CPU.UsageNanoCores).To(BeEquivalentTo(standinCPUNanoCores))
			Expect(*c.Memory.WorkingSetBytes).To(BeEquivalentTo(standinMemoryBytes))
			Expect(*c.Logs.UsedBytes).To(BeNumerically(">", 0), "the log file's size")
		})

		It("forgets a pod once it is gone", func() {
			running := pod("web-0", "a", corev1.PodRunning)
			Expect(indexer.Add(running)).To(Succeed())
			lister := listersv1.NewPodLister(indexer)
			w.scan(lister, t0)
			Expect(w.pods).To(HaveLen(1))
			Expect(indexer.Delete(running)).To(Succeed())
			Expect(w.scan(lister, t0.Add(podLineInterval)).Pods).To(BeEmpty())
			Expect(w.pods).To(BeEmpty())
		})
	})
})
