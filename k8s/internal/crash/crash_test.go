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
	"github.com/opi-bridge/opi/k8s/internal/crash"
	"github.com/opi-bridge/opi/k8s/internal/crash/crashfakes"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// The reporter on its own: a fake of its pod cache (crash.Pods) and client-go's fake clientset.
// The specs through the backend (backend_test.go) prove the wiring and the informer's part.
var _ = Describe("Reporter", func() {
	const (
		namespace = "apps"
		key       = namespace + "/pod-a"
	)
	var (
		ctx      context.Context
		client   *fake.Clientset
		pods     *crashfakes.FakePods
		notifier *fakes.FakeCrashNotifier
		reporter *crash.Reporter
		record   *store.PodRecord
	)
	finishedAt := time.Date(2026, 1, 2, 3, 10, 0, 0, time.UTC)
	id := opi.LRPIdentifier{GUID: "guid-1", Version: "v1"}

	patches := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}
	marked := func() string {
		p, err := client.CoreV1().Pods(namespace).Get(ctx, "pod-a", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return p.Annotations[names.AnnotationCrashesReported]
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-a", Namespace: namespace, UID: "uid-a"}})
		pods = new(crashfakes.FakePods)
		notifier = new(fakes.FakeCrashNotifier)
		record = &store.PodRecord{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-a", Namespace: namespace, UID: "uid-a"},
			LRPRef:     store.LRPRef{GUID: id.GUID, Version: id.Version},
			Crash:      &store.PodCrash{Count: 2, ExitCode: 137, Reason: "OOMKilled", FinishedAt: finishedAt.Unix()},
		}
		pods.PodByKeyReturns(record, true)
		pods.InstanceIndexReturns(3)
		var err error
		reporter, err = crash.New(lagertest.NewTestLogger("crash"), crash.Deps{Client: client, Pods: pods, Notifier: notifier})
		Expect(err).NotTo(HaveOccurred())
	})

	It("reports a pod that owes a crash once, with the index the cache gives, and marks it", func() {
		Expect(reporter.Sync(ctx, key)).To(Succeed())

		Expect(pods.PodByKeyArgsForCall(0)).To(Equal(key))
		Expect(pods.InstanceIndexCallCount()).To(Equal(1))
		Expect(pods.InstanceIndexArgsForCall(0)).To(BeIdenticalTo(record))
		Expect(notifier.InstanceCrashedCallCount()).To(Equal(1))
		_, report := notifier.InstanceCrashedArgsForCall(0)
		Expect(report).To(Equal(opi.Crash{
			LRPIdentifier: id, InstanceGUID: "pod-a", Index: 3, Reason: "CRASHED",
			ExitStatus: 137, ExitDescription: "Exited with status 137 (out of memory)", CrashCount: 2,
			CrashTimestamp: finishedAt, OwedSince: finishedAt,
		}))
		Expect(marked()).To(Equal("2"))

		By("an event the cache had before the mark: nothing is reported or patched again")
		Expect(reporter.Sync(ctx, key)).To(Succeed())
		Expect(notifier.InstanceCrashedCallCount()).To(Equal(1))
		Expect(patches()).To(Equal(1))
	})

	It("reports nothing of a pod whose crashes the cache shows marked", func() {
		record.Crash.Reported = 2
		Expect(reporter.Sync(ctx, key)).To(Succeed())
		Expect(notifier.InstanceCrashedCallCount()).To(BeZero())
		Expect(client.Actions()).To(BeEmpty())
	})

	It("marks nothing when the notifier fails, so the crash is reported again", func() {
		notifier.InstanceCrashedReturns(errors.New("cc is down"))
		Expect(reporter.Sync(ctx, key)).To(MatchError(ContainSubstring("report crash: cc is down")))
		Expect(client.Actions()).To(BeEmpty())
		Expect(reporter.Remembers(key)).To(BeFalse())
	})

	It("forgets a delivered crash whose mark failed once the cache no longer has the pod", func() {
		client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is down"))
		})
		Expect(reporter.Sync(ctx, key)).To(MatchError(ContainSubstring("mark crash reported on pod " + key)))
		Expect(reporter.Remembers(key)).To(BeTrue())

		By("retried while the pod is cached: only the mark again, no second report")
		Expect(reporter.Sync(ctx, key)).NotTo(Succeed())
		Expect(notifier.InstanceCrashedCallCount()).To(Equal(1))
		Expect(patches()).To(Equal(2))

		By("retried once the cache lost the pod: forgotten, nothing written")
		pods.PodByKeyReturns(nil, false)
		Expect(reporter.Sync(ctx, key)).To(Succeed())
		Expect(reporter.Remembers(key)).To(BeFalse())
		Expect(patches()).To(Equal(2))
		Expect(notifier.InstanceCrashedCallCount()).To(Equal(1))
	})

	It("runs on the cache's events until its context ends, then removes its handler", func() {
		runCtx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		done := make(chan struct{})
		go func() {
			defer close(done)
			reporter.Run(runCtx)
		}()
		Eventually(pods.AddPodHandlerCallCount).Should(Equal(1))
		pods.AddPodHandlerArgsForCall(0).OnAdd(record, true)
		Eventually(notifier.InstanceCrashedCallCount).Should(Equal(1))
		Eventually(marked).Should(Equal("2"))

		cancel()
		Eventually(done).Should(BeClosed())
		Expect(pods.RemovePodHandlerCallCount()).To(Equal(1))
	})

	It("gives up at once when the cache refuses its handler", func() {
		pods.AddPodHandlerReturns(nil, errors.New("informer stopped"))
		reporter.Run(ctx) // returns without a context end
		Expect(pods.RemovePodHandlerCallCount()).To(BeZero())
	})

	DescribeTable("New refuses a reporter missing a dependency",
		func(change func(*crash.Deps), want string) {
			deps := crash.Deps{Client: client, Pods: pods, Notifier: notifier}
			change(&deps)
			r, err := crash.New(lagertest.NewTestLogger("crash"), deps)
			Expect(err).To(MatchError(want))
			Expect(r).To(BeNil())
		},
		Entry("the notifier", func(d *crash.Deps) { d.Notifier = nil }, "crash reporter needs a crash notifier"),
		Entry("the client", func(d *crash.Deps) { d.Client = nil }, "crash reporter needs a kubernetes client"),
		Entry("the pod cache", func(d *crash.Deps) { d.Pods = nil }, "crash reporter needs the pod cache"),
	)
})
