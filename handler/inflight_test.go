package handler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/models"
)

var _ = Describe("Requests in flight", func() {
	const maxBody = 4096
	var (
		lrps    *fakes.FakeLRPBifrost
		tasks   *fakes.FakeTaskBifrost
		server  *httptest.Server
		arrived chan struct{}
		release chan struct{}
	)

	BeforeEach(func() {
		lrps, tasks = new(fakes.FakeLRPBifrost), new(fakes.FakeTaskBifrost)
		arrived, release = make(chan struct{}, 10), make(chan struct{})
		lrps.DesireStub = func(context.Context, models.DesireLRPRequest) error {
			arrived <- struct{}{}
			<-release
			return nil
		}
		server = serve(handler.Config{
			LRP: lrps, Task: tasks, Readiness: new(fakes.FakeReadinessChecker), Logger: lagertest.NewTestLogger("h"),
			MaxBodyBytes: maxBody, MaxInFlight: 2,
		})
		DeferCleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
	})

	// maximal is desireBody padded with JSON whitespace to the body limit.
	maximal := desireBody + strings.Repeat(" ", maxBody-len(desireBody))
	// hold sends a desire that waits in the backend until release.
	hold := func(body string) chan int {
		status := make(chan int, 1)
		go func() {
			defer GinkgoRecover()
			resp, _ := send(server, "PUT", "/apps/"+processGUID, body)
			status <- resp.StatusCode
		}()
		Eventually(arrived).Should(Receive())
		return status
	}

	It("answers 503 with Retry-After and the route's error body beyond max_in_flight maximal requests, and serves again after", func() {
		first, second := hold(maximal), hold(maximal)

		resp, body := send(server, "PUT", "/apps/"+processGUID, desireBody)
		Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
		Expect(resp.Header.Get("Retry-After")).To(Equal("1"))
		Expect(body).To(MatchJSON(`{"error":{"message":"too many requests in flight: at most 2 of 4096 bytes (max_in_flight), retry later"}}`))
		resp, body = send(server, "POST", "/tasks/"+taskGUID, taskBody)
		Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
		Expect(resp.Header.Get("Retry-After")).To(Equal("1"))
		Expect(body).To(MatchJSON(`{"message":"too many requests in flight: at most 2 of 4096 bytes (max_in_flight), retry later"}`))
		Expect(tasks.DesireCallCount()).To(BeZero(), "nothing reached the backend")

		// Reads carry no body and do not count.
		resp, _ = send(server, "GET", "/apps", "")
		Expect(resp.StatusCode).To(Equal(http.StatusOK))

		close(release)
		Expect(<-first).To(Equal(http.StatusAccepted))
		Expect(<-second).To(Equal(http.StatusAccepted))
		resp, _ = send(server, "PUT", "/apps/"+processGUID, desireBody)
		Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	})

	It("counts small requests by their size, so that many fit beside a maximal one", func() {
		held := []chan int{hold(maximal)}
		small := maxBody / len(desireBody) // what fits in the other maximal request's room
		Expect(small).To(BeNumerically(">", 2), "more small requests than max_in_flight")
		for range small {
			held = append(held, hold(desireBody))
		}
		resp, _ := send(server, "PUT", "/apps/"+processGUID, maximal)
		Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable), "no room for another maximal one")
		close(release)
		for _, status := range held {
			Expect(<-status).To(Equal(http.StatusAccepted))
		}
	})
})
