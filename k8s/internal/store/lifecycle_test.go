package store_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
)

var _ = Describe("A pod's steps (the lifecycle lines' input)", func() {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

	It("is empty for a pod nothing has happened to", func() {
		Expect(store.PodRecordOf(&corev1.Pod{}).Steps).To(Equal(store.PodSteps{}))
	})

	DescribeTable("holds, while no node takes the pod, the placement error CC gets, not the scheduler's whole message",
		func(message string, labels map[string]string, want string) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: message, LastTransitionTime: metav1.NewTime(at),
			}}}}
			r := store.PodRecordOf(p)
			Expect(r.Steps).To(Equal(store.PodSteps{Unschedulable: want, UnschedulableAt: at.Unix()}))
			Expect(r.Steps.Unschedulable).To(Equal(r.PlacementError))
		},
		Entry("memory", "0/4 nodes are available: 4 Insufficient memory. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.", nil, "Insufficient resources: memory"),
		Entry("cpu", "0/4 nodes are available: 4 Insufficient cpu.", nil, "Insufficient resources: cpu"),
		Entry("anything else, without the preemption report", "0/4 nodes are available: 4 node(s) had untolerated taint {a: b}. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.", nil,
			"found no compatible cell: 0/4 nodes are available: 4 node(s) had untolerated taint {a: b}"),
		Entry("an isolation segment no node has", "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.", map[string]string{names.LabelPlacementTag: "blue"},
			names.PlacementTagError("blue")),
	)

	It("holds another reason the pod is not scheduled with its message, clipped", func() {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates", LastTransitionTime: metav1.NewTime(at),
		}}}}
		Expect(store.PodRecordOf(p).Steps).To(Equal(store.PodSteps{
			Unschedulable: "SchedulingGated: Scheduling is blocked due to non-empty scheduling gates", UnschedulableAt: at.Unix(),
		}))
	})

	It("holds when the pod was placed and its app container's current run started", func() {
		p := &corev1.Pod{
			Spec: corev1.PodSpec{NodeName: "node-1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}},
				ContainerStatuses: []corev1.ContainerStatus{
					{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at.Add(time.Second))}}},
					{Name: names.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at.Add(3 * time.Second))}}},
				},
			},
		}
		Expect(store.PodRecordOf(p).Steps).To(Equal(store.PodSteps{ScheduledAt: at.Unix(), StartedAt: at.Unix() + 3}))
	})
})
