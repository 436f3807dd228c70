// Package metrics holds opi's Prometheus metrics: the API server requests opi makes (so that
// tests and the benchmark can prove reads cost none) and the requests opi serves.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
		verb, resource := KubeVerbResource(req)
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

// KubeVerbResource names a Kubernetes API request the way the API server's audit log does:
// get/list/watch/create/update/patch/delete/deletecollection, and the resource (with its
// subresource as "pods/status"). Non-resource paths (/readyz, /version) are their own resource.
func KubeVerbResource(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:] // /api/v1/...
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:] // /apis/group/version/...
	default:
		return strings.ToLower(req.Method), "/" + strings.Join(parts, "/")
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) > 2 {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return strings.ToLower(req.Method), "discovery"
	}
	resource = rest[0]
	named := len(rest) >= 2
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}
