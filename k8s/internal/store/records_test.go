package store_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// The records and the ranking on their own: pure functions of a pod or workload, which a
// reader outside opi's process (the node agent) shares.
var _ = Describe("Records", func() {
	created := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	readyAt := created.Add(7 * time.Second)
	pod := func(name string, offset time.Duration, ready bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", UID: types.UID("uid-" + name),
				CreationTimestamp: metav1.NewTime(created.Add(offset)),
				Labels:            map[string]string{names.LabelGUID: "g", names.LabelVersion: "v"}},
			Spec:   corev1.PodSpec{NodeName: "node-1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9"},
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(readyAt)}}
		return p
	}

	It("keeps where a router reaches a pod and since when it is Ready", func() {
		r := store.PodRecordOf(pod("a", 0, true))
		Expect(r.IP).To(Equal("10.0.0.9"))
		Expect(r.Node).To(Equal("node-1"))
		Expect(r.ReadySince).To(Equal(readyAt.UnixNano()))
		Expect(r.State).To(Equal(opi.InstanceRunning))
		Expect(r.ID()).To(Equal(opi.LRPIdentifier{GUID: "g", Version: "v"}))

		Expect(store.PodRecordOf(pod("b", 0, false)).ReadySince).To(BeZero(), "not Ready")
		deleting := pod("c", 0, true)
		deleting.DeletionTimestamp = &metav1.Time{Time: readyAt}
		Expect(store.PodRecordOf(deleting).ReadySince).To(BeZero(), "being deleted: no longer routed to")
	})

	It("ranks a Deployment's pods by creation, Ready current pods kept before others", func() {
		w := &store.WorkloadRecord{ReplicaCount: 2, Image: "new"}
		old := store.PodRecordOf(pod("old", 0, true))
		old.Image = "old"
		starting := store.PodRecordOf(pod("starting", time.Second, false))
		starting.Image = "new"
		current := store.PodRecordOf(pod("current", 2*time.Second, true))
		current.Image = "new"
		pods := []*store.PodRecord{current, starting, old}

		Expect(podNames(store.RankedPods(pods, w))).To(Equal([]string{"old", "current"}),
			"a surge of three for two: the starting pod is the one left out")
		Expect(store.InstanceIndex(current, pods, w, false)).To(Equal(int32(1)))
		Expect(store.InstanceIndex(starting, pods, w, false)).To(Equal(int32(1)),
			"not reported: its rank among the live pods")
		Expect(store.InstanceIndex(old, pods, nil, false)).To(Equal(int32(0)), "workload gone")
	})

	It("puts a StatefulSet's pods at their ordinals", func() {
		w := &store.WorkloadRecord{ReplicaCount: 3}
		at := func(name string, ordinal string) *store.PodRecord {
			p := pod(name, 0, true)
			p.Labels[appsv1.PodIndexLabel] = ordinal
			return store.PodRecordOf(p)
		}
		two, zero, surplus := at("app-2", "2"), at("app-0", "0"), at("app-3", "3")
		pods := []*store.PodRecord{two, zero, surplus}
		got := store.OrdinalPods(pods, w)
		Expect(got).To(HaveLen(3))
		Expect(got[0]).To(BeIdenticalTo(zero))
		Expect(got[1]).To(BeNil(), "ordinal 1 has no pod yet")
		Expect(got[2]).To(BeIdenticalTo(two))
		Expect(store.InstanceIndex(surplus, pods, w, true)).To(Equal(int32(3)), "its ordinal, reported or not")
	})

	It("indexes every pod as InstanceIndex does, ranking once", func() {
		w := &store.WorkloadRecord{ReplicaCount: 4, Image: "new"}
		var pods []*store.PodRecord
		for i, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			p := store.PodRecordOf(pod(name, time.Duration(i%3)*time.Second, i%2 == 0))
			p.Image = []string{"old", "new"}[i%2]
			pods = append(pods, p)
		}
		pods[1].DeletionTimestamp = &metav1.Time{Time: readyAt}
		pods[3].Terminal = true
		pods[5].Ordinal = 1
		for _, byOrdinal := range []bool{false, true} {
			for _, workload := range []*store.WorkloadRecord{w, nil} {
				indexOf := store.InstanceIndexer(pods, workload, byOrdinal)
				want, got := map[string]int32{}, map[string]int32{}
				for _, p := range pods {
					want[p.Name] = store.InstanceIndex(p, pods, workload, byOrdinal)
					got[p.Name] = indexOf(p)
				}
				Expect(got).To(Equal(want), "byOrdinal %v, workload %v", byOrdinal, workload != nil)
			}
		}
	})
})

func podNames(pods []*store.PodRecord) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
