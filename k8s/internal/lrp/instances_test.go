package lrp_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("GetInstances", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
	)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
	})

	instances := func(n int) []*opi.Instance {
		var got []*opi.Instance
		EventuallyWithOffset(1, func() []*opi.Instance {
			got, _ = backend.GetInstances(ctx, lrp.LRPIdentifier)
			return got
		}).Should(HaveLen(n))
		return got
	}

	It("ranks live pods by creation time then name, skips terminating ones and drops ranks beyond the desired count", func() {
		lrp.Instances = 3
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		pending := corev1.PodStatus{Phase: corev1.PodPending}
		terminating := backendtest.NewPod(lrp, "pod-0-terminating", t0.Add(-time.Hour), pending)
		terminating.DeletionTimestamp = &metav1.Time{Time: t0}
		terminating.Finalizers = []string{"example.com/hold"}
		backendtest.CreatePod(client, terminating)
		backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-z", t0, pending))
		backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-y", t0.Add(time.Second), pending))
		backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-x", t0.Add(time.Second), pending))
		backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-w", t0.Add(time.Minute), pending)) // a surplus pod during a scale-down

		got := instances(3)
		Expect(got).To(Equal([]*opi.Instance{
			{Index: 0, State: opi.InstanceClaimed, Since: t0.UnixNano()},
			{Index: 1, State: opi.InstanceClaimed, Since: t0.Add(time.Second).UnixNano()},
			{Index: 2, State: opi.InstanceClaimed, Since: t0.Add(time.Second).UnixNano()},
		}))
		// pod-x precedes pod-y at the same creation time: stopping index 1 deletes pod-x.
		before := len(client.Actions())
		Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, 1)).To(Succeed())
		Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"delete pods pod-x"}))
	})

	It("reports nothing for an LRP scaled to zero", func() {
		lrp.Instances = 0
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-a", t0, corev1.PodStatus{Phase: corev1.PodRunning}))
		Consistently(func() []*opi.Instance {
			got, err := backend.GetInstances(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			return got
		}, "100ms").Should(BeEmpty())
	})

	It("returns ErrNotFound for an absent LRP", func() {
		_, err := backend.GetInstances(ctx, lrp.LRPIdentifier)
		Expect(err).To(MatchError(opi.ErrNotFound))
	})

	started := t0.Add(30 * time.Second)
	readyAt := t0.Add(40 * time.Second)
	finished := t0.Add(50 * time.Second)
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readyAt)}
	notReady := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	unschedulable := func(message string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: message}
	}
	running := corev1.ContainerStatus{Name: "opi", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name:                 "opi",
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(finished)}},
		}
	}
	notReadySince := func(t time.Time) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t)}
	}
	waitingFor := func(reason, message string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "opi", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
	}
	terminated := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "opi", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(finished)}}}
	}
	status := func(phase corev1.PodPhase, conditions []corev1.PodCondition, containers ...corev1.ContainerStatus) corev1.PodStatus {
		return corev1.PodStatus{Phase: phase, Conditions: conditions, ContainerStatuses: containers}
	}

	DescribeTable("maps pod status to instance state",
		func(s corev1.PodStatus, want opi.Instance) {
			lrp.Instances = 1
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod", t0, s))
			got := instances(1)
			want.Index = 0
			Expect(*got[0]).To(Equal(want))
		},
		Entry("running and ready: RUNNING since the container started",
			status(corev1.PodRunning, []corev1.PodCondition{scheduled, ready}, running),
			opi.Instance{State: opi.InstanceRunning, Since: started.UnixNano()}),
		Entry("ready without container state: RUNNING since it became ready",
			status(corev1.PodRunning, []corev1.PodCondition{scheduled, ready}),
			opi.Instance{State: opi.InstanceRunning, Since: readyAt.UnixNano()}),
		Entry("running but not ready: CLAIMED",
			status(corev1.PodRunning, []corev1.PodCondition{scheduled, notReady}, running),
			opi.Instance{State: opi.InstanceClaimed, Since: t0.UnixNano()}),
		Entry("pending and scheduled: CLAIMED",
			status(corev1.PodPending, []corev1.PodCondition{scheduled}, corev1.ContainerStatus{Name: "opi", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}),
			opi.Instance{State: opi.InstanceClaimed, Since: t0.UnixNano()}),
		Entry("pending without conditions: CLAIMED",
			status(corev1.PodPending, nil),
			opi.Instance{State: opi.InstanceClaimed, Since: t0.UnixNano()}),
		Entry("no memory: UNCLAIMED",
			status(corev1.PodPending, []corev1.PodCondition{unschedulable("0/3 nodes are available: 3 Insufficient memory. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")}),
			opi.Instance{State: opi.InstanceUnclaimed, Since: t0.UnixNano(), PlacementError: "Insufficient resources: memory"}),
		Entry("no cpu: UNCLAIMED",
			status(corev1.PodPending, []corev1.PodCondition{unschedulable("0/1 nodes are available: 1 Insufficient cpu.")}),
			opi.Instance{State: opi.InstanceUnclaimed, Since: t0.UnixNano(), PlacementError: "Insufficient resources: cpu"}),
		Entry("no disk: UNCLAIMED",
			status(corev1.PodPending, []corev1.PodCondition{unschedulable("0/1 nodes are available: 1 Insufficient ephemeral-storage.")}),
			opi.Instance{State: opi.InstanceUnclaimed, Since: t0.UnixNano(), PlacementError: "Insufficient resources: disk"}),
		Entry("no compatible node: UNCLAIMED",
			status(corev1.PodPending, []corev1.PodCondition{unschedulable("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")}),
			opi.Instance{State: opi.InstanceUnclaimed, Since: t0.UnixNano(), PlacementError: "found no compatible cell: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector"}),
		Entry("crash loop: CRASHED since it last exited, with Diego's exit text",
			status(corev1.PodRunning, []corev1.PodCondition{scheduled, notReady}, waiting("CrashLoopBackOff")),
			opi.Instance{State: opi.InstanceCrashed, Since: finished.UnixNano(), CrashReason: "APP/PROC/WEB: Exited with status 1"}),
		Entry("waiting after an error: CRASHED",
			status(corev1.PodRunning, []corev1.PodCondition{scheduled, notReady}, waiting("Error")),
			opi.Instance{State: opi.InstanceCrashed, Since: finished.UnixNano(), CrashReason: "APP/PROC/WEB: Exited with status 1"}),
		Entry("exited non-zero: CRASHED",
			status(corev1.PodRunning, []corev1.PodCondition{scheduled, notReady}, terminated(137)),
			opi.Instance{State: opi.InstanceCrashed, Since: finished.UnixNano(), CrashReason: "APP/PROC/WEB: Exited with status 137"}),
		Entry("killed for memory: CRASHED, out of memory",
			status(corev1.PodRunning, []corev1.PodCondition{scheduled, notReady}, corev1.ContainerStatus{Name: "opi", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(finished)}}}),
			opi.Instance{State: opi.InstanceCrashed, Since: finished.UnixNano(), CrashReason: "APP/PROC/WEB: Exited with status 137 (out of memory)"}),
		Entry("exited zero, about to restart: CLAIMED",
			status(corev1.PodRunning, []corev1.PodCondition{scheduled, notReady}, terminated(0)),
			opi.Instance{State: opi.InstanceClaimed, Since: t0.UnixNano()}),
		Entry("failed pod: CRASHED",
			status(corev1.PodFailed, []corev1.PodCondition{scheduled}),
			opi.Instance{State: opi.InstanceCrashed, Since: t0.UnixNano(), CrashReason: "Instance failed"}),
		Entry("evicted: CRASHED since it stopped being ready, with the evictor's message",
			corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory.",
				Conditions: []corev1.PodCondition{scheduled, notReadySince(finished)}},
			opi.Instance{State: opi.InstanceCrashed, Since: finished.UnixNano(), CrashReason: "Instance was evicted: The node was low on resource: memory."}),
		Entry("failed on node shutdown, container exited: CRASHED with the pod's reason",
			corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Terminated", Message: "Pod was terminated in response to imminent node shutdown.",
				Conditions: []corev1.PodCondition{scheduled, notReady}, ContainerStatuses: []corev1.ContainerStatus{terminated(143)}},
			opi.Instance{State: opi.InstanceCrashed, Since: finished.UnixNano(), CrashReason: "Instance failed: Terminated: Pod was terminated in response to imminent node shutdown."}),
		Entry("image cannot be pulled: CRASHED since it stopped being ready",
			status(corev1.PodPending, []corev1.PodCondition{scheduled, notReadySince(readyAt)}, waitingFor("ImagePullBackOff", `Back-off pulling image "registry.example.com/does-not-exist"`)),
			opi.Instance{State: opi.InstanceCrashed, Since: readyAt.UnixNano(), CrashReason: `Failed to pull the image: Back-off pulling image "registry.example.com/does-not-exist"`}),
		Entry("image pull error: CRASHED with the same since",
			status(corev1.PodPending, []corev1.PodCondition{scheduled, notReadySince(readyAt)}, waitingFor("ErrImagePull", "")),
			opi.Instance{State: opi.InstanceCrashed, Since: readyAt.UnixNano(), CrashReason: "Failed to pull the image"}),
		Entry("invalid image name: CRASHED",
			status(corev1.PodPending, []corev1.PodCondition{scheduled}, waitingFor("InvalidImageName", `couldn't parse image name "UPPER"`)),
			opi.Instance{State: opi.InstanceCrashed, Since: t0.UnixNano(), CrashReason: `Invalid image name: couldn't parse image name "UPPER"`}),
		Entry("root image under runAsNonRoot: CRASHED with the kubelet's reason",
			status(corev1.PodPending, []corev1.PodCondition{scheduled, notReadySince(readyAt)}, waitingFor("CreateContainerConfigError", "container has runAsNonRoot and image will run as root")),
			opi.Instance{State: opi.InstanceCrashed, Since: readyAt.UnixNano(), CrashReason: "Failed to configure the container: container has runAsNonRoot and image will run as root"}),
		Entry("container cannot be created: CRASHED",
			status(corev1.PodPending, []corev1.PodCondition{scheduled, notReadySince(readyAt)}, waitingFor("CreateContainerError", "exec format error")),
			opi.Instance{State: opi.InstanceCrashed, Since: readyAt.UnixNano(), CrashReason: "Failed to create the container: exec format error"}),
	)
})

var _ = Describe("Which pods are instances", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
	)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	healthy := corev1.PodStatus{
		Phase:             corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "opi", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at(100))}}}},
	}
	starting := corev1.PodStatus{Phase: corev1.PodPending}
	evicted := corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: ephemeral-storage."}
	crashLooping := corev1.PodStatus{
		Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "opi",
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, FinishedAt: metav1.NewTime(at(90))}}}},
	}
	pullFailing := corev1.PodStatus{
		Phase:             corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "opi", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}},
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
	})

	pod := func(name string, created int, image string, s corev1.PodStatus) {
		p := backendtest.NewPod(lrp, name, at(created), s)
		p.Spec.Containers[0].Image = image
		backendtest.CreatePod(client, p)
	}
	// report waits until the cache holds the LRP's n pods and returns its instances.
	report := func(n int) []opi.Instance {
		EventuallyWithOffset(1, func() int { return backend.CachedPodCount(lrp.LRPIdentifier) }).Should(Equal(n))
		got, err := backend.GetInstances(ctx, lrp.LRPIdentifier)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		out := make([]opi.Instance, len(got))
		for i, in := range got {
			out[i] = *in
		}
		return out
	}
	states := func(got []opi.Instance) []string {
		out := []string{}
		for _, in := range got {
			out = append(out, fmt.Sprintf("%d %s %s", in.Index, in.State, in.CrashReason))
		}
		return out
	}
	stopDeletes := func(index int32) []string {
		before := len(client.Actions())
		Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, index)).To(Succeed())
		return backendtest.ActionsSince(client, before)
	}

	It("reports a 1-instance app RUNNING while its evicted pod lingers, and restarts the live pod", func() {
		lrp.Instances = 1
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		pod("pod-evicted", 0, lrp.Image, evicted)
		pod("pod-replacement", 10, lrp.Image, healthy)
		Expect(states(report(2))).To(Equal([]string{"0 RUNNING "}))
		Expect(stopDeletes(0)).To(Equal([]string{"delete pods pod-replacement"}))
	})

	It("reports an evicted pod CRASHED, with why, until a replacement takes its place", func() {
		lrp.Instances = 1
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		pod("pod-evicted", 0, lrp.Image, evicted)
		Expect(states(report(1))).To(Equal([]string{"0 CRASHED Instance was evicted: The node was low on resource: ephemeral-storage."}))

		pod("pod-replacement", 10, lrp.Image, starting)
		Expect(states(report(2))).To(Equal([]string{"0 CLAIMED "}))
	})

	It("fills only the indices no live pod takes with the newest failed pods", func() {
		lrp.Instances = 3
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		pod("pod-failed-old", 0, lrp.Image, evicted)
		pod("pod-live-a", 1, lrp.Image, healthy)
		pod("pod-failed-new", 2, lrp.Image, corev1.PodStatus{Phase: corev1.PodFailed})
		pod("pod-live-b", 3, lrp.Image, crashLooping)
		Expect(states(report(4))).To(Equal([]string{
			"0 RUNNING ",
			"1 CRASHED APP/PROC/WEB: Exited with status 2",
			"2 CRASHED Instance failed",
		}))
	})

	It("keeps an image error CRASHED at its own index beside healthy pods", func() {
		lrp.Instances = 3
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		pod("pod-a", 0, lrp.Image, healthy)
		pod("pod-b", 1, lrp.Image, pullFailing)
		pod("pod-c", 2, lrp.Image, healthy)
		Expect(states(report(3))).To(Equal([]string{
			"0 RUNNING ", "1 CRASHED Failed to pull the image", "2 RUNNING ",
		}))
	})

	It("reports the serving pods during a rollout: old ones until new ones are Ready", func() {
		lrp.Instances = 2
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		old := lrp.Image
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Image: ptr.To("example.com/new:2")})).To(Succeed())

		By("a surge pod of the new template starts: the two old ones still report")
		pod("pod-old-a", 0, old, healthy)
		pod("pod-old-b", 1, old, healthy)
		pod("pod-new-a", 10, "example.com/new:2", starting)
		Expect(states(report(3))).To(Equal([]string{"0 RUNNING ", "1 RUNNING "}))
		Expect(stopDeletes(1)).To(Equal([]string{"delete pods pod-old-b"}))

		By("a new pod Ready beside two old ones: the new one is kept, with the oldest old one")
		Expect(client.CoreV1().Pods(backendtest.Namespace).Delete(ctx, "pod-new-a", metav1.DeleteOptions{})).To(Succeed())
		pod("pod-old-b2", 2, old, healthy)
		pod("pod-new-b", 11, "example.com/new:2", healthy)
		Expect(states(report(3))).To(Equal([]string{"0 RUNNING ", "1 RUNNING "}))
		Expect(stopDeletes(1)).To(Equal([]string{"delete pods pod-new-b"}))
	})

	It("prefers the new template's starting pods over old ones that no longer serve", func() {
		lrp.Instances = 2
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		old := lrp.Image
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Image: ptr.To("example.com/fixed:2")})).To(Succeed())
		pod("pod-old-a", 0, old, crashLooping)
		pod("pod-old-b", 1, old, crashLooping)
		pod("pod-new-a", 10, "example.com/fixed:2", starting)
		Expect(states(report(3))).To(Equal([]string{
			"0 CRASHED APP/PROC/WEB: Exited with status 2", "1 CLAIMED ",
		}))
		Expect(stopDeletes(1)).To(Equal([]string{"delete pods pod-new-a"}))
	})
})

var _ = Describe("Reads", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
	})

	It("serve list, get and instances from the caches without API calls", func() {
		backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-a", time.Now(), corev1.PodStatus{Phase: corev1.PodPending}))
		Eventually(func() []*opi.Instance {
			got, _ := backend.GetInstances(ctx, lrp.LRPIdentifier)
			return got
		}).Should(HaveLen(1))
		before := len(client.Actions())

		for range 3 {
			lrps, err := backend.ListLRPs(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(lrps).To(HaveLen(1))
			_, err = backend.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			_, err = backend.GetInstances(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(client.Actions()).To(HaveLen(before))
	})

	It("recover the LRP from the deployment, without its env", func() {
		got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
		Expect(err).NotTo(HaveOccurred())
		d := backendtest.GetDeployment(client, names.DeploymentName(lrp))

		want := *backendtest.SampleLRP()
		want.Env = nil
		want.ModificationTag = opi.ModificationTag{Epoch: string(d.UID), Index: d.Generation}
		Expect(want.ModificationTag.Epoch).NotTo(BeEmpty())
		Expect(*got).To(Equal(want))
	})

	It("list each LRP with exactly its scheduling fields", func() {
		lrps, err := backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		d := backendtest.GetDeployment(client, names.DeploymentName(lrp))
		Expect(lrps).To(Equal([]*opi.LRP{{
			LRPIdentifier:   lrp.LRPIdentifier,
			AppGUID:         lrp.AppGUID,
			Instances:       2,
			MemoryMB:        256,
			DiskMB:          1024,
			LastUpdated:     "1600000000.2499998",
			ModificationTag: opi.ModificationTag{Epoch: string(d.UID), Index: d.Generation},
		}}))
	})

	It("list every LRP, ordered by process guid", func() {
		other := backendtest.SampleLRP()
		other.GUID = "0aaaaaaa-0d35-4ad7-a6d3-2c0ef0d3bb2a"
		other.PrivateRegistry = &opi.PrivateRegistry{Username: "u", Password: "p"}
		Expect(backend.DesireLRP(ctx, other)).To(Succeed())

		lrps, err := backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(lrps).To(HaveLen(2))
		Expect(lrps[0].ProcessGUID()).To(Equal(other.ProcessGUID()))
		Expect(lrps[1].ProcessGUID()).To(Equal(lrp.ProcessGUID()))
		Expect(lrps[0].PrivateRegistry).To(BeNil(), "credentials are not read back")
	})

	It("find the LRP by its labels, not its name", func() {
		renamed := backendtest.SampleLRP()
		renamed.AppName = "renamed"
		got, err := backend.GetLRP(ctx, renamed.LRPIdentifier)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.AppName).To(Equal("My App"))

		_, err = backend.GetLRP(ctx, opi.LRPIdentifier{GUID: lrp.GUID, Version: "other"})
		Expect(err).To(MatchError(opi.ErrNotFound))
	})

	It("skip a deployment being deleted", func() {
		d := backendtest.GetDeployment(client, names.DeploymentName(lrp))
		d.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		d.Finalizers = []string{"example.com/hold"}
		_, err := client.AppsV1().Deployments(backendtest.Namespace).Update(ctx, d, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			_, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
			return err
		}).Should(MatchError(opi.ErrNotFound))
		Expect(backend.ListLRPs(ctx)).To(BeEmpty())
	})
})
