package store_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Caches that are not watching the API server", func() {
	var (
		ctx     context.Context
		backend *k8s.Backend
		watches *apiclient.Watches
		elapsed atomic.Int64 // nanoseconds past the start of the spec, as watches' clock reads
		open    map[string]*http.Response
		lrp     *opi.LRP
		task    *opi.Task
	)

	// watch opens a WATCH of resource as the informer's reflector does.
	watch := func(resource string) {
		transport := watches.Wrap(apiTransport{})
		req := httptest.NewRequest("GET", "/api/v1/namespaces/"+backendtest.Namespace+"/"+resource+"?watch=true", nil)
		resp, err := transport.RoundTrip(req)
		Expect(err).NotTo(HaveOccurred())
		open[resource] = resp
	}

	BeforeEach(func() {
		ctx = context.Background()
		start := time.Now()
		elapsed.Store(0)
		watches = apiclient.NewWatches()
		watches.SetClock(func() time.Time { return start.Add(time.Duration(elapsed.Load())) })
		open = map[string]*http.Response{}
		for _, r := range []string{"deployments", "pods", "jobs"} {
			watch(r)
		}
		DeferCleanup(func() {
			for _, resp := range open {
				resp.Body.Close()
			}
		})
		client := backendtest.NewClient()
		backend = backendtest.StartBackendWith(client, k8s.Options{Clients: k8s.Clients{Watches: watches}})
		lrp = backendtest.SampleLRP()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		task = backendtest.SampleTask()
		Expect(backend.DesireTask(ctx, task)).To(Succeed())
		Expect(backend.Ready(ctx)).To(Succeed())
	})

	// lose ends the watch of resource after it was open for minutes (the API server went away,
	// or the watch reached its timeout) and lets after pass.
	lose := func(resource string, after time.Duration) {
		elapsed.Add(int64(5 * time.Minute))
		Expect(open[resource].Body.Close()).To(Succeed())
		elapsed.Add(int64(after))
	}

	// answered and refused pass a request through watches' transport as the API server answers
	// it, or as a connection to it is refused (it is down).
	contact := func(err error) {
		transport := watches.Wrap(apiTransport{err})
		resp, rtErr := transport.RoundTrip(httptest.NewRequest("POST", "/apis/apps/v1/namespaces/"+backendtest.Namespace+"/deployments", nil))
		if err != nil {
			Expect(rtErr).To(HaveOccurred())
			return
		}
		Expect(rtErr).NotTo(HaveOccurred())
		Expect(resp.Body.Close()).To(Succeed())
	}
	answered := func() { contact(nil) }
	refused := func() { contact(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}) }

	It("refuses every write while one of them is not watching and the API server is unreachable, and serves reads", func() {
		lose("pods", time.Minute)
		refused()
		unreachable := And(MatchError(opi.ErrUnavailable), MatchError(ContainSubstring("not watching the api server (pods) and it does not answer")))

		fresh := backendtest.SampleLRP()
		fresh.GUID = "00000001-0d35-4ad7-a6d3-2c0ef0d3bb2a"
		Expect(backend.DesireLRP(ctx, fresh)).To(unreachable)
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(5))})).To(unreachable)
		Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, 0)).To(unreachable)
		Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(unreachable)
		other := backendtest.SampleTask()
		other.GUID = "other-task"
		Expect(backend.DesireTask(ctx, other)).To(unreachable)
		Expect(backend.CancelTask(ctx, task.GUID)).To(unreachable)

		// Nothing was written: the reads show what was there.
		got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Instances).To(BeEquivalentTo(lrp.Instances))
		list, err := backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(list).To(HaveLen(1))
		_, err = backend.GetLRP(ctx, fresh.LRPIdentifier)
		Expect(err).To(MatchError(opi.ErrNotFound))
		tasks, err := backend.ListTasks(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(tasks).To(HaveLen(1))

		watch("pods") // reconnected
		Expect(backend.DesireLRP(ctx, fresh)).To(Succeed())
		list, err = backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(list).To(HaveLen(2))
	})

	It("writes, and is ready, while a watch is being re-established and the API server answers", func() {
		lose("pods", time.Minute)
		answered()
		Expect(backend.Ready(ctx)).To(Succeed())
		fresh := backendtest.SampleLRP()
		fresh.GUID = "00000001-0d35-4ad7-a6d3-2c0ef0d3bb2a"
		Expect(backend.DesireLRP(ctx, fresh)).To(Succeed())
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(5))})).To(Succeed())
		list, err := backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(list).To(HaveLen(2))
	})

	It("names every cache that is not watching", func() {
		lose("deployments", 0)
		lose("jobs", time.Minute)
		refused()
		Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(MatchError(ContainSubstring("(deployments, jobs)")))
	})

	It("lets a watch end and the next one start within the grace (a watch's timeout)", func() {
		lose("deployments", time.Second)
		refused()
		Expect(backend.Ready(ctx)).To(Succeed())
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(5))})).To(Succeed())
	})

	It("counts a watch that lasted under a second as not watching at once: the reflector backs off", func() {
		elapsed.Add(int64(500 * time.Millisecond))
		Expect(open["pods"].Body.Close()).To(Succeed())
		refused()
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(5))})).To(MatchError(ContainSubstring("not watching the api server (pods)")))
		got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Instances).To(BeEquivalentTo(lrp.Instances))
	})

	It("sweeps nothing meanwhile: what a stale cache lacks would look like leftovers", func() {
		client := backendtest.NewClient()
		md := backendtest.NewMetadataClient(client)
		backend = backendtest.StartBackendWith(client, k8s.Options{Janitor: janitor.Options{Grace: time.Nanosecond}, Clients: k8s.Clients{Watches: watches, Metadata: md}})
		lose("deployments", time.Minute)
		from := len(client.Actions())
		backend.Sweep(ctx)
		Expect(backendtest.ActionsSince(client, from)).To(BeEmpty())
		Expect(backendtest.MetadataActions(md)).To(BeEmpty())
		watch("deployments")
		backend.Sweep(ctx)
		Expect(backendtest.MetadataActions(md)).To(ContainElement("list secrets"))
	})
})
