// Package metrics holds opi's Prometheus metrics: the API server requests opi makes (so that
// tests and the benchmark can prove reads cost none) and the requests opi serves.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/opi-bridge/opi/k8s/kube"
)

// Metrics is opi's registry and the collectors in it.
type Metrics struct {
	Registry      *prometheus.Registry
	kubeRequests  *prometheus.CounterVec
	httpRequests  *prometheus.CounterVec
	httpDurations *prometheus.HistogramVec
}

// New registers opi's metrics and the Go and process collectors in a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		kubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opi_kube_api_requests_total",
			Help: "Requests opi made to the Kubernetes API server, by verb and resource.",
		}, []string{"verb", "resource"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "opi_http_requests_total",
			Help: "Requests opi answered, by route and status code.",
		}, []string{"route", "code"}),
		httpDurations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "opi_http_request_duration_seconds",
			Help:    "Time opi took to answer, by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
	}
	m.Registry.MustRegister(m.kubeRequests, m.httpRequests, m.httpDurations,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// WrapKubeTransport counts every request a Kubernetes client makes through rt. It has the
// shape of rest.Config.WrapTransport.
func (m *Metrics) WrapKubeTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		verb, resource := kube.VerbResource(req)
		m.kubeRequests.WithLabelValues(verb, resource).Inc()
		return rt.RoundTrip(req)
	})
}

// ObserveHTTP records one answered request.
func (m *Metrics) ObserveHTTP(route string, code int, took time.Duration) {
	m.httpRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.httpDurations.WithLabelValues(route).Observe(took.Seconds())
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
