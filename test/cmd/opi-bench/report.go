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
	targetDesireRatioOne  = 0.7 // opi's desire throughput / the one-Deployment floor's
	targetDesireRatioSame = 0.9 // opi's desire throughput / the same-objects floor's
	targetBatchRatio      = 1.5 // opi's last batch / its batch ending nearest 1,000 apps, per desire
	targetBatchApps       = 1000
	targetListSpeedup     = 100.0 // live LIST p50 / GET /apps p50, at 1,000 and 10,000 apps
	targetInstancesRatio  = 1.5   // instances p50 at N / at 10 apps
	targetN               = 10000
)

// targetRSSMB is opi's peak RSS target at the N where it is checked.
var targetRSSMB = map[int]float64{1000: 45, 10000: 100}

// targetApps is the N of the RSS and GET /apps targets nearest n; checked says whether n is it.
func targetApps(n int) (at int, checked bool) {
	at = 1000
	if abs(n-10000) < abs(n-1000) {
		at = 10000
	}
	return at, n == at
}

// results is everything one run measured; it is the JSON line.
type results struct {
	Date    string `json:"date"`
	N       int    `json:"n"`
	Backend string `json:"backend"`
	// Routing is opi's routing mode when -opi-args give one other than the default (ingress):
	// the tables keep the modes' rows apart.
	Routing     string  `json:"routing,omitempty"`
	Desired     int     `json:"desired_per_phase"`
	Concurrency int     `json:"concurrency"`
	Batch       int     `json:"batch"`
	FloorEvery  int     `json:"floor_every"`
	KubeQPS     int     `json:"kube_qps"`
	KubeBurst   int     `json:"kube_burst"`
	CtrlQPS     int     `json:"controller_qps"`
	CtrlBurst   int     `json:"controller_burst"`
	Nodes       int     `json:"nodes"`
	Elapsed     float64 `json:"elapsed_s"`
	// Tuning is "large-cluster" (localkube.LargeClusterTuning, TuningSettings) or "defaults".
	Tuning         string           `json:"control_plane_tuning"`
	TuningSettings localkube.Tuning `json:"control_plane_tuning_settings"`

	// FloorKinds are the kinds opi made for the template app (the same-objects floor's).
	FloorKinds []string `json:"floor_kinds"`
	FloorOne   phase    `json:"floor_one_deployment_desire"`
	FloorSame  phase    `json:"floor_same_objects_desire"`
	FloorSteps []step   `json:"floor_same_objects_calls"`
	Desire     phase    `json:"opi_desire"`
	// DesirePaired is opi on the batches the floors ran on: what the ratios compare.
	DesirePaired    phase          `json:"opi_desire_floor_batches"`
	DesireRatioOne  float64        `json:"desire_ratio_one_deployment"`
	DesireRatioSame float64        `json:"desire_ratio_same_objects"`
	DesireAPI       map[string]int `json:"opi_desire_api_requests"`
	DesireAPIPerApp float64        `json:"opi_desire_api_requests_per_app"`
	FloorOthersCPU  float64        `json:"floor_phase_others_cpu_share"`
	DesireOthersCPU float64        `json:"opi_phase_others_cpu_share"`
	PodsSettle      float64        `json:"pods_running_after_desire_s"`
	// Batches are the desire batches; BatchAt1000 and BatchLast index them; BatchRatio is the
	// last's seconds per desire over the other's.
	Batches     []batchRecord `json:"batches"`
	BatchAt1000 int           `json:"batch_nearest_1000"`
	BatchLast   int           `json:"batch_last"`
	BatchRatio  float64       `json:"batch_ratio_last_over_1000"`

	Startup startup      `json:"startup"`
	Phases  phaseSeconds `json:"phase_seconds"`

	Apps        reads   `json:"get_apps"`
	List        reads   `json:"live_list"`
	ListSpeedup float64 `json:"list_p50_over_get_apps_p50"`

	// BurstApps and BurstInstances are the reads under a burst (burst.go).
	BurstApps      burstRead `json:"reads_burst_get_apps"`
	BurstInstances burstRead `json:"reads_burst_instances"`

	Instances10     reads   `json:"instances_at_10"`
	InstancesN      reads   `json:"instances_at_n"`
	InstancesRatio  float64 `json:"instances_p50_ratio"`
	APIPerAppsCall  float64 `json:"api_requests_per_get_apps"`
	APIPerInstances float64 `json:"api_requests_per_instances"`

	Stop          phase          `json:"opi_stop"`
	StopAPI       map[string]int `json:"opi_stop_api_requests"`
	StopAPIPerApp float64        `json:"opi_stop_api_requests_per_app"`

	IdleRSS   float64 `json:"rss_idle_mb"`
	Peak      float64 `json:"rss_peak_mb"`
	SteadyRSS float64 `json:"rss_steady_mb"`
	// SteadyAnon and SteadyFile split opi's RSS once the steady samples are taken: anonymous
	// memory (the Go heap, stacks, the runtime) and file-backed (the binary's pages).
	SteadyAnon float64 `json:"rss_steady_anon_mb,omitempty"`
	SteadyFile float64 `json:"rss_steady_file_mb,omitempty"`
	// Refused are opi's API requests refused (or not answered) from its start to the steady
	// sample, by "verb resource code" (opi_kube_api_refusals_total).
	Refused         map[string]int `json:"opi_api_refused_until_steady,omitempty"`
	PeakKBPerApp    float64        `json:"rss_peak_kb_per_app"`
	SteadyKBPerApp  float64        `json:"rss_steady_kb_per_app"`
	MarginalKBPerAp float64        `json:"rss_peak_minus_idle_kb_per_app"`
	// RSSByApps is opi's RSS after each of its desire batches; RSSSlope its least-squares
	// slope (KB per app, over the batches after the first, which also pays for code first
	// run); RSSAt10k the peak projected to 10,000 apps with that slope.
	RSSByApps []rssPoint `json:"rss_by_apps"`
	RSSSlope  float64    `json:"rss_slope_kb_per_app"`
	RSSAt10k  float64    `json:"rss_peak_projected_10000_mb"`
	HeapInuse float64    `json:"go_heap_inuse_bytes"`
	HeapAlloc float64    `json:"go_heap_alloc_bytes"`
	GoSys     float64    `json:"go_sys_bytes"`
	// RSSTargetMB is the peak RSS target at TargetApps, the target N nearest N; the RSS and
	// GET /apps targets are checked only when N is TargetApps.
	RSSTargetMB    float64 `json:"rss_peak_target_mb"`
	TargetApps     int     `json:"target_n"`
	TargetsChecked bool    `json:"rss_and_get_apps_targets_checked"`

	// Where is each phase's cost by component: CPU by process, API server requests, etcd,
	// the controller-manager's queues, the scheduler.
	Where []phaseDelta `json:"where_the_time_went"`
	// Profiles are the CPU profiles taken during opi's last desire batch (-profile).
	ProfileSeconds int                `json:"profile_seconds,omitempty"`
	ProfileDir     string             `json:"profile_dir,omitempty"`
	ProfileError   string             `json:"profile_error,omitempty"`
	Profiles       []componentProfile `json:"profiles,omitempty"`

	Machine machine `json:"machine"`
	// Notes are the report's notes (missed targets, failures, disturbances, -note), so that
	// the recorded line says what the printed report said.
	Notes []string `json:"notes,omitempty"`
}

// batchRecord is one desire batch: opi's, and the floors' when they ran on it.
type batchRecord struct {
	Batch                  int     `json:"batch"`
	Apps                   int     `json:"apps_after"`
	Count                  int     `json:"count"`
	OpiSeconds             float64 `json:"opi_s"`
	OpiPerSecond           float64 `json:"opi_per_second"`
	OneDeploymentPerSecond float64 `json:"one_deployment_per_second,omitempty"`
	SameObjectsPerSecond   float64 `json:"same_objects_per_second,omitempty"`
	// CPUMsPerApp is the CPU milliseconds per desire of each process during opi's batch.
	CPUMsPerApp map[string]float64 `json:"cpu_ms_per_app,omitempty"`
}

// phaseDelta is one phase's component costs, summed over its stretches (batches, clean-ups).
type phaseDelta struct {
	Phase     string `json:"phase"`
	Stretches int    `json:"stretches"`
	componentDelta
}

// componentProfile is one component's CPU profile and its costliest functions.
type componentProfile struct {
	Component  string     `json:"component"`
	File       string     `json:"file"`
	CPUSeconds float64    `json:"cpu_seconds"`
	Top        []funcCost `json:"top_by_cum"`
}

// msPerApp is each process's CPU milliseconds per app over n apps.
func (d componentDelta) msPerApp(n int) map[string]float64 {
	out := map[string]float64{}
	for _, c := range d.CPU {
		out[c.Component] = c.Seconds * 1000 / float64(max(n, 1))
	}
	return out
}

// The processes in the order the report lists them, with their short names.
var components = []struct{ name, short string }{
	{componentOpi, "opi"}, {localkube.APIServer, "apiserver"}, {localkube.Etcd, "etcd"},
	{localkube.ControllerManager, "controller-manager"}, {localkube.Scheduler, "scheduler"},
	{localkube.Kwok, "kwok"}, {componentBench, "bench"},
}

func componentRank(name string) int {
	for i, c := range components {
		if c.name == name {
			return i
		}
	}
	return len(components)
}

// secondsPerDesire is opi's batch time per desire.
func (b batchRecord) secondsPerDesire() float64 { return ratio(b.OpiSeconds, float64(b.Count)) }

// startup is opi's restart with N apps: seconds from its start to /readyz answering 200 and to
// GET /apps answering 200 (first at all, then listing every app), and its peak RSS meanwhile.
type startup struct {
	Exit           float64 `json:"sigterm_to_exit_s"`
	Ready          float64 `json:"ready_s"`
	FirstApps      float64 `json:"first_get_apps_200_s"`
	FirstAppsCount int     `json:"first_get_apps_200_apps"`
	FullApps       float64 `json:"first_full_get_apps_s"`
	PeakRSS        float64 `json:"rss_peak_mb"`
	PeakBefore     float64 `json:"rss_peak_before_restart_mb"`
}

// phaseSeconds is the wall time of each phase of the run.
type phaseSeconds struct {
	ControlPlane float64 `json:"control_plane"`
	OpiStart     float64 `json:"opi_start"`
	Template     float64 `json:"template"`
	WarmUp       float64 `json:"warm_up"`
	DesireOpi    float64 `json:"desire_opi"`
	FloorOne     float64 `json:"floor_one_deployment"`
	FloorSame    float64 `json:"floor_same_objects"`
	FloorCleanup float64 `json:"floor_cleanup"`
	Quiesce      float64 `json:"quiesce"`
	Settle       float64 `json:"pods_settle"`
	Reads        float64 `json:"reads"`
	ReadsBurst   float64 `json:"reads_burst"`
	Steady       float64 `json:"steady_rss"`
	Startup      float64 `json:"startup"`
	Stop         float64 `json:"stop"`
}

func (p phaseSeconds) String() string {
	parts := []string{}
	for _, x := range []struct {
		name string
		s    float64
	}{
		{"control plane", p.ControlPlane}, {"opi start", p.OpiStart}, {"template", p.Template}, {"warm-up", p.WarmUp},
		{"desire opi", p.DesireOpi}, {"one-Deployment floor", p.FloorOne}, {"same-objects floor", p.FloorSame},
		{"floor clean-ups", p.FloorCleanup}, {"quiesce before batches", p.Quiesce}, {"pods settle", p.Settle}, {"reads", p.Reads}, {"reads under a burst", p.ReadsBurst}, {"steady RSS", p.Steady},
		{"start-up", p.Startup}, {"stop", p.Stop},
	} {
		parts = append(parts, fmt.Sprintf("%s %.0f", x.name, x.s))
	}
	return strings.Join(parts, "; ")
}

func (p phaseSeconds) total() float64 {
	return p.ControlPlane + p.OpiStart + p.Template + p.WarmUp + p.DesireOpi + p.FloorOne + p.FloorSame +
		p.FloorCleanup + p.Settle + p.Reads + p.ReadsBurst + p.Steady + p.Startup + p.Stop
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

// dropWorkFolder removes a run's work folder unless keep is set or the run failed (*err set, read
// when the run returns), where it says it kept it.
func dropWorkFolder(dir string, keep bool, err *error) {
	if keep || *err != nil {
		logf("work folder kept: %s", dir)
		return
	}
	_ = os.RemoveAll(dir)
}

// thisMachine is the machine a run starts on, its load at the start included.
func thisMachine() machine {
	return machine{
		CPUs: numCPU(), CPUModel: cpuModel(), MemoryGiB: memGiB(), Go: runtime.Version(),
		LoadStart: loadavg(),
	}
}

func newResults(cfg config) *results {
	r := &results{
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), N: cfg.n, Backend: cfg.backend, Desired: cfg.n - warmApps,
		Concurrency: cfg.concurrency, KubeQPS: cfg.qps, KubeBurst: cfg.burst,
		CtrlQPS: cfg.ctrlQPS, CtrlBurst: cfg.ctrlBurst, Nodes: cfg.nodes, Tuning: "defaults",
	}
	if cfg.tune {
		r.Tuning, r.TuningSettings = "large-cluster", localkube.LargeClusterTuning()
	}
	if mode := routingOf(cfg.opiArgs); mode != "ingress" {
		r.Routing = mode
	}
	r.TargetApps, r.TargetsChecked = targetApps(cfg.n)
	r.RSSTargetMB = targetRSSMB[r.TargetApps]
	r.Machine = thisMachine()
	r.Machine.Kubernetes, r.Machine.Kwok = pins()
	return r
}

// finish derives the ratios once every phase has run.
func (r *results) finish(cpu0, cpu1 cpuSample) {
	r.DesireRatioOne = ratio(r.DesirePaired.Throughput, r.FloorOne.Throughput)
	r.DesireRatioSame = ratio(r.DesirePaired.Throughput, r.FloorSame.Throughput)
	if len(r.Batches) > 0 {
		r.BatchLast = len(r.Batches) - 1
		for i, b := range r.Batches {
			if abs(b.Apps-targetBatchApps) < abs(r.Batches[r.BatchAt1000].Apps-targetBatchApps) {
				r.BatchAt1000 = i
			}
		}
		r.BatchRatio = ratio(r.Batches[r.BatchLast].secondsPerDesire(), r.Batches[r.BatchAt1000].secondsPerDesire())
	}
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

func abs(x int) int { return max(x, -x) }

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
	at, checked := r.TargetApps, r.TargetsChecked
	return []check{
		{"desire ratio one", r.DesireRatioOne >= targetDesireRatioOne && r.Desire.Errors == 0,
			desireMiss(r, "one-Deployment", r.DesireRatioOne, targetDesireRatioOne)},
		{"desire ratio same", r.DesireRatioSame >= targetDesireRatioSame && r.Desire.Errors == 0,
			desireMiss(r, "same-objects", r.DesireRatioSame, targetDesireRatioSame)},
		{"list speedup", !checked || r.ListSpeedup >= targetListSpeedup,
			fmt.Sprintf("GET /apps p50 is only %.1f × faster than a live LIST at %d apps (target ≥ %.0f ×)", r.ListSpeedup, at, targetListSpeedup)},
		{"reads api", r.APIPerAppsCall == 0 && r.APIPerInstances == 0,
			fmt.Sprintf("reads made API server requests: %.3f per GET /apps, %.3f per instances call", r.APIPerAppsCall, r.APIPerInstances)},
		{"instances ratio", r.InstancesRatio <= targetInstancesRatio,
			fmt.Sprintf("instances p50 at %d apps is %.2f × its p50 at 10 apps (target ≤ %.1f)", r.N, r.InstancesRatio, targetInstancesRatio)},
		{"rss", !checked || r.Peak <= r.RSSTargetMB,
			fmt.Sprintf("opi's peak RSS is %.1f MB at %d apps (target ≤ %.0f MB); its RSS with no app was %.1f MB, the growth %.1f KB per app",
				r.Peak, r.N, r.RSSTargetMB, r.IdleRSS, r.MarginalKBPerAp)},
		{"reads burst apps", len(r.BurstApps.misses()) == 0, strings.Join(r.BurstApps.misses(), "; ")},
		{"reads burst instances", len(r.BurstInstances.misses()) == 0, strings.Join(r.BurstInstances.misses(), "; ")},
		{"batch ratio", !r.batchChecked() || r.BatchRatio <= targetBatchRatio,
			fmt.Sprintf("opi's last batch (at %d apps) took %.2f × per desire its batch at %d apps (target ≤ %.1f)", r.lastBatch().Apps, r.BatchRatio, r.batch1000().Apps, targetBatchRatio)},
	}
}

// desireMiss says how a desire target was missed: throughput, failures or both.
func desireMiss(r *results, floor string, got, want float64) string {
	var parts []string
	if got < want {
		parts = append(parts, fmt.Sprintf("desire throughput through opi is %.2f × the %s floor (target ≥ %.1f)", got, floor, want))
	} else {
		parts = append(parts, fmt.Sprintf("desire throughput through opi is %.2f × the %s floor, but not every desire succeeded", got, floor))
	}
	if f := failures(r.Desire, "desires through opi"); f != "" {
		parts = append(parts, strings.TrimPrefix(f, "; "))
	}
	return strings.Join(parts, ": ")
}

func (r *results) lastBatch() batchRecord { return r.batchAt(r.BatchLast) }
func (r *results) batch1000() batchRecord { return r.batchAt(r.BatchAt1000) }

func (r *results) batchAt(i int) batchRecord {
	if i < len(r.Batches) {
		return r.Batches[i]
	}
	return batchRecord{}
}

// batchChecked says whether the batch target applies: two different batches, the last at
// least twice as far into the run as the one near 1,000 apps.
func (r *results) batchChecked() bool {
	return r.BatchLast != r.BatchAt1000 && r.lastBatch().Apps >= 2*r.batch1000().Apps
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
	ok := func(name string) bool {
		for _, x := range c {
			if x.name == name {
				return x.ok
			}
		}
		panic("no check " + name)
	}
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
	row("apps in the cluster at the reads (N)", fmt.Sprintf("%d (%d desired through opi in %d batches ending at multiples of %d apps, concurrency %d)",
		r.N, r.Desired, len(r.Batches), r.Batch, r.Concurrency), "", "")
	row("control plane tuning", r.tuningString(), "", "")
	row("desire through opi (PUT /apps/{process_guid}), all batches", lat(r.Desire), "", "")
	row("desire through opi, the batches the floors ran on", lat(r.DesirePaired)+fmt.Sprintf("; batches %s", r.floorBatches()), "", "")
	row("desire floor: one Deployment per desire with client-go (env inlined)", lat(r.FloorOne), "", "")
	row("desire floor: same objects with client-go ("+strings.Join(r.FloorKinds, ", ")+"; "+floorOrder(r.FloorKinds)+")", lat(r.FloorSame), "", "")
	var calls []string
	for _, st := range r.FloorSteps {
		calls = append(calls, fmt.Sprintf("%s %.0f/%.0f", st.Call, st.P50, st.P99))
	}
	row("same-objects floor, each call's p50/p99 (ms)", strings.Join(calls, "; "), "", "")
	row("**desire throughput, opi / one-Deployment floor**", fmt.Sprintf("**%.2f**", r.DesireRatioOne), fmt.Sprintf("≥ %.1f", targetDesireRatioOne), met(ok("desire ratio one")))
	row("**desire throughput, opi / same-objects floor**", fmt.Sprintf("**%.2f**", r.DesireRatioSame), fmt.Sprintf("≥ %.1f", targetDesireRatioSame), met(ok("desire ratio same")))
	b1, bl := r.batch1000(), r.lastBatch()
	batchTarget, batchMet := fmt.Sprintf("≤ %.1f", targetBatchRatio), met(ok("batch ratio"))
	if !r.batchChecked() {
		batchTarget, batchMet = batchTarget+" (not checked: N too small)", ""
	}
	row("opi batch time: the batch ending nearest 1,000 apps, the last batch", fmt.Sprintf("%.1f s for %d desires (at %d apps); %.1f s for %d desires (at %d apps)",
		b1.OpiSeconds, b1.Count, b1.Apps, bl.OpiSeconds, bl.Count, bl.Apps), "", "")
	row("**opi batch time per desire, last batch / batch at ~1,000 apps**", fmt.Sprintf("**%.2f**", r.BatchRatio), batchTarget, batchMet)
	if split := r.batchCPUSplit(); split != "" {
		row("CPU ms per desire by process, opi's first batch → its last", split, "", "")
	}
	row("API server requests per desire (opi)", fmt.Sprintf("%.2f (%s)", r.DesireAPIPerApp, verbs(r.DesireAPI)), "", "")
	row(fmt.Sprintf("GET /apps at N (%d sequential, then %d concurrent)", r.Apps.Calls-burstCount(r.Apps), burstCount(r.Apps)),
		fmt.Sprintf("p50 %.2f ms, p99 %.2f ms; burst p50 %.2f ms, p99 %.2f ms; %s", r.Apps.P50, r.Apps.P99, r.Apps.BurstP50, r.Apps.BurstP99, size(r.Apps.Bytes)), "", "")
	row(fmt.Sprintf("live LIST of the N %s (client-go, protobuf)", workloadKind(r.Backend)+"s"),
		fmt.Sprintf("p50 %.1f ms, p99 %.1f ms; burst p50 %.1f ms, p99 %.1f ms", r.List.P50, r.List.P99, r.List.BurstP50, r.List.BurstP99), "", "")
	row("**LIST p50 / GET /apps p50**", fmt.Sprintf("**%.1f ×** (p99: %.1f ×)", r.ListSpeedup, ratio(r.List.P99, r.Apps.P99)),
		r.atTarget(fmt.Sprintf("≥ %.0f ×", targetListSpeedup)), r.metAt(ok("list speedup")))
	row("API server requests per GET /apps", fmt.Sprintf("%.3f (%.0f in %d calls%s)", r.APIPerAppsCall, r.Apps.APIRequests, r.Apps.Calls, janitorNote(r.Apps)), "0", met(r.APIPerAppsCall == 0))
	row("instances with 10 apps", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", r.Instances10.P50, r.Instances10.P99), "", "")
	row("instances at N", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", r.InstancesN.P50, r.InstancesN.P99), "", "")
	row("**instances p50, at N / with 10 apps**", fmt.Sprintf("**%.2f**", r.InstancesRatio), fmt.Sprintf("≤ %.1f", targetInstancesRatio), met(ok("instances ratio")))
	row("API server requests per instances call", fmt.Sprintf("%.3f (%.0f in %d calls%s)", r.APIPerInstances, r.Instances10.APIRequests+r.InstancesN.APIRequests,
		r.Instances10.Calls+r.InstancesN.Calls, janitorNote(reads{Janitor: r.Instances10.Janitor + r.InstancesN.Janitor})), "0", met(r.APIPerInstances == 0))
	for _, x := range []struct {
		b     burstRead
		check string
	}{{r.BurstApps, "reads burst apps"}, {r.BurstInstances, "reads burst instances"}} {
		if b := x.b; b.Callers > 0 {
			row(fmt.Sprintf("%s at N, one caller (%d calls in %.1f s)", b.Read, b.SeqCalls, b.SeqSeconds),
				fmt.Sprintf("p50 %.2f ms, p99 %.2f ms; opi %.3f ms CPU per call (this run %.3f ms)", b.SeqP50, b.SeqP99, b.SeqOpiCPUMs, b.SeqBenchCPUMs), "", "")
			row(fmt.Sprintf("**%s at N, %d closed-loop callers: throughput ÷ what the CPUs allow at opi's sequential CPU per call**", b.Read, b.Callers),
				fmt.Sprintf("**%s**; opi %.2f cores, this run %.2f cores (%.3f ms per call; counting it too: %.2f); others %.0f %% of the CPUs", b.summary(),
					b.OpiCores, b.BenchCores, b.BenchCPUMs, b.ShareWithBench, 100*b.OthersCPU),
				fmt.Sprintf("≥ %.1f; p99 ≤ %.2f × callers ÷ CPUs × the sequential p50; max ≤ %s; 0 requests", targetBurstShare, burstP99Slack, ccTimeout), met(ok(x.check)))
		}
	}
	row("stop through opi (PUT /apps/{guid}/{version}/stop)", lat(r.Stop), "", "")
	row("API server requests per stop (opi)", fmt.Sprintf("%.2f (%s)", r.StopAPIPerApp, verbs(r.StopAPI)), "", "")
	row("opi RSS with no app", fmt.Sprintf("%.1f MB", r.IdleRSS), "", "")
	row("**opi peak RSS**", fmt.Sprintf("**%.1f MB = %.1f KB/app** (growth over idle: %.1f KB/app)", r.Peak, r.PeakKBPerApp, r.MarginalKBPerAp),
		r.atTarget(fmt.Sprintf("≤ %.0f MB", r.RSSTargetMB)), r.metAt(ok("rss")))
	row("opi RSS growth per app (least-squares slope over its desire batches)", fmt.Sprintf("%.2f KB/app", r.RSSSlope), "", "")
	row("opi peak RSS projected to 10,000 apps (peak + slope × the apps to 10,000; information)", fmt.Sprintf("%.1f MB", r.RSSAt10k), "", "")
	row("opi steady RSS after the reads", fmt.Sprintf("%.1f MB = %.1f KB/app (anonymous %.1f MB, the binary's pages %.1f MB; Go heap in use %.1f MB)",
		r.SteadyRSS, r.SteadyKBPerApp, r.SteadyAnon, r.SteadyFile, r.HeapInuse/1e6), "", "")
	if r.Refused != nil {
		refused := verbs(r.Refused)
		if refused == "" {
			refused = "none"
		}
		row("opi's API requests refused or not answered, from its start to the steady sample (verb resource code)", refused, "", "")
	}
	row("pods of all N apps running, after the last desire", fmt.Sprintf("%.1f s", r.PodsSettle), "", "")
	row("floor clean-ups (delete, untimed wait until gone)", fmt.Sprintf("%.1f s in all, %.1f s per clean-up", r.Phases.FloorCleanup, ratio(r.Phases.FloorCleanup, float64(2*len(r.floorBatchList())))), "", "")
	row(fmt.Sprintf("**start-up at N** (opi restarted with %d apps)", r.N), fmt.Sprintf("**ready after %.1f s, first full GET /apps after %.1f s** (first 200 after %.1f s with %d apps; the old opi exited %.1f s after SIGTERM)",
		r.Startup.Ready, r.Startup.FullApps, r.Startup.FirstApps, r.Startup.FirstAppsCount, r.Startup.Exit), "", "")
	row("opi peak RSS during start-up", fmt.Sprintf("%.1f MB (before the restart: %.1f MB)", r.Startup.PeakRSS, r.Startup.PeakBefore), "", "")
	row("opi ready at the run's start (empty cluster)", fmt.Sprintf("%.1f s", r.Phases.OpiStart), "", "")
	row("wall time per phase (s)", r.Phases.String(), "", "")
	row("CPU used by other processes (share of all cores)", fmt.Sprintf("floor batches %.0f %%, opi batches %.0f %%, whole run %.0f %%",
		100*r.FloorOthersCPU, 100*r.DesireOthersCPU, 100*r.Machine.OthersCPU), "", "")
	row("whole run", fmt.Sprintf("%.1f min (phases above: %.1f min)", r.Elapsed/60, r.Phases.total()/60), "", "")
	return b.String()
}

// floorBatchList are the numbers of the batches the floors ran on.
func (r *results) floorBatchList() []string {
	var out []string
	for _, b := range r.Batches {
		if b.SameObjectsPerSecond > 0 || b.OneDeploymentPerSecond > 0 {
			out = append(out, fmt.Sprintf("%d (at %d apps)", b.Batch, b.Apps))
		}
	}
	return out
}

func (r *results) floorBatches() string { return strings.Join(r.floorBatchList(), ", ") }

func firstOr(xs []string) string {
	if len(xs) == 0 {
		return "workload"
	}
	return xs[0]
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

// report is the table, where the time went and the notes.
func (r *results) report() string {
	var b strings.Builder
	b.WriteString(r.table())
	if w := r.whereSection(); w != "" {
		b.WriteString("\n" + w)
	}
	if notes := r.notes(); len(notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range notes {
			// A note indented by two spaces belongs to the one before it.
			if sub, ok := strings.CutPrefix(n, "  "); ok {
				b.WriteString("  - " + sub + "\n")
				continue
			}
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}

// notes are the missed targets, failures, disturbances and profiles of the run.
func (r *results) notes() []string {
	var out []string
	for _, c := range r.checks() {
		if !c.ok {
			out = append(out, fmt.Sprintf("Missed: %s.", c.miss))
		}
	}
	for _, f := range []struct {
		name string
		p    phase
	}{{floorOneDeployment, r.FloorOne}, {floorSameObjects, r.FloorSame}} {
		if f.p.Errors > 0 {
			out = append(out, fmt.Sprintf("%d apps of the %s floor failed, the first with: %s.", f.p.Errors, f.name, f.p.FirstError))
		}
	}
	for _, b := range []burstRead{r.BurstApps, r.BurstInstances} {
		if b.DriverSaturated {
			out = append(out, fmt.Sprintf("This run itself used %.2f of the %d CPUs reading the answers of the %s burst (%.3f ms per call): it competes with opi for the cores; "+
				"counting its CPU per call too, the throughput is %.2f × what the CPUs allow.", b.BenchCores, b.CPUs, b.Read, b.BenchCPUMs, b.ShareWithBench))
		}
	}
	if r.Stop.Errors > 0 {
		out = append(out, fmt.Sprintf("%d stops failed (and were stopped again, untimed), the first with: %s.", r.Stop.Errors, r.Stop.FirstError))
	}
	if !r.TargetsChecked {
		out = append(out, fmt.Sprintf("The RSS and GET /apps targets are checked at N = 1,000 and 10,000; at N = %d they are shown against those at %d apps, not checked.", r.N, r.TargetApps))
	}
	if m := r.Machine; m.OthersCPU > 0.05 {
		out = append(out, fmt.Sprintf("Other processes (other engineers' test suites on this shared machine) used %.0f %% of the CPUs during the run "+
			"(%.0f %% during the floor's desire batches, %.0f %% during opi's): absolute timings are disturbed; ratios measured in the same run are what count.",
			100*m.OthersCPU, 100*r.FloorOthersCPU, 100*r.DesireOthersCPU))
	}
	if r.ProfileSeconds > 0 {
		s := fmt.Sprintf("CPU profiles over %d s from the start of opi's last desire batch (at %d apps; profiling costs CPU of its own), in %s; top 10 functions by cumulative CPU seconds:",
			r.ProfileSeconds, r.lastBatch().Apps, r.ProfileDir)
		if r.ProfileError != "" {
			s += " (" + r.ProfileError + ")"
		}
		out = append(out, s)
		for _, p := range r.Profiles {
			var fs []string
			for _, f := range p.Top {
				fs = append(fs, fmt.Sprintf("`%s` %.2f", shortFunc(f.Func), f.CumSecs))
			}
			out = append(out, fmt.Sprintf("  %s (%.2f CPU s): %s", p.Component, p.CPUSeconds, strings.Join(fs, ", ")))
		}
	}
	if note := strings.TrimSpace(noteFlag); note != "" {
		out = append(out, note)
	}
	return out
}

// shortFunc drops a function's package path, keeping the package name.
func shortFunc(f string) string {
	if i := strings.LastIndex(f, "/"); i >= 0 {
		return f[i+1:]
	}
	return f
}

// atTarget is a target as shown in the table: at the N it applies to.
func (r *results) atTarget(t string) string {
	if r.TargetsChecked {
		return fmt.Sprintf("%s (at %d apps)", t, r.TargetApps)
	}
	return fmt.Sprintf("%s at %d apps (not checked at N = %d)", t, r.TargetApps, r.N)
}

func (r *results) metAt(ok bool) string {
	if !r.TargetsChecked {
		return ""
	}
	return met(ok)
}

func (r *results) tuningString() string {
	if r.Tuning != "large-cluster" {
		return r.Tuning
	}
	t := r.TuningSettings
	return fmt.Sprintf("large-cluster (controller-manager deployment/replicaset/endpoint syncs %d/%d/%d; apiserver inflight %d, mutating %d; etcd quota %d GiB; kwok pod parallelism %d)",
		t.ConcurrentDeploymentSyncs, t.ConcurrentReplicaSetSyncs, t.ConcurrentServiceEndpointSyncs, t.MaxRequestsInflight, t.MaxMutatingRequestsInflight,
		t.EtcdQuotaBackendBytes>>30, t.KwokPodParallelism)
}

// batchCPUSplit is each process's CPU ms per desire in opi's first batch and its last, e.g.
// "opi 3.1 → 3.4; apiserver 9.0 → 12.1".
func (r *results) batchCPUSplit() string {
	var first, last *batchRecord
	for i := range r.Batches {
		if r.Batches[i].CPUMsPerApp != nil {
			if first == nil {
				first = &r.Batches[i]
			}
			last = &r.Batches[i]
		}
	}
	if first == nil {
		return ""
	}
	var parts []string
	for _, c := range components {
		a, ok1 := first.CPUMsPerApp[c.name]
		b, ok2 := last.CPUMsPerApp[c.name]
		if !ok1 && !ok2 {
			continue
		}
		if first == last {
			parts = append(parts, fmt.Sprintf("%s %.1f", c.short, a))
		} else {
			parts = append(parts, fmt.Sprintf("%s %.1f → %.1f", c.short, a, b))
		}
	}
	return fmt.Sprintf("%s (batch %d at %d apps → batch %d at %d apps)", strings.Join(parts, "; "), first.Batch, first.Apps, last.Batch, last.Apps)
}

// Rows of the where-the-time-went table: API calls and queues shown per phase, and the least
// time (waiting plus working) that makes a controller-manager queue busy.
const (
	whereCalls    = 4
	whereQueues   = 5
	busyQueueSecs = 0.1
)

// whereSection is one row per phase: CPU seconds by process, the API server's costliest
// requests and the controller-manager's busy queues. The JSON holds every figure.
func (r *results) whereSection() string {
	if len(r.Where) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Where the time went, per phase (wall s; CPU s by process and the whole machine's busy CPU s; the kube-apiserver's costliest requests, watches excluded: count, total s; " +
		"the controller-manager's busy work queues: adds, mean wait/work ms):\n\n")
	b.WriteString("| phase | wall s | CPU s | kube-apiserver requests | controller-manager queues |\n| --- | --- | --- | --- | --- |\n")
	for _, p := range r.Where {
		byName := map[string]float64{}
		for _, c := range p.CPU {
			byName[c.Component] = c.Seconds
		}
		var cpu []string
		for _, c := range components {
			if v, ok := byName[c.name]; ok {
				cpu = append(cpu, fmt.Sprintf("%s %.1f", c.short, v))
			}
		}
		cpu = append(cpu, fmt.Sprintf("machine %.1f", p.MachineBusy))
		var calls []string
		for _, c := range p.API[:min(len(p.API), whereCalls)] {
			calls = append(calls, fmt.Sprintf("%s %d, %.1f", c.Call, c.Count, c.Seconds))
		}
		var queues []string
		for _, q := range p.Queues {
			if q.WaitSecs+q.WorkSecs >= busyQueueSecs && len(queues) < whereQueues {
				queues = append(queues, fmt.Sprintf("%s %d, %.0f/%.0f", q.Name, q.Adds, q.MeanWaitMs, q.MeanWorkMs))
			}
		}
		if len(queues) == 0 {
			queues = []string{"none busy"}
		}
		name := p.Phase
		if p.Stretches > 1 {
			name += fmt.Sprintf(" (%d stretches)", p.Stretches)
		}
		fmt.Fprintf(&b, "| %s | %.1f | %s | %s%s | %s |\n", name, p.Seconds, strings.Join(cpu, ", "), strings.Join(calls, "; "), codesNote(p.APICodes), strings.Join(queues, "; "))
	}
	return b.String()
}

// regenerated says, for the log, which document's tables were written again.
func regenerated(doc string) string {
	if doc == "" {
		return ""
	}
	return " and regenerated the tables of " + doc
}

// noteFlag is -note, for the notes.
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
