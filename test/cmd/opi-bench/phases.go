package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

const (
	opiNamespace   = "bench-opi"
	floorNamespace = "bench-floor"
	appName        = "bench"
	spaceName      = "dev"
)

// app is one CC process of the benchmark.
type app struct{ guid, version string }

func newApp() app { return app{guid: fixture.NewGUID(), version: fixture.NewGUID()} }

func (a app) processGUID() string { return a.guid + "-" + a.version }
func (a app) path() string        { return "/apps/" + a.guid + "/" + a.version }

// body is the DesireLRPRequest CC sends for a one-instance docker app (the integration suite's,
// with a VCAP_APPLICATION and a MEMORY_LIMIT as CC adds them, and the benchmark's names).
func (a app) body() []byte {
	return fixture.DesireLRP(a.guid, a.version).Merge(map[string]any{
		"app_name": appName, "space_name": spaceName,
		"environment": map[string]string{
			"VCAP_SERVICES":          `{"db":[{"credentials":{"password":"marked-secret-value"}}]}`,
			"VCAP_APPLICATION":       `{"application_name":"bench","space_name":"dev","limits":{"mem":64}}`,
			"PORT":                   "8080",
			"MEMORY_LIMIT":           "64m",
			"spring.profiles.active": "cloud",
			"key:with:colons":        "colons",
		},
		"instances": 1,
		"routes":    fixture.Routes("bench.example.com", 8080),
	}).Bytes()
}

// deploymentName is the name opi gives the app's Deployment (and Service).
func (a app) deploymentName() string {
	return names.DeploymentName(&opi.LRP{
		LRPIdentifier: opi.LRPIdentifier{GUID: a.guid, Version: a.version},
		AppName:       appName, SpaceName: spaceName,
	})
}

// phases runs the benchmark proper on a ready opi.
func (e *env) phases(ctx context.Context) error {
	cfg, res := e.cfg, e.res
	admin := e.cluster.Clientset()
	desired := cfg.n - warmApps
	res.IdleRSS = e.rss.current()

	// 1. The objects opi makes for one app, read back from Kubernetes: the floors create them.
	logf("desiring a template app through opi and reading back what it created")
	t := time.Now()
	tmpl, err := e.captureTemplate(ctx, admin)
	if err != nil {
		return err
	}
	res.Phases.Template = time.Since(t).Seconds()
	res.FloorKinds = tmpl.kinds()
	logf("opi made for one app: %s", strings.Join(res.FloorKinds, ", "))

	// 2. Warm-up: 10 apps through opi, instances measured with only them in the cluster.
	t = time.Now()
	warm := make([]app, warmApps)
	for i := range warm {
		warm[i] = newApp()
	}
	if _, err := e.desirePhase(ctx, warm, 1); err != nil {
		return err
	}
	if _, err := waitPods(ctx, admin, opiNamespace, warmApps, 2*time.Minute); err != nil {
		return err
	}
	m0, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	if res.Instances10, err = e.instancesPhase(ctx, warm); err != nil {
		return err
	}
	m1, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	res.Instances10.APIRequests, res.Instances10.Janitor, res.Instances10.ByVerb = readRequests(m1.diff(m0))
	logf("instances at %d apps: p50 %.2f ms, p99 %.2f ms", warmApps, res.Instances10.P50, res.Instances10.P99)
	res.Phases.WarmUp = time.Since(t).Seconds()

	// 3. Desire, in batches through opi. On the floor batches the two client-go floors run too,
	// in turn with opi (the order rotates), so that all three see the same cluster size and the
	// same load from outside the run; each floor's objects are deleted right after it is timed
	// and the run waits until they are gone, so every timed batch sees opi's apps only.
	fc, err := e.floorClient()
	if err != nil {
		return err
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the floor namespace: %w", err)
	}
	apps := make([]app, desired)
	for i := range apps {
		apps[i] = newApp()
	}
	ends := batchEnds(cfg.n, cfg.batch)
	res.Batch, res.FloorEvery = cfg.batch, cfg.floorEvery
	logf("desire: %d apps through opi in %d batches ending at multiples of %d apps; the floors on batch 1, every %d-th after it and the last; concurrency %d",
		desired, len(ends), cfg.batch, cfg.floorEvery, cfg.concurrency)
	m2, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	var (
		opiBatches, opiPaired, oneBatches, sameBatches []phase
		sameCalls                                      [][]call
		floorCPU, opiCPU                               cpuAcc
		opiCost, cleanupCost                           phaseCost
		floorCost                                      = map[string]*phaseCost{floorOneDeployment: {}, floorSameObjects: {}}
		retry                                          []app // opi's failed desires, desired again untimed as CC's sync would
		floorRuns                                      int
	)
	lo := 0
	for k, end := range ends {
		hi := end - warmApps
		rec := batchRecord{Batch: k + 1, Apps: end, Count: hi - lo}
		runOpi := func() error {
			var waitProfiles func()
			if k == len(ends)-1 && cfg.profile > 0 {
				waitProfiles = e.startProfiles(ctx)
			}
			var p phase
			d, err := e.stretch(ctx, &opiCost, func() error {
				a := readCPU(e.ourPIDs())
				var err error
				p, err = e.desirePhase(ctx, apps[lo:hi], cfg.concurrency)
				opiCPU.add(a, readCPU(e.ourPIDs()))
				return err
			})
			if waitProfiles != nil {
				waitProfiles()
			}
			if d != nil {
				rec.CPUMsPerApp = d.msPerApp(hi - lo)
			}
			opiBatches = append(opiBatches, p)
			rec.OpiSeconds, rec.OpiPerSecond = p.Seconds, p.Throughput
			return err
		}
		runFloor := func(floor string) func() error {
			return func() error {
				var (
					p     phase
					calls [][]call
				)
				_, err := e.stretch(ctx, floorCost[floor], func() error {
					a := readCPU(e.ourPIDs())
					var err error
					p, calls, err = e.floorBatch(ctx, fc, tmpl, floor, hi-lo)
					floorCPU.add(a, readCPU(e.ourPIDs()))
					return err
				})
				if err != nil {
					return err
				}
				if floor == floorOneDeployment {
					oneBatches, rec.OneDeploymentPerSecond = append(oneBatches, p), p.Throughput
				} else {
					sameBatches, sameCalls, rec.SameObjectsPerSecond = append(sameBatches, p), append(sameCalls, calls...), p.Throughput
				}
				var d time.Duration
				_, err = e.stretch(ctx, &cleanupCost, func() error {
					var err error
					d, err = e.cleanFloor(ctx, tmpl)
					return err
				})
				res.Phases.FloorCleanup += d.Seconds()
				logf("  %s floor: %.1f apps/s; its objects gone after %.1f s", floor, p.Throughput, d.Seconds())
				return err
			}
		}
		order := []func() error{runOpi}
		if k == 0 || k%cfg.floorEvery == 0 || k == len(ends)-1 {
			sides := []func() error{runFloor(floorOneDeployment), runOpi, runFloor(floorSameObjects)}
			r := floorRuns % len(sides)
			order = append(sides[r:], sides[:r]...)
			floorRuns++
		}
		for _, f := range order {
			// Every timed side starts on a quiet cluster: the controllers' work for what the
			// last side created (ReplicaSets, pods, status updates) would otherwise be paid by
			// the next side.
			q, err := e.quiesce(ctx)
			res.Phases.Quiesce += q.Seconds()
			if err != nil {
				return err
			}
			if err := f(); err != nil {
				return err
			}
		}
		ob := opiBatches[len(opiBatches)-1]
		if len(order) > 1 {
			opiPaired = append(opiPaired, ob)
		}
		res.RSSByApps = append(res.RSSByApps, rssPoint{Apps: end, MB: e.rss.current()})
		res.Batches = append(res.Batches, rec)
		for _, i := range ob.failed {
			retry = append(retry, apps[lo+i])
		}
		logf("batch %d (%d apps, %d in the cluster): opi %.1f apps/s in %.1f s", k+1, hi-lo, end, ob.Throughput, ob.Seconds)
		lo = hi
	}
	if len(retry) > 0 {
		logf("desiring the %d apps whose desire failed again, untimed (as CC's next sync would)", len(retry))
		if err := e.retry(ctx, retry, func(ctx context.Context, a app) error {
			p, err := e.desirePhase(ctx, []app{a}, 1)
			return single(p, err)
		}); err != nil {
			return err
		}
	}
	res.Desire, res.DesirePaired = merge(opiBatches), merge(opiPaired)
	res.FloorOne, res.FloorSame = merge(oneBatches), merge(sameBatches)
	res.FloorSteps = stepPercentiles(sameCalls)
	res.FloorOthersCPU, res.DesireOthersCPU = floorCPU.share(), opiCPU.share()
	res.Phases.DesireOpi, res.Phases.FloorOne, res.Phases.FloorSame = res.Desire.Seconds, res.FloorOne.Seconds, res.FloorSame.Seconds
	m3, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	res.DesireAPI = byVerb(m3.diff(m2))
	e.where("desire through opi (its batches)", &opiCost)
	e.where("one-Deployment floor (its batches)", floorCost[floorOneDeployment])
	e.where("same-objects floor (its batches)", floorCost[floorSameObjects])
	e.where("floor clean-ups", &cleanupCost)
	res.DesireAPIPerApp = float64(sum(res.DesireAPI)) / float64(desired)
	logf("one Deployment floor: %.1f apps/s, p50 %.1f ms, p99 %.1f ms, %d errors", res.FloorOne.Throughput, res.FloorOne.P50, res.FloorOne.P99, res.FloorOne.Errors)
	logf("same objects floor: %.1f apps/s, p50 %.1f ms, p99 %.1f ms, %d errors", res.FloorSame.Throughput, res.FloorSame.P50, res.FloorSame.P99, res.FloorSame.Errors)
	logf("opi: %.1f apps/s (%.1f on the floor batches), p50 %.1f ms, p99 %.1f ms, %d errors; %.2f API requests per desire %v",
		res.Desire.Throughput, res.DesirePaired.Throughput, res.Desire.P50, res.Desire.P99, res.Desire.Errors, res.DesireAPIPerApp, res.DesireAPI)
	// Nothing is left in the floor namespace: it goes without a wait.
	if err := admin.CoreV1().Namespaces().Delete(ctx, floorNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the floor namespace: %w", err)
	}

	// 4. The controllers catch up with opi's apps: every pod exists and runs.
	logf("waiting for the %d pods to run", cfg.n)
	var settled time.Duration
	var settleCost phaseCost
	if _, err := e.stretch(ctx, &settleCost, func() error {
		var err error
		settled, err = waitPods(ctx, admin, opiNamespace, cfg.n, 5*time.Minute+time.Duration(cfg.n)*30*time.Millisecond)
		return err
	}); err != nil {
		return err
	}
	e.where("pods settle", &settleCost)
	res.PodsSettle, res.Phases.Settle = settled.Seconds(), settled.Seconds()
	logf("all %d pods running %.1f s after the last desire", cfg.n, res.PodsSettle)

	// 5. Reads at N.
	t = time.Now()
	var readsCost phaseCost
	readsBefore, readsOK := e.snap(ctx)
	m4, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	if res.Apps, err = e.appsPhase(ctx); err != nil {
		return err
	}
	m5, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	res.Apps.APIRequests, res.Apps.Janitor, res.Apps.ByVerb = readRequests(m5.diff(m4))
	logf("GET /apps at %d: p50 %.2f ms, p99 %.2f ms, %d bytes; burst p50 %.2f ms p99 %.2f ms",
		cfg.n, res.Apps.P50, res.Apps.P99, res.Apps.Bytes, res.Apps.BurstP50, res.Apps.BurstP99)
	if res.InstancesN, err = e.instancesPhase(ctx, warm); err != nil {
		return err
	}
	m6, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	res.InstancesN.APIRequests, res.InstancesN.Janitor, res.InstancesN.ByVerb = readRequests(m6.diff(m5))
	logf("instances at %d apps: p50 %.2f ms, p99 %.2f ms", cfg.n, res.InstancesN.P50, res.InstancesN.P99)

	listClient, err := e.client(true)
	if err != nil {
		return err
	}
	if res.List, err = e.listPhase(ctx, listClient); err != nil {
		return err
	}
	logf("live LIST of %d workloads: p50 %.1f ms, p99 %.1f ms; burst p50 %.1f ms p99 %.1f ms",
		cfg.n, res.List.P50, res.List.P99, res.List.BurstP50, res.List.BurstP99)
	res.Phases.Reads = time.Since(t).Seconds()
	if after, ok := e.snap(ctx); ok && readsOK {
		readsCost.add(readsBefore, after)
	}
	e.where("reads", &readsCost)

	// 5b. Reads under a burst (burst.go), on every app in the cluster.
	all := append(append([]app{}, warm...), apps...)
	if cfg.readCallers > 0 {
		t = time.Now()
		var burstCost phaseCost
		if _, err := e.stretch(ctx, &burstCost, func() error {
			var err error
			res.BurstApps, res.BurstInstances, err = e.readsBurst(ctx, all, res.Apps.Bytes)
			return err
		}); err != nil {
			return err
		}
		e.where("reads under a burst", &burstCost)
		res.Phases.ReadsBurst = time.Since(t).Seconds()
	}

	// 6. Steady memory after the reads.
	t = time.Now()
	logf("settling %s before sampling steady RSS", cfg.settle)
	if err := sleep(ctx, cfg.settle); err != nil {
		return err
	}
	res.SteadyRSS = e.rss.steady(ctx, 5, time.Second)
	res.SteadyAnon, res.SteadyFile = rssSplit(e.opi.Pid())
	if m, err := e.scrape(ctx); err == nil {
		res.HeapInuse = m.value("go_memstats_heap_inuse_bytes")
		res.HeapAlloc = m.value("go_memstats_heap_alloc_bytes")
		res.GoSys = m.value("go_memstats_sys_bytes")
		res.Refused = m.refusals()
		logf("opi's API requests refused since its start: %v", res.Refused)
	}
	res.Phases.Steady = time.Since(t).Seconds()

	// 7. Start-up at N: opi stopped and started again, with the same arguments.
	t = time.Now()
	if res.Startup, err = e.restartOpi(ctx); err != nil {
		return err
	}
	res.Phases.Startup = time.Since(t).Seconds()
	logf("start-up at %d apps: ready after %.1f s, first full GET /apps after %.1f s, peak RSS %.1f MB",
		cfg.n, res.Startup.Ready, res.Startup.FullApps, res.Startup.PeakRSS)

	// 8. Stop everything through the new opi.
	t = time.Now()
	logf("opi: stopping %d apps through PUT /apps/{guid}/{version}/stop at concurrency %d", len(all), cfg.concurrency)
	stopBefore, stopOK := e.snap(ctx)
	m7, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	res.Stop, err = e.stopPhase(ctx, all)
	if err != nil {
		return err
	}
	if len(res.Stop.failed) > 0 {
		var again []app
		for _, i := range res.Stop.failed {
			again = append(again, all[i])
		}
		logf("stopping the %d apps whose stop failed again, untimed", len(again))
		if err := e.retry(ctx, again, func(ctx context.Context, a app) error {
			p, err := e.stopPhase(ctx, []app{a})
			return single(p, err)
		}); err != nil {
			return err
		}
	}
	var stopCost phaseCost
	if after, ok := e.snap(ctx); ok && stopOK {
		stopCost.add(stopBefore, after)
	}
	e.where("stop", &stopCost)
	m8, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	res.StopAPI = byVerb(m8.diff(m7))
	res.StopAPIPerApp = float64(sum(res.StopAPI)) / float64(len(all))
	logf("stop: %.1f apps/s, p50 %.1f ms, p99 %.1f ms, %d errors; %.2f API requests per stop %v",
		res.Stop.Throughput, res.Stop.P50, res.Stop.P99, res.Stop.Errors, res.StopAPIPerApp, res.StopAPI)
	left, _, err := e.get(ctx, "/apps")
	if err == nil && !bytes.Contains(left, []byte(`"desired_lrp_scheduling_infos":[]`)) {
		return fmt.Errorf("GET /apps after stopping every app is not empty: %.200s", left)
	}
	res.Phases.Stop = time.Since(t).Seconds()
	return err
}

// batchEnds are the numbers of apps in the cluster (the warm-up apps included) after each desire
// batch: the multiples of batch up to n, then n.
func batchEnds(n, batch int) []int {
	var ends []int
	for end := (warmApps/batch + 1) * batch; end < n; end += batch {
		ends = append(ends, end)
	}
	return append(ends, n)
}

// restartOpi stops opi (SIGTERM) and starts it again with the same arguments, and measures the
// time from the start to /readyz answering 200 and to the first GET /apps that lists all N apps,
// and the new process's peak RSS meanwhile. The RSS sampler follows the new process.
func (e *env) restartOpi(ctx context.Context) (startup, error) {
	var s startup
	s.PeakBefore = e.rss.retire()
	t := time.Now()
	logf("restart: stopping opi (SIGTERM)")
	if err := e.opi.Stop(); err != nil {
		return s, fmt.Errorf("stopping opi for its restart: %w", err)
	}
	s.Exit = time.Since(t).Seconds()
	logf("restart: opi exited after %.1f s; starting it again", s.Exit)
	// Taken with no opi running, so opi's CPU in the phase is all the new process's.
	before, beforeOK := e.snap(ctx)
	start := time.Now()
	p, err := e.startOpi(e.opiBin)
	if err != nil {
		return s, err
	}
	e.opi = p
	e.rss.follow(p.Pid())
	deadline := 10*time.Minute + time.Duration(e.cfg.n)*10*time.Millisecond
	var wg sync.WaitGroup
	var readyErr, appsErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		readyErr = pollFast(ctx, p, deadline, func() (bool, error) {
			_, code, err := e.get(ctx, "/readyz")
			return err == nil && code == http.StatusOK, nil
		})
		s.Ready = time.Since(start).Seconds()
	}()
	go func() {
		defer wg.Done()
		appsErr = pollFast(ctx, p, deadline, func() (bool, error) {
			body, code, err := e.get(ctx, "/apps")
			if err != nil || code != http.StatusOK {
				return false, nil
			}
			var list struct {
				Infos []json.RawMessage `json:"desired_lrp_scheduling_infos"`
			}
			if err := json.Unmarshal(body, &list); err != nil {
				return false, fmt.Errorf("decoding GET /apps: %w", err)
			}
			if s.FirstApps == 0 {
				s.FirstApps, s.FirstAppsCount = time.Since(start).Seconds(), len(list.Infos)
			}
			return len(list.Infos) == e.cfg.n, nil
		})
		s.FullApps = time.Since(start).Seconds()
	}()
	wg.Wait()
	if err := errors.Join(readyErr, appsErr); err != nil {
		return s, fmt.Errorf("opi's start-up with %d apps: %w; see %s/opi.log", e.cfg.n, err, e.workDir)
	}
	s.PeakRSS = e.rss.own()
	var c phaseCost
	if after, ok := e.snap(ctx); ok && beforeOK {
		c.add(before, after)
	}
	e.where("start-up (opi restarted, until its first full GET /apps)", &c)
	return s, nil
}

// pollFast calls cond every 100 ms until it holds; it fails when the process exits, ctx ends,
// the timeout passes or cond fails.
func pollFast(ctx context.Context, p *localkube.Process, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		select {
		case <-p.Done():
			return fmt.Errorf("opi exited: %v", p.Err())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// snap is a snapshot of the components and of opi (when it runs). A failed one is logged and
// not ok: the run's own figures do not depend on it.
func (e *env) snap(ctx context.Context) (componentSnapshot, bool) {
	pid := e.opi.Pid()
	select {
	case <-e.opi.Done():
		pid = 0
	default:
	}
	s, err := snapshotComponents(ctx, e.cluster, pid)
	if err != nil {
		logf("component snapshot failed (this stretch is left out of where the time went): %v", err)
		return s, false
	}
	return s, true
}

// stretch runs f between two snapshots, adds their difference to cost and returns it (nil when
// a snapshot failed).
func (e *env) stretch(ctx context.Context, cost *phaseCost, f func() error) (*componentDelta, error) {
	before, ok := e.snap(ctx)
	err := f()
	after, ok2 := e.snap(ctx)
	if !ok || !ok2 {
		return nil, err
	}
	cost.add(before, after)
	d := after.since(before)
	return &d, err
}

// jsonCalls is how many API server and etcd calls, the costliest, the results keep per phase.
const jsonCalls = 15

// where records a phase's component costs in the results.
func (e *env) where(name string, cost *phaseCost) {
	if d, ok := cost.delta(); ok {
		// The long tail of cheap calls would make each recorded run's JSON tens of KB.
		d.API, d.Etcd = d.API[:min(len(d.API), jsonCalls)], d.Etcd[:min(len(d.Etcd), jsonCalls)]
		e.res.Where = append(e.res.Where, phaseDelta{Phase: name, Stretches: cost.stretches, componentDelta: d})
	}
}

// startProfiles takes CPU profiles of opi and the control plane in the background, over
// -profile seconds; the func it returns waits for them and puts their costliest functions
// (by cumulative time) in the results.
func (e *env) startProfiles(ctx context.Context) func() {
	dir := filepath.Join(e.workDir, "profiles")
	logf("profiling opi and the control plane for %d s, into %s", e.cfg.profile, dir)
	var (
		files map[string]string
		err   error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		files, err = captureProfiles(ctx, e.cluster, e.opsURL, e.cfg.profile, dir)
	}()
	return func() {
		<-done
		e.res.ProfileSeconds, e.res.ProfileDir = e.cfg.profile, dir
		if err != nil {
			logf("profiles: %v", err)
			e.res.ProfileError = strings.TrimSpace(err.Error())
		}
		for name, file := range files {
			top, total, err := topFunctionsByCum(file, 10)
			if err != nil {
				logf("reading the profile of %s: %v", name, err)
				continue
			}
			e.res.Profiles = append(e.res.Profiles, componentProfile{Component: name, File: file, CPUSeconds: total, Top: top})
		}
		slices.SortFunc(e.res.Profiles, func(a, b componentProfile) int {
			return cmp.Compare(componentRank(a.Component), componentRank(b.Component))
		})
	}
}

// ourPIDs are the processes of the run: the control plane, opi and this program.
func (e *env) ourPIDs() []int {
	return append(e.cluster.PIDs(), e.opi.Pid(), osPid)
}

// client is a client-go clientset at opi's rate limits; protobuf asks for the API server's
// binary encoding (the fastest a client can read a LIST).
func (e *env) client(protobuf bool) (kubernetes.Interface, error) {
	rc := e.cluster.RestConfig()
	rc.QPS, rc.Burst = float32(e.cfg.qps), e.cfg.burst
	rc.UserAgent = "opi-bench"
	if protobuf {
		rc.ContentType = "application/vnd.kubernetes.protobuf"
		rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	return kubernetes.NewForConfig(rc)
}

// waitOpiReady waits for /readyz; opi waits out a slow cache sync rather than failing, so the
// bound is generous.
func (e *env) waitOpiReady(ctx context.Context) error {
	if err := e.opi.WaitHTTP(ctx, e.opiURL+"/readyz", 10*time.Minute); err != nil {
		return fmt.Errorf("opi not ready: %w; see %s/opi.log", err, e.workDir)
	}
	return nil
}

// call sends a request as CC does: a JSON body without a JSON Content-Type.
func (e *env) call(ctx context.Context, method, path string, body []byte) ([]byte, int, error) {
	resp, err := e.do(ctx, method, path, body)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// do sends a request to opi as call does and leaves its answer to the caller.
func (e *env) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.opiURL+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return e.http.Do(req)
}

func (e *env) get(ctx context.Context, path string) ([]byte, int, error) {
	return e.call(ctx, http.MethodGet, path, nil)
}

// merge adds up batches: throughput over their summed wall time, latencies over all calls.
func merge(batches []phase) phase {
	var m phase
	for _, b := range batches {
		m.Count += b.Count
		m.Errors += b.Errors
		m.Seconds += b.Seconds
		m.durs = append(m.durs, b.durs...)
		if m.FirstError == "" {
			m.FirstError = b.FirstError
		}
	}
	if m.Seconds > 0 {
		m.Throughput = float64(len(m.durs)) / m.Seconds
	}
	m.P50, m.P99 = percentiles(m.durs)
	return m
}

// single is the error of a one-call phase.
func single(p phase, err error) error {
	if err == nil && p.Errors > 0 {
		err = errors.New(p.FirstError)
	}
	return err
}

// retry calls f for each app, up to 5 times, 10 at a time, until it succeeds.
func (e *env) retry(ctx context.Context, apps []app, f func(context.Context, app) error) error {
	p, err := timed(ctx, len(apps), 10, func(ctx context.Context, i int) (time.Duration, error) {
		var err error
		for range 5 {
			if err = f(ctx, apps[i]); err == nil {
				return 0, nil
			}
			if err := sleep(ctx, 2*time.Second); err != nil {
				return 0, err
			}
		}
		return 0, err
	})
	if err != nil {
		return err
	}
	if p.Errors > 0 {
		return fmt.Errorf("%d calls still failed after 5 tries; first: %s", p.Errors, p.FirstError)
	}
	return nil
}

// desirePhase desires apps through opi; a desire is done when opi answers 202.
func (e *env) desirePhase(ctx context.Context, apps []app, concurrency int) (phase, error) {
	return timed(ctx, len(apps), concurrency, func(ctx context.Context, i int) (time.Duration, error) {
		a := apps[i]
		path, body := "/apps/"+a.processGUID(), a.body()
		start := time.Now()
		resp, code, err := e.call(ctx, http.MethodPut, path, body)
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if code != http.StatusAccepted {
			return 0, fmt.Errorf("desire: %d %s", code, bytes.TrimSpace(resp))
		}
		return took, nil
	})
}

// stopPhase stops apps through opi; a stop is done when opi answers 200.
func (e *env) stopPhase(ctx context.Context, apps []app) (phase, error) {
	return timed(ctx, len(apps), e.cfg.concurrency, func(ctx context.Context, i int) (time.Duration, error) {
		start := time.Now()
		resp, code, err := e.call(ctx, http.MethodPut, apps[i].path()+"/stop", nil)
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK {
			return 0, fmt.Errorf("stop: %d %s", code, bytes.TrimSpace(resp))
		}
		return took, nil
	})
}

// instancesPhase asks for the instances of the warm-up apps in turn.
func (e *env) instancesPhase(ctx context.Context, apps []app) (reads, error) {
	var r reads
	durs := make([]time.Duration, 0, e.cfg.instanceCalls)
	for i := range e.cfg.instanceCalls {
		a := apps[i%len(apps)]
		start := time.Now()
		body, code, err := e.get(ctx, a.path()+"/instances")
		took := time.Since(start)
		if err != nil {
			return r, err
		}
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"index":0`)) {
			return r, fmt.Errorf("instances of %s: %d %s", a.processGUID(), code, body)
		}
		durs = append(durs, took)
		r.Calls++
		r.Bytes = len(body)
	}
	r.P50, r.P99 = percentiles(durs)
	return r, nil
}

// appsPhase calls GET /apps sequentially, then in a concurrent burst, and checks that it lists
// every app.
func (e *env) appsPhase(ctx context.Context) (reads, error) {
	var r reads
	body, code, err := e.get(ctx, "/apps")
	if err != nil || code != http.StatusOK {
		return r, fmt.Errorf("GET /apps: %d %v", code, err)
	}
	var list struct {
		Infos []json.RawMessage `json:"desired_lrp_scheduling_infos"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return r, fmt.Errorf("decoding GET /apps: %w", err)
	}
	if len(list.Infos) != e.cfg.n {
		return r, fmt.Errorf("GET /apps lists %d apps, want %d", len(list.Infos), e.cfg.n)
	}
	r.Bytes = len(body)
	one := func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		body, code, err := e.get(ctx, "/apps")
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK || len(body) < r.Bytes/2 {
			return 0, fmt.Errorf("GET /apps: %d, %d bytes", code, len(body))
		}
		return took, nil
	}
	return e.readPhases(ctx, r, one)
}

// listPhase is the cacheless baseline: a live LIST of the workloads in opi's namespace, as
// often and in the same pattern as GET /apps.
func (e *env) listPhase(ctx context.Context, client kubernetes.Interface) (reads, error) {
	var r reads
	one := func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		var items int
		if e.cfg.backend == backendStatefulSets {
			list, err := client.AppsV1().StatefulSets(opiNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			items = len(list.Items)
		} else {
			list, err := client.AppsV1().Deployments(opiNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			items = len(list.Items)
		}
		took := time.Since(start)
		if items != e.cfg.n {
			return 0, fmt.Errorf("LIST returned %d workloads, want %d", items, e.cfg.n)
		}
		return took, nil
	}
	return e.readPhases(ctx, r, one)
}

// readPhases runs one read cfg.seqReads times in a row, then burstWorkers callers burstCalls
// times each at once.
func (e *env) readPhases(ctx context.Context, r reads, one func(context.Context) (time.Duration, error)) (reads, error) {
	seq := make([]time.Duration, 0, e.cfg.seqReads)
	for range e.cfg.seqReads {
		d, err := one(ctx)
		if err != nil {
			return r, err
		}
		seq = append(seq, d)
	}
	r.P50, r.P99 = percentiles(seq)
	burst, err := timed(ctx, e.cfg.burstWorkers*e.cfg.burstCalls, e.cfg.burstWorkers, func(ctx context.Context, _ int) (time.Duration, error) {
		return one(ctx)
	})
	if err != nil {
		return r, err
	}
	if burst.Errors > 0 {
		return r, fmt.Errorf("%d burst reads failed: %s", burst.Errors, burst.FirstError)
	}
	r.BurstP50, r.BurstP99 = burst.P50, burst.P99
	r.Calls = len(seq) + burst.Count
	return r, nil
}

// timed runs f for 0..count-1 on concurrency workers and reports throughput and latencies. A
// failed call is counted (the first error kept, the indices of all in the phase's failed);
// failures of more than half the calls (at least 10) abort the phase.
func timed(ctx context.Context, count, concurrency int, f func(context.Context, int) (time.Duration, error)) (phase, error) {
	var (
		next     atomic.Int64
		errCount atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	durs := make([]time.Duration, count)
	ok := make([]bool, count)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for range min(concurrency, count) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= count || ctx.Err() != nil {
					return
				}
				d, err := f(ctx, i)
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					if errCount.Add(1) > int64(max(10, count/2)) {
						cancel()
					}
					continue
				}
				durs[i], ok[i] = d, true
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	p := phase{Count: count, Errors: int(errCount.Load()), Seconds: wall.Seconds()}
	if v := firstErr.Load(); v != nil {
		p.FirstError = v.(string)
	}
	if err := ctx.Err(); err != nil && p.Errors <= max(10, count/2) {
		return p, err
	}
	if p.Errors > max(10, count/2) {
		return p, fmt.Errorf("%d of %d calls failed; first: %s", p.Errors, count, p.FirstError)
	}
	var good []time.Duration
	for i, d := range durs {
		if ok[i] {
			good = append(good, d)
		} else {
			p.failed = append(p.failed, i)
		}
	}
	p.durs = good
	p.Throughput = float64(len(good)) / wall.Seconds()
	p.P50, p.P99 = percentiles(good)
	return p, nil
}

// waitPods waits until namespace ns holds at least want pods, none of them not Running, and
// returns how long that took. It asks for one item per call and reads the count the API server
// reports, so polling stays cheap at thousands of pods.
func waitPods(ctx context.Context, c kubernetes.Interface, ns string, want int, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var last string
	err := poll(ctx, timeout, func() (bool, error) {
		n, err := countPods(ctx, c, ns)
		if err != nil {
			return false, err
		}
		// One item is enough to know that some pod does not run yet.
		notRunning, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: "status.phase!=Running"})
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("%d pods, all running: %t", n, len(notRunning.Items) == 0)
		return n >= want && len(notRunning.Items) == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for %d running pods in %s (last: %s): %w", want, ns, last, err)
	}
	return time.Since(start), nil
}

// quiesce waits until the controllers are done with what the run created so far: every
// controller-manager work queue is empty, every opi workload has a running pod, and the
// machine has been idle (under quietCores busy) for two polls in a row, so that leftovers no
// queue shows (events, endpoints, the API server's own catch-up) are not paid by the next
// side either. A cluster that never gets that idle is taken as quiet 20 s after the
// queues and pods are.
func (e *env) quiesce(ctx context.Context) (time.Duration, error) {
	const quietCores = 0.3
	start := time.Now()
	admin := e.cluster.Clientset()
	var (
		last      string
		settled   time.Time // when queues and pods were first found done
		idlePolls int
		prevBusy  float64
		prevAt    time.Time
	)
	err := poll(ctx, 10*time.Minute, func() (bool, error) {
		busy, err := machineBusySeconds()
		if err != nil {
			return false, err
		}
		now := time.Now()
		cores := -1.0
		if !prevAt.IsZero() {
			cores = (busy - prevBusy) / now.Sub(prevAt).Seconds()
		}
		prevBusy, prevAt = busy, now
		done, err := e.controllersDone(ctx, admin, &last)
		if err != nil || !done {
			settled, idlePolls = time.Time{}, 0
			return false, err
		}
		if settled.IsZero() {
			settled = now
		}
		if cores >= 0 && cores < quietCores {
			idlePolls++
		} else {
			idlePolls = 0
		}
		last = fmt.Sprintf("queues empty, pods running, machine %.2f cores busy", cores)
		return idlePolls >= 2 || now.Sub(settled) > 20*time.Second, nil
	})
	if err != nil {
		return time.Since(start), fmt.Errorf("waiting for the controllers to be done (last: %s): %w", last, err)
	}
	return time.Since(start), nil
}

// controllersDone says whether every controller-manager work queue is empty and every opi
// workload has a running pod; last describes what is not done yet.
func (e *env) controllersDone(ctx context.Context, admin kubernetes.Interface, last *string) (bool, error) {
	body, err := e.cluster.Get(ctx, localkube.ControllerManager, "/metrics")
	if err != nil {
		return false, err
	}
	fams, err := parseMetrics(body)
	if err != nil {
		return false, err
	}
	for name, q := range queueStatsOf(fams) {
		if q.Depth > 0 {
			*last = fmt.Sprintf("queue %s holds %.0f", name, q.Depth)
			return false, nil
		}
	}
	want, err := countWorkloads(ctx, admin, e.cfg.backend)
	if err != nil {
		return false, err
	}
	have, err := countPods(ctx, admin, opiNamespace)
	if err != nil {
		return false, err
	}
	// (The API server counts what remains only without selectors: one item is enough.)
	notRunning, err := admin.CoreV1().Pods(opiNamespace).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: "status.phase!=Running"})
	if err != nil {
		return false, err
	}
	*last = fmt.Sprintf("%d pods for %d workloads, all running: %t", have, want, len(notRunning.Items) == 0)
	return have >= want && len(notRunning.Items) == 0, nil
}

// countWorkloads counts opi's workloads from one single-item page.
func countWorkloads(ctx context.Context, admin kubernetes.Interface, backend string) (int, error) {
	var (
		n         int
		remaining *int64
	)
	if backend == backendStatefulSets {
		l, err := admin.AppsV1().StatefulSets(opiNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		n, remaining = len(l.Items), l.RemainingItemCount
	} else {
		l, err := admin.AppsV1().Deployments(opiNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		n, remaining = len(l.Items), l.RemainingItemCount
	}
	if remaining != nil {
		n += int(*remaining)
	}
	return n, nil
}

// countPods counts the pods of ns from one single-item page: the API server reports how many
// items remain.
func countPods(ctx context.Context, c kubernetes.Interface, ns string) (int, error) {
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	if list.RemainingItemCount != nil {
		return len(list.Items) + int(*list.RemainingItemCount), nil
	}
	if list.Continue == "" {
		return len(list.Items), nil
	}
	// No count from the server: page through.
	n := 0
	err = apiclient.ListPages(ctx, metav1.ListOptions{}, c.CoreV1().Pods(ns).List, func(page *corev1.PodList) error {
		n += len(page.Items)
		return nil
	})
	return n, err
}

// poll calls cond every second until it holds, the timeout passes or ctx ends. An error from
// cond does not stop the polling; the last one is reported if the timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			lastErr = err
		}
		return ok, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case lastErr != nil:
		return fmt.Errorf("timed out after %s (last error: %w)", timeout, lastErr)
	default:
		return fmt.Errorf("timed out after %s", timeout)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
