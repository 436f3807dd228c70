package agent_test

import (
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// gauge is a gauge envelope as the specs compare it.
type gauge struct {
	SourceID, InstanceID string
	Tags                 map[string]string
	Values               map[string]float64
	Units                map[string]string
}

func gauges(envs []*loggregator_v2.Envelope) []gauge {
	var out []gauge
	for _, e := range envs {
		g := e.GetGauge()
		if g == nil {
			continue
		}
		v, u := map[string]float64{}, map[string]string{}
		for name, m := range g.Metrics {
			v[name], u[name] = m.Value, m.Unit
		}
		out = append(out, gauge{SourceID: e.SourceId, InstanceID: e.InstanceId, Tags: e.Tags, Values: v, Units: u})
	}
	return out
}

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

		tags := withInstance(webTags, "web-uid")
		delete(tags, "source_type")
		want := gauge{
			SourceID: appGUID, InstanceID: "0", Tags: tags,
			Values: map[string]float64{"cpu": 25, "memory": 100 * mi, "disk": 11 * mi, "memory_quota": 256 * mi, "disk_quota": 1024 * mi},
			Units:  map[string]string{"cpu": "percentage", "memory": "bytes", "disk": "bytes", "memory_quota": "bytes", "disk_quota": "bytes"},
		}
		Eventually(func() []gauge { return gauges(ingress.Envelopes()) }, 10*time.Second).Should(ContainElement(want))
		Expect(gauges(ingress.Envelopes())).To(HaveEach(want), "only the followed pod's gauges")
		_, refused := kubelet.Requests()
		Expect(refused).To(BeZero())
	})
})
