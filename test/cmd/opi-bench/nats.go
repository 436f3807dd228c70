package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/testsupport/fixture"
	"github.com/opi-bridge/opi/testsupport/natsserver"
)

// With -routing nats the run measures opi's routing mode nats against a real
// nats-server in this process: opi runs with --routing nats --nats-url, the run subscribes to
// router.* as gorouter does, answers router.greet and announces a register interval of
// natsInterval with router.start (gorouter's built-in default; BOSH's is 20 s), and measures
//   - desire throughput of N apps in one burst against the one-Deployment floor's and the
//     same-objects floor's (opi makes no Service in this mode; the API server requests per
//     desire say how many writes it made);
//   - each instance's time from Ready (the run's own pod watch seeing the Ready condition, and
//     the condition's lastTransitionTime, whole seconds) to its first router.register arriving;
//   - the burst: from the first desire to the last instance registered, against the floor's
//     first create to all its pods Running;
//   - the steady cost of keeping N × -nats-instances instances registered: register messages
//     per second over a window, opi's CPU over it and its RSS; and that every pod has its own IP.

// natsInterval is the register interval the run announces (gorouter's built-in default).
const natsInterval = 5 * time.Second

// natsWindow is how long the steady cost is measured: six register intervals.
const natsWindow = 6 * natsInterval

// natsResults are the nats run; they are its JSON line.
type natsResults struct {
	Date        string   `json:"date"`
	N           int      `json:"n"`
	Backend     string   `json:"backend"`
	Routing     string   `json:"routing"`
	Concurrency int      `json:"concurrency"`
	Kinds       []string `json:"nats_objects_per_app"`

	Desire         phase   `json:"nats_desire"`
	FloorOne       phase   `json:"nats_floor_one_deployment"`
	DesireRatioOne float64 `json:"nats_desire_ratio_one_deployment"`
	// FloorSame makes exactly opi's objects of this mode (the template read back), as the
	// LRP runs' same-objects floor does; the ratio has the LRP runs' name, so that the
	// recorded runs' table shows it beside theirs.
	FloorSame       phase          `json:"nats_floor_same_objects"`
	FloorSteps      []step         `json:"nats_floor_same_objects_calls"`
	DesireRatioSame float64        `json:"desire_ratio_same_objects"`
	DesireAPI       map[string]int `json:"nats_desire_api_requests"`
	DesireAPIPerApp float64        `json:"opi_desire_api_requests_per_app"`

	Registration natsRegistration `json:"nats_ready_to_registered"`
	Burst        natsBurst        `json:"nats_burst"`
	// Rounds are each round's figures when -nats-rounds ran more than one (the figures above
	// then add the rounds up: throughput over their summed time, the burst's times averaged).
	Rounds []natsRound `json:"nats_rounds,omitempty"`
	Steady natsSteady  `json:"nats_steady"`

	Elapsed  float64  `json:"nats_elapsed_s"`
	Machine  machine  `json:"machine"`
	Note     string   `json:"note,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// natsRegistration is the time from an instance's readiness to its first router.register.
type natsRegistration struct {
	Instances int     `json:"instances"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
	// From the Ready condition's lastTransitionTime (whole seconds: up to 1 s too long).
	ConditionP50 float64 `json:"condition_p50_ms"`
	ConditionP99 float64 `json:"condition_p99_ms"`
	// opi's own opi_gorouter_registration_delay_seconds over the burst: its mean.
	OpiMean float64 `json:"opi_metric_mean_ms"`
}

// natsBurst is the N-app burst: first desire to last instance registered, and the floor's
// first create to all pods Running.
type natsBurst struct {
	Apps         int     `json:"apps"`
	Registered   float64 `json:"last_registered_s"`
	FloorRunning float64 `json:"floor_all_running_s"`
	// FloorSameRunning is the same-objects floor's first create to all its pods Running.
	FloorSameRunning float64 `json:"floor_same_objects_all_running_s"`
	Ratio            float64 `json:"ratio"`
}

// natsSteady is the cost of keeping the instances registered.
type natsSteady struct {
	Apps          int     `json:"apps"`
	Instances     int     `json:"instances"`
	Registered    int     `json:"registered"`
	UniquePodIPs  int     `json:"unique_pod_ips"`
	IntervalS     float64 `json:"interval_s"`
	WindowS       float64 `json:"window_s"`
	MessagesPerS  float64 `json:"register_per_s"`
	OpiCores      float64 `json:"opi_cpu_cores"`
	OpiCPUSeconds float64 `json:"opi_cpu_s"`
	RSSMB         float64 `json:"opi_rss_mb"`
	ScaleSeconds  float64 `json:"scale_to_registered_s"`
}

// natsBus is the run's side of NATS: the server, and a subscriber to router.* as gorouter is.
type natsBus struct {
	srv  *natsserver.Server
	conn *nats.Conn

	registers atomic.Int64
	mu        sync.Mutex
	// first is when each instance (private_instance_id) was first registered.
	first map[string]time.Time
	// live are the registered instances and their hosts (unregisters remove them).
	live map[string]string
}

// startNATS starts the server and the subscriber; the subscriber answers router.greet with the
// run's interval.
func startNATS() (*natsBus, error) {
	srv, err := natsserver.Start(natsserver.Options{})
	if err != nil {
		return nil, fmt.Errorf("starting nats-server: %w", err)
	}
	b := &natsBus{srv: srv, first: map[string]time.Time{}, live: map[string]string{}}
	if b.conn, err = nats.Connect(srv.URL(), nats.MaxReconnects(-1)); err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("connecting to nats-server: %w", err)
	}
	sub, err := b.conn.Subscribe("router.*", b.handle)
	if err == nil {
		err = sub.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = b.conn.Flush()
	}
	if err != nil {
		b.stop()
		return nil, fmt.Errorf("subscribing to router.*: %w", err)
	}
	return b, nil
}

// announcement is gorouter's router.start body with the run's interval.
func announcement() []byte {
	b, _ := json.Marshal(map[string]any{"id": "opi-bench", "hosts": []string{"127.0.0.1"},
		"minimumRegisterIntervalInSeconds": int(natsInterval / time.Second), "pruneThresholdInSeconds": 120})
	return b
}

// registerMessage is what the run reads of router.register and router.unregister.
type registerMessage struct {
	Host              string `json:"host"`
	Port              int    `json:"port"`
	PrivateInstanceID string `json:"private_instance_id"`
}

func (b *natsBus) handle(m *nats.Msg) {
	now := time.Now()
	switch m.Subject {
	case "router.greet":
		if m.Reply != "" {
			_ = b.conn.Publish(m.Reply, announcement())
		}
		return
	case "router.register", "router.unregister":
	default:
		return
	}
	var r registerMessage
	if err := json.Unmarshal(m.Data, &r); err != nil || r.PrivateInstanceID == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if m.Subject == "router.unregister" {
		delete(b.live, r.PrivateInstanceID)
		return
	}
	b.registers.Add(1)
	if _, ok := b.first[r.PrivateInstanceID]; !ok {
		b.first[r.PrivateInstanceID] = now
	}
	b.live[r.PrivateInstanceID] = r.Host
}

// registered are the first registration times of instances and how many are registered now.
func (b *natsBus) registered() (map[string]time.Time, map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := make(map[string]time.Time, len(b.first))
	for k, v := range b.first {
		first[k] = v
	}
	live := make(map[string]string, len(b.live))
	for k, v := range b.live {
		live[k] = v
	}
	return first, live
}

func (b *natsBus) liveCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.live)
}

func (b *natsBus) stop() {
	if b.conn != nil {
		b.conn.Close()
	}
	b.srv.Shutdown()
}

// readyWatch records when the run first sees each pod of opi's namespace Ready, and the Ready
// condition's lastTransitionTime.
type readyWatch struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	cond  map[string]time.Time
	stopC chan struct{}
}

func (e *env) watchReady() (*readyWatch, error) {
	w := &readyWatch{seen: map[string]time.Time{}, cond: map[string]time.Time{}, stopC: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(e.cluster.Clientset(), 0, informers.WithNamespace(opiNamespace))
	inf := f.Core().V1().Pods().Informer()
	see := func(obj any) {
		now := time.Now()
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				w.mu.Lock()
				if _, ok := w.seen[string(p.UID)]; !ok {
					w.seen[string(p.UID)], w.cond[string(p.UID)] = now, c.LastTransitionTime.Time
				}
				w.mu.Unlock()
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		return nil, err
	}
	go inf.Run(w.stopC)
	if !cache.WaitForCacheSync(w.stopC, inf.HasSynced) {
		close(w.stopC)
		return nil, fmt.Errorf("the pod watch did not sync")
	}
	return w, nil
}

func (w *readyWatch) stop() { close(w.stopC) }

// readyToRegistered are the delays from Ready to first registration of the instances uids, from
// the run's watch and from the condition's time, in ms.
func readyToRegistered(uids []string, seen, cond, first map[string]time.Time) (watch, condition []time.Duration) {
	for _, uid := range uids {
		reg, ok := first[uid]
		if !ok {
			continue
		}
		if s, ok := seen[uid]; ok {
			watch = append(watch, max(0, reg.Sub(s)))
		}
		if c, ok := cond[uid]; ok && !c.IsZero() {
			condition = append(condition, max(0, reg.Sub(c)))
		}
	}
	return watch, condition
}

// lastOf is the latest of the instances' first registrations, and how many of them have one.
func lastOf(uids []string, first map[string]time.Time) (time.Time, int) {
	var last time.Time
	n := 0
	for _, uid := range uids {
		if t, ok := first[uid]; ok {
			n++
			if t.After(last) {
				last = t
			}
		}
	}
	return last, n
}

// podUIDs are the UIDs and IPs of opi's pods.
func (e *env) podUIDs(ctx context.Context) (uids []string, ips map[string]int, err error) {
	list, err := e.cluster.Clientset().CoreV1().Pods(opiNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	ips = map[string]int{}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		uids = append(uids, string(p.UID))
		if p.Status.PodIP != "" {
			ips[p.Status.PodIP]++
		}
	}
	return uids, ips, nil
}

// natsPhases runs the nats benchmark on a ready opi connected to bus.
func (e *env) natsPhases(ctx context.Context, bus *natsBus) (*natsResults, error) {
	cfg := e.cfg
	admin := e.cluster.Clientset()
	res := &natsResults{Date: time.Now().UTC().Format(time.RFC3339), N: cfg.n, Backend: cfg.backend, Routing: "nats",
		Concurrency: cfg.concurrency, Machine: newResults(cfg).Machine}
	cpuStart := readCPU(e.ourPIDs())
	if err := bus.conn.Publish("router.start", announcement()); err != nil {
		return nil, err
	}

	logf("desiring a template app through opi and reading back what it created")
	tmpl, err := e.captureTemplate(ctx, admin)
	if err != nil {
		return nil, err
	}
	res.Kinds = tmpl.kinds()
	logf("opi made for one app: %s", strings.Join(res.Kinds, ", "))

	fc, err := e.floorClient()
	if err != nil {
		return nil, err
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the floor namespace: %w", err)
	}
	// The burst watch sees every round's pods go Ready.
	watch, err := e.watchReady()
	if err != nil {
		return nil, err
	}
	defer watch.stop()
	var (
		ones, sames, desires []phase
		sameCalls            [][]call
		uids                 []string
		apps                 []app
	)
	res.DesireAPI = map[string]int{}
	m0, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	for round := range cfg.natsRounds {
		if round > 0 {
			if err := e.natsClear(ctx, bus, apps); err != nil {
				return nil, err
			}
		}
		if cfg.natsRounds > 1 {
			logf("round %d of %d", round+1, cfg.natsRounds)
		}
		r, err := e.natsRound(ctx, bus, fc, tmpl, watch, round == 0 && cfg.profile > 0)
		if err != nil {
			return nil, err
		}
		ones, sames, desires = append(ones, r.one), append(sames, r.same), append(desires, r.desire)
		sameCalls = append(sameCalls, r.sameCalls...)
		uids, apps = append(uids, r.uids...), r.apps
		for verb, n := range r.api {
			res.DesireAPI[verb] += n
		}
		res.Burst.Registered += r.Registered / float64(cfg.natsRounds)
		res.Burst.FloorRunning += r.FloorRunning / float64(cfg.natsRounds)
		res.Burst.FloorSameRunning += r.floorSameRunning / float64(cfg.natsRounds)
		if cfg.natsRounds > 1 {
			res.Rounds = append(res.Rounds, r.natsRound)
		}
	}
	res.FloorOne, res.FloorSame, res.Desire = merge(ones), merge(sames), merge(desires)
	res.FloorSteps = stepPercentiles(sameCalls)
	res.DesireAPIPerApp = float64(sum(res.DesireAPI)) / float64(cfg.n*cfg.natsRounds)
	res.DesireRatioOne = ratio(res.Desire.Throughput, res.FloorOne.Throughput)
	res.DesireRatioSame = ratio(res.Desire.Throughput, res.FloorSame.Throughput)
	res.Burst.Apps = cfg.n
	res.Burst.Ratio = ratio(res.Burst.Registered, res.Burst.FloorRunning)
	if cfg.natsRounds > 1 {
		logf("over %d rounds: desire %.2f × the one-Deployment floor, %.2f × the same-objects floor; last registered %.1f s against all Running %.1f s (%.2f ×)",
			cfg.natsRounds, res.DesireRatioOne, res.DesireRatioSame, res.Burst.Registered, res.Burst.FloorRunning, res.Burst.Ratio)
	}
	first, _ := bus.registered()
	watch.mu.Lock()
	w, c := readyToRegistered(uids, watch.seen, watch.cond, first)
	watch.mu.Unlock()
	res.Registration.Instances = len(w)
	res.Registration.P50, res.Registration.P99 = percentiles(w)
	res.Registration.ConditionP50, res.Registration.ConditionP99 = percentiles(c)
	if m2, err := e.scrape(ctx); err == nil {
		const h = "opi_gorouter_registration_delay_seconds"
		if n := m2.value(h+"_count") - m0.value(h+"_count"); n > 0 {
			res.Registration.OpiMean = (m2.value(h+"_sum") - m0.value(h+"_sum")) / n * 1000
		}
	}

	// Steady: every app scaled to -nats-instances, then the cost of keeping them registered.
	want := cfg.n * cfg.natsInstances
	res.Steady.Apps, res.Steady.Instances, res.Steady.IntervalS = cfg.n, want, natsInterval.Seconds()
	logf("scaling the %d apps to %d instances each (%d instances)", cfg.n, cfg.natsInstances, want)
	start := time.Now()
	scale, err := timed(ctx, len(apps), cfg.concurrency, func(ctx context.Context, i int) (time.Duration, error) {
		a := apps[i]
		s := time.Now()
		body, code, err := e.call(ctx, http.MethodPost, "/apps/"+a.processGUID(), fixture.Scale(a.guid, a.version, cfg.natsInstances, "2.0").Bytes())
		if err != nil {
			return 0, err
		}
		if code/100 != 2 {
			return 0, fmt.Errorf("scale: %d %s", code, body)
		}
		return time.Since(s), nil
	})
	if err != nil {
		return nil, err
	}
	if scale.Errors > 0 {
		return nil, fmt.Errorf("%d scales failed: %s", scale.Errors, scale.FirstError)
	}
	// A machine too slow to start them all in -nats-wait measures the instances it started: the
	// figure says how many of the wanted ones were registered.
	polls := 0
	err = poll(ctx, cfg.natsWait, func() (bool, error) {
		n := bus.liveCount()
		if polls++; polls%30 == 0 {
			logf("  %d of %d instances registered", n, want)
		}
		return n >= want, nil
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res.Steady.ScaleSeconds = time.Since(start).Seconds()
	complete := err == nil
	if !complete {
		res.Warnings = append(res.Warnings, fmt.Sprintf("only %d of %d instances registered %s after the first scale (-nats-wait)", bus.liveCount(), want, cfg.natsWait))
		logf("  %s", res.Warnings[len(res.Warnings)-1])
	} else {
		logf("  %d instances registered %.1f s after the first scale", want, res.Steady.ScaleSeconds)
	}
	if complete { // the controllers' work for the new pods done first
		if _, err := e.quiesce(ctx); err != nil {
			return nil, err
		}
	}
	// A round of re-registrations starts at most one interval after the quiet.
	m0n, cpu0, t0 := bus.registers.Load(), e.opiCPU(), time.Now()
	if err := sleep(ctx, natsWindow); err != nil {
		return nil, err
	}
	m1n, cpu1, t1 := bus.registers.Load(), e.opiCPU(), time.Now()
	window := t1.Sub(t0).Seconds()
	res.Steady.WindowS = window
	res.Steady.MessagesPerS = float64(m1n-m0n) / window
	res.Steady.OpiCPUSeconds = cpu1 - cpu0
	res.Steady.OpiCores = (cpu1 - cpu0) / window
	res.Steady.RSSMB = e.rss.steady(ctx, 5, time.Second)
	_, live := bus.registered()
	res.Steady.Registered = len(live)
	_, ips, err := e.podUIDs(ctx)
	if err != nil {
		return nil, err
	}
	res.Steady.UniquePodIPs = len(ips)
	for ip, n := range ips {
		if n > 1 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("pod IP %s is held by %d pods", ip, n))
		}
	}
	slices.Sort(res.Warnings)
	logf("steady: %d registered, %d distinct pod IPs; %.0f register messages/s at a %s interval; opi %.3f cores (%.1f CPU s in %.0f s), RSS %.1f MB",
		res.Steady.Registered, res.Steady.UniquePodIPs, res.Steady.MessagesPerS, natsInterval, res.Steady.OpiCores, res.Steady.OpiCPUSeconds, window, res.Steady.RSSMB)

	res.Elapsed = time.Since(benchStart).Seconds()
	res.Machine.LoadEnd = loadavg()
	res.Machine.OthersCPU = othersShare(cpuStart, readCPU(e.ourPIDs()))
	return res, nil
}

// natsRound is one round's figures of a nats run: both floors, then opi's burst.
type natsRound struct {
	FloorOne     float64 `json:"floor_one_deployment_apps_per_s"`
	FloorSame    float64 `json:"floor_same_objects_apps_per_s"`
	Desire       float64 `json:"desire_apps_per_s"`
	RatioOne     float64 `json:"desire_ratio_one_deployment"`
	RatioSame    float64 `json:"desire_ratio_same_objects"`
	Registered   float64 `json:"last_registered_s"`
	FloorRunning float64 `json:"floor_all_running_s"`
	BurstRatio   float64 `json:"burst_ratio"`
}

// natsRoundRun is a round as measured, for the run to add up.
type natsRoundRun struct {
	natsRound
	one, same, desire phase
	sameCalls         [][]call
	floorSameRunning  float64
	apps              []app
	uids              []string
	api               map[string]int
}

// natsRound times the one-Deployment floor, the same-objects floor (N apps each, on a quiet
// cluster, deleted again), then N apps desired through opi in one burst until the last of their
// instances is registered; profile takes CPU profiles over the burst.
func (e *env) natsRound(ctx context.Context, bus *natsBus, fc *floorClient, tmpl *template, watch *readyWatch, profile bool) (*natsRoundRun, error) {
	cfg := e.cfg
	r := &natsRoundRun{}
	var err error
	if r.one, _, r.FloorRunning, err = e.natsFloor(ctx, fc, tmpl, floorOneDeployment); err != nil {
		return nil, err
	}
	if r.same, r.sameCalls, r.floorSameRunning, err = e.natsFloor(ctx, fc, tmpl, floorSameObjects); err != nil {
		return nil, err
	}
	if cfg.floorAtOnce {
		atOnce, _, _, err := e.natsFloor(ctx, fc, tmpl, floorSameAtOnce)
		if err != nil {
			return nil, err
		}
		logf("  (not recorded) same objects at once ÷ one Deployment %.2f, ÷ same objects %.2f",
			atOnce.Throughput/r.one.Throughput, atOnce.Throughput/r.same.Throughput)
	}
	if _, err := e.quiesce(ctx); err != nil {
		return nil, err
	}
	r.apps = make([]app, cfg.n)
	for i := range r.apps {
		r.apps[i] = newApp()
	}
	m0, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	logf("desire: %d apps through opi in one burst, concurrency %d", cfg.n, cfg.concurrency)
	var waitProfiles func()
	if profile {
		waitProfiles = e.startProfiles(ctx)
	}
	start := time.Now()
	if r.desire, err = e.desirePhase(ctx, r.apps, cfg.concurrency); err != nil {
		return nil, err
	}
	if waitProfiles != nil {
		waitProfiles()
		for _, p := range e.res.Profiles {
			logf("  profile of %s over the burst: %.1f CPU s in %s", p.Component, p.CPUSeconds, p.File)
		}
	}
	m1, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	r.api = byVerb(m1.diff(m0))
	r.FloorOne, r.FloorSame, r.Desire = r.one.Throughput, r.same.Throughput, r.desire.Throughput
	r.RatioOne, r.RatioSame = ratio(r.Desire, r.FloorOne), ratio(r.Desire, r.FloorSame)
	logf("  opi: %.1f apps/s (%.2f × the one-Deployment floor, %.2f × the same-objects floor), %d errors; %.2f API requests per desire %v",
		r.Desire, r.RatioOne, r.RatioSame, r.desire.Errors, float64(sum(r.api))/float64(cfg.n), r.api)
	if len(r.desire.failed) > 0 {
		return nil, fmt.Errorf("%d desires failed: %s", len(r.desire.failed), r.desire.FirstError)
	}
	err = poll(ctx, 5*time.Minute+time.Duration(cfg.n)*30*time.Millisecond, func() (bool, error) {
		var err error
		if r.uids, _, err = e.podUIDs(ctx); err != nil {
			return false, err
		}
		first, _ := bus.registered()
		_, n := lastOf(r.uids, first)
		return len(r.uids) >= cfg.n && n == len(r.uids), nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the burst's %d instances to be registered: %w", cfg.n, err)
	}
	first, _ := bus.registered()
	last, _ := lastOf(r.uids, first)
	r.Registered = last.Sub(start).Seconds()
	r.BurstRatio = ratio(r.Registered, r.FloorRunning)
	watch.mu.Lock()
	w, c := readyToRegistered(r.uids, watch.seen, watch.cond, first)
	watch.mu.Unlock()
	p50, p99 := percentiles(w)
	cp50, cp99 := percentiles(c)
	logf("  last of %d instances registered %.1f s after the first desire (floor: all running after %.1f s: %.2f ×); Ready → registered p50 %.0f ms, p99 %.0f ms (condition time: p50 %.0f ms, p99 %.0f ms)",
		len(r.uids), r.Registered, r.FloorRunning, r.BurstRatio, p50, p99, cp50, cp99)
	return r, nil
}

// natsClear stops a round's apps through opi and waits until their pods are gone and every
// instance is unregistered, so that the next round starts from an empty namespace.
func (e *env) natsClear(ctx context.Context, bus *natsBus, apps []app) error {
	logf("stopping the round's %d apps", len(apps))
	if err := single(e.stopPhase(ctx, apps)); err != nil {
		return err
	}
	start := time.Now()
	err := poll(ctx, 5*time.Minute, func() (bool, error) {
		n, err := countPods(ctx, e.cluster.Clientset(), opiNamespace)
		return n == 0 && bus.liveCount() == 0, err
	})
	if err != nil {
		return fmt.Errorf("waiting for the round's pods to go and be unregistered: %w", err)
	}
	logf("  pods gone and unregistered after %.1f s", time.Since(start).Seconds())
	return nil
}

// natsFloor times one floor of N apps, on a quiet cluster, to its creates and to all its pods
// Running, then deletes what it made and waits until it is gone.
func (e *env) natsFloor(ctx context.Context, fc *floorClient, tmpl *template, floor string) (phase, [][]call, float64, error) {
	n := e.cfg.n
	if _, err := e.quiesce(ctx); err != nil {
		return phase{}, nil, 0, err
	}
	logf("%s floor: %d apps, concurrency %d", floor, n, e.cfg.concurrency)
	start := time.Now()
	p, calls, err := e.floorBatch(ctx, fc, tmpl, floor, n)
	if err != nil {
		return p, nil, 0, err
	}
	if _, err := waitPods(ctx, e.cluster.Clientset(), floorNamespace, n, 5*time.Minute+time.Duration(n)*30*time.Millisecond); err != nil {
		return p, nil, 0, err
	}
	running := time.Since(start).Seconds()
	logf("  %s floor: %.1f apps/s; all %d pods running %.1f s after its first create", floor, p.Throughput, n, running)
	d, err := e.cleanFloor(ctx, tmpl)
	if err != nil {
		return p, nil, 0, err
	}
	logf("  its objects gone after %.1f s", d.Seconds())
	return p, calls, running, nil
}

// opiCPU is opi's CPU seconds so far (0 when unreadable).
func (e *env) opiCPU() float64 {
	s, _ := processCPUSeconds(e.opi.Pid())
	return s
}

// table is the nats run as markdown.
func (r *natsResults) table() string {
	var b strings.Builder
	b.WriteString("| measure (routing nats) | value |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| objects opi makes per app | %s |\n", strings.Join(r.Kinds, ", "))
	fmt.Fprintf(&b, "| desire, %d apps in one burst, %d at once | %.1f apps/s (p50 %.0f ms, p99 %.0f ms), %d errors; %.2f API requests each (%s) |\n",
		r.N, r.Concurrency, r.Desire.Throughput, r.Desire.P50, r.Desire.P99, r.Desire.Errors, r.DesireAPIPerApp, verbs(r.DesireAPI))
	fmt.Fprintf(&b, "| one-Deployment floor | %.1f apps/s; opi ÷ floor %.2f |\n", r.FloorOne.Throughput, r.DesireRatioOne)
	var calls []string
	for _, st := range r.FloorSteps {
		calls = append(calls, fmt.Sprintf("%s %.0f/%.0f", st.Call, st.P50, st.P99))
	}
	fmt.Fprintf(&b, "| same-objects floor (%s; %s) | %.1f apps/s; opi ÷ floor %.2f (target ≥ %.1f); each call's p50/p99 ms: %s; all pods Running %.1f s after its first create |\n",
		strings.Join(r.Kinds, ", "), floorOrder(r.Kinds), r.FloorSame.Throughput, r.DesireRatioSame, targetDesireRatioSame, strings.Join(calls, "; "), r.Burst.FloorSameRunning)
	fmt.Fprintf(&b, "| Ready → registered (%d instances) | p50 %.0f ms, p99 %.0f ms; from the condition's time p50 %.0f ms, p99 %.0f ms; opi's metric mean %.0f ms |\n",
		r.Registration.Instances, r.Registration.P50, r.Registration.P99, r.Registration.ConditionP50, r.Registration.ConditionP99, r.Registration.OpiMean)
	fmt.Fprintf(&b, "| burst: first desire → last registered | %.1f s (floor: first create → all Running %.1f s; ratio %.2f) |\n",
		r.Burst.Registered, r.Burst.FloorRunning, r.Burst.Ratio)
	fmt.Fprintf(&b, "| steady, %d instances (%d apps) at a %.0f s interval | %.0f register/s; opi %.3f cores, RSS %.1f MB; %d distinct pod IPs |\n",
		r.Steady.Instances, r.Steady.Apps, r.Steady.IntervalS, r.Steady.MessagesPerS, r.Steady.OpiCores, r.Steady.RSSMB, r.Steady.UniquePodIPs)
	return b.String()
}

// reportNATS prints the nats run and, with -record, appends it to the runs file.
func reportNATS(cfg config, r *natsResults) error {
	r.Note = strings.TrimSpace(noteFlag)
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return printRun(r.table(), line, cfg.record, cfg.doc)
}

// podCapacity is how many pods each node must hold so that placement never limits the run.
func (c config) podCapacity() int {
	if c.routing == routingNATS {
		return c.n*c.natsInstances + 100
	}
	return c.n + c.tasks + 100
}

const routingNATS = "nats"
