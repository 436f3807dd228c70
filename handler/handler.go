// Package handler is opi's HTTP face: the routes Cloud Controller calls, the decoding of its
// bodies, and the status codes and error bodies of the OPI contract.
package handler

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/julienschmidt/httprouter"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate

// DefaultMaxBodyBytes is the request body limit when none is configured: 2 MiB, the largest
// valid request. Its largest part is the environment, which opi stores in one Secret and so
// bounds to bifrost.MaxEnvBytes (1 MiB of names and values); in JSON its values are escaped,
// and VCAP_SERVICES (JSON in a string) doubles each of its quotes: about 1.5 MiB at most in
// practice. The other lists are bounded by count (bifrost.MaxRoutes and so on): 1,000 routes of
// about 250 bytes (a 253-character hostname at most) ≈ 0.25 MiB, 1,000 egress rules of about 200
// bytes ≈ 0.2 MiB, and the rest (image, command, annotations, volume mounts, metadata) well
// under 64 KiB. 1.5 + 0.25 + 0.2 + 0.06 ≈ 2 MiB. A body beyond it gets 413; max_body_bytes
// raises it (and with it what DefaultMaxInFlight's arithmetic assumed).
const DefaultMaxBodyBytes = 2 << 20

// DefaultWriteTimeout bounds a write's backend calls when none is configured: below CC's own
// 60 s receive timeout, so CC gets a 503 rather than a broken connection, and above what a busy
// API server takes to allocate a Service IP (seen: over 20 s at thousands of Services). It is
// the one definition of this default: opi's config refers to it.
const DefaultWriteTimeout = 50 * time.Second

// readyTimeout bounds a readiness check, so that a hung API server makes /readyz answer 503
// rather than hang.
const readyTimeout = 5 * time.Second

// LRPBifrost is what the handler needs of the LRP bifrost.
//
//counterfeiter:generate -o ../fakes/lrp_bifrost.go . LRPBifrost
type LRPBifrost interface {
	Desire(ctx context.Context, req models.DesireLRPRequest) error
	List(ctx context.Context) ([]models.DesiredLRPSchedulingInfo, error)
	Get(ctx context.Context, id opi.LRPIdentifier) (*models.DesiredLRP, error)
	Update(ctx context.Context, req models.UpdateDesiredLRPRequest) error
	Stop(ctx context.Context, id opi.LRPIdentifier) error
	StopInstance(ctx context.Context, id opi.LRPIdentifier, index int32) error
	Instances(ctx context.Context, id opi.LRPIdentifier) ([]models.Instance, error)
}

// ReadinessChecker tells whether opi can serve: its backend is reachable and its caches synced.
//
//counterfeiter:generate -o ../fakes/readiness_checker.go . ReadinessChecker
type ReadinessChecker interface {
	Ready(ctx context.Context) error
}

// RequestObserver records each answered request (route pattern, status, duration).
//
//counterfeiter:generate -o ../fakes/request_observer.go . RequestObserver
type RequestObserver interface {
	ObserveHTTP(route string, code int, took time.Duration)
}

// Config is what New needs.
type Config struct {
	LRP LRPBifrost
	// Task, when set, serves the task routes (/tasks).
	Task TaskBifrost
	// Readiness answers /readyz, at most once every ReadinessPeriod (pass one *CachedReadiness
	// to New and NewOps to share that bound).
	Readiness ReadinessChecker
	Logger    lager.Logger
	// MaxBodyBytes bounds request bodies; DefaultMaxBodyBytes when 0.
	MaxBodyBytes int64
	// Observer, when set, sees every request to an API route.
	Observer RequestObserver
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// WriteTimeout bounds the backend calls of each write (desire, update, stop, stop
	// instance); past it the write answers 503. DefaultWriteTimeout when 0.
	WriteTimeout time.Duration
	// Staging, when set, serves POST /stage/{staging_guid}.
	Staging StagingBifrost
	// MaxInFlight bounds the requests with a body (desire, update, stage, task) handled at once,
	// counted in maximal requests (see inFlight); beyond it 503 with Retry-After.
	// DefaultMaxInFlight when 0. Reads, stops and cancels carry no body and are not counted.
	MaxInFlight int
}

// Route is one registered route: its method and its httprouter path pattern (":name" for a
// path parameter).
type Route struct {
	Method string
	Path   string
}

// Router is an httprouter that records every route it is given, however it is given (Handle,
// Handler, GET, ...), so that a test can hold the API description (openapi.yaml) against what
// is really served.
type Router struct {
	*httprouter.Router
	routes []Route
}

// Routes lists the routes the router serves, in registration order.
func (r *Router) Routes() []Route { return append([]Route(nil), r.routes...) }

// Handle registers and records a route.
func (r *Router) Handle(method, path string, h httprouter.Handle) {
	r.Router.Handle(method, path, h)
	r.routes = append(r.routes, Route{Method: method, Path: path})
}

// Handler registers and records a route served by an http.Handler.
func (r *Router) Handler(method, path string, h http.Handler) {
	r.Router.Handler(method, path, h) // the embedded Handle: recorded once, here
	r.routes = append(r.routes, Route{Method: method, Path: path})
}

// HandlerFunc registers and records a route served by an http.HandlerFunc.
func (r *Router) HandlerFunc(method, path string, h http.HandlerFunc) { r.Handler(method, path, h) }

// GET registers and records a GET route.
func (r *Router) GET(path string, h httprouter.Handle) { r.Handle(http.MethodGet, path, h) }

// POST registers and records a POST route.
func (r *Router) POST(path string, h httprouter.Handle) { r.Handle(http.MethodPost, path, h) }

// PUT registers and records a PUT route.
func (r *Router) PUT(path string, h httprouter.Handle) { r.Handle(http.MethodPut, path, h) }

// DELETE registers and records a DELETE route.
func (r *Router) DELETE(path string, h httprouter.Handle) { r.Handle(http.MethodDelete, path, h) }

// newRouter is a recording httprouter with the contract's 404/405/panic answers.
func newRouter(logger lager.Logger) *Router {
	r := &Router{Router: httprouter.New()}
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusNotFound, "no route for "+req.Method+" "+req.URL.Path)
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method "+req.Method+" is not allowed on "+req.URL.Path)
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		logger.Error("panic", nil, lager.Data{"method": req.Method, "path": req.URL.Path, "panic": v})
		writeError(w, http.StatusInternalServerError, "internal error")
	}
	return r
}

// MaxPprofSeconds bounds pprof's ?seconds= (the CPU profile, the trace, and the delta of a named
// profile): the ops server's write timeout is set to cover it, so that no request holds a
// connection longer than that.
const MaxPprofSeconds = 30

// servePprof serves Go's profiles: the index, every named profile (heap, goroutine, allocs, ...),
// and the CPU profile, trace, symbol and cmdline endpoints. A ?seconds= beyond MaxPprofSeconds
// is refused with 400.
func servePprof(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if s := r.URL.Query().Get("seconds"); s != "" {
		if n, err := strconv.ParseFloat(s, 64); err != nil || n < 0 || n > MaxPprofSeconds {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("seconds must be a number from 0 to %d, got %q", MaxPprofSeconds, s))
			return
		}
	}
	switch ps.ByName("name") {
	case "/profile":
		pprof.Profile(w, r)
	case "/trace":
		pprof.Trace(w, r)
	case "/symbol":
		pprof.Symbol(w, r)
	case "/cmdline":
		pprof.Cmdline(w, r)
	default:
		pprof.Index(w, r) // it reads the profile's name from the path
	}
}

// New returns the router with every route of the contract, plus health, metrics and the API
// description.
func New(cfg Config) *Router {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	lrp := &lrpHandler{bifrost: cfg.LRP, logger: cfg.Logger, maxBody: cfg.MaxBodyBytes, writeTimeout: cfg.WriteTimeout}
	lrp.versioned, _ = cfg.LRP.(VersionedLRPLister)
	health := &healthHandler{readiness: cachedReadiness(cfg.Readiness), logger: cfg.Logger}

	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	bodies := newInFlight(cfg.MaxInFlight, cfg.MaxBodyBytes)

	r := newRouter(cfg.Logger)
	route := func(method, path string, handle httprouter.Handle) {
		r.Handle(method, path, observe(cfg.Observer, method+" "+path, handle))
	}
	// httprouter needs one name for a path segment across routes: ":guid" is the process guid
	// on desire and update, and the CC process guid elsewhere.
	route(http.MethodPut, "/apps/:guid", bodies.limit(writeError, lrp.desire))
	route(http.MethodGet, "/apps", lrp.list)
	route(http.MethodGet, "/apps/:guid/:version", lrp.get)
	route(http.MethodPost, "/apps/:guid", bodies.limit(writeError, lrp.update))
	route(http.MethodPut, "/apps/:guid/:version/stop", lrp.stop)
	route(http.MethodPut, "/apps/:guid/:version/stop/:index", lrp.stopInstance)
	route(http.MethodGet, "/apps/:guid/:version/instances", lrp.instances)
	if cfg.Staging != nil {
		stage := &stageHandler{bifrost: cfg.Staging, logger: cfg.Logger, maxBody: cfg.MaxBodyBytes, writeTimeout: cfg.WriteTimeout}
		route(http.MethodPost, "/stage/:staging_guid", bodies.limit(writeMessageError, stage.stage))
	}
	if cfg.Task != nil {
		task := &taskHandler{bifrost: cfg.Task, logger: cfg.Logger, maxBody: cfg.MaxBodyBytes, writeTimeout: cfg.WriteTimeout}
		task.versioned, _ = cfg.Task.(VersionedTaskLister)
		route(http.MethodPost, "/tasks/:task_guid", bodies.limit(writeMessageError, task.desire))
		route(http.MethodGet, "/tasks/:task_guid", task.get)
		route(http.MethodGet, "/tasks", task.list)
		route(http.MethodDelete, "/tasks/:task_guid", task.cancel)
	}
	if cfg.Metrics != nil {
		r.Handler(http.MethodGet, "/metrics", cfg.Metrics)
	}

	r.GET("/healthz", health.live)
	r.GET("/readyz", health.ready)
	r.GET("/openapi.json", serveOpenAPI)
	return r
}

// OpsConfig is what NewOps needs.
type OpsConfig struct {
	// Readiness answers /readyz, at most once every ReadinessPeriod.
	Readiness ReadinessChecker
	Logger    lager.Logger
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// Pprof serves Go's profiles under /debug/pprof/.
	Pprof bool
}

// NewOps returns the operations router: health, readiness, metrics, the API description and,
// when asked, pprof. It is served on its own plaintext listener, so that kubelet probes and
// Prometheus reach it without the client certificate the API demands.
func NewOps(cfg OpsConfig) *Router {
	r := newRouter(cfg.Logger)
	health := &healthHandler{readiness: cachedReadiness(cfg.Readiness), logger: cfg.Logger}
	r.GET("/healthz", health.live)
	r.GET("/readyz", health.ready)
	r.GET("/openapi.json", serveOpenAPI)
	if cfg.Metrics != nil {
		r.Handler(http.MethodGet, "/metrics", cfg.Metrics)
	}
	if cfg.Pprof {
		r.GET("/debug/pprof/*name", servePprof)
	}
	return r
}

// observe reports each answer of handle to observer under the route's pattern (never the raw
// path: guids would make the metric's cardinality unbounded).
func observe(observer RequestObserver, route string, handle httprouter.Handle) httprouter.Handle {
	if observer == nil {
		return handle
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		handle(rec, r, ps)
		observer.ObserveHTTP(route, rec.code, time.Since(start))
	}
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

type healthHandler struct {
	readiness ReadinessChecker
	logger    lager.Logger
}

func (h *healthHandler) live(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *healthHandler) ready(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := h.readiness.Ready(ctx); err != nil {
		// The reason goes to the log only: /readyz is open to anyone who reaches the ops
		// listener, and an error's text can name internal hosts and objects.
		h.logger.Info("not-ready", lager.Data{"reason": err.Error()})
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// errorBody is the contract's error body for LRP routes.
func errorBody(message string) models.ErrorResponse {
	return models.ErrorResponse{Error: models.Error{Message: message}}
}
