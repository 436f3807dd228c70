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
// Derived from BenchmarkMaximalDesireHeap (handler/inflight_bench_test.go; docs/reliability.md,
// "Request bounds"): a desire at every bound at once (a 1.28 MB body: a 1 MiB environment,
// 1,000 routes, 1,000 egress rules, 10 ports) allocates 6.9 MB in the handler and bifrost (read,
// decoded, validated, converted), 5.4 bytes per body byte, and holds 1.7 MB live while it waits
// on the backend. Worst case, counting everything a request allocates as live at once, and
// scaled to a body of the full 2 MiB: 5.4 × 2 MiB ≈ 11.3 MiB. The backend's copies (the env
// Secret, its protobuf encoding, the workload), which the benchmark does not reach, add about
// three times the 1 MiB environment: ≈ 14.5 MiB a maximal request. The manifests give opi
// 256 Mi, of which its caches and runtime take ~50 MB at 1,000 apps and a few times that at
// 10,000: leave them ~150 MiB, and ~100 MiB are left for requests. With GOGC=25's headroom
// (garbage up to a quarter of the live heap), 5 × 14.5 × 1.25 ≈ 91 MiB < 100 MiB; 6 would be
// 109. Raise it together with the memory limit.
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
