package store_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Writes while a cache's watch is being re-established", func() {
	var (
		s        *store.Store
		factory  informers.SharedInformerFactory
		watches  *apiclient.Watches
		elapsed  atomic.Int64 // past the start of the spec, on watches' clock
		open     map[string]*http.Response
		probeErr error
		probes   chan struct{}
	)
	const ns = "cf-workloads"

	send := func(t apiTransport, method, path string) (*http.Response, error) {
		return watches.Wrap(t).RoundTrip(httptest.NewRequest(method, path, nil))
	}
	watch := func(resource string) {
		resp, err := send(apiTransport{}, "GET", "/api/v1/namespaces/"+ns+"/"+resource+"?watch=true")
		Expect(err).NotTo(HaveOccurred())
		open[resource] = resp
	}
	// cut ends the watch of resource after it was open for minutes (the API server closed it,
	// or the connection under it was cut) and lets a minute pass: the reflector is backing off.
	cut := func(resource string) {
		elapsed.Add(int64(5 * time.Minute))
		Expect(open[resource].Body.Close()).To(Succeed())
		elapsed.Add(int64(time.Minute))
	}
	answered := func() {
		_, err := send(apiTransport{}, "POST", "/apis/apps/v1/namespaces/"+ns+"/deployments")
		Expect(err).NotTo(HaveOccurred())
	}
	refused := func() {
		_, err := send(apiTransport{err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, "POST", "/apis/apps/v1/namespaces/"+ns+"/deployments")
		Expect(err).To(HaveOccurred())
	}
	nothingLately := func() { elapsed.Add(int64(time.Minute)) }

	BeforeEach(func() {
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
		probeErr = nil
		probes = make(chan struct{}, 100)
		factory = informers.NewSharedInformerFactoryWithOptions(fake.NewClientset(), 0, informers.WithNamespace(ns))
		s = store.New(store.Config{
			Options:   store.Options{ReadWaitTimeout: 10 * time.Millisecond},
			Namespace: ns,
			Workloads: factory.Apps().V1().Deployments().Informer(),
			Pods:      factory.Core().V1().Pods().Informer(),
			Jobs:      factory.Batch().V1().Jobs().Informer(),
			Resources: [3]string{"deployments", "pods", "jobs"},
			KindName:  "deployment",
			Watches:   watches,
			Probe: func(context.Context) error {
				probes <- struct{}{}
				return probeErr
			},
			Logger: lagertest.NewTestLogger("store"),
		})
		s.SetSynced()
		Expect(s.CheckWritable(context.Background())).To(Succeed())
		Expect(s.CheckWatching()).To(Succeed())
	})

	DescribeTable("CheckWritable decides by whether the API server answers, not by the watch",
		func(contact func(), probe error, writable bool, probed bool) {
			cut("pods")
			contact()
			probeErr = probe
			err := s.CheckWritable(context.Background())
			if writable {
				Expect(err).NotTo(HaveOccurred())
			} else {
				Expect(err).To(MatchError(opi.ErrUnavailable))
				Expect(err).To(MatchError(ContainSubstring("not watching the api server (pods) and it does not answer")))
			}
			Expect(probes).To(HaveLen(map[bool]int{true: 1, false: 0}[probed]))
			// The janitor takes the caches for the cluster's state: not while one is not watching.
			Expect(s.CheckWatching()).To(MatchError(ContainSubstring("not watching the api server yet (pods)")))
		},
		Entry("writable: the API server answered a request lately", answered, nil, true, false),
		Entry("writable: nothing heard lately, and the API server answers the probe", nothingLately, nil, true, true),
		Entry("503: a connection to the API server was refused lately", refused, nil, false, false),
		Entry("503: nothing heard lately, and the probe fails", nothingLately, errors.New("connection refused"), false, true),
		Entry("503: refused after it answered", func() { answered(); refused() }, nil, false, false),
		Entry("writable: answered after a refusal", func() { refused(); answered() }, nil, true, false),
	)

	It("is writable once the watch is back, whatever the API server's contact", func() {
		cut("pods")
		refused()
		Expect(s.CheckWritable(context.Background())).To(MatchError(opi.ErrUnavailable))
		watch("pods")
		Expect(s.CheckWritable(context.Background())).To(Succeed())
		Expect(s.CheckWatching()).To(Succeed())
	})

	Describe("a write's wait for the cache", func() {
		deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "dora", Namespace: ns, ResourceVersion: "7"}}
		cached := func() bool {
			_, ok := s.WorkloadByName("dora")
			return ok
		}

		It("goes on past the read wait timeout while the API server answers, until the cache sees the write", func() {
			cut("deployments")
			nothingLately() // each recheck asks the probe: the wait is past its read wait timeout
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			seen := make(chan store.WaitEnd, 1)
			go func() { seen <- s.WaitFor(ctx, cached, nil) }()

			Eventually(probes).Should(Receive())
			// The watch is back: the informer's cache gets the write.
			record, err := store.RecordWorkload(deployment)
			Expect(err).NotTo(HaveOccurred())
			Expect(factory.Apps().V1().Deployments().Informer().GetIndexer().Add(record)).To(Succeed())
			Eventually(seen).Should(Receive(Equal(store.Seen)))
			Expect(ctx.Err()).NotTo(HaveOccurred())
		})

		It("stops at the read wait timeout when the API server does not answer", func() {
			cut("deployments")
			refused()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			Expect(s.WaitFor(ctx, cached, nil)).To(Equal(store.TimedOut))
			Expect(ctx.Err()).NotTo(HaveOccurred(), "answered before the request's deadline")
		})

		It("stops at the read wait timeout for a call without a deadline", func() {
			cut("deployments")
			answered()
			Expect(s.WaitFor(context.Background(), cached, nil)).To(Equal(store.TimedOut))
			Expect(probes).To(BeEmpty())
		})

		It("stops at the request's deadline", func() {
			cut("deployments")
			answered()
			ctx, cancel := context.WithCancel(context.Background())
			ctx, cancelDeadline := context.WithDeadline(ctx, time.Now().Add(time.Hour))
			defer cancelDeadline()
			done := make(chan store.WaitEnd, 1)
			go func() { done <- s.WaitFor(ctx, cached, nil) }()
			Consistently(done).ShouldNot(Receive())
			cancel()
			Eventually(done).Should(Receive(Equal(store.TimedOut)))
		})

		// live is a LiveCheck that counts its calls and answers isLive.
		live := func(calls *atomic.Int32, isLive bool) store.LiveCheck {
			return func(context.Context) (bool, error) {
				calls.Add(1)
				return isLive, nil
			}
		}

		add := func() {
			record, err := store.RecordWorkload(deployment)
			Expect(err).NotTo(HaveOccurred())
			Expect(factory.Apps().V1().Deployments().Informer().GetIndexer().Add(record)).To(Succeed())
		}
		failing := func(calls *atomic.Int32) store.LiveCheck {
			return func(context.Context) (bool, error) {
				calls.Add(1)
				return false, errors.New("the server was unable to return a response in the time allotted")
			}
		}
		// beforeDeadline says that the wait ended long before ctx's deadline of a minute: it did
		// not run out.
		beforeDeadline := func(ctx context.Context) {
			GinkgoHelper()
			deadline, _ := ctx.Deadline()
			Expect(time.Until(deadline)).To(BeNumerically(">", 30*time.Second), "answered long before the request's deadline")
		}

		DescribeTable("goes on past the read wait while every watch is open but behind (the API server's events come late), until the cache sees the write",
			func(check func(*atomic.Int32) store.LiveCheck) {
				answered()
				var calls atomic.Int32
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				c := check(&calls)
				seen := make(chan store.WaitEnd, 1)
				go func() { seen <- s.WaitFor(ctx, cached, c) }()

				if c != nil {
					Eventually(calls.Load, 10*time.Second).Should(BeEquivalentTo(2), "asked after the first recheck, then after two more")
					Consistently(calls.Load, 2*time.Second).Should(BeEquivalentTo(2), "then not before four more")
				} else {
					Consistently(seen, 3500*time.Millisecond).ShouldNot(Receive())
				}
				Expect(seen).NotTo(Receive(), "a recheck with every watch open ends no wait")
				add()
				Eventually(seen).Should(Receive(Equal(store.Seen)))
				beforeDeadline(ctx)
			},
			Entry("a write whose object the API server says is live", func(calls *atomic.Int32) store.LiveCheck { return live(calls, true) }),
			Entry("a write whose live check fails: an error tells nothing", failing),
			Entry("a wait for a deletion, which has no live check: its event must come", func(*atomic.Int32) store.LiveCheck { return nil }),
		)

		It("ends as overtaken at the first recheck whose GET says the written object is no longer live", func() {
			answered()
			var calls atomic.Int32
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			Expect(s.WaitFor(ctx, cached, live(&calls, false))).To(Equal(store.Overtaken))
			Expect(calls.Load()).To(BeEquivalentTo(1))
			beforeDeadline(ctx)
		})

		It("sees the cache catch up while a live check's GET hangs", func() {
			answered()
			asked := make(chan struct{}, 10)
			hanging := func(ctx context.Context) (bool, error) {
				asked <- struct{}{}
				<-ctx.Done()
				return false, ctx.Err()
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			seen := make(chan store.WaitEnd, 1)
			go func() { seen <- s.WaitFor(ctx, cached, hanging) }()
			Eventually(asked, 5*time.Second).Should(Receive())
			add()
			Eventually(seen, 5*time.Second).Should(Receive(Equal(store.Seen)))
			beforeDeadline(ctx)
		})

		DescribeTable("with a watch being re-established, asks whether the write is live once, when the wait has run out",
			func(isLive bool, end store.WaitEnd) {
				cut("deployments")
				answered()
				var calls atomic.Int32
				ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
				defer cancel()
				Expect(s.WaitFor(ctx, cached, live(&calls, isLive))).To(Equal(end))
				Expect(calls.Load()).To(BeEquivalentTo(1))
				Expect(ctx.Err()).NotTo(HaveOccurred(), "answered before the request's deadline")
			},
			Entry("still live: timed out (the call answers 503)", true, store.TimedOut),
			Entry("deleted or replaced meanwhile: overtaken (success)", false, store.Overtaken),
		)
	})
})
