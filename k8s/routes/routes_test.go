package routes_test

import (
	"context"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s/routes"
	"github.com/opi-bridge/opi/k8s/routes/routesfakes"
	"github.com/opi-bridge/opi/k8s/store"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Route registration", func() {
	var (
		fakeCache *routesfakes.FakeCache
		table     *routesfakes.FakeTable
		registrar *routes.Registrar
		workload  *store.WorkloadRecord
		pods      []*store.PodRecord
		mu        sync.Mutex
		readyAt   = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	)
	id := opi.LRPIdentifier{GUID: "b7a3c2d0-6a3c-4bcd-9e55-3d2f1c0a9b8e", Version: "v1"}
	pod := func(name, ip string, ready bool) *store.PodRecord {
		p := &store.PodRecord{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
			LRPRef: store.LRPRef{GUID: id.GUID, Version: id.Version}, IP: ip, Node: "node-1", Ordinal: -1}
		if ready {
			p.ReadySince = readyAt.UnixNano()
		}
		return p
	}
	setPods := func(p ...*store.PodRecord) {
		mu.Lock()
		defer mu.Unlock()
		pods = p
	}
	setWorkload := func(w *store.WorkloadRecord) {
		mu.Lock()
		defer mu.Unlock()
		workload = w
	}

	BeforeEach(func() {
		workload = &store.WorkloadRecord{
			ObjectMeta: metav1.ObjectMeta{Name: "dora-1234567890"},
			LRPRef:     store.LRPRef{GUID: id.GUID, Version: id.Version},
			AppGUID:    "app-guid", AppName: "dora", SpaceGUID: "space-guid", SpaceName: "dev",
			OrgGUID: "org-guid", OrgName: "org", ProcessType: "web", ReplicaCount: 2,
			RoutesAnnotation: `[{"hostname":"dora.example.com","port":8080},{"hostname":"dora.example.com/api","port":8080},{"hostname":"admin.example.com","port":9090}]`,
		}
		pods = []*store.PodRecord{pod("p0", "10.0.0.1", true), pod("p1", "10.0.0.2", false)}
		fakeCache = &routesfakes.FakeCache{}
		fakeCache.WorkloadStub = func(got opi.LRPIdentifier) *store.WorkloadRecord {
			mu.Lock()
			defer mu.Unlock()
			if got != id {
				return nil
			}
			return workload
		}
		fakeCache.WorkloadsStub = func() []*store.WorkloadRecord {
			mu.Lock()
			defer mu.Unlock()
			if workload == nil {
				return nil
			}
			return []*store.WorkloadRecord{workload}
		}
		fakeCache.PodsStub = func(opi.LRPIdentifier) []*store.PodRecord {
			mu.Lock()
			defer mu.Unlock()
			return pods
		}
		fakeCache.InstanceIndexerStub = func(_ []*store.PodRecord, _ *store.WorkloadRecord) func(*store.PodRecord) int32 {
			return func(p *store.PodRecord) int32 {
				if p.Name == "p1" {
					return 1
				}
				return 0
			}
		}
		table = &routesfakes.FakeTable{}
		table.RunStub = func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}
		var err error
		registrar, err = routes.New(lagertest.NewTestLogger("routes"), routes.Deps{Cache: fakeCache, Table: table,
			Zone: func(node string) string { return map[string]string{"node-1": "z1"}[node] }})
		Expect(err).NotTo(HaveOccurred())
	})

	registration := func(host, index, uid string, port uint16, uris ...string) gorouter.Registration {
		return gorouter.Registration{
			Host: host, Port: port, URIs: uris, App: "app-guid",
			PrivateInstanceID: uid, PrivateInstanceIndex: index, AvailabilityZone: "z1",
			Tags: map[string]string{
				"app_id": "app-guid", "app_name": "dora", "space_id": "space-guid", "space_name": "dev",
				"organization_id": "org-guid", "organization_name": "org", "process_id": id.GUID,
				"process_type": "web", "process_instance_id": uid, "instance_id": index,
				"source_id": "app-guid", "component": "opi",
			},
		}
	}
	// run starts the registrar and returns the pod and workload handlers it registered.
	run := func() (podHandler, workloadHandler cache.ResourceEventHandler) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			registrar.Run(ctx)
		}()
		DeferCleanup(func() {
			cancel()
			Eventually(done).Should(BeClosed())
		})
		Eventually(fakeCache.AddPodHandlerCallCount).Should(Equal(1))
		Eventually(table.RunCallCount).Should(Equal(1))
		return fakeCache.AddPodHandlerArgsForCall(0), fakeCache.AddWorkloadHandlerArgsForCall(0)
	}
	sets := func() map[string]gorouter.Registration {
		out := map[string]gorouter.Registration{}
		for i := range table.SetCallCount() {
			key, reg, _ := table.SetArgsForCall(i)
			out[key] = reg
		}
		return out
	}
	deletes := func() []string {
		var out []string
		for i := range table.DeleteCallCount() {
			out = append(out, table.DeleteArgsForCall(i))
		}
		return out
	}

	It("fills the table, at once, with one registration per Ready instance and route port", func() {
		run()
		Expect(table.ReplaceCallCount()).To(Equal(1))
		Expect(table.ReplaceArgsForCall(0)).To(Equal(map[string]gorouter.Registration{
			"uid-p0/8080": registration("10.0.0.1", "0", "uid-p0", 8080, "dora.example.com", "dora.example.com/api"),
			"uid-p0/9090": registration("10.0.0.1", "0", "uid-p0", 9090, "admin.example.com"),
		}), "p1 is not Ready: not registered")
	})

	It("registers an instance that becomes Ready and unregisters one that stops being Ready", func() {
		podHandler, _ := run()
		setPods(pod("p0", "10.0.0.1", false), pod("p1", "10.0.0.2", true))
		podHandler.OnUpdate(nil, pods[1])

		Eventually(sets).Should(HaveKeyWithValue("uid-p1/8080", registration("10.0.0.2", "1", "uid-p1", 8080, "dora.example.com", "dora.example.com/api")))
		Eventually(deletes).Should(ConsistOf("uid-p0/8080", "uid-p0/9090"))
		_, _, since := table.SetArgsForCall(0)
		Expect(since).To(BeTemporally("==", readyAt))
	})

	It("leaves out pods without an IP, being deleted, or terminal", func() {
		podHandler, _ := run()
		deleting := pod("p1", "10.0.0.2", true)
		deleting.DeletionTimestamp = &metav1.Time{Time: readyAt}
		noIP := pod("p2", "", true)
		failed := pod("p3", "10.0.0.4", true)
		failed.Terminal = true
		setPods(pod("p0", "10.0.0.1", true), deleting, noIP, failed)
		podHandler.OnUpdate(nil, deleting)
		Eventually(table.SetCallCount).Should(Equal(2))
		Expect(sets()).To(HaveLen(2))
		Expect(sets()).To(HaveKey("uid-p0/8080"))
		Expect(sets()).To(HaveKey("uid-p0/9090"))
	})

	It("unregisters a port whose routes an update removed, and everything of a stopped LRP", func() {
		_, workloadHandler := run()
		updated := *workload
		updated.RoutesAnnotation = `[{"hostname":"dora.example.com","port":8080}]`
		setWorkload(&updated)
		workloadHandler.OnUpdate(nil, &updated)
		Eventually(deletes).Should(ConsistOf("uid-p0/9090"))
		Expect(sets()).To(HaveKeyWithValue("uid-p0/8080", registration("10.0.0.1", "0", "uid-p0", 8080, "dora.example.com")))

		setWorkload(nil)
		workloadHandler.OnDelete(cache.DeletedFinalStateUnknown{Key: "apps/dora-1234567890", Obj: &updated})
		Eventually(deletes).Should(ConsistOf("uid-p0/9090", "uid-p0/8080"))
	})

	It("registers nothing of an LRP without routes", func() {
		workload.RoutesAnnotation = ""
		run()
		Expect(table.ReplaceArgsForCall(0)).To(BeEmpty())
	})

	It("refuses to be made without a cache or a table", func() {
		_, err := routes.New(lagertest.NewTestLogger("routes"), routes.Deps{Cache: fakeCache})
		Expect(err).To(MatchError(ContainSubstring("needs a cache and a table")))
	})
})
