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
// Derived from BenchmarkMaximalDesireHeap (k8s/internal/lrp/desire_heap_bench_test.go; docs/reliability.md,
// "Request bounds"), which drives desires at every bound at once and as large as the body limit
// allows (2,093,053 bytes: 1,000 env entries of ~1 MB, 1,000 routes, 1,000 egress rules, 10 ports)
// through the router, bifrost and the k8s backend (ingress routing, network policies, on a
// fake clientset; Deployments and StatefulSets) under opi's GOGC=25, sampling the heap while
// they run. Measured 2026-12-01: one alone peaks at 12.4-13.6 MB of heap above the base, five
// at once at 10.2-11.1 MB each. That peak counts the fake clientset's copies of the objects
// (~4 MB a desire, which the API server keeps in opi's place), so it is an upper bound; what it
// misses is the client's protobuf encoding of what it writes and the answers it reads, about
// twice the 1.6 MB those objects encode to: 13.6 + 2 × 1.6 ≈ 16.8 MB (16.0 MiB) a maximal
// request. The manifests give opi 256 Mi, of which its caches and runtime take ~50 MB at 1,000
// apps and ~108 MB at 10,000 (docs/benchmarks.md): leave them ~150 MiB (with their own GC
// headroom), and ~106 MiB are left for requests. With GOGC=25's headroom (garbage up to a
// quarter of the live heap), 5 × 16.0 × 1.25 ≈ 100 MiB < 106 MiB; 6 would be 120. Raise it
// together with the memory limit.
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
