package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/metrics"
)

var _ = Describe("Metrics", func() {
	It("counts requests through the wrapped transport, and apart those refused or not answered, and serves them", func() {
		m := metrics.New()
		calls := 0
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if calls++; calls == 2 {
				w.WriteHeader(http.StatusConflict)
			}
		}))
		client := &http.Client{Transport: m.WrapKubeTransport(http.DefaultTransport)}
		for range 3 {
			resp, err := client.Post(upstream.URL+"/api/v1/namespaces/cf/secrets", "application/json", nil)
			Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
		}
		upstream.Close()
		_, err := client.Get(upstream.URL + "/api/v1/namespaces/cf/secrets/s")
		Expect(err).To(HaveOccurred())
		m.ObserveHTTP("GET /apps", 200, 3*time.Millisecond)

		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		Expect(string(body)).To(ContainSubstring(`opi_kube_api_requests_total{resource="secrets",verb="create"} 3`))
		Expect(string(body)).To(ContainSubstring(`opi_kube_api_refusals_total{code="409",resource="secrets",verb="create"} 1`))
		Expect(string(body)).To(ContainSubstring(`opi_kube_api_refusals_total{code="none",resource="secrets",verb="get"} 1`))
		Expect(string(body)).To(ContainSubstring(`opi_http_requests_total{code="200",route="GET /apps"} 1`))
	})

	It("serves the gorouter emitter's metrics", func() {
		m := metrics.New()
		m.SetRouteRegistrations(3)
		m.CountNATSMessage("router.register")
		m.CountNATSMessage("router.register")
		m.SetNATSConnected(true)
		m.CountNATSError("disconnect")
		m.ObserveRouteRegistrationDelay(1500 * time.Millisecond)

		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		Expect(body).To(ContainSubstring("opi_gorouter_registrations 3\n"))
		Expect(body).To(ContainSubstring(`opi_nats_messages_sent_total{subject="router.register"} 2`))
		Expect(body).To(ContainSubstring("opi_nats_connected 1\n"))
		Expect(body).To(ContainSubstring(`opi_nats_errors_total{kind="disconnect"} 1`))
		Expect(body).To(ContainSubstring(`opi_gorouter_registration_delay_seconds_bucket{le="2.5"} 1`))
		Expect(body).To(ContainSubstring(`opi_gorouter_registration_delay_seconds_bucket{le="1"} 0`))
		Expect(body).To(ContainSubstring("opi_gorouter_registration_delay_seconds_sum 1.5\n"))

		m.SetNATSConnected(false)
		rec = httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		Expect(rec.Body.String()).To(ContainSubstring("opi_nats_connected 0\n"))
	})
})
