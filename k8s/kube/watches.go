package kube

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
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
// moment). Watches spares writes that would time out; a write's own wait for the cache is what
// decides whether it may answer success.
type Watches struct {
	mu    sync.Mutex
	now   func() time.Time
	state map[string]*watchState // by resource, as VerbResource names it
}

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
// to w. Other requests pass untouched.
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
	if req.Method != http.MethodGet { // writes, the hot path, pass without parsing their path
		return t.next.RoundTrip(req)
	}
	verb, resource := VerbResource(req)
	if verb != "list" && verb != "watch" {
		return t.next.RoundTrip(req)
	}
	began := t.w.begin(resource)
	resp, err := t.next.RoundTrip(req)
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
