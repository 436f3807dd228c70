package routeobjects

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

// countingCache holds workload records and counts the reads of each LRP's pods: what building
// EndpointSlices costs per carrier.
type countingCache struct {
	mu        sync.Mutex
	workloads map[string]*store.WorkloadRecord
	podReads  atomic.Int64
	// ip is every instance's address ("" for 10.0.0.1).
	ip string
}

func (c *countingCache) Workload(id opi.LRPIdentifier) *store.WorkloadRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workloads[id.GUID+"/"+id.Version]
}

func (c *countingCache) Workloads() []*store.WorkloadRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*store.WorkloadRecord
	for _, w := range c.workloads {
		out = append(out, w)
	}
	return out
}

// Pods gives each LRP one Ready instance (a carrier without one has no slice).
func (c *countingCache) Pods(id opi.LRPIdentifier) []*store.PodRecord {
	c.podReads.Add(1)
	c.mu.Lock()
	ip := c.ip
	c.mu.Unlock()
	if ip == "" {
		ip = "10.0.0.1"
	}
	return []*store.PodRecord{{
		ObjectMeta: metav1.ObjectMeta{Name: id.GUID + "-0"}, LRPRef: store.LRPRef{GUID: id.GUID, Version: id.Version},
		IP: ip, ReadySince: 1,
	}}
}

func (c *countingCache) setIP(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ip = ip
}

func (c *countingCache) set(guid, routes string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.workloads[guid+"/v1"] = &store.WorkloadRecord{
		ObjectMeta: metav1.ObjectMeta{Name: guid}, LRPRef: store.LRPRef{GUID: guid, Version: "v1"},
		SpaceGUID: "space-1", RoutesAnnotation: routes,
	}
}

func (*countingCache) AddWorkloadHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, nil
}
func (*countingCache) RemoveWorkloadHandler(cache.ResourceEventHandlerRegistration) error { return nil }
func (*countingCache) AddPodHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, nil
}
func (*countingCache) RemovePodHandler(cache.ResourceEventHandlerRegistration) error { return nil }

var _ = Describe("What a change costs with many carriers of one route", func() {
	const carriers = 50
	var (
		ctx    context.Context
		c      *Controller
		counts *countingCache
		queued []string
	)
	route := func(port int) string {
		return fmt.Sprintf(`[{"hostname":"shared.example.com","port":%d},{"hostname":"shared.example.com/admin","port":9090}]`, port)
	}
	// drain processes what is queued, following what each step queues, until nothing is left.
	drain := func() {
		for len(queued) > 0 {
			key := queued[0]
			queued = queued[1:]
			_, err := c.process(ctx, key)
			Expect(err).NotTo(HaveOccurred())
		}
	}

	BeforeEach(func() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		DeferCleanup(cancel)
		counts = &countingCache{workloads: map[string]*store.WorkloadRecord{}}
		for i := range carriers {
			counts.set(fmt.Sprintf("lrp-%02d", i), route(8080))
		}
		var err error
		c, err = New(lagertest.NewTestLogger("route-objects"), Config{Namespace: "cf-apps", Routing: hooks.RoutingOptions{Mode: hooks.RoutingIngress}},
			Deps{Client: fake.NewClientset(), Cache: counts})
		Expect(err).NotTo(HaveOccurred())
		c.objects, err = c.informers(ctx, func(string) {})
		Expect(err).NotTo(HaveOccurred())
		queued = nil
		for guid := range counts.workloads {
			queued = append(queued, lrpPrefix+guid)
		}
		// What process queues, the spec runs itself, in order.
		c.enqueue = func(key string) { queued = append(queued, key) }
		drain()
		// The caches hold what the syncs wrote (the route's two Services, each carrier's two
		// slices, the Ingress) before a spec's sync compares with them.
		Eventually(func() []int {
			return []int{len(c.objects.services.GetStore().List()), len(c.objects.slices.GetStore().List()), len(c.objects.routes.GetStore().List())}
		}).Should(Equal([]int{2, 2 * carriers, 1}))
	})

	It("reads one LRP's pods, not every carrier's, when its instances or port change", func() {
		counts.podReads.Store(0)
		queued = []string{lrpPrefix + "lrp-07/v1"}
		drain()
		Expect(counts.podReads.Load()).To(Equal(int64(2)), "one read per path the LRP carries")

		counts.podReads.Store(0)
		counts.set("lrp-07", route(7070))
		queued = []string{lrpPrefix + "lrp-07/v1"}
		drain()
		Expect(counts.podReads.Load()).To(Equal(int64(2)))
	})

	It("indexes the Services by route key and the slices by route key and carrier only (not by namespace); the Ingress not at all", func() {
		indexes := func(inf cache.SharedIndexInformer) []string {
			return slices.Collect(maps.Keys(inf.GetIndexer().GetIndexers()))
		}
		Expect(indexes(c.objects.services)).To(ConsistOf(byRouteKey))
		Expect(indexes(c.objects.slices)).To(ConsistOf(byRouteKey, byCarrier))
		Expect(indexes(c.objects.routes)).To(BeEmpty())
	})

	It("syncs the whole route when a path gains its first or loses its last carrier", func() {
		counts.podReads.Store(0)
		counts.set("lrp-07", `[{"hostname":"shared.example.com/new","port":8080}]`)
		queued = []string{lrpPrefix + "lrp-07/v1"}
		drain()
		Expect(counts.podReads.Load()).To(BeNumerically(">=", carriers), "every carrier's slices rebuilt")
	})
})
