package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Reads under a burst: Cloud Controller's sync, a few CC workers and operators' scripts read at
// once. For each of GET /apps and GET /apps/{guid}/{version}/instances (spread over the N apps)
// the run first measures the sequential cost (one caller: its p50 and opi's CPU seconds per call
// from /proc/<pid>/stat), then -read-callers closed-loop callers for -read-burst: the aggregate
// calls per second against what the machine's cores allow at the sequential CPU per call, the
// latencies against the queueing a fair server would show, the slowest call against CC's
// timeout, and opi's API server requests meanwhile.

// Targets of the reads under a burst.
const (
	// targetBurstShare is the least aggregate throughput, as a share of CPUs ÷ the sequential
	// CPU seconds per call.
	targetBurstShare = 0.8
	// burstP99Slack times callers ÷ CPUs times the sequential p50 is the p99 a server that
	// shares its cores fairly between the callers stays within.
	burstP99Slack = 1.25
	// ccTimeout is Cloud Controller's timeout on a call to opi: no call may take longer.
	ccTimeout = 60 * time.Second
)

// The two reads measured under a burst.
const (
	readApps      = "GET /apps"
	readInstances = "GET /apps/{guid}/{version}/instances"
)

// burstRead is one read under a burst: its sequential cost, then the concurrent callers.
type burstRead struct {
	Read string `json:"read"`
	Apps int    `json:"apps"`
	CPUs int    `json:"cpus"`

	// One caller, at least SeqCalls calls and -read-seq-min of wall time.
	SeqCalls   int     `json:"seq_calls"`
	SeqSeconds float64 `json:"seq_s"`
	SeqP50     float64 `json:"seq_p50_ms"`
	SeqP99     float64 `json:"seq_p99_ms"`
	// opi's and the run's own CPU milliseconds per sequential call.
	SeqOpiCPUMs   float64 `json:"seq_opi_cpu_ms_per_call"`
	SeqBenchCPUMs float64 `json:"seq_bench_cpu_ms_per_call"`

	// Callers closed-loop callers for about Seconds (the calls under way at the end finish).
	Callers    int     `json:"callers"`
	Seconds    float64 `json:"seconds"`
	Calls      int     `json:"calls"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	PerSecond  float64 `json:"per_second"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	Bytes      int     `json:"bytes"`
	// CPU during the burst: opi's and the run's own (which reads every answer), per call and
	// in cores, and the share of the CPUs other processes used.
	OpiCPUMs   float64 `json:"opi_cpu_ms_per_call"`
	BenchCPUMs float64 `json:"bench_cpu_ms_per_call"`
	OpiCores   float64 `json:"opi_cores"`
	BenchCores float64 `json:"bench_cores"`
	OthersCPU  float64 `json:"others_cpu_share"`
	// opi's non-watch API server requests over both parts, the janitor's sweeps apart.
	APIRequests float64        `json:"api_requests"`
	Janitor     float64        `json:"janitor_requests"`
	ByVerb      map[string]int `json:"api_requests_by_verb,omitempty"`

	// Derived (derive): the calls per second the CPUs allow at the sequential CPU per call,
	// the throughput's share of it, the same counting the run's own CPU per call too, and
	// the p99 bound.
	Allowed           float64 `json:"allowed_per_s"`
	Share             float64 `json:"throughput_share_of_allowed"`
	ShareWithBench    float64 `json:"throughput_share_with_bench_cpu"`
	P99BoundMs        float64 `json:"p99_bound_ms"`
	TimeoutMs         float64 `json:"timeout_ms"`
	TargetShare       float64 `json:"target_share"`
	TargetP99Slack    float64 `json:"target_p99_slack"`
	DriverSaturated   bool    `json:"driver_saturated,omitempty"`
	DriverSaturatedAt float64 `json:"driver_saturated_cores,omitempty"`
}

// derive computes the figures the targets compare. The cores a fair server has for each caller
// are CPUs ÷ callers, so a call's wait is about callers ÷ CPUs sequential calls' time.
func (b *burstRead) derive() {
	cpus := float64(max(b.CPUs, 1))
	b.Allowed = ratio(cpus*1000, b.SeqOpiCPUMs)
	b.Share = ratio(b.PerSecond, b.Allowed)
	b.ShareWithBench = ratio(b.PerSecond, ratio(cpus*1000, b.SeqOpiCPUMs+b.SeqBenchCPUMs))
	b.P99BoundMs = burstP99Slack * float64(b.Callers) / cpus * b.SeqP50
	b.TimeoutMs = float64(ccTimeout / time.Millisecond)
	b.TargetShare, b.TargetP99Slack = targetBurstShare, burstP99Slack
	// The run's own reading of the answers competes with opi for the cores: a quarter of
	// them is enough to move the share by as much as the target's margin.
	b.DriverSaturatedAt = cpus / 4
	b.DriverSaturated = b.BenchCores >= b.DriverSaturatedAt
}

// misses are the targets b missed, each described; none when the phase did not run.
func (b burstRead) misses() []string {
	if b.Callers == 0 {
		return nil
	}
	var out []string
	if b.Share < targetBurstShare {
		out = append(out, fmt.Sprintf("%s under %d callers: %.1f calls/s, %.2f × the %.1f/s %d CPUs allow at opi's sequential %.3f ms CPU per call (target ≥ %.1f)",
			b.Read, b.Callers, b.PerSecond, b.Share, b.Allowed, b.CPUs, b.SeqOpiCPUMs, targetBurstShare))
	}
	if b.P99 > b.P99BoundMs {
		out = append(out, fmt.Sprintf("%s under %d callers: p99 %.1f ms over %.2f × %d callers ÷ %d CPUs × the sequential p50 %.2f ms = %.1f ms",
			b.Read, b.Callers, b.P99, burstP99Slack, b.Callers, b.CPUs, b.SeqP50, b.P99BoundMs))
	}
	if b.Max > b.TimeoutMs {
		out = append(out, fmt.Sprintf("%s under %d callers: a call took %.1f s, over CC's %s timeout", b.Read, b.Callers, b.Max/1000, ccTimeout))
	}
	if b.APIRequests != 0 {
		out = append(out, fmt.Sprintf("%s under a burst made %.0f API server requests (%s)", b.Read, b.APIRequests, verbs(b.ByVerb)))
	}
	if b.Errors > 0 {
		out = append(out, fmt.Sprintf("%d of the %s calls under %d callers failed, the first with: %s", b.Errors, b.Read, b.Callers, b.FirstError))
	}
	return out
}

// summary is b's burst in one line, for the report and the recorded runs' table.
func (b burstRead) summary() string {
	return fmt.Sprintf("%s (%.1f calls/s of the %.1f/s %d CPUs allow at %.3f ms CPU per call); p50 %.1f, p99 %.1f ms (bound %.1f), max %.1f ms; %.0f API requests; %d callers, %.0f s",
		ratioString(b.Share, targetBurstShare), b.PerSecond, b.Allowed, b.CPUs, b.SeqOpiCPUMs, b.P50, b.P99, b.P99BoundMs, b.Max, b.APIRequests, b.Callers, b.Seconds)
}

// loopResult is what closedLoop measured.
type loopResult struct {
	durs       []time.Duration
	wall       time.Duration
	errors     int
	firstError string
}

// closedLoop runs callers callers, each calling f again as soon as its last call returned,
// while fewer than minCalls calls have started or less than minWall has passed. f gets each
// call's index (0, 1, ...), for spreading calls over apps.
func closedLoop(ctx context.Context, callers, minCalls int, minWall time.Duration, f func(context.Context, int) error) loopResult {
	var (
		next atomic.Int64
		mu   sync.Mutex
		res  loopResult
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= minCalls && time.Since(start) >= minWall {
					return
				}
				s := time.Now()
				err := f(ctx, i)
				took := time.Since(s)
				mu.Lock()
				if err != nil {
					if res.errors++; res.firstError == "" {
						res.firstError = err.Error()
					}
				} else {
					res.durs = append(res.durs, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

// maxMs is the longest of ds in milliseconds.
func maxMs(ds []time.Duration) float64 {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return float64(m) / float64(time.Millisecond)
}

// cpuNow is opi's and this program's CPU seconds so far (0 where unreadable).
func (e *env) cpuNow() (opiSecs, benchSecs float64) {
	opiSecs, _ = processCPUSeconds(e.opi.Pid())
	benchSecs, _ = processCPUSeconds(osPid)
	return opiSecs, benchSecs
}

// readsBurst measures both reads under a burst at N apps; apps are every app in the cluster.
func (e *env) readsBurst(ctx context.Context, apps []app, appsBytes int) (burstRead, burstRead, error) {
	getApps := func(ctx context.Context, _ int) (int, error) {
		n, code, err := e.drain(ctx, "/apps")
		if err == nil && (code != http.StatusOK || n < appsBytes/2) {
			err = fmt.Errorf("GET /apps: %d, %d bytes", code, n)
		}
		return n, err
	}
	instances := func(ctx context.Context, i int) (int, error) {
		a := apps[i%len(apps)]
		body, code, err := e.get(ctx, a.path()+"/instances")
		if err == nil && (code != http.StatusOK || !bytes.Contains(body, []byte(`"index":0`))) {
			err = fmt.Errorf("instances of %s: %d %.200s", a.processGUID(), code, body)
		}
		return len(body), err
	}
	a, err := e.burstOf(ctx, readApps, getApps)
	if err != nil {
		return a, burstRead{}, err
	}
	in, err := e.burstOf(ctx, readInstances, instances)
	return a, in, err
}

// burstOf measures one read: sequentially, then under the burst.
func (e *env) burstOf(ctx context.Context, name string, read func(context.Context, int) (int, error)) (burstRead, error) {
	cfg := e.cfg
	b := burstRead{Read: name, Apps: cfg.n, CPUs: numCPU(), Callers: cfg.readCallers}
	var size atomic.Int64
	call := func(ctx context.Context, i int) error {
		n, err := read(ctx, i)
		size.Store(int64(n))
		return err
	}
	m0, err := e.scrape(ctx)
	if err != nil {
		return b, err
	}

	opi0, bench0 := e.cpuNow()
	seq := closedLoop(ctx, 1, cfg.readSeqCalls, cfg.readSeqMin, call)
	opi1, bench1 := e.cpuNow()
	if seq.errors > 0 {
		return b, fmt.Errorf("%s: %d of the sequential calls failed, the first with: %s", name, seq.errors, seq.firstError)
	}
	b.SeqCalls, b.SeqSeconds = len(seq.durs), seq.wall.Seconds()
	b.SeqP50, b.SeqP99 = percentiles(seq.durs)
	b.SeqOpiCPUMs = (opi1 - opi0) * 1000 / float64(max(b.SeqCalls, 1))
	b.SeqBenchCPUMs = (bench1 - bench0) * 1000 / float64(max(b.SeqCalls, 1))
	logf("%s at %d apps, sequential: %d calls, p50 %.2f ms; opi %.3f ms CPU per call (this run %.3f ms)", name, cfg.n, b.SeqCalls, b.SeqP50, b.SeqOpiCPUMs, b.SeqBenchCPUMs)

	logf("%s at %d apps: %d closed-loop callers for %s", name, cfg.n, cfg.readCallers, cfg.readBurst)
	machine0 := readCPU(e.ourPIDs())
	opi0, bench0 = e.cpuNow()
	burst := closedLoop(ctx, cfg.readCallers, 0, cfg.readBurst, call)
	opi1, bench1 = e.cpuNow()
	b.OthersCPU = othersShare(machine0, readCPU(e.ourPIDs()))
	if err := ctx.Err(); err != nil {
		return b, err
	}
	m1, err := e.scrape(ctx)
	if err != nil {
		return b, err
	}
	b.APIRequests, b.Janitor, b.ByVerb = readRequests(m1.diff(m0))
	b.Seconds, b.Calls, b.Errors, b.FirstError = burst.wall.Seconds(), len(burst.durs), burst.errors, burst.firstError
	b.PerSecond = ratio(float64(b.Calls), b.Seconds)
	b.P50, b.P99 = percentiles(burst.durs)
	b.Max = maxMs(burst.durs)
	b.Bytes = int(size.Load())
	calls := float64(max(b.Calls, 1))
	b.OpiCPUMs, b.BenchCPUMs = (opi1-opi0)*1000/calls, (bench1-bench0)*1000/calls
	b.OpiCores, b.BenchCores = ratio(opi1-opi0, b.Seconds), ratio(bench1-bench0, b.Seconds)
	b.derive()
	logf("%s under the burst: %.1f calls/s = %.2f × the %.1f/s the CPUs allow; p50 %.1f ms, p99 %.1f ms (bound %.1f ms), max %.1f ms; opi %.2f cores, this run %.2f cores; %.0f API requests, %d errors",
		name, b.PerSecond, b.Share, b.Allowed, b.P50, b.P99, b.P99BoundMs, b.Max, b.OpiCores, b.BenchCores, b.APIRequests, b.Errors)
	return b, nil
}

// drainBuffers are drain's read buffers, one per caller at a time.
var drainBuffers = sync.Pool{New: func() any { return new([drainBufferBytes]byte) }}

// drainBufferBytes is drain's read size: io.Copy into io.Discard reads 8 KiB at a time, so a
// 4.6 MB GET /apps cost the run some 560 reads (more CPU per call than opi's writing it).
const drainBufferBytes = 512 << 10

// drain sends a GET and reads the answer without keeping it, so that reading a large list
// costs the run as little CPU as reading can; it returns the answer's size.
func (e *env) drain(ctx context.Context, path string) (int, int, error) {
	resp, err := e.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	buf := drainBuffers.Get().(*[drainBufferBytes]byte)
	defer drainBuffers.Put(buf)
	n := 0
	for {
		k, err := resp.Body.Read(buf[:])
		n += k
		if err == io.EOF {
			return n, resp.StatusCode, nil
		}
		if err != nil {
			return n, resp.StatusCode, err
		}
	}
}

// burstFigure is the recorded runs' table of one read under a burst.
func burstFigure(read string, of func(recordedRun) *burstRead) figure {
	return figure{
		title: "Reads under a burst: " + read + " at N, closed-loop callers: throughput ÷ what the CPUs allow at opi's sequential CPU per call; p50, p99, max; API requests",
		target: fmt.Sprintf("≥ %.1f; p99 ≤ %.2f × callers ÷ CPUs × the sequential p50; no call over CC's %s timeout; 0 API requests",
			targetBurstShare, burstP99Slack, ccTimeout),
		value: func(r recordedRun) (string, string, bool) {
			b := of(r)
			if b == nil || b.Callers == 0 {
				return "", "", false
			}
			return b.summary(), met(len(b.misses()) == 0), true
		},
	}
}
