package instances_test

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/k8s/instances/clientset"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

const namespace = "apps"

var _ = Describe("Reader", func() {
	id := opi.LRPIdentifier{GUID: "8a3d6a87-0d35-4ad7-a6d3-2c0ef0d3bb2a", Version: "f4a19c5e"}
	lrpLabels := map[string]string{names.LabelGUID: id.GUID, names.LabelVersion: id.Version, names.LabelSourceType: names.SourceTypeApp}
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	pod := func(name string, age time.Duration, running bool, extra ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name), Labels: lrpLabels,
				CreationTimestamp: metav1.NewTime(created.Add(-age))},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: names.ContainerName, Image: "busybox"}}},
		}
		if running {
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: names.ContainerName, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		}
		for _, f := range extra {
			f(p)
		}
		return p
	}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "dora-dev-0123456789", Namespace: namespace, Labels: lrpLabels,
			Annotations: map[string]string{names.AnnotationAppName: "dora", names.AnnotationProcessType: "worker"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: names.ContainerName, Image: "busybox"}}}}},
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task-1", Namespace: namespace,
		Labels:      map[string]string{names.LabelSourceType: names.SourceTypeTask},
		Annotations: map[string]string{names.AnnotationTaskName: "migrate", names.AnnotationTaskGUID: "task-guid-1"}}}

	start := func(objs ...runtime.Object) *instances.Reader {
		ctx, cancel := context.WithCancel(context.Background())
		r := instances.New(clientset.Sources(fake.NewClientset(objs...), namespace), instances.Options{Namespace: namespace, Logger: lagertest.NewTestLogger("instances")})
		DeferCleanup(func() { cancel(); r.Shutdown() })
		Expect(r.Start(ctx)).To(Succeed())
		return r
	}

	It("reports each pod at the index GET /instances gives it, oldest first, and no pod past the desired count", func() {
		// Three live pods for two desired instances: the one not Ready is left out.
		r := start(deployment, job, pod("pod-a", time.Hour, true), pod("pod-b", time.Minute, true), pod("pod-c", 2*time.Hour, false))

		first, w, ok := r.Instance(id, 0)
		Expect(ok).To(BeTrue())
		Expect(first.Name).To(Equal("pod-a"))
		Expect(first.State).To(Equal(opi.InstanceRunning))
		Expect(w.AppName).To(Equal("dora"))
		Expect(w.ProcessType).To(Equal("worker"))
		second, _, ok := r.Instance(id, 1)
		Expect(ok).To(BeTrue())
		Expect(second.Name).To(Equal("pod-b"))
		Expect(r.Index(second, w)).To(Equal(int32(1)))

		_, _, ok = r.Instance(id, 2)
		Expect(ok).To(BeFalse(), "past the desired count")
		_, _, ok = r.Instance(id, -1)
		Expect(ok).To(BeFalse())
		_, _, ok = r.Instance(opi.LRPIdentifier{GUID: id.GUID, Version: "other"}, 0)
		Expect(ok).To(BeFalse(), "another version of the LRP has no workload")
		Expect(r.Workload(id)).To(Equal(w))

		byName, ok := r.Pod("pod-c")
		Expect(ok).To(BeTrue(), "a pod is found by name whether it reports an index or not")
		Expect(byName.UID).To(Equal(types.UID("uid-pod-c")))
		_, ok = r.Pod("pod-z")
		Expect(ok).To(BeFalse())

		j, ok := r.Job("task-1")
		Expect(ok).To(BeTrue())
		Expect(j.TaskName).To(Equal("migrate"))
	})

	It("holds each pod cut to what the ranking and an SSH tunnel read", func() {
		r := start(deployment, pod("pod-a", time.Hour, true, func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.1" }))
		Expect(r.CachedPods()).To(HaveLen(1))
		held := r.CachedPods()[0].(*instances.Pod)
		Expect(held.Name).To(Equal("pod-a"))
		Expect(held.IP).To(Equal("10.0.0.1"), "a tunnel may name the instance by its IP")
		Expect(held.Node).To(BeEmpty(), "the node is neither's")
	})
})
