package routes_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	"github.com/nats-io/nats.go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s/internal/routes"
	"github.com/opi-bridge/opi/k8s/internal/routes/routesfakes"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/natsserver"
)

var _ = Describe("Route registration", func() {
	var (
		fakeCache *routesfakes.FakeCache
		table     *routesfakes.FakeTable
		records   *routesfakes.FakeRecords
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
		records = &routesfakes.FakeRecords{}
		var err error
		registrar, err = routes.New(lagertest.NewTestLogger("routes"), routes.Deps{Cache: fakeCache, Table: table, Records: records,
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

	It("admits the routers on the union of the LRPs' route ports before registering, again only when it changes", func() {
		var mu sync.Mutex
		var admitted [][]int32
		setsAtAdmit := []int{}
		admit := func(_ context.Context, ports []int32) error {
			mu.Lock()
			defer mu.Unlock()
			admitted = append(admitted, ports)
			setsAtAdmit = append(setsAtAdmit, table.SetCallCount())
			return nil
		}
		calls := func() [][]int32 {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(admitted)
		}
		var err error
		registrar, err = routes.New(lagertest.NewTestLogger("routes"), routes.Deps{Cache: fakeCache, Table: table, Records: records, RouterPorts: admit})
		Expect(err).NotTo(HaveOccurred())
		podHandler, workloadHandler := run()
		Expect(calls()).To(Equal([][]int32{{8080, 9090}}), "at the term's start, before the table is sent")

		By("a pod's change leaves the ports: nothing written")
		setPods(pod("p0", "10.0.0.1", true), pod("p1", "10.0.0.2", true))
		podHandler.OnUpdate(nil, pods[1])
		Eventually(sets).Should(HaveKey("uid-p1/8080"))
		Expect(calls()).To(HaveLen(1))

		By("9090 dropped, 7070 added: admitted before the new port is registered")
		updated := *workload
		updated.RoutesAnnotation = `[{"hostname":"dora.example.com","port":8080},{"hostname":"new.example.com","port":7070}]`
		setWorkload(&updated)
		before := table.SetCallCount()
		workloadHandler.OnUpdate(nil, &updated)
		Eventually(calls).Should(Equal([][]int32{{8080, 9090}, {7070, 8080}}))
		mu.Lock()
		Expect(setsAtAdmit[1]).To(Equal(before), "no register of the sync before the ports")
		mu.Unlock()

		By("the LRP stopped: no port left")
		setWorkload(nil)
		workloadHandler.OnDelete(&updated)
		Eventually(calls).Should(Equal([][]int32{{8080, 9090}, {7070, 8080}, {}}))
	})

	It("registers nothing of an LRP without routes", func() {
		workload.RoutesAnnotation = ""
		run()
		Expect(table.ReplaceArgsForCall(0)).To(BeEmpty())
	})

	It("refuses to be made without a cache or a table", func() {
		_, err := routes.New(lagertest.NewTestLogger("routes"), routes.Deps{Cache: fakeCache, Records: records})
		Expect(err).To(MatchError(ContainSubstring("needs a cache, a table and records")))
		_, err = routes.New(lagertest.NewTestLogger("routes"), routes.Deps{Cache: fakeCache, Table: table})
		Expect(err).To(MatchError(ContainSubstring("needs a cache, a table and records")))
	})

	Describe("the records of what was registered", func() {
		lrpKey := id.GUID + "/" + id.Version
		// bare is what a record keeps of a registration: one endpoint, its URIs, no tags.
		bare := func(r gorouter.Registration) gorouter.Registration {
			r.Tags = nil
			return r
		}
		saved := func() map[string][]gorouter.Registration {
			out := map[string][]gorouter.Registration{}
			for i := range records.SaveCallCount() {
				_, key, regs, _ := records.SaveArgsForCall(i)
				out[key] = regs
			}
			return out
		}
		p0 := registration("10.0.0.1", "0", "uid-p0", 8080, "dora.example.com", "dora.example.com/api")
		p0Admin := registration("10.0.0.1", "0", "uid-p0", 9090, "admin.example.com")

		It("records the table before it is registered, and unregisters every recorded endpoint it does not have before the first send", func() {
			gonePod := bare(registration("10.0.0.7", "1", "uid-gone", 8080, "dora.example.com"))
			goneLRP := bare(registration("10.0.0.8", "0", "uid-stopped", 8080, "stopped.example.com"))
			droppedURI := bare(registration("10.0.0.1", "0", "uid-p0", 8080, "old.example.com"))
			records.LoadReturns(map[string][]gorouter.Registration{
				lrpKey:            {bare(p0), gonePod, droppedURI},
				"stopped-guid/v1": {goneLRP},
			}, nil)
			type counts struct{ saves, unregisters, replaces int }
			atRunCh := make(chan counts, 1)
			table.RunStub = func(ctx context.Context) error {
				atRunCh <- counts{records.SaveCallCount(), table.UnregisterCallCount(), table.ReplaceCallCount()}
				<-ctx.Done()
				return nil
			}
			run()
			var atRun counts
			Eventually(atRunCh).Should(Receive(&atRun))

			Expect(atRun.replaces).To(Equal(1))
			Expect(atRun.saves).To(Equal(1), "the one record missing a registration of the table, saved before any send")
			_, _, _, exists := records.SaveArgsForCall(0)
			Expect(exists).To(BeTrue(), "the record was loaded")
			Expect(saved()[lrpKey]).To(ConsistOf(
				bare(registration("10.0.0.1", "0", "uid-p0", 8080, "dora.example.com", "dora.example.com/api", "old.example.com")),
				bare(p0Admin), gonePod), "write-ahead: what is recorded stays until unregistered")
			Expect(atRun.unregisters).To(Equal(3))
			var unregistered []gorouter.Registration
			for i := range table.UnregisterCallCount() {
				unregistered = append(unregistered, table.UnregisterArgsForCall(i))
			}
			Expect(unregistered).To(ConsistOf(gonePod, goneLRP, droppedURI))
		})

		It("leaves an LRP whose record cannot be saved out of the table, and registers it once its sync saved it", func() {
			records.SaveReturnsOnCall(0, errors.New("etcd is gone"))
			run()
			Expect(table.ReplaceArgsForCall(0)).To(BeEmpty())
			Eventually(sets).Should(HaveKeyWithValue("uid-p0/8080", p0))
			Expect(records.SaveCallCount()).To(Equal(2))
			Expect(saved()[lrpKey]).To(ConsistOf(bare(p0), bare(p0Admin)))
		})

		It("saves a new endpoint before it registers it, one write per sync", func() {
			podHandler, _ := run()
			Expect(records.SaveCallCount()).To(Equal(1))
			var savedMu sync.Mutex
			savedBeforeSet := map[string]int{}
			table.SetStub = func(key string, _ gorouter.Registration, _ time.Time) {
				savedMu.Lock()
				defer savedMu.Unlock()
				savedBeforeSet[key] = records.SaveCallCount()
			}
			p1 := registration("10.0.0.2", "1", "uid-p1", 8080, "dora.example.com", "dora.example.com/api")
			setPods(pod("p0", "10.0.0.1", true), pod("p1", "10.0.0.2", true))
			podHandler.OnUpdate(nil, pods[1])
			Eventually(sets).Should(HaveKeyWithValue("uid-p1/8080", p1))
			Expect(records.SaveCallCount()).To(Equal(2))
			savedMu.Lock()
			Expect(savedBeforeSet["uid-p1/8080"]).To(Equal(2), "saved before the register")
			savedMu.Unlock()
			_, _, _, existed := records.SaveArgsForCall(0)
			_, _, _, exists := records.SaveArgsForCall(1)
			Expect([]bool{existed, exists}).To(Equal([]bool{false, true}), "a new LRP's record is created, then replaced")
			Expect(saved()[lrpKey]).To(ConsistOf(bare(p0), bare(p0Admin), bare(p1),
				bare(registration("10.0.0.2", "1", "uid-p1", 9090, "admin.example.com"))))
		})

		It("keeps an unregistered endpoint in the record until every unregister went out, then prunes it, and deletes the record of a stopped LRP", func() {
			podHandler, workloadHandler := run()
			Expect(records.SaveCallCount()).To(Equal(1))

			By("NATS down: the record keeps what may still be registered")
			table.FlushedReturns(false)
			setPods(pod("p0", "10.0.0.1", false))
			podHandler.OnUpdate(nil, pods[0])
			Eventually(deletes).Should(ConsistOf("uid-p0/8080", "uid-p0/9090"))
			Consistently(records.SaveCallCount).Should(Equal(1))

			By("the unregisters out: the next look prunes it")
			table.FlushedReturns(true)
			setPods(pod("p0", "10.0.0.1", true))
			podHandler.OnUpdate(nil, pods[0])
			Eventually(sets).Should(HaveKey("uid-p0/8080"))
			Expect(records.SaveCallCount()).To(Equal(1), "the endpoint is registered again: the record has it")

			By("a stopped LRP, unregisters out: its record deleted")
			stopped := workload
			setWorkload(nil)
			workloadHandler.OnDelete(stopped)
			Eventually(records.SaveCallCount).Should(Equal(2))
			_, key, regs, exists := records.SaveArgsForCall(1)
			Expect(key).To(Equal(lrpKey))
			Expect(regs).To(BeEmpty())
			Expect(exists).To(BeTrue())
		})

		It("prunes the record of an LRP gone before the term once its unregisters went out", func() {
			goneLRP := bare(registration("10.0.0.8", "0", "uid-stopped", 8080, "stopped.example.com"))
			records.LoadReturns(map[string][]gorouter.Registration{"stopped-guid/v1": {goneLRP}}, nil)
			table.FlushedReturns(true)
			run()
			Eventually(saved).Should(HaveKeyWithValue("stopped-guid/v1", BeEmpty()))
		})

		It("tries loading the records again until it can, and sends nothing before", func() {
			records.LoadReturnsOnCall(0, nil, errors.New("the API server is restarting"))
			run()
			Expect(records.LoadCallCount()).To(Equal(2))
		})

		It("with gorouter's emitter and a NATS server, begins the first send with the unregisters of what earlier terms registered", func() {
			srv, err := natsserver.Start(natsserver.Options{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(srv.Shutdown)
			nc, err := nats.Connect(srv.URL())
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(nc.Close)
			var seen []string
			var seenMu sync.Mutex
			_, err = nc.Subscribe("router.*", func(m *nats.Msg) {
				seenMu.Lock()
				defer seenMu.Unlock()
				seen = append(seen, m.Subject+" "+string(m.Data))
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(nc.Flush()).To(Succeed())
			messages := func() []string {
				seenMu.Lock()
				defer seenMu.Unlock()
				return slices.Clone(seen)
			}

			emitter, err := gorouter.NewEmitter(gorouter.Config{URLs: []string{srv.URL()}, DefaultRegisterInterval: time.Hour},
				lagertest.NewTestLogger("gorouter"), nil)
			Expect(err).NotTo(HaveOccurred())
			gonePod := bare(registration("10.0.0.7", "1", "uid-gone", 8080, "dora.example.com"))
			records.LoadReturns(map[string][]gorouter.Registration{lrpKey: {bare(p0), gonePod}}, nil)
			registrar, err := routes.New(lagertest.NewTestLogger("routes"), routes.Deps{Cache: fakeCache, Table: emitter, Records: records,
				Zone: func(string) string { return "z1" }})
			Expect(err).NotTo(HaveOccurred())
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

			Eventually(messages).Should(HaveLen(4))
			Expect(messages()[:2]).To(Equal([]string{
				gorouter.SubjectGreet + " ",
				gorouter.SubjectUnregister + " " + string(gonePod.Encode()),
			}))
			Expect(messages()[2:]).To(ConsistOf(
				gorouter.SubjectRegister+" "+string(p0.Encode()),
				gorouter.SubjectRegister+" "+string(p0Admin.Encode()),
			))
		})
	})
})
