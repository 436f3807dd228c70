package handler_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
)

var _ = Describe("Readiness", func() {
	var (
		checker   *fakes.FakeReadinessChecker
		now       time.Time
		readiness *handler.CachedReadiness
		api, ops  *httptest.Server
		mu        sync.Mutex // guards now: the servers' goroutines read it
	)
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}

	BeforeEach(func() {
		checker = new(fakes.FakeReadinessChecker)
		now = time.Unix(1600000000, 0)
		readiness = &handler.CachedReadiness{Checker: checker, Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		}}
		logger := lagertest.NewTestLogger("readiness")
		api = serve(handler.Config{LRP: new(fakes.FakeLRPBifrost), Readiness: readiness, Logger: logger})
		ops = httptest.NewServer(handler.NewOps(handler.OpsConfig{Readiness: readiness, Logger: logger}))
		DeferCleanup(ops.Close)
	})

	probe := func(url string) int {
		resp, err := http.Get(url + "/readyz")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		return resp.StatusCode
	}

	It("checks the backend at most once a second, however many probes arrive on either port", func() {
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				url := api.URL
				if i%2 == 1 {
					url = ops.URL
				}
				Expect(probe(url)).To(Equal(http.StatusOK))
			}()
		}
		wg.Wait()
		Expect(checker.ReadyCallCount()).To(Equal(1))

		advance(999 * time.Millisecond)
		Expect(probe(ops.URL)).To(Equal(http.StatusOK))
		Expect(checker.ReadyCallCount()).To(Equal(1))

		checker.ReadyReturns(errors.New("api server gone"))
		advance(time.Millisecond)
		Expect(probe(ops.URL)).To(Equal(http.StatusServiceUnavailable))
		Expect(checker.ReadyCallCount()).To(Equal(2))
		Expect(probe(api.URL)).To(Equal(http.StatusServiceUnavailable), "the failure is reused too")
		Expect(checker.ReadyCallCount()).To(Equal(2))
	})

	It("does not let a probe that gave up fail the check the others wait for", func() {
		checker.ReadyStub = func(ctx context.Context) error { return ctx.Err() }
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		Expect(readiness.Ready(ctx)).To(Succeed())
	})
})
