// Package metrics holds opi's Prometheus metrics: the API server requests opi makes (so that
// tests and the benchmark can prove reads cost none), the requests opi serves, and the routes it
// keeps registered with gorouter over NATS.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/opi-bridge/opi/k8s/apiclient"
)

// Metrics is opi's registry and the collectors in it.
type Metrics struct {
	Registry      *prometheus.Registry
	kubeRequests  *prometheus.CounterVec
	kubeRefusals  *prometheus.CounterVec
	httpRequests  *prometheus.CounterVec
	httpDurations *prometheus.HistogramVec

	routeRegistrations prometheus.Gauge
	natsMessages       *prometheus.CounterVec
	natsConnected      prometheus.Gauge
	natsErrors         *prometheus.CounterVec
	routeDelay         prometheus.Histogram
}

// New registers opi's metrics and the Go and process collectors in a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		kubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opi_kube_api_requests_total",
			Help: "Requests opi made to the Kubernetes API server, by verb and resource.",
		}, []string{"verb", "resource"}),
		kubeRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opi_kube_api_refusals_total",
			Help: "Requests of opi's the Kubernetes API server answered with an error status (code: 409 for a write refused as conflicting or existing), or that got no answer (code \"none\"), by verb and resource.",
		}, []string{"verb", "resource", "code"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opi_http_requests_total",
			Help: "Requests opi answered, by route and status code.",
		}, []string{"route", "code"}),
		httpDurations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "opi_http_request_duration_seconds",
			Help:    "Time opi took to answer, by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		routeRegistrations: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opi_gorouter_registrations",
			Help: "Registrations (an instance's endpoint and a route's URIs) opi keeps registered with gorouter over NATS; 0 while it is not the leader.",
		}),
		natsMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opi_nats_messages_sent_total",
			Help: "Messages opi handed to NATS, by subject.",
		}, []string{"subject"}),
		natsConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "opi_nats_connected",
			Help: "1 while opi's emitter is connected to NATS, else 0.",
		}),
		natsErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opi_nats_errors_total",
			Help: "NATS disconnects (kind disconnect), failed attempts to connect (connect), messages NATS did not take (publish) and errors it reported (async).",
		}, []string{"kind"}),
		routeDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "opi_gorouter_registration_delay_seconds",
			Help:    "Time from an instance becoming ready to its first registration handed to NATS.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
	}
	m.Registry.MustRegister(m.kubeRequests, m.kubeRefusals, m.httpRequests, m.httpDurations,
		m.routeRegistrations, m.natsMessages, m.natsConnected, m.natsErrors, m.routeDelay,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// WrapKubeTransport counts every request a Kubernetes client makes through rt, and apart those
// answered with a status of 400 or more or not answered. It has the shape of
// rest.Config.WrapTransport.
func (m *Metrics) WrapKubeTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		verb, resource := apiclient.VerbResource(req)
		m.kubeRequests.WithLabelValues(verb, resource).Inc()
		resp, err := rt.RoundTrip(req)
		switch {
		case err != nil:
			m.kubeRefusals.WithLabelValues(verb, resource, "none").Inc()
		case resp.StatusCode >= 400:
			m.kubeRefusals.WithLabelValues(verb, resource, strconv.Itoa(resp.StatusCode)).Inc()
		}
		return resp, err
	})
}

// ObserveHTTP records one answered request.
func (m *Metrics) ObserveHTTP(route string, code int, took time.Duration) {
	m.httpRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.httpDurations.WithLabelValues(route).Observe(took.Seconds())
}

// SetRouteRegistrations is the number of registrations kept with gorouter.
func (m *Metrics) SetRouteRegistrations(n int) { m.routeRegistrations.Set(float64(n)) }

// CountNATSMessage counts one message handed to NATS.
func (m *Metrics) CountNATSMessage(subject string) { m.natsMessages.WithLabelValues(subject).Inc() }

// SetNATSConnected is the NATS connection's state.
func (m *Metrics) SetNATSConnected(connected bool) {
	if connected {
		m.natsConnected.Set(1)
	} else {
		m.natsConnected.Set(0)
	}
}

// CountNATSError counts one NATS disconnect or error, by kind.
func (m *Metrics) CountNATSError(kind string) { m.natsErrors.WithLabelValues(kind).Inc() }

// ObserveRouteRegistrationDelay records the time from an instance's readiness to its first
// registration.
func (m *Metrics) ObserveRouteRegistrationDelay(d time.Duration) { m.routeDelay.Observe(d.Seconds()) }

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
