package handler_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Handler write timeout", func() {
	var (
		bifrost *fakes.FakeLRPBifrost
		server  *httptest.Server
	)

	BeforeEach(func() {
		bifrost = new(fakes.FakeLRPBifrost)
		server = serve(handler.Config{
			LRP: bifrost, Readiness: new(fakes.FakeReadinessChecker), Logger: lagertest.NewTestLogger("handler"),
			WriteTimeout: 100 * time.Millisecond,
		})
	})

	// hang is a backend call stuck on an API server that never answers: it returns only when
	// its context ends, with an error that is not one of opi's sentinels.
	hang := func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("rate: Wait(n=1) would exceed context deadline")
	}

	DescribeTable("answers 503 saying the orchestrator is unavailable once a write's backend calls overrun",
		func(method, path, body string, stub func()) {
			stub()
			start := time.Now()
			status, resp := call(server, method, path, body)
			Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
			Expect(status).To(Equal(http.StatusServiceUnavailable))
			Expect(resp).To(ContainSubstring("orchestrator unavailable"))
		},
		Entry("desire", "PUT", "/apps/"+processGUID, desireBody, func() {
			bifrost.DesireStub = func(ctx context.Context, _ models.DesireLRPRequest) error { return hang(ctx) }
		}),
		Entry("update", "POST", "/apps/"+processGUID, `{"guid":"`+guid+`","version":"`+version+`","update":{"instances":3}}`, func() {
			bifrost.UpdateStub = func(ctx context.Context, _ models.UpdateDesiredLRPRequest) error { return hang(ctx) }
		}),
		Entry("stop", "PUT", "/apps/"+guid+"/"+version+"/stop", "", func() {
			bifrost.StopStub = func(ctx context.Context, _ opi.LRPIdentifier) error { return hang(ctx) }
		}),
		Entry("stop instance", "PUT", "/apps/"+guid+"/"+version+"/stop/0", "", func() {
			bifrost.StopInstanceStub = func(ctx context.Context, _ opi.LRPIdentifier, _ int32) error { return hang(ctx) }
		}),
	)

	It("gives a write's backend calls a deadline", func() {
		status, _ := call(server, "PUT", "/apps/"+guid+"/"+version+"/stop", "")
		Expect(status).To(Equal(http.StatusOK))
		ctx, _ := bifrost.StopArgsForCall(0)
		deadline, ok := ctx.Deadline()
		Expect(ok).To(BeTrue())
		Expect(time.Until(deadline)).To(BeNumerically("<=", 100*time.Millisecond))
	})

	It("leaves reads without that deadline", func() {
		status, _ := call(server, "GET", "/apps", "")
		Expect(status).To(Equal(http.StatusOK))
		ctx := bifrost.ListArgsForCall(0)
		_, ok := ctx.Deadline()
		Expect(ok).To(BeFalse())
	})

	It("bounds the readiness check, so that a hung API server makes /readyz answer 503", func() {
		readiness := new(fakes.FakeReadinessChecker)
		readiness.ReadyStub = func(ctx context.Context) error {
			deadline, ok := ctx.Deadline()
			Expect(ok).To(BeTrue())
			Expect(time.Until(deadline)).To(BeNumerically("<=", 5*time.Second))
			return opi.ErrUnavailable
		}
		ready := httptest.NewServer(handler.New(handler.Config{LRP: bifrost, Readiness: readiness, Logger: lagertest.NewTestLogger("handler")}))
		defer ready.Close()
		resp, err := http.Get(ready.URL + "/readyz")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
		Expect(readiness.ReadyCallCount()).To(Equal(1))
	})
})
