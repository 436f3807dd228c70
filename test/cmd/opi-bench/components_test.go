package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/google/pprof/profile"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Trimmed from real scrapes of the local control plane (kube v1.37).
const apiServerMetrics = `# HELP apiserver_request_duration_seconds [STABLE] Response latency distribution in seconds.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1",le="+Inf"} 10
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 0.5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1",le="+Inf"} 4
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 0.2
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 4
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1",le="+Inf"} 3
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 900
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 9
apiserver_request_total{code="409",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 4
# HELP etcd_request_duration_seconds [ALPHA] Etcd request latency in seconds for each operation and object type.
# TYPE etcd_request_duration_seconds histogram
etcd_request_duration_seconds_bucket{group="apps",operation="create",resource="deployments",le="+Inf"} 10
etcd_request_duration_seconds_sum{group="apps",operation="create",resource="deployments"} 0.1
etcd_request_duration_seconds_count{group="apps",operation="create",resource="deployments"} 10
`

const controllerManagerMetrics = `# HELP workqueue_adds_total [ALPHA] Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="deployment"} 30
workqueue_adds_total{name="replicaset"} 40
workqueue_adds_total{name="ttl_jobs_to_delete"} 0
# HELP workqueue_depth [ALPHA] Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{name="deployment"} 2
workqueue_depth{name="replicaset"} 0
# HELP workqueue_queue_duration_seconds [ALPHA] How long in seconds an item stays in workqueue before being requested.
# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{name="deployment",le="+Inf"} 16
workqueue_queue_duration_seconds_sum{name="deployment"} 2
workqueue_queue_duration_seconds_count{name="deployment"} 16
workqueue_queue_duration_seconds_bucket{name="replicaset",le="+Inf"} 40
workqueue_queue_duration_seconds_sum{name="replicaset"} 0.4
workqueue_queue_duration_seconds_count{name="replicaset"} 40
# HELP workqueue_work_duration_seconds [ALPHA] How long in seconds processing an item from workqueue takes.
# TYPE workqueue_work_duration_seconds histogram
workqueue_work_duration_seconds_bucket{name="deployment",le="+Inf"} 16
workqueue_work_duration_seconds_sum{name="deployment"} 1
workqueue_work_duration_seconds_count{name="deployment"} 16
workqueue_work_duration_seconds_bucket{name="replicaset",le="+Inf"} 40
workqueue_work_duration_seconds_sum{name="replicaset"} 0.8
workqueue_work_duration_seconds_count{name="replicaset"} 40
`

const schedulerMetrics = `# HELP scheduler_pending_pods [STABLE] Number of pending pods, by the queue type.
# TYPE scheduler_pending_pods gauge
scheduler_pending_pods{queue="active"} 3
scheduler_pending_pods{queue="backoff"} 1
scheduler_pending_pods{queue="gated"} 0
scheduler_pending_pods{queue="unschedulable"} 2
# HELP scheduler_scheduling_attempt_duration_seconds [STABLE] Scheduling attempt latency in seconds.
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="scheduled",le="+Inf"} 8
scheduler_scheduling_attempt_duration_seconds_sum{profile="default-scheduler",result="scheduled",le="+Inf"} 0.08
scheduler_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="scheduled"} 8
scheduler_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="unschedulable",le="+Inf"} 2
scheduler_scheduling_attempt_duration_seconds_sum{profile="default-scheduler",result="unschedulable"} 0.02
scheduler_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="unschedulable"} 2
`

// snapshotOf builds a snapshot from canned scrapes, as snapshotComponents does from live ones.
func snapshotOf(at time.Time, cpu map[string]float64, busy float64, api, cm, sched string) componentSnapshot {
	s := componentSnapshot{At: at, CPU: cpu, MachineBusy: busy}
	fams, err := parseMetrics([]byte(api))
	Expect(err).NotTo(HaveOccurred())
	s.API, s.APICodes, s.Etcd = apiServerStats(fams)
	fams, err = parseMetrics([]byte(cm))
	Expect(err).NotTo(HaveOccurred())
	s.Queues = queueStatsOf(fams)
	fams, err = parseMetrics([]byte(sched))
	Expect(err).NotTo(HaveOccurred())
	s.SchedulerAttempts, s.SchedulerPending = schedulerStats(fams)
	return s
}

var _ = Describe("component snapshots", func() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	It("reads request latency by verb and resource, leaving watches out", func() {
		s := snapshotOf(t0, nil, 0, apiServerMetrics, "", "")
		Expect(s.API).To(Equal(map[string]sumCount{
			"POST deployments":  {Sum: 0.5, Count: 10},
			"PATCH pods/status": {Sum: 0.2, Count: 4},
		}))
		Expect(s.APICodes).To(Equal(map[string]float64{"201": 9, "409": 1, "200": 4}))
		Expect(s.Etcd).To(Equal(map[string]sumCount{"create deployments": {Sum: 0.1, Count: 10}}))
	})

	It("reads the controller-manager's queues and the scheduler's attempts and pending pods", func() {
		s := snapshotOf(t0, nil, 0, "", controllerManagerMetrics, schedulerMetrics)
		Expect(s.Queues).To(HaveKeyWithValue("deployment", queueStats{
			Adds: 30, Depth: 2, Wait: sumCount{Sum: 2, Count: 16}, Work: sumCount{Sum: 1, Count: 16},
		}))
		Expect(s.Queues).To(HaveKey("ttl_jobs_to_delete"))
		Expect(s.SchedulerAttempts).To(Equal(sumCount{Sum: 0.1, Count: 10}))
		Expect(s.SchedulerPending).To(Equal(6.0))
	})

	It("rejects what is not the Prometheus text format", func() {
		_, err := parseMetrics([]byte("not metrics {"))
		Expect(err).To(MatchError(ContainSubstring("parsing metrics")))
	})

	Describe("a delta", func() {
		var d componentDelta

		BeforeEach(func() {
			before := snapshotOf(t0, map[string]float64{"kube-apiserver": 10, "opi": 1, "etcd": 2}, 100, "", "", "")
			after := snapshotOf(t0.Add(4*time.Second), map[string]float64{"kube-apiserver": 16, "opi": 2, "etcd": 3}, 109,
				apiServerMetrics, controllerManagerMetrics, schedulerMetrics)
			d = after.since(before)
		})

		It("splits the CPU time between the processes, the costliest first", func() {
			Expect(d.Seconds).To(Equal(4.0))
			Expect(d.MachineBusy).To(Equal(9.0))
			Expect(d.CPU).To(Equal([]cpuCost{
				{Component: "kube-apiserver", Seconds: 6, Share: 0.75},
				{Component: "etcd", Seconds: 1, Share: 0.125},
				{Component: "opi", Seconds: 1, Share: 0.125},
			}))
		})

		It("ranks requests by total time with their count and mean", func() {
			Expect(d.API).To(Equal([]callCost{
				{Call: "POST deployments", Count: 10, Seconds: 0.5, MeanMs: 50},
				{Call: "PATCH pods/status", Count: 4, Seconds: 0.2, MeanMs: 50},
			}))
			Expect(d.APICodes).To(Equal(map[string]int{"201": 9, "409": 1, "200": 4}))
		})

		It("keeps the queues that had traffic, with their mean wait and work", func() {
			Expect(d.Queues).To(Equal([]queueCost{
				{Name: "deployment", Adds: 30, MeanWaitMs: 125, MeanWorkMs: 62.5, WaitSecs: 2, WorkSecs: 1, Depth: 2},
				{Name: "replicaset", Adds: 40, MeanWaitMs: 10, MeanWorkMs: 20, WaitSecs: 0.4, WorkSecs: 0.8, Depth: 0},
			}))
			Expect(d.Scheduler).To(Equal(schedCost{Attempts: 10, MeanMs: 10, Pending: 6}))
		})

		It("drops counters that went back, as after a component restart", func() {
			back := snapshotOf(t0.Add(8*time.Second), map[string]float64{"kube-apiserver": 1, "opi": 3, "etcd": 3}, 110, "", "", "")
			d := back.since(snapshotOf(t0, map[string]float64{"kube-apiserver": 10, "opi": 1, "etcd": 3}, 100,
				apiServerMetrics, controllerManagerMetrics, schedulerMetrics))
			Expect(d.CPU).To(ConsistOf(HaveField("Component", "opi"), HaveField("Component", "etcd")))
			Expect(d.API).To(BeEmpty())
			Expect(d.Queues).To(BeEmpty())
		})

		It("prints compact tables", func() {
			md := d.markdown()
			Expect(md).To(ContainSubstring("| kube-apiserver | 6.0 | 75% |"))
			Expect(md).To(ContainSubstring("| POST deployments | 10 | 0.5 | 50.0 |"))
			Expect(md).To(ContainSubstring("answers other than 2xx: 409: 1"))
			Expect(md).To(ContainSubstring("| deployment | 30 | 125.0 | 62.5 | 2 |"))
			Expect(md).To(ContainSubstring("kube-scheduler: 10 attempts, mean 10.0 ms, 6 pods pending at end"))
		})

		It("goes into the JSON line", func() {
			b, err := json.Marshal(d)
			Expect(err).NotTo(HaveOccurred())
			var back componentDelta
			Expect(json.Unmarshal(b, &back)).To(Succeed())
			Expect(back).To(Equal(d))
		})
	})

	It("reads a process's user and system time from /proc/<pid>/stat, whatever its name holds", func() {
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
		secs, err := parseProcStat([]byte("42 (kube (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(secs).To(Equal(3.0))
		_, err = parseProcStat([]byte("42 (short) S 1"))
		Expect(err).To(HaveOccurred())
	})

	It("reads this process's CPU time and the machine's", func() {
		_, err := processCPUSeconds(os.Getpid())
		Expect(err).NotTo(HaveOccurred())
		busy, err := machineBusySeconds()
		Expect(err).NotTo(HaveOccurred())
		Expect(busy).To(BeNumerically(">", 0))
	})
})

var _ = Describe("topFunctions", func() {
	It("ranks a CPU profile's functions by flat time and adds up their cumulative time", func() {
		fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
		mainF, encode, syscall := fn(1, "main.main"), fn(2, "json.Marshal"), fn(3, "syscall.Write")
		loc := func(id uint64, f *profile.Function) *profile.Location {
			return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
		}
		lMain, lEncode, lSyscall := loc(1, mainF), loc(2, encode), loc(3, syscall)
		p := &profile.Profile{
			SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
			Sample: []*profile.Sample{
				{Location: []*profile.Location{lEncode, lMain}, Value: []int64{3, 3e9}},
				{Location: []*profile.Location{lSyscall, lMain}, Value: []int64{1, 1e9}},
				{Location: []*profile.Location{lMain}, Value: []int64{1, 5e8}},
			},
			Location: []*profile.Location{lMain, lEncode, lSyscall},
			Function: []*profile.Function{mainF, encode, syscall},
		}
		path := filepath.Join(GinkgoT().TempDir(), "cpu.pprof")
		f, err := os.Create(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Write(f)).To(Succeed())
		Expect(f.Close()).To(Succeed())

		top, total, err := topFunctions(path, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(total).To(Equal(4.5))
		Expect(top).To(Equal([]funcCost{
			{Func: "json.Marshal", FlatSecs: 3, CumSecs: 3},
			{Func: "syscall.Write", FlatSecs: 1, CumSecs: 1},
		}))
		all, _, err := topFunctions(path, 10)
		Expect(err).NotTo(HaveOccurred())
		Expect(all).To(ContainElement(funcCost{Func: "main.main", FlatSecs: 0.5, CumSecs: 4.5}))

		byCum, _, err := topFunctionsByCum(path, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(byCum).To(Equal([]funcCost{
			{Func: "main.main", FlatSecs: 0.5, CumSecs: 4.5},
			{Func: "json.Marshal", FlatSecs: 3, CumSecs: 3},
		}))
	})

	It("fails on what is not a profile", func() {
		path := filepath.Join(GinkgoT().TempDir(), "junk")
		Expect(os.WriteFile(path, []byte("junk"), 0o644)).To(Succeed())
		_, _, err := topFunctions(path, 3)
		Expect(err).To(HaveOccurred())
	})
})
