package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

var osPid = os.Getpid()

// phase is a timed batch of calls (desires, stops, floor apps, read bursts).
type phase struct {
	Count      int     `json:"count"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"per_second"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	durs       []time.Duration
	failed     []int // indices of the failed calls
}

// reads are latencies of one read: sequential calls, then a concurrent burst.
type reads struct {
	Calls    int     `json:"calls"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	BurstP50 float64 `json:"burst_p50_ms,omitempty"`
	BurstP99 float64 `json:"burst_p99_ms,omitempty"`
	Bytes    int     `json:"bytes,omitempty"`
	// opi's non-watch API server requests during the calls, but for the janitor's sweeps
	APIRequests float64 `json:"api_requests"`
	// the janitor's LISTs of Secrets and Services that fell in the window (every minute,
	// whatever the reads do)
	Janitor float64        `json:"janitor_requests"`
	ByVerb  map[string]int `json:"api_requests_by_verb,omitempty"`
}

// readRequests splits the non-watch requests made during reads into those the reads could
// have caused and the janitor's periodic sweep, which runs on its own clock. A sweep LISTs
// opi's Secrets and Services, then the objects of the other routing modes and of each hook
// (Ingresses, NetworkPolicies, ...): a LIST of another kind is the sweep's when the window
// holds the sweep's LIST of Secrets too.
func readRequests(d map[string]float64) (reads, janitor float64, verbs map[string]int) {
	verbs = byVerb(d)
	swept := verbs["list secrets"] > 0
	for k, v := range verbs {
		if k == "list secrets" || k == "list services" || (swept && strings.HasPrefix(k, "list ")) {
			janitor += float64(v)
		} else {
			reads += float64(v)
		}
	}
	return reads, janitor, verbs
}

// percentiles are the nearest-rank p50 and p99 in milliseconds.
func percentiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return float64(s[max(i, 0)]) / float64(time.Millisecond)
	}
	return rank(0.50), rank(0.99)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// metricsSnapshot is every sample of opi's /metrics, keyed by name{labels} as printed.
type metricsSnapshot map[string]float64

func (e *env) scrape(ctx context.Context) (metricsSnapshot, error) {
	body, code, err := e.get(ctx, "/metrics")
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d %v", code, err)
	}
	m := metricsSnapshot{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

func (m metricsSnapshot) value(key string) float64 { return m[key] }

// diff is the growth of opi_kube_api_requests_total since before, by "verb resource", without
// the leader election's Lease renewals (background, every retry period, whatever the requests).
func (m metricsSnapshot) diff(before metricsSnapshot) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, "opi_kube_api_requests_total{") || label(k, "resource") == "leases" {
			continue
		}
		if d := v - before[k]; d != 0 {
			out[label(k, "verb")+" "+label(k, "resource")] = d
		}
	}
	return out
}

// refusals are opi_kube_api_refusals_total's counts since opi started, by "verb resource code",
// without the leader election's Leases.
func (m metricsSnapshot) refusals() map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if strings.HasPrefix(k, "opi_kube_api_refusals_total{") && label(k, "resource") != "leases" && v > 0 {
			out[label(k, "verb")+" "+label(k, "resource")+" "+label(k, "code")] = int(v)
		}
	}
	return out
}

func label(key, name string) string {
	_, after, ok := strings.Cut(key, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, `"`)
	return v
}

// byVerb keeps the non-watch requests, as integers.
func byVerb(d map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range d {
		if !strings.HasPrefix(k, "watch ") {
			out[k] = int(v)
		}
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// rssSampler samples a process's resident memory from /proc every 200 ms. When opi is
// restarted it follows the new process; its peak is then the larger of both processes' peaks.
type rssSampler struct {
	mu   sync.Mutex
	pid  int
	max  int64 // KiB, of the process followed now
	prev int64 // KiB, the peak of the processes followed before
	done chan struct{}
	once sync.Once
}

func startRSS(pid int) *rssSampler {
	s := &rssSampler{pid: pid, done: make(chan struct{})}
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			s.current()
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() { s.once.Do(func() { close(s.done) }) }

// retire keeps the peak of the process followed now (call it while that process still runs:
// its high-water mark goes with it) and stops sampling it until follow names the next.
func (s *rssSampler) retire() float64 {
	_, hwm := s.status()
	s.mu.Lock()
	defer s.mu.Unlock()
	own := max(s.max, hwm)
	s.prev, s.max, s.pid = max(s.prev, own), 0, 0
	return kibToMB(own)
}

// follow samples pid from now on.
func (s *rssSampler) follow(pid int) {
	s.mu.Lock()
	s.pid, s.max = pid, 0
	s.mu.Unlock()
	s.current()
}

// status reads VmRSS and VmHWM (KiB) from /proc/<pid>/status of the process followed.
func (s *rssSampler) status() (rss, hwm int64) {
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	if pid == 0 {
		return 0, 0
	}
	kib := procStatusKiB(pid)
	return kib["VmRSS"], kib["VmHWM"]
}

// procStatusKiB is the numbers of /proc/<pid>/status by field name (memory fields in KiB);
// empty when it cannot be read.
func procStatusKiB(pid int) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[strings.TrimSuffix(f[0], ":")] = v
		}
	}
	return out
}

// current is the resident memory now, in MB; it also updates the sampled peak.
func (s *rssSampler) current() float64 {
	rss, _ := s.status()
	s.mu.Lock()
	s.max = max(s.max, rss)
	s.mu.Unlock()
	return kibToMB(rss)
}

// own is the peak of the process followed now: the larger of its samples and its high-water
// mark, in MB.
func (s *rssSampler) own() float64 {
	_, hwm := s.status()
	s.mu.Lock()
	defer s.mu.Unlock()
	return kibToMB(max(s.max, hwm))
}

// peak is the peak of every process followed, in MB.
func (s *rssSampler) peak() float64 {
	_, hwm := s.status()
	s.mu.Lock()
	defer s.mu.Unlock()
	return kibToMB(max(s.prev, s.max, hwm))
}

// steady is the median of n samples taken every interval, in MB.
func (s *rssSampler) steady(ctx context.Context, n int, interval time.Duration) float64 {
	var xs []float64
	for i := range n {
		if i > 0 && sleep(ctx, interval) != nil {
			break
		}
		xs = append(xs, s.current())
	}
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func kibToMB(kib int64) float64 { return float64(kib) * 1024 / 1e6 }

// cpuSample is the machine's CPU time and that of our processes, in clock ticks.
type cpuSample struct {
	at         time.Time
	busy, ours float64
}

// readCPU reads /proc/stat's busy time and the user+system time of pids.
func readCPU(pids []int) cpuSample {
	s := cpuSample{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i, v := range f[1:] {
			x, _ := strconv.ParseFloat(v, 64)
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			if i >= 8 { // guest time is already in user
				break
			}
			s.busy += x
		}
	}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces) start after the last ')'.
		rest := string(b[bytes.LastIndexByte(b, ')')+2:])
		f := strings.Fields(rest)
		if len(f) > 14 {
			u, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			s.ours += u + st
			if pid == osPid {
				// Children that exited and were waited for (the first opi, after its
				// restart) count as ours too.
				cu, _ := strconv.ParseFloat(f[13], 64)
				cs, _ := strconv.ParseFloat(f[14], 64)
				s.ours += cu + cs
			}
		}
	}
	return s
}

// cpuAcc adds up other processes' CPU time over several windows.
type cpuAcc struct{ others, secs float64 }

func (c *cpuAcc) add(a, b cpuSample) {
	c.secs += b.at.Sub(a.at).Seconds()
	c.others += othersSeconds(a, b)
}

func (c *cpuAcc) share() float64 {
	if c.secs <= 0 {
		return 0
	}
	return c.others / (c.secs * float64(numCPU()))
}

// othersSeconds is the CPU time processes outside the run used between a and b.
func othersSeconds(a, b cpuSample) float64 {
	const ticks = 100 // USER_HZ
	return math.Max(0, ((b.busy-a.busy)-(b.ours-a.ours))/ticks)
}

// othersShare is the share of the machine's CPUs that processes outside the run used between
// a and b (0..1): other people's test suites on a shared machine.
func othersShare(a, b cpuSample) float64 {
	var c cpuAcc
	c.add(a, b)
	return c.share()
}
