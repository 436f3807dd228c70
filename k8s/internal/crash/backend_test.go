package crash_test

import (
	"context"
	"errors"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/fakekube"
)

var _ = Describe("Crash reports", func() {
	var (
		ctx      context.Context
		client   *fake.Clientset
		notifier *fakes.FakeCrashNotifier
		backend  *k8s.Backend
		lrp      *opi.LRP
	)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	crashedAt := time.Date(2026, 1, 2, 3, 10, 0, 0, time.UTC)

	// lead runs b's leader work, as the leader does, until the spec ends or the returned
	// function is called.
	lead := func(b *k8s.Backend) func() { return backendtest.Lead(b.RunLeaderWork) }
	// workload is the backend's Options.Workload ("": Deployments).
	var workloadKind string
	// start makes and starts a backend reporting to notifier and leads with it; the returned
	// function stops leading (the informers run on until the spec ends).
	start := func() func() {
		startCtx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		backend = backendtest.MustBackend(client, lagertest.NewTestLogger("k8s"), k8s.Options{
			Namespace: backendtest.Namespace,
			Workload:  workloadKind,
			Store:     store.Options{ReadWaitTimeout: 2 * time.Second},
			Notifiers: k8s.Notifiers{Crash: notifier},
		})
		Expect(backend.Start(startCtx)).To(Succeed())
		return lead(backend)
	}

	waitingAfter := func(restarts int32, exitCode int32, reason string, finished time.Time) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: "opi", RestartCount: restarts,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Reason: reason, FinishedAt: metav1.NewTime(finished),
			}},
		}
	}
	podWith := func(name string, created time.Time, s corev1.ContainerStatus) *corev1.Pod {
		return backendtest.NewPod(lrp, name, created, corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{s}})
	}
	reports := func() []opi.Crash {
		var out []opi.Crash
		for i := range notifier.InstanceCrashedCallCount() {
			_, c := notifier.InstanceCrashedArgsForCall(i)
			out = append(out, c)
		}
		return out
	}
	reported := func(name string) string {
		p, err := client.CoreV1().Pods(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return p.Annotations[names.AnnotationCrashesReported]
	}
	patches := func() []string {
		var out []string
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" && a.GetResource().Resource == "pods" {
				out = append(out, fakekube.Describe(a))
			}
		}
		return out
	}
	crash := func(name string, index, count, exit int32, description string, at time.Time) opi.Crash {
		return opi.Crash{
			LRPIdentifier: lrp.LRPIdentifier, InstanceGUID: name, Index: index, Reason: "CRASHED",
			ExitStatus: exit, ExitDescription: description, CrashCount: count,
			CrashTimestamp: at, OwedSince: at,
		}
	}
	// updateStatus is the kubelet reporting a new container status.
	updateStatus := func(name string, s corev1.ContainerStatus) {
		p, err := client.CoreV1().Pods(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		p.Status.ContainerStatuses = []corev1.ContainerStatus{s}
		_, err = client.CoreV1().Pods(backendtest.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		notifier = new(fakes.FakeCrashNotifier)
		lrp = backendtest.SampleLRP()
		workloadKind = ""
	})

	It("with StatefulSets, reports a crash at the pod's ordinal, not its rank by creation time", func() {
		workloadKind = workload.StatefulSets
		start()
		lrp.Instances = 3
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		first := backendtest.StatefulPod(lrp, 2, t0, corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{waitingAfter(1, 1, "Error", crashedAt)}})
		backendtest.CreatePod(client, first)
		backendtest.CreatePod(client, backendtest.StatefulPod(lrp, 0, t0.Add(time.Minute), corev1.PodStatus{Phase: corev1.PodPending}))

		Eventually(reports).Should(Equal([]opi.Crash{crash(first.Name, 2, 2, 1, "Exited with status 1", crashedAt)}))
	})

	It("reports a crash once, marks the pod, and reports the next crash with its higher count", func() {
		start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.CreatePod(client, podWith("pod-a", t0, waitingAfter(1, 1, "Error", crashedAt)))

		Eventually(reports).Should(Equal([]opi.Crash{crash("pod-a", 0, 2, 1, "Exited with status 1", crashedAt)}))
		Eventually(func() string { return reported("pod-a") }).Should(Equal("2"))
		Expect(patches()).To(Equal([]string{"patch pods pod-a"}))

		// The kubelet restarts it, and it crashes again, OOM-killed this time.
		later := crashedAt.Add(time.Minute)
		updateStatus("pod-a", waitingAfter(2, 137, "OOMKilled", later))
		Eventually(reports).Should(Equal([]opi.Crash{
			crash("pod-a", 0, 2, 1, "Exited with status 1", crashedAt),
			crash("pod-a", 0, 3, 137, "Exited with status 137 (out of memory)", later),
		}))
		Eventually(func() string { return reported("pod-a") }).Should(Equal("3"))
		Expect(patches()).To(Equal([]string{"patch pods pod-a", "patch pods pod-a"}))

		// Status updates that bring no new crash (running again) report nothing.
		running := waitingAfter(2, 137, "OOMKilled", later)
		running.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(later)}}
		updateStatus("pod-a", running)
		Consistently(reports, "300ms").Should(HaveLen(2))
	})

	It("does not report again what a pod's annotation says was reported, after a restart of opi", func() {
		stop := start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.CreatePod(client, podWith("pod-a", t0, waitingAfter(1, 1, "Error", crashedAt)))
		Eventually(func() string { return reported("pod-a") }).Should(Equal("2"))
		stop()

		// A new opi (or a new leader) sees pod-a marked, and pod-b crashed while none ran.
		backendtest.CreatePod(client, podWith("pod-b", t0.Add(time.Second), waitingAfter(1, 2, "Error", crashedAt)))
		start()
		Eventually(reports).Should(HaveLen(2))
		Consistently(reports, "300ms").Should(Equal([]opi.Crash{
			crash("pod-a", 0, 2, 1, "Exited with status 1", crashedAt),
			crash("pod-b", 1, 2, 2, "Exited with status 2", crashedAt),
		}))
		Expect(reported("pod-b")).To(Equal("2"))
	})

	It("reports only crashes newer than the pod's annotation", func() {
		pod := podWith("pod-a", t0, waitingAfter(3, 1, "Error", crashedAt))
		pod.Annotations = map[string]string{names.AnnotationCrashesReported: "2"}
		backendtest.CreatePod(client, pod)
		start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		Eventually(reports).Should(Equal([]opi.Crash{crash("pod-a", 0, 4, 1, "Exited with status 1", crashedAt)}))
		Eventually(func() string { return reported("pod-a") }).Should(Equal("4"))
	})

	It("does not mark a crash the notifier still owes, and tries it again", func() {
		notifier.InstanceCrashedReturnsOnCall(0, errors.New("context canceled"))
		start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.CreatePod(client, podWith("pod-a", t0, waitingAfter(1, 1, "Error", crashedAt)))

		Eventually(notifier.InstanceCrashedCallCount).Should(Equal(2))
		Eventually(func() string { return reported("pod-a") }).Should(Equal("2"))
		want := crash("pod-a", 0, 2, 1, "Exited with status 1", crashedAt)
		Expect(reports()).To(Equal([]opi.Crash{want, want}))
		Expect(patches()).To(Equal([]string{"patch pods pod-a"}))
	})

	It("marks a delivered crash again when the mark failed, without reporting it twice", func() {
		failures := 1
		client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			if failures > 0 {
				failures--
				return true, nil, apierrors.NewServiceUnavailable("etcd is down")
			}
			return false, nil, nil
		})
		start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.CreatePod(client, podWith("pod-a", t0, waitingAfter(1, 1, "Error", crashedAt)))

		Eventually(func() string { return reported("pod-a") }).Should(Equal("2"))
		Expect(patches()).To(Equal([]string{"patch pods pod-a", "patch pods pod-a"}))
		Consistently(notifier.InstanceCrashedCallCount, "300ms").Should(Equal(1))
	})

	It("counts an exit with code 0: an LRP should never exit", func() {
		start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.CreatePod(client, podWith("pod-a", t0, corev1.ContainerStatus{
			Name: "opi",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(crashedAt),
			}},
		}))
		Eventually(reports).Should(Equal([]opi.Crash{crash("pod-a", 0, 1, 0, "Exited with status 0", crashedAt)}))
		Eventually(func() string { return reported("pod-a") }).Should(Equal("1"))
	})

	It("gives the index GetInstances gives the pod", func() {
		start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed()) // two instances
		backendtest.CreatePod(client, podWith("pod-b", t0, corev1.ContainerStatus{
			Name: "opi", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		}))
		// A terminating pod created before both ranks nowhere.
		gone := podWith("pod-0", t0.Add(-time.Hour), corev1.ContainerStatus{Name: "opi"})
		gone.DeletionTimestamp = &metav1.Time{Time: t0}
		gone.Finalizers = []string{"example.com/hold"}
		backendtest.CreatePod(client, gone)
		Eventually(func() []*opi.Instance {
			instances, _ := backend.GetInstances(ctx, lrp.LRPIdentifier)
			return instances
		}).Should(HaveLen(1))
		// Created later but first by name: index 1.
		backendtest.CreatePod(client, podWith("pod-a", t0.Add(time.Second), waitingAfter(1, 1, "Error", crashedAt)))

		Eventually(reports).Should(HaveLen(1))
		Expect(reports()[0].InstanceGUID).To(Equal("pod-a"))
		Expect(reports()[0].Index).To(BeEquivalentTo(1))
		Eventually(func() []string {
			instances, err := backend.GetInstances(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			var states []string
			for _, in := range instances {
				states = append(states, in.State)
			}
			return states
		}).Should(Equal([]string{opi.InstanceClaimed, opi.InstanceCrashed}))
	})

	It("ignores pods that did not crash, pods of no LRP and terminations caused by a deletion", func() {
		start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.CreatePod(client, podWith("running", t0, corev1.ContainerStatus{
			Name: "opi", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}},
		}))
		backendtest.CreatePod(client, podWith("pending", t0, corev1.ContainerStatus{
			Name: "opi", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		}))
		// opi's source label but no LRP's guid and version.
		stray := podWith("stray", t0, waitingAfter(1, 1, "Error", crashedAt))
		delete(stray.Labels, "opi-bridge.io/guid")
		delete(stray.Labels, "opi-bridge.io/version")
		backendtest.CreatePod(client, stray)
		// Stopped: its container was terminated by the deletion.
		stopped := podWith("stopped", t0, corev1.ContainerStatus{
			Name: "opi", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 143, Reason: "Error", FinishedAt: metav1.NewTime(crashedAt),
			}},
		})
		stopped.DeletionTimestamp = &metav1.Time{Time: crashedAt}
		stopped.Finalizers = []string{"example.com/hold"}
		backendtest.CreatePod(client, stopped)
		// A crashed pod last, so that once it is reported every pod above went past the
		// reporter.
		backendtest.CreatePod(client, podWith("crashed", t0.Add(time.Second), waitingAfter(1, 1, "Error", crashedAt)))

		Eventually(reports).Should(HaveLen(1))
		Consistently(reports, "300ms").Should(HaveLen(1))
		Expect(reports()[0].InstanceGUID).To(Equal("crashed"))
		Expect(patches()).To(Equal([]string{"patch pods crashed"}))
	})

	It("reports the crashes before a deletion that were not reported yet", func() {
		start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		stopped := podWith("stopped", t0, corev1.ContainerStatus{
			Name: "opi", RestartCount: 2,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 3, Reason: "Error", FinishedAt: metav1.NewTime(crashedAt),
			}},
		})
		stopped.DeletionTimestamp = &metav1.Time{Time: crashedAt.Add(time.Minute)}
		stopped.Finalizers = []string{"example.com/hold"}
		backendtest.CreatePod(client, stopped)
		Eventually(reports).Should(Equal([]opi.Crash{crash("stopped", 0, 2, 3, "Exited with status 3", crashedAt)}))
	})

	It("reports nothing while it does not lead, and what is owed once it leads again", func() {
		stop := start()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		stop()
		backendtest.CreatePod(client, podWith("pod-a", t0, waitingAfter(1, 1, "Error", crashedAt)))
		Eventually(func() []*opi.Instance {
			instances, _ := backend.GetInstances(ctx, lrp.LRPIdentifier)
			return instances
		}).Should(HaveLen(1))
		Consistently(reports, "300ms").Should(BeEmpty())

		lead(backend)
		Eventually(reports).Should(Equal([]opi.Crash{crash("pod-a", 0, 2, 1, "Exited with status 1", crashedAt)}))
	})
})
