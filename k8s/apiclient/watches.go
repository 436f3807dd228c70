package apiclient

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Watches follows, at the transport, the LISTs and WATCHes a Kubernetes client makes, so
// that opi can tell whether its informers are watching the API server.
//
// client-go's informers say nothing when their watch breaks: the reflector retries on its
// own, with a backoff that grows to 30 s (up to 60 s with its jitter) while the API server is
// unreachable, and keeps no hook for "watching again". Until it has reconnected, the caches
// hold what was last seen: reads of them are fine (that is what opi answers during an outage),
// but a write would be made, its cache wait would time out, and a read right after it would not
// see it. Watches lets opi refuse writes (and say it is not ready) until every cache it needs
// is watching again.
//
// A resource is watched while a LIST or WATCH of it is in flight (its response body not yet
// ended): the reflector lists before it watches, and a LIST's objects reach the cache before
// the WATCH is opened. Between two requests (a watch ending at its timeout, a failed attempt
// and the next) a resource is idle; Unwatched counts it only once idle longer than a grace,
// or at once when the request that ended is one the reflector backs off after: a failed
// attempt, an error status, or a WATCH that lasted under a second (a watch from a resource
// version the API server no longer has, as after its restart, or one it closed at once).
//
// A request in flight is no promise that the cache will follow (that WATCH was in flight for a
// moment). A write's own wait for the cache is what decides whether it may answer success.
//
// Watches also follows whether the API server answers (Contact): a watch ends routinely (the
// API server closes watches at their timeout, under load, and a connection may be cut between
// them), and while the API server answers, a cache reconnecting is no outage.
type Watches struct {
	mu    sync.Mutex
	now   func() time.Time
	state map[string]*watchState // by resource, as VerbResource names it
	// told is when a request last told anything of the API server: that it answered, or, with
	// unreachable, that it could not be reached (see unreachable).
	told        time.Time
	unreachable bool
}

// Contact is what the client's requests last told of the API server.
type Contact int

const (
	// ContactUnknown: no request got a response or failed to reach the API server lately.
	ContactUnknown Contact = iota
	// ContactAnswered: the latest request that told anything got a response.
	ContactAnswered
	// ContactUnreachable: the latest request that told anything could not reach the API server.
	ContactUnreachable
)

type watchState struct {
	inFlight   int
	idleSince  time.Time // when inFlight last dropped to 0
	backingOff bool      // the request that ended last is one the reflector backs off after
}

// shortWatch is how long a WATCH must last for the reflector to open the next without a
// backoff (client-go counts a shorter one without events as a "very short watch").
const shortWatch = time.Second

// NewWatches returns a Watches that has seen no request yet.
func NewWatches() *Watches {
	return &Watches{now: time.Now, state: map[string]*watchState{}}
}

// SetClock replaces the clock (tests).
func (w *Watches) SetClock(now func() time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = now
}

// Wrap is a transport wrapper (rest.Config.Wrap) that reports the client's LISTs and WATCHes
// to w, and every request's contact with the API server.
func (w *Watches) Wrap(rt http.RoundTripper) http.RoundTripper {
	return watchesTransport{w: w, next: rt}
}

// Unwatched returns those of resources that are not being watched: no LIST or WATCH of them in
// flight for longer than grace, or none ever made. The order is that of resources.
func (w *Watches) Unwatched(resources []string, grace time.Duration) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	var out []string
	for _, r := range resources {
		s := w.state[r]
		if s == nil || (s.inFlight == 0 && (s.backingOff || now.Sub(s.idleSince) > grace)) {
			out = append(out, r)
		}
	}
	return out
}

// Contact says what the latest request that told anything within the last period told of the
// API server: it answered, it was unreachable, or nothing was told within the period.
func (w *Watches) Contact(period time.Duration) Contact {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.told.IsZero() || w.now().Sub(w.told) > period:
		return ContactUnknown
	case w.unreachable:
		return ContactUnreachable
	default:
		return ContactAnswered
	}
}

// Now is the time on w's clock.
func (w *Watches) Now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now()
}

// contact records what a request's round trip told of the API server.
func (w *Watches) contact(req *http.Request, resp *http.Response, err error) {
	var failed bool
	switch {
	case err == nil && !gatewayStatus(resp.StatusCode):
	case err != nil && req.Context().Err() == nil && unreachable(err):
		failed = true
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.told, w.unreachable = w.now(), failed
}

// gatewayStatus is a status a proxy in front of the API server answers for it when it cannot
// reach it: no sign that the API server answers.
func gatewayStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// unreachable says err is a failure to reach the API server: a dial failure (connection
// refused, no route, unknown host) or a timeout (a TLS handshake or response headers that never
// came: a hung API server). A connection lost under a request is not: the API server closes
// connections (and a proxy between may cut them) while it answers; the request that follows
// tells which it is.
func unreachable(err error) bool {
	if utilnet.IsConnectionRefused(err) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// begin counts a request of resource in flight and returns when it began.
func (w *Watches) begin(resource string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.state[resource]
	if s == nil {
		s = &watchState{}
		w.state[resource] = s
	}
	s.inFlight++
	return w.now()
}

// end counts a request of resource ended. failed says it failed or answered an error status;
// a WATCH that began less than shortWatch ago counts as failed too.
func (w *Watches) end(resource, verb string, began time.Time, failed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.state[resource]
	s.inFlight--
	if s.inFlight == 0 {
		s.idleSince = w.now()
		s.backingOff = failed || (verb == "watch" && s.idleSince.Sub(began) < shortWatch)
	}
}

type watchesTransport struct {
	w    *Watches
	next http.RoundTripper
}

func (t watchesTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := ""
	var resource string
	if req.Method == http.MethodGet { // writes, the hot path, pass without parsing their path
		verb, resource = VerbResource(req)
	}
	if verb != "list" && verb != "watch" {
		resp, err := t.next.RoundTrip(req)
		t.w.contact(req, resp, err)
		return resp, err
	}
	began := t.w.begin(resource)
	resp, err := t.next.RoundTrip(req)
	t.w.contact(req, resp, err)
	if err != nil {
		t.w.end(resource, verb, began, true)
		return resp, err
	}
	failed := resp.StatusCode >= http.StatusBadRequest
	resp.Body = &trackedBody{ReadCloser: resp.Body, done: func() { t.w.end(resource, verb, began, failed) }}
	return resp, nil
}

// trackedBody calls done once, when the body ends (a read fails, EOF included) or is closed.
type trackedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// VerbResource names a Kubernetes API request the way the API server's audit log does:
// get/list/watch/create/update/patch/delete/deletecollection, and the resource (with its
// subresource as "pods/status"). Non-resource paths (/readyz, /version) are their own resource.
func VerbResource(req *http.Request) (verb, resource string) {
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
