package routeobjects

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
)

var _ = Describe("A write refused by an object that is not opi's", func() {
	It("is retried after a growing delay, logged at info while it persists, and written once that object is gone", func() {
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		cache := &countingCache{workloads: map[string]*store.WorkloadRecord{}}
		cache.set("lrp-01", `[{"hostname":"app.example.com","port":8080}]`)
		key := names.RouteKey("space-1", "app.example.com")
		// A Service of the name opi gives the route's / Service, made by someone else: no route
		// labels, so the controller's caches never hold it and no event of it comes.
		foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: names.RouteServiceName(key, "/"), Namespace: "cf-apps"}}
		client := fake.NewClientset(foreign)
		logger := lagertest.NewTestLogger("test")
		c, err := New(logger, Config{Namespace: "cf-apps", Routing: hooks.RoutingOptions{Mode: hooks.RoutingIngress}},
			Deps{Client: client, Cache: cache})
		Expect(err).NotTo(HaveOccurred())
		c.objects, err = c.informers(ctx, func(string) {})
		Expect(err).NotTo(HaveOccurred())
		c.enqueue = func(string) {}
		c.index("lrp-01/v1")

		refusals := func() []lager.LogFormat {
			var out []lager.LogFormat
			for _, l := range logger.Logs() {
				if l.Message == "test.route-objects.write-refused-retrying" {
					out = append(out, l)
				}
			}
			return out
		}
		routeKey := routePrefix + key
		after, err := c.process(ctx, routeKey)
		Expect(err).NotTo(HaveOccurred(), "not an error: the key comes back after a delay")
		Expect(after).To(Equal(time.Second))
		Expect(refusals()).To(HaveExactElements(HaveField("LogLevel", lager.DEBUG)), "the first refusal is mostly a cache a moment behind")

		after, err = c.process(ctx, routeKey)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(2 * time.Second))
		Expect(refusals()).To(HaveLen(2))
		Expect(refusals()[1].LogLevel).To(Equal(lager.INFO))
		Expect(refusals()[1].Data).To(HaveKeyWithValue("error", ContainSubstring("create service "+foreign.Name)))
		Expect(refusals()[1].Data).To(HaveKeyWithValue("retry-in", "2s"))
		svc, err := client.CoreV1().Services("cf-apps").Get(ctx, foreign.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(svc.Labels).To(BeEmpty(), "the other's object is left as it is")

		Expect(client.CoreV1().Services("cf-apps").Delete(ctx, foreign.Name, metav1.DeleteOptions{})).To(Succeed())
		after, err = c.process(ctx, routeKey)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(BeZero())
		svc, err = client.CoreV1().Services("cf-apps").Get(ctx, foreign.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(svc.Labels).To(HaveKeyWithValue(names.LabelRouteKey, key), "opi's Service, written once the name was free")
		Expect(c.refused.NumRequeues(routeKey)).To(BeZero(), "the next refusal starts from a second again")
	})
})
