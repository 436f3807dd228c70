package routeobjects

import (
	"context"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
)

var _ = Describe("A sync that runs before the caches show the controller's own writes", func() {
	It("makes none of them again: no create of what it created, no update from the older look; once the events come, the caches are trusted", func() {
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		lrps := &countingCache{workloads: map[string]*store.WorkloadRecord{}}
		lrps.set("lrp-01", `[{"hostname":"app.example.com","port":8080}]`)
		key := names.RouteKey("space-1", "app.example.com")
		client := fake.NewClientset()
		// The informers' watches hold their events while held is set: the caches stay behind.
		var held atomic.Bool
		held.Store(true)
		client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
			w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
			if err != nil {
				return true, nil, err
			}
			out := make(chan watch.Event)
			go func() {
				defer close(out)
				for e := range w.ResultChan() {
					for held.Load() && ctx.Err() == nil {
						time.Sleep(5 * time.Millisecond)
					}
					select {
					case out <- e:
					case <-ctx.Done():
						return
					}
				}
			}()
			return true, watch.NewProxyWatcher(out), nil
		})
		c, err := New(lagertest.NewTestLogger("test"), Config{Namespace: "cf-apps", Routing: hooks.RoutingOptions{Mode: hooks.RoutingIngress}},
			Deps{Client: client, Cache: lrps})
		Expect(err).NotTo(HaveOccurred())
		c.objects, err = c.informers(ctx, func(string) {})
		Expect(err).NotTo(HaveOccurred())
		c.enqueue = func(string) {}
		c.index("lrp-01/v1")
		writes := func() []string {
			var out []string
			for _, a := range client.Actions() {
				if v := a.GetVerb(); v == "create" || v == "update" || v == "delete" {
					out = append(out, v+" "+a.GetResource().Resource)
				}
			}
			return out
		}
		process := func(key string) {
			GinkgoHelper()
			after, err := c.process(ctx, key)
			Expect(err).NotTo(HaveOccurred())
			Expect(after).To(BeZero(), "no write refused")
		}

		routeKey, slicesKey := routePrefix+key, slicesQueueKey(key, "lrp-01/v1")
		process(routeKey)
		Expect(writes()).To(Equal([]string{"create services", "create endpointslices", "create ingresses"}))
		Expect(c.objects.slices.GetStore().List()).To(BeEmpty(), "the caches have not seen the writes")
		process(routeKey)
		process(slicesKey)
		Expect(writes()).To(HaveLen(3), "nothing written again")

		// An instance's new address: the slice is updated from what was written, once.
		lrps.setIP("10.0.0.2")
		process(slicesKey)
		process(slicesKey)
		process(routeKey)
		Expect(writes()).To(Equal([]string{"create services", "create endpointslices", "create ingresses", "update endpointslices"}))

		// The events come: the caches hold what was written, and are the look again.
		held.Store(false)
		Eventually(func() []int {
			return []int{c.objects.servicesWritten.len(), c.objects.slicesWritten.len(), c.objects.routesWritten.len()}
		}).Should(Equal([]int{0, 0, 0}))
		Expect(c.objects.slices.GetStore().List()).To(ConsistOf(HaveField("Endpoints", ConsistOf(HaveField("Addresses", []string{"10.0.0.2"})))))
		Expect(client.NetworkingV1().Ingresses("cf-apps").Delete(ctx, names.RouteObjectName(key), metav1.DeleteOptions{})).To(Succeed())
		Eventually(c.objects.routes.GetStore().List).Should(BeEmpty())
		process(routeKey)
		_, err = client.NetworkingV1().Ingresses("cf-apps").Get(ctx, names.RouteObjectName(key), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "an object deleted behind opi's back is put back")
	})
})

var _ = Describe("The written objects waiting for their events", func() {
	var (
		r   *recent
		now time.Time
	)
	svc := func(rv string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: rv}}
	}
	BeforeEach(func() {
		now = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
		r = newRecent()
		r.now = func() time.Time { return now }
	})

	It("keeps a write until the event of its version, not an older one's", func() {
		r.writing("s")
		_, ok := r.get("s")
		Expect(ok).To(BeFalse(), "nothing to compare with while the write is in flight")
		r.wrote("s", svc("7"))
		got, ok := r.get("s")
		Expect(ok).To(BeTrue())
		Expect(got.GetResourceVersion()).To(Equal("7"))
		r.seen(svc("6"))
		got, ok = r.get("s")
		Expect(ok).To(BeTrue(), "an older version's event")
		Expect(got.GetResourceVersion()).To(Equal("7"))
		r.seen(cache.DeletedFinalStateUnknown{Key: "cf-apps/s", Obj: svc("7")})
		Expect(r.len()).To(BeZero())
	})

	It("keeps nothing when the event came before the answer, or the write failed", func() {
		r.writing("s")
		r.seen(svc("6"))
		r.seen(svc("7"))
		r.wrote("s", svc("7"))
		Expect(r.len()).To(BeZero(), "the cache holds the version already")

		r.writing("s")
		r.wrote("s", nil)
		Expect(r.len()).To(BeZero())
	})

	It("trusts the cache again once a write's event is recentTTL late, and sweeps such writes", func() {
		r.writing("s")
		r.wrote("s", svc("7"))
		now = now.Add(recentTTL - time.Second)
		_, ok := r.get("s")
		Expect(ok).To(BeTrue())
		now = now.Add(time.Second)
		_, ok = r.get("s")
		Expect(ok).To(BeFalse())

		r.writing("a")
		r.wrote("a", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "8"}})
		now = now.Add(recentTTL + time.Second)
		r.writing("b")
		Expect(r.len()).To(Equal(1), "a's write swept, b's in flight")
	})
})
