package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/opi-bridge/opi/localkube"
)

// Targets of the benchmark (the issue that asked for it).
const (
	targetDesireRatio    = 0.8   // opi's desire throughput / the client-go floor's
	targetListSpeedup    = 20.0  // live LIST p50 / GET /apps p50, at 10,000 apps
	targetInstancesRatio = 1.5   // instances p50 at N / at 10 apps
	targetRSSMB          = 150.0 // peak RSS at 10,000 apps
	targetKBPerApp       = 15.0  // the same, per app
	targetN              = 10000
)

// results is everything one run measured; it is the JSON line.
type results struct {
	Date        string  `json:"date"`
	N           int     `json:"n"`
	Backend     string  `json:"backend"`
	Desired     int     `json:"desired_per_phase"`
	Concurrency int     `json:"concurrency"`
	Batch       int     `json:"batch"`
	KubeQPS     int     `json:"kube_qps"`
	KubeBurst   int     `json:"kube_burst"`
	CtrlQPS     int     `json:"controller_qps"`
	CtrlBurst   int     `json:"controller_burst"`
	Nodes       int     `json:"nodes"`
	Elapsed     float64 `json:"elapsed_s"`

	Floor           phase          `json:"floor_desire"`
	FloorSteps      []step         `json:"floor_calls"`
	Desire          phase          `json:"opi_desire"`
	DesireRatio     float64        `json:"desire_ratio"`
	DesireAPI       map[string]int `json:"opi_desire_api_requests"`
	DesireAPIPerApp float64        `json:"opi_desire_api_requests_per_app"`
	FloorOthersCPU  float64        `json:"floor_phase_others_cpu_share"`
	DesireOthersCPU float64        `json:"opi_phase_others_cpu_share"`
	FloorCleanup    float64        `json:"floor_cleanup_s"`
	PodsSettle      float64        `json:"pods_running_after_desire_s"`

	Apps        reads   `json:"get_apps"`
	List        reads   `json:"live_list"`
	ListSpeedup float64 `json:"list_p50_over_get_apps_p50"`

	Instances10     reads   `json:"instances_at_10"`
	InstancesN      reads   `json:"instances_at_n"`
	InstancesRatio  float64 `json:"instances_p50_ratio"`
	APIPerAppsCall  float64 `json:"api_requests_per_get_apps"`
	APIPerInstances float64 `json:"api_requests_per_instances"`

	Stop          phase          `json:"opi_stop"`
	StopAPI       map[string]int `json:"opi_stop_api_requests"`
	StopAPIPerApp float64        `json:"opi_stop_api_requests_per_app"`

	IdleRSS         float64 `json:"rss_idle_mb"`
	Peak            float64 `json:"rss_peak_mb"`
	SteadyRSS       float64 `json:"rss_steady_mb"`
	PeakKBPerApp    float64 `json:"rss_peak_kb_per_app"`
	SteadyKBPerApp  float64 `json:"rss_steady_kb_per_app"`
	MarginalKBPerAp float64 `json:"rss_peak_minus_idle_kb_per_app"`
	// RSSByApps is opi's RSS after each of its desire batches; RSSSlope its least-squares
	// slope (KB per app, over the batches after the first, which also pays for code first
	// run); RSSAt10k the peak projected to 10,000 apps with that slope.
	RSSByApps []rssPoint `json:"rss_by_apps"`
	RSSSlope  float64    `json:"rss_slope_kb_per_app"`
	RSSAt10k  float64    `json:"rss_peak_projected_10000_mb"`
	HeapInuse float64    `json:"go_heap_inuse_bytes"`
	HeapAlloc float64    `json:"go_heap_alloc_bytes"`
	GoSys     float64    `json:"go_sys_bytes"`

	Machine machine `json:"machine"`
}

// step is the latency of one kind of call in the floor.
type step struct {
	Call string  `json:"call"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
}

type machine struct {
	CPUs       int     `json:"cpus"`
	CPUModel   string  `json:"cpu_model"`
	MemoryGiB  float64 `json:"memory_gib"`
	Go         string  `json:"go"`
	Kubernetes string  `json:"kubernetes"`
	Kwok       string  `json:"kwok"`
	LoadStart  string  `json:"loadavg_start"`
	LoadEnd    string  `json:"loadavg_end"`
	OthersCPU  float64 `json:"others_cpu_share"`
}

func newResults(cfg config) *results {
	r := &results{
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), N: cfg.n, Backend: cfg.backend, Desired: cfg.n - warmApps,
		Concurrency: cfg.concurrency, KubeQPS: cfg.qps, KubeBurst: cfg.burst,
		CtrlQPS: cfg.ctrlQPS, CtrlBurst: cfg.ctrlBurst, Nodes: cfg.nodes,
	}
	r.Machine = machine{
		CPUs: numCPU(), CPUModel: cpuModel(), MemoryGiB: memGiB(), Go: runtime.Version(),
		LoadStart: loadavg(),
	}
	r.Machine.Kubernetes, r.Machine.Kwok = pins()
	return r
}

// finish derives the ratios once every phase has run.
func (r *results) finish(cpu0, cpu1 cpuSample) {
	r.DesireRatio = ratio(r.Desire.Throughput, r.Floor.Throughput)
	r.ListSpeedup = ratio(r.List.P50, r.Apps.P50)
	r.InstancesRatio = ratio(r.InstancesN.P50, r.Instances10.P50)
	r.APIPerAppsCall = ratio(r.Apps.APIRequests, float64(r.Apps.Calls))
	r.APIPerInstances = ratio(r.InstancesN.APIRequests+r.Instances10.APIRequests, float64(r.InstancesN.Calls+r.Instances10.Calls))
	r.PeakKBPerApp = r.Peak * 1000 / float64(r.N)
	r.SteadyKBPerApp = r.SteadyRSS * 1000 / float64(r.N)
	r.MarginalKBPerAp = (r.Peak - r.IdleRSS) * 1000 / float64(r.N)
	r.RSSSlope = rssSlope(r.RSSByApps)
	r.RSSAt10k = r.Peak + r.RSSSlope*float64(max(0, targetN-r.N))/1000
	r.Machine.LoadEnd = loadavg()
	r.Machine.OthersCPU = othersShare(cpu0, cpu1)
}

// rssPoint is opi's RSS (MB) with Apps apps desired.
type rssPoint struct {
	Apps int     `json:"apps"`
	MB   float64 `json:"mb"`
}

// rssSlope is the least-squares slope of RSS over apps, in KB per app, leaving out the first
// point; 0 with fewer than three points.
func rssSlope(points []rssPoint) float64 {
	if len(points) < 3 {
		return 0
	}
	points = points[1:]
	var sx, sy, sxx, sxy float64
	for _, p := range points {
		x, y := float64(p.Apps), p.MB
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(points))
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d * 1000
}

func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func verbs(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// checks are the targets, each with whether this run met it.
type check struct {
	name string
	ok   bool
	miss string // what was missed, for the notes
}

func (r *results) checks() []check {
	rssLimit := targetKBPerApp * float64(r.N) / 1000
	return []check{
		{"desire ratio", r.DesireRatio >= targetDesireRatio && r.Desire.Errors == 0,
			desireMiss(r)},
		{"list speedup", r.ListSpeedup >= targetListSpeedup,
			fmt.Sprintf("GET /apps p50 is only %.1f × faster than a live LIST (target ≥ %.0f ×)", r.ListSpeedup, targetListSpeedup)},
		{"reads api", r.APIPerAppsCall == 0 && r.APIPerInstances == 0,
			fmt.Sprintf("reads made API server requests: %.3f per GET /apps, %.3f per instances call", r.APIPerAppsCall, r.APIPerInstances)},
		{"instances ratio", r.InstancesRatio <= targetInstancesRatio,
			fmt.Sprintf("instances p50 at %d apps is %.2f × its p50 at 10 apps (target ≤ %.1f)", r.N, r.InstancesRatio, targetInstancesRatio)},
		{"rss", r.Peak <= rssLimit,
			fmt.Sprintf("opi's peak RSS is %.1f MB = %.1f KB per app (target ≤ %.0f KB per app = %.1f MB at %d apps); its RSS with no app was %.1f MB, the growth %.1f KB per app",
				r.Peak, r.PeakKBPerApp, targetKBPerApp, rssLimit, r.N, r.IdleRSS, r.MarginalKBPerAp)},
		{"rss at 10000", r.RSSAt10k <= targetRSSMB,
			fmt.Sprintf("opi's peak RSS projected to %d apps is %.1f MB (target ≤ %.0f MB): peak %.1f MB at %d apps plus %.2f KB per further app", targetN, r.RSSAt10k, targetRSSMB, r.Peak, r.N, r.RSSSlope)},
	}
}

// desireMiss says how the desire target was missed: throughput, failures or both.
func desireMiss(r *results) string {
	var parts []string
	if r.DesireRatio < targetDesireRatio {
		parts = append(parts, fmt.Sprintf("desire throughput through opi is %.2f × the client-go floor (target ≥ %.1f)", r.DesireRatio, targetDesireRatio))
	} else {
		parts = append(parts, fmt.Sprintf("desire throughput through opi is %.2f × the client-go floor, but not every desire succeeded", r.DesireRatio))
	}
	if f := failures(r.Desire, "desires through opi"); f != "" {
		parts = append(parts, strings.TrimPrefix(f, "; "))
	}
	return strings.Join(parts, ": ")
}

// failures describes a phase's failed calls, if any.
func failures(p phase, what string) string {
	if p.Errors == 0 {
		return ""
	}
	return fmt.Sprintf("; %d %s failed (and were desired again, untimed, before the reads), the first with: %s", p.Errors, what, strings.TrimSpace(p.FirstError))
}

// table is the markdown table of the run.
func (r *results) table() string {
	c := r.checks()
	var b strings.Builder
	row := func(metric, value, target, ok string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", metric, value, target, ok)
	}
	lat := func(p phase) string {
		s := fmt.Sprintf("%.1f apps/s (p50 %.1f ms, p99 %.1f ms)", p.Throughput, p.P50, p.P99)
		if p.Errors > 0 {
			s += fmt.Sprintf(", %d errors", p.Errors)
		}
		return s
	}
	b.WriteString("| metric | value | target | met? |\n| --- | --- | --- | --- |\n")
	row("apps in the cluster at the reads (N)", fmt.Sprintf("%d (%d desired by each of floor and opi, alternating batches of %d, concurrency %d)", r.N, r.Desired, r.Batch, r.Concurrency), "", "")
	row("desire through opi (PUT /apps/{process_guid})", lat(r.Desire), "", "")
	row("desire floor: same objects with client-go", lat(r.Floor), "", "")
	var calls []string
	for _, st := range r.FloorSteps {
		calls = append(calls, fmt.Sprintf("%s %.0f/%.0f", st.Call, st.P50, st.P99))
	}
	row("floor, each call's p50/p99 (ms)", strings.Join(calls, "; "), "", "")
	row("**desire throughput, opi / floor**", fmt.Sprintf("**%.2f**", r.DesireRatio), fmt.Sprintf("≥ %.1f", targetDesireRatio), met(c[0].ok))
	row("API server requests per desire (opi)", fmt.Sprintf("%.2f (%s)", r.DesireAPIPerApp, verbs(r.DesireAPI)), "", "")
	row(fmt.Sprintf("GET /apps at N (%d sequential, then %d concurrent)", r.Apps.Calls-burstCount(r.Apps), burstCount(r.Apps)),
		fmt.Sprintf("p50 %.2f ms, p99 %.2f ms; burst p50 %.2f ms, p99 %.2f ms; %s", r.Apps.P50, r.Apps.P99, r.Apps.BurstP50, r.Apps.BurstP99, size(r.Apps.Bytes)), "", "")
	row(fmt.Sprintf("live LIST of the N %s (client-go, protobuf)", workloadKind(r.Backend)+"s"),
		fmt.Sprintf("p50 %.1f ms, p99 %.1f ms; burst p50 %.1f ms, p99 %.1f ms", r.List.P50, r.List.P99, r.List.BurstP50, r.List.BurstP99), "", "")
	row("**LIST p50 / GET /apps p50**", fmt.Sprintf("**%.1f ×** (p99: %.1f ×)", r.ListSpeedup, ratio(r.List.P99, r.Apps.P99)),
		fmt.Sprintf("≥ %.0f × (at %d apps)", targetListSpeedup, targetN), met(c[1].ok))
	row("API server requests per GET /apps", fmt.Sprintf("%.3f (%.0f in %d calls%s)", r.APIPerAppsCall, r.Apps.APIRequests, r.Apps.Calls, janitorNote(r.Apps)), "0", met(r.APIPerAppsCall == 0))
	row("instances with 10 apps", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", r.Instances10.P50, r.Instances10.P99), "", "")
	row("instances at N", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", r.InstancesN.P50, r.InstancesN.P99), "", "")
	row("**instances p50, at N / with 10 apps**", fmt.Sprintf("**%.2f**", r.InstancesRatio), fmt.Sprintf("≤ %.1f", targetInstancesRatio), met(c[3].ok))
	row("API server requests per instances call", fmt.Sprintf("%.3f (%.0f in %d calls%s)", r.APIPerInstances, r.Instances10.APIRequests+r.InstancesN.APIRequests,
		r.Instances10.Calls+r.InstancesN.Calls, janitorNote(reads{Janitor: r.Instances10.Janitor + r.InstancesN.Janitor})), "0", met(r.APIPerInstances == 0))
	row("stop through opi (PUT /apps/{guid}/{version}/stop)", lat(r.Stop), "", "")
	row("API server requests per stop (opi)", fmt.Sprintf("%.2f (%s)", r.StopAPIPerApp, verbs(r.StopAPI)), "", "")
	row("opi RSS with no app", fmt.Sprintf("%.1f MB", r.IdleRSS), "", "")
	row("**opi peak RSS**", fmt.Sprintf("**%.1f MB = %.1f KB/app** (growth over idle: %.1f KB/app)", r.Peak, r.PeakKBPerApp, r.MarginalKBPerAp),
		fmt.Sprintf("≤ %.0f KB/app (%.0f MB at %d)", targetKBPerApp, targetRSSMB, targetN), met(c[4].ok))
	row("opi RSS growth per app (least-squares slope over its desire batches)", fmt.Sprintf("%.2f KB/app", r.RSSSlope), "", "")
	row("**opi peak RSS projected to 10,000 apps** (peak + slope × the apps to 10,000)", fmt.Sprintf("**%.1f MB**", r.RSSAt10k),
		fmt.Sprintf("≤ %.0f MB", targetRSSMB), met(c[5].ok))
	row("opi steady RSS after the reads", fmt.Sprintf("%.1f MB = %.1f KB/app (Go heap in use %.1f MB)", r.SteadyRSS, r.SteadyKBPerApp, r.HeapInuse/1e6), "", "")
	row("pods of all N apps running, after the last desire", fmt.Sprintf("%.1f s", r.PodsSettle), "", "")
	row("floor namespace deleted and gone, after the last desire", fmt.Sprintf("%.1f s", r.FloorCleanup), "", "")
	row("CPU used by other processes (share of all cores)", fmt.Sprintf("floor batches %.0f %%, opi batches %.0f %%, whole run %.0f %%",
		100*r.FloorOthersCPU, 100*r.DesireOthersCPU, 100*r.Machine.OthersCPU), "", "")
	row("whole run", fmt.Sprintf("%.1f min", r.Elapsed/60), "", "")
	return b.String()
}

// janitorNote says what was left out of a read window's count.
func janitorNote(r reads) string {
	s := "; watches excluded"
	if r.Janitor > 0 {
		s += fmt.Sprintf("; %.0f janitor sweep LISTs in the window excluded", r.Janitor)
	}
	return s
}

func burstCount(r reads) int {
	// Sequential calls are counted first; the rest were the burst.
	return r.Calls - seqCalls
}

// seqCalls is set from the configuration, for the table's labels.
var seqCalls int

func size(n int) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

func (r *results) jsonLine() (string, error) {
	b, err := json.Marshal(r)
	return string(b), err
}

// record appends the run to a markdown file: date, N, machine, the table, notes.
func record(path string, r *results, table, line string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s — N = %d, backend %s\n\n", r.Date, r.N, r.Backend)
	m := r.Machine
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %.0f GiB RAM; %s; Kubernetes %s and kwok %s (tools/kube/go.mod). "+
		"Load average %s at the start, %s at the end. Controllers at %d/%d requests/s, opi and the floor client at %d/%d; %d kwok nodes.\n\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.Go, m.Kubernetes, m.Kwok, m.LoadStart, m.LoadEnd, r.CtrlQPS, r.CtrlBurst, r.KubeQPS, r.KubeBurst, r.Nodes)
	b.WriteString(table)
	b.WriteString("\nNotes:\n\n")
	for _, c := range r.checks() {
		if !c.ok {
			fmt.Fprintf(&b, "- Missed: %s.\n", c.miss)
		}
	}
	if r.Floor.Errors > 0 {
		fmt.Fprintf(&b, "- %d floor apps failed, the first with: %s.\n", r.Floor.Errors, r.Floor.FirstError)
	}
	if r.Stop.Errors > 0 {
		fmt.Fprintf(&b, "- %d stops failed (and were stopped again, untimed), the first with: %s.\n", r.Stop.Errors, r.Stop.FirstError)
	}
	if r.N < targetN {
		fmt.Fprintf(&b, "- The GET /apps speedup and RSS targets are set at %d apps; at N = %d the fixed part of opi's memory weighs more per app.\n", targetN, r.N)
	}
	if m.OthersCPU > 0.05 {
		fmt.Fprintf(&b, "- Other processes (other engineers' test suites on this shared machine) used %.0f %% of the CPUs during the run "+
			"(%.0f %% during the floor's desire batches, %.0f %% during opi's): absolute timings are disturbed; ratios measured in the same run are what count.\n",
			100*m.OthersCPU, 100*r.FloorOthersCPU, 100*r.DesireOthersCPU)
	}
	if note := strings.TrimSpace(noteFlag); note != "" {
		fmt.Fprintf(&b, "- %s\n", note)
	}
	fmt.Fprintf(&b, "\n<details><summary>JSON</summary>\n\n```json\n%s\n```\n</details>\n", line)

	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// noteFlag is -note, for record.
var noteFlag string

func numCPU() int { return runtime.NumCPU() }

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func memGiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb float64
	fmt.Sscanf(string(b), "MemTotal: %f kB", &kb)
	return kb / (1 << 20)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// pins are the Kubernetes and kwok versions tools/kube/go.mod pins.
func pins() (kubernetes, kwok string) {
	kubernetes, kwok = "?", "?"
	root, err := localkube.RepoRoot()
	if err != nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(root, "tools", "kube", "go.mod"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "k8s.io/kubernetes":
			kubernetes = f[1]
		case "sigs.k8s.io/kwok":
			kwok = f[1]
		}
	}
	return
}
