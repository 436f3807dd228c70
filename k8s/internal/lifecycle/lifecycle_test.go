package lifecycle_test

import (
	"context"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/lifecycle"
	"github.com/opi-bridge/opi/k8s/internal/lifecycle/lifecyclefakes"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Lifecycle lines", func() {
	var (
		fakeCache *lifecyclefakes.FakeCache
		emitter   *lifecyclefakes.FakeEmitter
		reporter  *lifecycle.Reporter
		workload  *store.WorkloadRecord
		pods      []*store.PodRecord
		mu        sync.Mutex
		clock     time.Time
		begun     = time.Date(2026, 12, 1, 12, 0, 0, 500_000_000, time.UTC)
	)
	id := opi.LRPIdentifier{GUID: "b7a3c2d0-6a3c-4bcd-9e55-3d2f1c0a9b8e", Version: "v1"}
	lrpKey := id.GUID + "/" + id.Version
	pod := func(name string, created time.Time) *store.PodRecord {
		return &store.PodRecord{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
			LRPRef:     store.LRPRef{GUID: id.GUID, Version: id.Version}, Ordinal: -1,
		}
	}
	setPods := func(p ...*store.PodRecord) {
		mu.Lock()
		defer mu.Unlock()
		pods = p
	}
	sent := func() []*loggregator_v2.Envelope {
		var out []*loggregator_v2.Envelope
		for i := range emitter.EmitCallCount() {
			env, _ := emitter.EmitArgsForCall(i)
			out = append(out, env)
		}
		return out
	}
	line := func(index, uid, text string) *loggregator_v2.Envelope {
		return &loggregator_v2.Envelope{
			Timestamp: clock.UnixNano(), SourceId: "app-guid", InstanceId: index,
			Tags: map[string]string{
				"source_type": "CELL", "app_id": "app-guid", "app_name": "dora",
				"space_id": "space-guid", "space_name": "dev", "organization_id": "org-guid", "organization_name": "acme",
				"process_id": id.GUID, "process_type": "web", "process_instance_id": uid,
			},
			Message: &loggregator_v2.Envelope_Log{Log: &loggregator_v2.Log{Payload: []byte(text), Type: loggregator_v2.Log_OUT}},
		}
	}
	expectSent := func(want ...*loggregator_v2.Envelope) {
		GinkgoHelper()
		got := sent()
		Expect(got).To(HaveLen(len(want)), "%v", got)
		for i := range want {
			Expect(proto.Equal(got[i], want[i])).To(BeTrue(), "envelope %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	// syncLRP syncs the LRP, returning what that sync sent.
	syncLRP := func() []*loggregator_v2.Envelope {
		before := emitter.EmitCallCount()
		reporter.Sync(lrpKey)
		return sent()[before:]
	}

	BeforeEach(func() {
		clock = begun
		workload = &store.WorkloadRecord{
			ObjectMeta: metav1.ObjectMeta{Name: "dora-1234567890"},
			LRPRef:     store.LRPRef{GUID: id.GUID, Version: id.Version},
			AppGUID:    "app-guid", AppName: "dora", SpaceGUID: "space-guid", SpaceName: "dev",
			OrgGUID: "org-guid", OrgName: "acme", ProcessType: "web", ReplicaCount: 2,
		}
		pods = nil
		fakeCache = &lifecyclefakes.FakeCache{}
		fakeCache.WorkloadStub = func(got opi.LRPIdentifier) *store.WorkloadRecord {
			mu.Lock()
			defer mu.Unlock()
			if got != id {
				return nil
			}
			return workload
		}
		fakeCache.PodsStub = func(got opi.LRPIdentifier) []*store.PodRecord {
			mu.Lock()
			defer mu.Unlock()
			if got != id {
				return nil
			}
			return append([]*store.PodRecord(nil), pods...)
		}
		emitter = &lifecyclefakes.FakeEmitter{}
		emitter.EmitReturns(true)
		var err error
		reporter, err = lifecycle.New(lagertest.NewTestLogger("lifecycle"), lifecycle.Deps{
			Cache: fakeCache, Emitter: emitter, Now: func() time.Time { return clock },
		})
		Expect(err).NotTo(HaveOccurred())
		reporter.Begin()
	})

	It("refuses to be made without a cache or an emitter", func() {
		_, err := lifecycle.New(lagertest.NewTestLogger("lifecycle"), lifecycle.Deps{Cache: fakeCache})
		Expect(err).To(MatchError("lifecycle lines need a cache and an emitter"))
		_, err = lifecycle.New(lagertest.NewTestLogger("lifecycle"), lifecycle.Deps{Emitter: emitter})
		Expect(err).To(HaveOccurred())
	})

	It("sends each step of an instance's life once, as a cell's lines", func() {
		created := begun.Add(time.Second)
		p := pod("p0", created)
		p.Steps = store.PodSteps{Unschedulable: "Insufficient resources: memory", UnschedulableAt: created.Unix()}
		setPods(p)
		Expect(syncLRP()).To(HaveLen(2))
		Expect(syncLRP()).To(BeEmpty(), "nothing new, nothing sent")

		p = pod("p0", created)
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: created.Unix() + 30}
		setPods(p)
		Expect(syncLRP()).To(HaveLen(1))

		p = pod("p0", created)
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: created.Unix() + 30, StartedAt: created.Unix() + 32}
		setPods(p)
		Expect(syncLRP()).To(HaveLen(1))
		p = pod("p0", created)
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: created.Unix() + 30, StartedAt: created.Unix() + 32}
		p.ReadySince = created.Add(33 * time.Second).UnixNano()
		setPods(p)
		Expect(syncLRP()).To(HaveLen(1))

		// The container is killed, then restarted: one exit line per crash, none for the restart.
		p = pod("p0", created)
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: created.Unix() + 30}
		p.Crash = &store.PodCrash{Count: 1, ExitCode: 137, Reason: "OOMKilled", FinishedAt: created.Unix() + 60}
		setPods(p)
		Expect(syncLRP()).To(HaveLen(1))
		p = pod("p0", created)
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: created.Unix() + 30, StartedAt: created.Unix() + 70}
		p.Crash = &store.PodCrash{Count: 1, ExitCode: 137, Reason: "OOMKilled", FinishedAt: created.Unix() + 60}
		p.ReadySince = created.Add(71 * time.Second).UnixNano()
		setPods(p)
		Expect(syncLRP()).To(BeEmpty())
		p = pod("p0", created)
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: created.Unix() + 30}
		p.Crash = &store.PodCrash{Count: 2, ExitCode: 1, Reason: "Error", FinishedAt: created.Unix() + 90}
		setPods(p)
		Expect(syncLRP()).To(HaveLen(1))

		// Stopped: the pod is being deleted, then gone.
		deleting := metav1.NewTime(created.Add(100 * time.Second))
		p = pod("p0", created)
		p.Node = "node-1"
		p.DeletionTimestamp = &deleting
		setPods(p)
		Expect(syncLRP()).To(HaveLen(1))
		setPods()
		Expect(syncLRP()).To(HaveLen(2))
		Expect(syncLRP()).To(BeEmpty())

		expectSent(
			line("0", "uid-p0", "Creating instance uid-p0"),
			line("0", "uid-p0", "No cell can place instance uid-p0: Insufficient resources: memory"),
			line("0", "uid-p0", "Cell node-1 creating container for instance uid-p0"),
			line("0", "uid-p0", "Cell node-1 successfully created container for instance uid-p0"),
			line("0", "uid-p0", "Container became healthy"),
			line("0", "uid-p0", "Exit status 137 (OOMKilled)"),
			line("0", "uid-p0", "Exit status 1 (Error)"),
			line("0", "uid-p0", "Cell node-1 stopping instance uid-p0"),
			line("0", "uid-p0", "Cell node-1 destroying container for instance uid-p0"),
			line("0", "uid-p0", "Cell node-1 successfully destroyed container for instance uid-p0"),
		)
	})

	It("tags each instance with the index CC shows, ranked once per LRP, and keeps it while the pod stops", func() {
		a := pod("a", begun.Add(time.Second))
		b := pod("b", begun.Add(2*time.Second))
		setPods(b, a)
		syncLRP()
		Expect(fakeCache.PodsCallCount()).To(Equal(1))
		Expect(fakeCache.WorkloadCallCount()).To(Equal(1))
		deleting := metav1.NewTime(begun.Add(10 * time.Second))
		a = pod("a", begun.Add(time.Second))
		a.DeletionTimestamp = &deleting
		setPods(b, a)
		syncLRP()
		expectSent(
			line("1", "uid-b", "Creating instance uid-b"),
			line("0", "uid-a", "Creating instance uid-a"),
			line("0", "uid-a", "Stopping instance uid-a"),
		)
	})

	It("does not send again, in a new term, what the pods show as done before it began", func() {
		before := begun.Add(-time.Minute)
		p := pod("p0", before)
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: before.Unix(), StartedAt: before.Unix() + 2}
		p.ReadySince = before.Add(3 * time.Second).UnixNano()
		p.Crash = &store.PodCrash{Count: 3, ExitCode: 1, Reason: "Error", FinishedAt: before.Unix() + 10}
		unplaced := pod("p1", before)
		unplaced.Steps = store.PodSteps{Unschedulable: "found no compatible cell: 0/4 nodes are available", UnschedulableAt: before.Unix()}
		setPods(p, unplaced)
		Expect(syncLRP()).To(BeEmpty())

		// What happens after the term began is sent, once.
		clock = begun.Add(5 * time.Second)
		p = pod("p0", before)
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: before.Unix()}
		p.Crash = &store.PodCrash{Count: 4, ExitCode: 2, Reason: "Error", FinishedAt: begun.Unix() + 4}
		setPods(p, unplaced)
		Expect(syncLRP()).To(HaveLen(1))
		Expect(syncLRP()).To(BeEmpty())
		expectSent(line("0", "uid-p0", "Exit status 2 (Error)"))
	})

	It("sends a crash the pod shows as ended in the term's first second, but not the ones before it", func() {
		p := pod("p0", begun.Add(-time.Hour))
		p.Node = "node-1"
		p.Steps = store.PodSteps{ScheduledAt: begun.Unix() - 3600}
		p.Crash = &store.PodCrash{Count: 5, ExitCode: 137, Reason: "OOMKilled", FinishedAt: begun.Unix()}
		setPods(p)
		syncLRP()
		expectSent(line("0", "uid-p0", "Exit status 137 (OOMKilled)"))
	})

	It("sends nothing for pods whose workload the cache does not hold", func() {
		workload = nil
		setPods(pod("p0", begun.Add(time.Second)))
		Expect(syncLRP()).To(BeEmpty())
	})

	It("follows the store's pod events while it leads, and stops following when it ends", func() {
		var handler cache.ResourceEventHandler
		added := make(chan struct{})
		fakeCache.AddPodHandlerStub = func(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
			handler = h
			close(added)
			return nil, nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			reporter.Run(ctx)
		}()
		Eventually(added).Should(BeClosed())
		p := pod("p0", begun.Add(time.Second))
		setPods(p)
		handler.OnAdd(p, false)
		Eventually(emitter.EmitCallCount).Should(Equal(1))
		cancel()
		Eventually(done).Should(BeClosed())
		Expect(fakeCache.RemovePodHandlerCallCount()).To(Equal(1))
		Expect(fakeCache.RemoveWorkloadHandlerCallCount()).To(Equal(1))
		expectSent(line("0", "uid-p0", "Creating instance uid-p0"))
	})
})
