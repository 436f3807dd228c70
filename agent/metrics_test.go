package agent_test

import (
	"maps"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

var _ = Describe("Agent container metrics", func() {
	It("sends each followed instance's gauges from the kubelet's stats summary", func() {
		ingress, cfg := startIngress()
		kubelet := startKubelet(&cfg)

		const mi = 1024 * 1024
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		web.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
			corev1.ResourceMemory:           *resource.NewQuantity(256*mi, resource.BinarySI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(1024*mi, resource.BinarySI),
		}
		kubelet.SetSummary(statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{
			{PodRef: statsv1alpha1.PodReference{Name: "someone-else", Namespace: "kube-system", UID: "x"},
				Containers: []statsv1alpha1.ContainerStats{{Name: "opi", CPU: &statsv1alpha1.CPUStats{UsageNanoCores: ptr.To[uint64](1)}}}},
			{PodRef: statsv1alpha1.PodReference{Name: web.Name, Namespace: ns, UID: "web-uid"},
				Containers: []statsv1alpha1.ContainerStats{
					{Name: "sidecar", CPU: &statsv1alpha1.CPUStats{UsageNanoCores: ptr.To[uint64](9e9)}},
					{
						Name:   "opi",
						CPU:    &statsv1alpha1.CPUStats{UsageNanoCores: ptr.To[uint64](250_000_000)},
						Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To[uint64](100 * mi)},
						Rootfs: &statsv1alpha1.FsStats{UsedBytes: ptr.To[uint64](10 * mi)},
						Logs:   &statsv1alpha1.FsStats{UsedBytes: ptr.To[uint64](1 * mi)},
					},
				}},
		}})
		runAgent(cfg, fake.NewClientset(deployment(1), web))

		tags := lrp.tags("web-uid")
		delete(tags, "source_type")
		want := standin.Gauge{
			SourceID: lrpGUID, InstanceID: "0", Tags: tags,
			Values: map[string]float64{"cpu": 25, "memory": 100 * mi, "disk": 11 * mi, "memory_quota": 256 * mi, "disk_quota": 1024 * mi},
			Units:  map[string]string{"cpu": "percentage", "memory": "bytes", "disk": "bytes", "memory_quota": "bytes", "disk_quota": "bytes"},
		}
		Eventually(func() []standin.Gauge { return standin.GaugesIn(ingress.Envelopes()) }, 10*time.Second).Should(ContainElement(want))
		Expect(standin.GaugesIn(ingress.Envelopes())).To(HaveEach(want), "only the followed pod's gauges")
		_, refused := kubelet.Requests()
		Expect(refused).To(BeZero())
	})
})

var _ = Describe("Agent container metrics of an app's processes", func() {
	const (
		mi = 1024 * 1024
		// workerGUID is a worker's: CC gives every process but the app's first web one a guid
		// of its own; newWebGUID the web process a rolling deploy desires.
		workerGUID = "4c7e1b2a-3d5f-4e6a-8b9c-0d1e2f3a4b5c"
		newWebGUID = "e5f6a7b8-c9d0-4e1f-a2b3-c4d5e6f7a8b9"
		taskGUID   = "t1" // taskJob's
	)
	var (
		// web is the app's original web process: CC's guid is the app guid.
		web    = process{guid: appGUID, version: "v1", processType: "web"}
		worker = process{guid: workerGUID, version: "v1", processType: "worker"}
		newWeb = process{guid: newWebGUID, version: "v2", processType: "web"}
		units  = map[string]string{"cpu": "percentage", "memory": "bytes", "disk": "bytes", "memory_quota": "bytes", "disk_quota": "bytes"}
	)

	// withLimits gives pod's app container the limits the quotas come from.
	withLimits := func(pod *corev1.Pod) *corev1.Pod {
		pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
			corev1.ResourceMemory:           *resource.NewQuantity(256*mi, resource.BinarySI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(1024*mi, resource.BinarySI),
		}
		return pod
	}
	// statsOf is pod's stats in the kubelet's summary, n telling the pods' usage apart.
	statsOf := func(pod *corev1.Pod, n uint64) statsv1alpha1.PodStats {
		return statsv1alpha1.PodStats{
			PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: ns, UID: string(pod.UID)},
			Containers: []statsv1alpha1.ContainerStats{{
				Name:   names.ContainerName,
				CPU:    &statsv1alpha1.CPUStats{UsageNanoCores: ptr.To(n * 100_000_000)},
				Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To(n * 10 * mi)},
				Rootfs: &statsv1alpha1.FsStats{UsedBytes: ptr.To(n * mi)},
				Logs:   &statsv1alpha1.FsStats{UsedBytes: ptr.To[uint64](mi)},
			}},
		}
	}
	// gaugeOf is the gauge envelope statsOf(_, n) gives an instance with those tags.
	gaugeOf := func(source, index string, tags map[string]string, n float64) standin.Gauge {
		tags = maps.Clone(tags)
		delete(tags, "source_type")
		return standin.Gauge{
			SourceID: source, InstanceID: index, Tags: tags, Units: units,
			Values: map[string]float64{"cpu": 10 * n, "memory": n * 10 * mi, "disk": (n + 1) * mi, "memory_quota": 256 * mi, "disk_quota": 1024 * mi},
		}
	}
	// expectRows expects a reader's rows to be exactly want's instances, every envelope of each
	// the instance's own.
	expectRows := func(got standin.Gauges, want map[string]standin.Gauge, reader string) {
		GinkgoHelper()
		Expect(got).To(HaveLen(len(want)), "%s: %v", reader, got)
		for index, w := range want {
			Expect(standin.GaugesIn(got[index])).To(And(Not(BeEmpty()), HaveEach(w)), "%s, instance %s", reader, index)
		}
	}

	It("sends each process's gauges under its own guid only, tagged with it, and every line under the app guid", func() {
		ingress, cfg := startIngress()
		kubelet := startKubelet(&cfg)

		// Two instances of the original web process, a worker, two instances of the web
		// process of a rolling deploy, and a task: the instances of one app on one node.
		type instance struct {
			p     process
			pod   *corev1.Pod
			index string
		}
		instances := []instance{
			{web, web.pod("dora-web-0", "web-0", node, t0), "0"},
			{web, web.pod("dora-web-1", "web-1", node, t0.Add(time.Second)), "1"},
			{worker, worker.pod("dora-worker-0", "worker-0", node, t0), "0"},
			{newWeb, newWeb.pod("dora-web-v2-0", "new-web-0", node, t0.Add(2*time.Second)), "0"},
			{newWeb, newWeb.pod("dora-web-v2-1", "new-web-1", node, t0.Add(3*time.Second)), "1"},
		}
		task := withLimits(taskPod())
		objects := []runtime.Object{
			web.deployment("dora-web", 2), worker.deployment("dora-worker", 1), newWeb.deployment("dora-web-v2", 2),
			taskJob(), task,
		}
		var (
			summary   statsv1alpha1.Summary
			wantLines []seen
			wantRows  = map[string]map[string]standin.Gauge{} // source_id → instance_id → its gauge
		)
		addRow := func(g standin.Gauge) {
			if wantRows[g.SourceID] == nil {
				wantRows[g.SourceID] = map[string]standin.Gauge{}
			}
			wantRows[g.SourceID][g.InstanceID] = g
		}
		for i, in := range instances {
			uid := string(in.pod.UID)
			objects = append(objects, withLimits(in.pod))
			summary.Pods = append(summary.Pods, statsOf(in.pod, uint64(i+1)))
			addRow(gaugeOf(in.p.guid, in.index, in.p.tags(uid), float64(i+1)))
			writeLines(cfg.PodLogs, in.pod, cri(t0, "stdout", "F", "from "+uid))
			wantLines = append(wantLines, seen{
				SourceID: appGUID, InstanceID: in.index, Time: t0, Type: loggregator_v2.Log_OUT, Payload: "from " + uid, Tags: in.p.tags(uid),
			})
		}
		summary.Pods = append(summary.Pods, statsOf(task, 9))
		addRow(gaugeOf(taskGUID, "0", taskTags, 9))
		writeLines(cfg.PodLogs, task, cri(t0, "stdout", "F", "from the task"))
		wantLines = append(wantLines, seen{SourceID: appGUID, InstanceID: "0", Time: t0, Type: loggregator_v2.Log_OUT, Payload: "from the task", Tags: taskTags})
		kubelet.SetSummary(summary)
		runAgent(cfg, fake.NewClientset(objects...))

		var wantGauges []standin.Gauge
		for _, rows := range wantRows {
			for _, g := range rows {
				wantGauges = append(wantGauges, g)
			}
		}
		Eventually(func() []standin.Gauge { return standin.GaugesIn(ingress.Envelopes()) }, 10*time.Second).Should(ContainElements(wantGauges))
		logs := func() []seen {
			var out []seen
			for _, e := range ingress.Envelopes() {
				if e.GetLog() != nil {
					out = append(out, seenOf([]*loggregator_v2.Envelope{e})...)
				}
			}
			return out
		}
		Eventually(logs, 10*time.Second).Should(ConsistOf(wantLines), "the lines under the app guid, each with its process's tags")
		envs := ingress.Envelopes()
		Expect(standin.GaugesIn(envs)).To(HaveEach(BeElementOf(wantGauges)), "no gauge but those")

		// CC in OPI mode: the source named by the process's guid, every envelope kept, by
		// instance_id. Each process finds exactly its own instances; the original web process,
		// whose guid is the app guid, none of the others'.
		bySource := standin.GaugesBySource(envs)
		Expect(bySource).To(HaveLen(4))
		for _, p := range []process{web, worker, newWeb} {
			expectRows(bySource[p.guid], wantRows[p.guid], "CC's OPI mode reading "+p.guid)
		}
		expectRows(bySource[taskGUID], wantRows[taskGUID], "the task guid")

		// A Diego-shaped reader: the app guid, filtered by process_id. It finds the process
		// whose guid is the app guid; the others are not under the app guid.
		expectRows(standin.GaugesTagged(envs, appGUID, web.guid), wantRows[web.guid], "Diego's reader of the web process")
		Expect(standin.GaugesTagged(envs, appGUID, workerGUID)).To(BeEmpty())
		Expect(standin.GaugesTagged(envs, appGUID, newWebGUID)).To(BeEmpty())
	})
})
