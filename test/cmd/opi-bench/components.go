package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/opi-bridge/opi/localkube"
)

// What the benchmark reads of the control plane to split a phase's time between opi, the API
// server and the controllers: every process's CPU time, the API server's request latencies, the
// controller-manager's work queues and the scheduler's attempts. Two snapshots make a delta.

// Names of the two processes that are not control plane components.
const (
	componentOpi   = "opi"
	componentBench = "opi-bench"
)

// sumCount is a histogram's running sum (seconds) and count.
type sumCount struct {
	Sum   float64 `json:"sum"`
	Count float64 `json:"count"`
}

func (s sumCount) minus(p sumCount) sumCount { return sumCount{s.Sum - p.Sum, s.Count - p.Count} }

// meanMs is the mean observation in milliseconds, 0 when there were none.
func (s sumCount) meanMs() float64 {
	if s.Count <= 0 {
		return 0
	}
	return s.Sum / s.Count * 1000
}

// queueStats is one controller-manager work queue.
type queueStats struct {
	Adds  float64  `json:"adds"`
	Depth float64  `json:"depth"`
	Wait  sumCount `json:"wait"` // time items sat in the queue
	Work  sumCount `json:"work"` // time spent processing them
}

// componentSnapshot is the running totals at one moment.
type componentSnapshot struct {
	At time.Time `json:"at"`
	// CPU is user+system seconds so far by process: the components, opi and the benchmark.
	CPU map[string]float64 `json:"cpu"`
	// MachineBusy is the whole machine's busy CPU seconds (/proc/stat), to show what the run's
	// processes leave to others.
	MachineBusy float64 `json:"machine_busy"`
	// API is kube-apiserver's request latency by "VERB resource[/subresource]".
	API map[string]sumCount `json:"api"`
	// APICodes is kube-apiserver's request count by HTTP code.
	APICodes map[string]float64 `json:"api_codes"`
	// Etcd is the API server's etcd request latency by "operation resource".
	Etcd map[string]sumCount `json:"etcd"`
	// Queues are the controller-manager's work queues by name.
	Queues map[string]queueStats `json:"queues"`
	// SchedulerAttempts is the scheduler's attempt latency (every result); SchedulerPending the
	// pods waiting in all its queues.
	SchedulerAttempts sumCount `json:"scheduler_attempts"`
	SchedulerPending  float64  `json:"scheduler_pending"`
}

// snapshotComponents reads the running totals. Metrics a component does not serve (yet: a
// histogram appears with its first observation) are left empty rather than failing the run.
func snapshotComponents(ctx context.Context, cluster *localkube.Cluster, opiPid int) (componentSnapshot, error) {
	s := componentSnapshot{At: time.Now(), CPU: map[string]float64{}}
	pids := cluster.Components()
	pids[componentBench] = os.Getpid()
	if opiPid > 0 {
		pids[componentOpi] = opiPid
	}
	for name, pid := range pids {
		secs, err := processCPUSeconds(pid)
		if err != nil {
			return s, err
		}
		s.CPU[name] = secs
	}
	busy, err := machineBusySeconds()
	if err != nil {
		return s, err
	}
	s.MachineBusy = busy

	scrape := func(component string) (map[string]*dto.MetricFamily, error) {
		body, err := cluster.Get(ctx, component, "/metrics")
		if err != nil {
			return nil, err
		}
		return parseMetrics(body)
	}
	api, err := scrape(localkube.APIServer)
	if err != nil {
		return s, err
	}
	s.API, s.APICodes, s.Etcd = apiServerStats(api)
	cm, err := scrape(localkube.ControllerManager)
	if err != nil {
		return s, err
	}
	s.Queues = queueStatsOf(cm)
	sched, err := scrape(localkube.Scheduler)
	if err != nil {
		return s, err
	}
	s.SchedulerAttempts, s.SchedulerPending = schedulerStats(sched)
	return s, nil
}

// parseMetrics reads the Prometheus text format.
func parseMetrics(body []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return fams, nil
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// histograms adds up a histogram family's sums and counts by key(metric).
func histograms(f *dto.MetricFamily, key func(*dto.Metric) string) map[string]sumCount {
	out := map[string]sumCount{}
	for _, m := range f.GetMetric() {
		k := key(m)
		if k == "" {
			continue
		}
		h := m.GetHistogram()
		v := out[k]
		v.Sum += h.GetSampleSum()
		v.Count += float64(h.GetSampleCount())
		out[k] = v
	}
	return out
}

// values adds up a counter or gauge family by key(metric).
func values(f *dto.MetricFamily, key func(*dto.Metric) string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		k := key(m)
		if k == "" {
			continue
		}
		out[k] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return out
}

// apiServerStats reads request latency by verb and resource, leaving out WATCH and CONNECT: they
// last as long as the client keeps them open, which says nothing of the server's cost.
func apiServerStats(fams map[string]*dto.MetricFamily) (api map[string]sumCount, codes map[string]float64, etcd map[string]sumCount) {
	api = histograms(fams["apiserver_request_duration_seconds"], func(m *dto.Metric) string {
		verb := labelOf(m, "verb")
		if verb == "WATCH" || verb == "CONNECT" {
			return ""
		}
		res := labelOf(m, "resource")
		if sub := labelOf(m, "subresource"); sub != "" {
			res += "/" + sub
		}
		if res == "" {
			res = "(non-resource)"
		}
		return verb + " " + res
	})
	codes = values(fams["apiserver_request_total"], func(m *dto.Metric) string { return labelOf(m, "code") })
	etcd = histograms(fams["etcd_request_duration_seconds"], func(m *dto.Metric) string {
		return labelOf(m, "operation") + " " + labelOf(m, "resource")
	})
	return api, codes, etcd
}

func queueStatsOf(fams map[string]*dto.MetricFamily) map[string]queueStats {
	name := func(m *dto.Metric) string { return labelOf(m, "name") }
	adds := values(fams["workqueue_adds_total"], name)
	depth := values(fams["workqueue_depth"], name)
	wait := histograms(fams["workqueue_queue_duration_seconds"], name)
	work := histograms(fams["workqueue_work_duration_seconds"], name)
	out := map[string]queueStats{}
	for q, a := range adds {
		out[q] = queueStats{Adds: a, Depth: depth[q], Wait: wait[q], Work: work[q]}
	}
	return out
}

func schedulerStats(fams map[string]*dto.MetricFamily) (attempts sumCount, pending float64) {
	all := func(*dto.Metric) string { return "all" }
	attempts = histograms(fams["scheduler_scheduling_attempt_duration_seconds"], all)["all"]
	pending = values(fams["scheduler_pending_pods"], all)["all"]
	return attempts, pending
}

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on every Linux the bench runs on).
const clockTicks = 100

// processCPUSeconds is a process's user+system CPU time so far, from /proc/<pid>/stat.
func processCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of pid %d: %w", pid, err)
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat line. The command
// name (field 2) may hold spaces and parentheses, so fields are counted after its last ')'.
func parseProcStat(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("parsing /proc/<pid>/stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("parsing /proc/<pid>/stat: %d fields after the name", len(f))
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parsing /proc/<pid>/stat: %w", err)
	}
	return (utime + stime) / clockTicks, nil
}

// machineBusySeconds is the CPU time of every CPU outside idle and iowait, from /proc/stat.
func machineBusySeconds() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/stat: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy float64
	// cpu user nice system idle iowait irq softirq steal guest guest_nice; guest time is already
	// counted in user.
	for i := 1; i < len(f) && i <= 8; i++ {
		if i == 4 || i == 5 {
			continue
		}
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, fmt.Errorf("parsing /proc/stat: %w", err)
		}
		busy += v
	}
	return busy / clockTicks, nil
}

// componentDelta is what happened between two snapshots, ready for the JSON line and the table.
type componentDelta struct {
	Seconds     float64        `json:"seconds"`
	CPU         []cpuCost      `json:"cpu"`
	MachineBusy float64        `json:"machine_busy_seconds"`
	API         []callCost     `json:"apiserver"`
	APICodes    map[string]int `json:"apiserver_codes"`
	Etcd        []callCost     `json:"etcd"`
	Queues      []queueCost    `json:"queues"`
	Scheduler   schedCost      `json:"scheduler"`
}

// cpuCost is one process's CPU seconds and its share of all the run's processes' CPU.
type cpuCost struct {
	Component string  `json:"component"`
	Seconds   float64 `json:"seconds"`
	Share     float64 `json:"share"`
}

// callCost is one kind of request: how many, their total time and mean.
type callCost struct {
	Call    string  `json:"call"`
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
	MeanMs  float64 `json:"mean_ms"`
}

// queueCost is one work queue's traffic, and its depth at the end.
type queueCost struct {
	Name       string  `json:"name"`
	Adds       int     `json:"adds"`
	MeanWaitMs float64 `json:"mean_wait_ms"`
	MeanWorkMs float64 `json:"mean_work_ms"`
	WaitSecs   float64 `json:"wait_seconds"`
	WorkSecs   float64 `json:"work_seconds"`
	Depth      int     `json:"depth"`
}

type schedCost struct {
	Attempts int     `json:"attempts"`
	MeanMs   float64 `json:"mean_ms"`
	Pending  int     `json:"pending"`
}

// since is the change from prev to s. A component restarted in between (its counters reset)
// would show negative growth; such entries are dropped rather than reported.
func (s componentSnapshot) since(prev componentSnapshot) componentDelta {
	d := componentDelta{
		Seconds:     s.At.Sub(prev.At).Seconds(),
		MachineBusy: s.MachineBusy - prev.MachineBusy,
		APICodes:    map[string]int{},
	}
	var total float64
	for name, v := range s.CPU {
		if secs := v - prev.CPU[name]; secs >= 0 {
			d.CPU = append(d.CPU, cpuCost{Component: name, Seconds: secs})
			total += secs
		}
	}
	for i := range d.CPU {
		if total > 0 {
			d.CPU[i].Share = d.CPU[i].Seconds / total
		}
	}
	slices.SortFunc(d.CPU, func(a, b cpuCost) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.Component, b.Component))
	})
	d.API = callCosts(s.API, prev.API)
	d.Etcd = callCosts(s.Etcd, prev.Etcd)
	for code, n := range s.APICodes {
		if g := int(n - prev.APICodes[code]); g > 0 {
			d.APICodes[code] = g
		}
	}
	for name, q := range s.Queues {
		p := prev.Queues[name]
		adds := q.Adds - p.Adds
		if adds <= 0 {
			continue
		}
		wait, work := q.Wait.minus(p.Wait), q.Work.minus(p.Work)
		d.Queues = append(d.Queues, queueCost{
			Name: name, Adds: int(adds), MeanWaitMs: wait.meanMs(), MeanWorkMs: work.meanMs(),
			WaitSecs: wait.Sum, WorkSecs: work.Sum, Depth: int(q.Depth),
		})
	}
	// The queues that held up the most (waiting plus working) first.
	slices.SortFunc(d.Queues, func(a, b queueCost) int {
		return cmp.Or(cmp.Compare(b.WaitSecs+b.WorkSecs, a.WaitSecs+a.WorkSecs), cmp.Compare(a.Name, b.Name))
	})
	att := s.SchedulerAttempts.minus(prev.SchedulerAttempts)
	d.Scheduler = schedCost{Attempts: int(att.Count), MeanMs: att.meanMs(), Pending: int(s.SchedulerPending)}
	return d
}

// callCosts is the growth of each call, the costliest (by total time) first.
func callCosts(now, prev map[string]sumCount) []callCost {
	var out []callCost
	for call, v := range now {
		g := v.minus(prev[call])
		if g.Count <= 0 {
			continue
		}
		out = append(out, callCost{Call: call, Count: int(g.Count), Seconds: g.Sum, MeanMs: g.meanMs()})
	}
	slices.SortFunc(out, func(a, b callCost) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.Call, b.Call))
	})
	return out
}

// Rows shown per table: the rest is in the JSON.
const (
	topCalls  = 10
	topQueues = 10
)

// markdown is the delta as compact tables.
func (d componentDelta) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CPU over %.1f s (machine busy %.1f s of %d CPUs)\n\n", d.Seconds, d.MachineBusy, numCPU())
	b.WriteString("| process | CPU s | share |\n|---|---:|---:|\n")
	for _, c := range d.CPU {
		fmt.Fprintf(&b, "| %s | %.1f | %.0f%% |\n", c.Component, c.Seconds, c.Share*100)
	}

	callTable := func(title string, calls []callCost) {
		if len(calls) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s\n\n| request | count | total s | mean ms |\n|---|---:|---:|---:|\n", title)
		for _, c := range calls[:min(len(calls), topCalls)] {
			fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f |\n", c.Call, c.Count, c.Seconds, c.MeanMs)
		}
	}
	callTable("kube-apiserver requests by total time (no watches)"+codesNote(d.APICodes), d.API)
	callTable("etcd requests from the API server by total time", d.Etcd)

	if len(d.Queues) > 0 {
		b.WriteString("\nkube-controller-manager work queues\n\n| queue | adds | mean wait ms | mean work ms | depth at end |\n|---|---:|---:|---:|---:|\n")
		for _, q := range d.Queues[:min(len(d.Queues), topQueues)] {
			fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %d |\n", q.Name, q.Adds, q.MeanWaitMs, q.MeanWorkMs, q.Depth)
		}
	}
	fmt.Fprintf(&b, "\nkube-scheduler: %d attempts, mean %.1f ms, %d pods pending at end\n",
		d.Scheduler.Attempts, d.Scheduler.MeanMs, d.Scheduler.Pending)
	return b.String()
}

// codesNote names the answers that were not successes, e.g. " (429: 12)".
func codesNote(codes map[string]int) string {
	var bad []string
	for code, n := range codes {
		if !strings.HasPrefix(code, "2") {
			bad = append(bad, fmt.Sprintf("%s: %d", code, n))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return " (answers other than 2xx: " + strings.Join(bad, ", ") + ")"
}

// captureProfiles takes CPU profiles of the API server, controller-manager, scheduler, etcd and
// (when opiPprofURL, the base URL of opi's operations listener with pprof on, is set) opi over
// the same seconds, and writes each to dir as <component>.pprof. It returns the files written by
// component; a profile that failed is named in the error while the others are still kept.
func captureProfiles(ctx context.Context, cluster *localkube.Cluster, opiPprofURL string, seconds int, dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the profile folder: %w", err)
	}
	path := "/debug/pprof/profile?seconds=" + strconv.Itoa(seconds)
	fetch := map[string]func(context.Context) ([]byte, error){}
	for _, c := range []string{localkube.APIServer, localkube.ControllerManager, localkube.Scheduler, localkube.Etcd} {
		fetch[c] = func(ctx context.Context) ([]byte, error) { return cluster.Get(ctx, c, path) }
	}
	if opiPprofURL != "" {
		fetch[componentOpi] = func(ctx context.Context) ([]byte, error) {
			return httpGet(ctx, strings.TrimSuffix(opiPprofURL, "/")+path)
		}
	}
	// A profile that does not come back well after its seconds is stuck, not slow.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		files = map[string]string{}
		errs  []error
		wg    sync.WaitGroup
	)
	for name, get := range fetch {
		wg.Go(func() {
			body, err := get(ctx)
			if err == nil {
				file := filepath.Join(dir, name+".pprof")
				if err = os.WriteFile(file, body, 0o644); err == nil {
					mu.Lock()
					files[name] = file
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			errs = append(errs, fmt.Errorf("profiling %s: %w", name, err))
			mu.Unlock()
		})
	}
	wg.Wait()
	return files, errors.Join(errs...)
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// funcCost is one function's share of a CPU profile: flat is time in the function itself, cum
// time in it or anything it called.
type funcCost struct {
	Func     string  `json:"func"`
	FlatSecs float64 `json:"flat_seconds"`
	CumSecs  float64 `json:"cum_seconds"`
}

// topFunctions reads a CPU profile and returns its n functions with the most flat time, and the
// profile's total CPU seconds.
func topFunctions(profilePath string, n int) ([]funcCost, float64, error) {
	out, total, err := functionCosts(profilePath)
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(out, func(a, b funcCost) int {
		return cmp.Or(cmp.Compare(b.FlatSecs, a.FlatSecs), cmp.Compare(a.Func, b.Func))
	})
	return out[:min(n, len(out))], total, nil
}

// topFunctionsByCum is topFunctions ordered by cumulative time: the call paths that cost most.
func topFunctionsByCum(profilePath string, n int) ([]funcCost, float64, error) {
	out, total, err := functionCosts(profilePath)
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(out, func(a, b funcCost) int {
		return cmp.Or(cmp.Compare(b.CumSecs, a.CumSecs), cmp.Compare(a.Func, b.Func))
	})
	return out[:min(n, len(out))], total, nil
}

// functionCosts is every function of a CPU profile with its flat and cumulative seconds, and the
// profile's total.
func functionCosts(profilePath string) ([]funcCost, float64, error) {
	f, err := os.Open(profilePath)
	if err != nil {
		return nil, 0, fmt.Errorf("opening the profile: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, 0, fmt.Errorf("parsing the profile %s: %w", profilePath, err)
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, 0, fmt.Errorf("the profile %s holds no cpu nanoseconds", profilePath)
	}
	costs := map[string]*funcCost{}
	cost := func(name string) *funcCost {
		c, ok := costs[name]
		if !ok {
			c = &funcCost{Func: name}
			costs[name] = c
		}
		return c
	}
	var total float64
	for _, s := range p.Sample {
		secs := float64(s.Value[idx]) / 1e9
		total += secs
		seen := map[string]bool{}
		// Location[0] is the leaf; a location's Line[0] is its innermost inlined function.
		for li, loc := range s.Location {
			for ln, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if li == 0 && ln == 0 {
					cost(name).FlatSecs += secs
				}
				if !seen[name] {
					seen[name] = true
					cost(name).CumSecs += secs
				}
			}
		}
	}
	out := make([]funcCost, 0, len(costs))
	for _, c := range costs {
		out = append(out, *c)
	}
	return out, total, nil
}

// phaseCost adds up the component deltas of a phase that runs in separate stretches (its
// batches, say): the sum of each stretch's growth, held as a snapshot taken at the zero time
// plus the stretches' total length, so that since(componentSnapshot{}) makes it a delta.
type phaseCost struct {
	sum       componentSnapshot
	stretches int
}

// add counts the stretch from before to after. Queue depths and pending pods are after's.
func (p *phaseCost) add(before, after componentSnapshot) {
	if p.sum.CPU == nil {
		p.sum = componentSnapshot{CPU: map[string]float64{}, API: map[string]sumCount{}, APICodes: map[string]float64{},
			Etcd: map[string]sumCount{}, Queues: map[string]queueStats{}}
	}
	p.stretches++
	p.sum.At = p.sum.At.Add(after.At.Sub(before.At))
	p.sum.MachineBusy += after.MachineBusy - before.MachineBusy
	// A process restarted in between has a smaller total: its growth is unknown, not negative.
	for name, v := range after.CPU {
		if g := v - before.CPU[name]; g >= 0 {
			p.sum.CPU[name] += g
		}
	}
	addCalls := func(sum, now, prev map[string]sumCount) {
		for k, v := range now {
			if g := v.minus(prev[k]); g.Count > 0 {
				sum[k] = sumCount{sum[k].Sum + g.Sum, sum[k].Count + g.Count}
			}
		}
	}
	addCalls(p.sum.API, after.API, before.API)
	addCalls(p.sum.Etcd, after.Etcd, before.Etcd)
	for code, n := range after.APICodes {
		if g := n - before.APICodes[code]; g > 0 {
			p.sum.APICodes[code] += g
		}
	}
	for name, q := range after.Queues {
		b, s := before.Queues[name], p.sum.Queues[name]
		if g := q.Adds - b.Adds; g > 0 {
			s.Adds += g
			w, k := q.Wait.minus(b.Wait), q.Work.minus(b.Work)
			s.Wait = sumCount{s.Wait.Sum + w.Sum, s.Wait.Count + w.Count}
			s.Work = sumCount{s.Work.Sum + k.Sum, s.Work.Count + k.Count}
		}
		s.Depth = q.Depth
		p.sum.Queues[name] = s
	}
	att := after.SchedulerAttempts.minus(before.SchedulerAttempts)
	p.sum.SchedulerAttempts = sumCount{p.sum.SchedulerAttempts.Sum + att.Sum, p.sum.SchedulerAttempts.Count + att.Count}
	p.sum.SchedulerPending = after.SchedulerPending
}

// delta is the phase's summed growth; ok is false when no stretch was counted.
func (p *phaseCost) delta() (componentDelta, bool) {
	if p.stretches == 0 {
		return componentDelta{}, false
	}
	return p.sum.since(componentSnapshot{}), true
}
