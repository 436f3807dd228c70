package handler

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/julienschmidt/httprouter"

	"github.com/opi-bridge/opi/models"
)

// DefaultMaxInFlight is how many maximal requests (bodies of DefaultMaxBodyBytes) may be in
// flight at once when none is configured; smaller ones count by their size (see inFlight).
//
// Derived from BenchmarkMaximalDesireHeap (handler/inflight_bench_test.go), which measures
// what one maximal desire allocates in the handler and bifrost, body read, decoded and
// converted: about 9 MiB (see docs/reliability.md, "Request bounds"). The backend then builds
// the env Secret and the workload from it, about as much again (the env is copied into the
// Secret, then encoded): call it 18 MiB a maximal request, all of it live at once in the worst
// case. The manifests give opi 256 Mi; its caches at 1,000 apps take about 50 MB and at 10,000
// apps a few times that, so about 100 MiB are left for requests: 100 / 18 ≈ 5.5, rounded down
// to 5. Raise it with the memory limit.
const DefaultMaxInFlight = 5

// minWeightFraction: a request counts as at least 1/minWeightFraction of a maximal one (what a
// small request costs beyond its body: decoding, conversion, the backend's objects).
const minWeightFraction = 64

// inFlight bounds the request bodies being handled at once: capacity is max maximal requests,
// and each request takes its Content-Length (at least maxBody/minWeightFraction; the whole
// maxBody when the length is not declared). So max requests of the largest size may be in
// flight at once, or up to max×minWeightFraction small ones (CC's usual few-KiB desires), and
// the heap they take stays within what DefaultMaxInFlight was derived for. Beyond it a request
// is answered 503 with Retry-After at once, without reading its body: CC retries.
type inFlight struct {
	max       int
	maxBody   int64
	minWeight int64
	capacity  int64

	mu   sync.Mutex
	used int64
}

func newInFlight(maxInFlight int, maxBody int64) *inFlight {
	return &inFlight{
		max: maxInFlight, maxBody: maxBody, capacity: int64(maxInFlight) * maxBody,
		minWeight: max(maxBody/minWeightFraction, 1),
	}
}

// weight is what r takes of the capacity.
func (f *inFlight) weight(r *http.Request) int64 {
	if r.ContentLength < 0 {
		return f.maxBody // chunked: it may be as large as allowed
	}
	return min(max(r.ContentLength, f.minWeight), f.maxBody)
}

func (f *inFlight) acquire(weight int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.used+weight > f.capacity {
		return false
	}
	f.used += weight
	return true
}

func (f *inFlight) release(weight int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used -= weight
}

// retryAfterSeconds is the Retry-After of a request refused for the bound: requests take
// seconds at most, and CC retries anyway.
const retryAfterSeconds = 1

// limit bounds handle's requests; refuse writes the route's error body.
func (f *inFlight) limit(refuse func(w http.ResponseWriter, status int, message string), handle httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		weight := f.weight(r)
		if !f.acquire(weight) {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
			refuse(w, http.StatusServiceUnavailable, fmt.Sprintf(
				"too many requests in flight: at most %d of %d bytes (max_in_flight), retry later", f.max, f.maxBody))
			return
		}
		defer f.release(weight)
		handle(w, r, ps)
	}
}

// writeMessageError writes a task or staging route's error body.
func writeMessageError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, models.MessageResponse{Message: message})
}
