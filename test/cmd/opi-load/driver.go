package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opi-bridge/opi/testsupport/fixture"
)

// Request kinds, in the order of the report.
const (
	kindDesire       = "desire"
	kindUpdate       = "update"
	kindList         = "list"
	kindInstances    = "instances"
	kindStopInstance = "stop-instance"
	kindStop         = "stop"
)

var kinds = []string{kindDesire, kindUpdate, kindList, kindInstances, kindStopInstance, kindStop}

// mix is how often each kind is picked, out of 100: about CC's mix in a busy foundation,
// with more writes than CC would send, to stress them.
var mix = []struct {
	kind   string
	weight int
}{
	{kindDesire, 25}, {kindUpdate, 20}, {kindList, 10}, {kindInstances, 20}, {kindStopInstance, 10}, {kindStop, 15},
}

// appModel is what should exist of one app. Its mutex is held across a write to it, so the
// model is exact: writes to one app are one at a time (as CC's process model makes them), and
// writes to different apps run concurrently.
type appModel struct {
	mu          sync.Mutex
	guid        string
	version     string
	desired     bool
	instances   int
	annotation  string
	generation  int // bumped by every write, for fresh annotations
	memoryMB    int
	appName     string
	processType string
}

func (a *appModel) processGUID() string { return a.guid + "-" + a.version }
func (a *appModel) path() string        { return "/apps/" + a.guid + "/" + a.version }

// kindStats are the figures of one kind of request.
type kindStats struct {
	Requests   int64   `json:"requests"`
	Status5xx  int64   `json:"status_5xx"`
	Unexpected int64   `json:"unexpected"`
	Transport  int64   `json:"transport_errors"`
	MeanMs     float64 `json:"mean_ms"`
	MaxMs      float64 `json:"max_ms"`
	totalNs    int64
	maxNs      int64
}

type driver struct {
	base   string
	f      flags
	client *http.Client
	apps   []*appModel
	sent   atomic.Int64

	mu       sync.Mutex
	stats    map[string]*kindStats
	examples []string // the first unexpected answers, for the report
	took     time.Duration
}

func newDriver(base string, f flags) *driver {
	d := &driver{
		base: base, f: f,
		client: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{
			MaxIdleConns: f.workers * 2, MaxIdleConnsPerHost: f.workers * 2, IdleConnTimeout: time.Minute,
		}},
		stats: map[string]*kindStats{},
	}
	rng := rand.New(rand.NewPCG(f.seed, 1))
	for i := range f.apps {
		d.apps = append(d.apps, &appModel{
			guid: fixture.SeededGUID(rng), version: fixture.SeededGUID(rng), memoryMB: 64,
			appName: fmt.Sprintf("load-app-%d", i), processType: "web",
		})
	}
	for _, k := range kinds {
		d.stats[k] = &kindStats{}
	}
	return d
}

// run lets the workers send requests until the duration passes, the request budget is spent or
// ctx ends.
func (d *driver) run(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, d.f.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range d.f.workers {
		rng := rand.New(rand.NewPCG(d.f.seed, uint64(w)+2))
		wg.Go(func() {
			for ctx.Err() == nil && d.sent.Add(1) <= int64(d.f.maxRequests) {
				d.step(rng)
			}
		})
	}
	wg.Wait()
	d.took = time.Since(start)
}

func pick(rng *rand.Rand) string {
	n := rng.IntN(100)
	for _, m := range mix {
		if n < m.weight {
			return m.kind
		}
		n -= m.weight
	}
	return kindList
}

// step sends one request of a random kind to a random app and checks the answer against the
// model.
func (d *driver) step(rng *rand.Rand) {
	kind := pick(rng)
	if kind == kindList {
		status, body, took, err := d.call(http.MethodGet, "/apps", "")
		d.record(kind, status, took, err, status == http.StatusOK && strings.Contains(body, `"desired_lrp_scheduling_infos":[`), body)
		return
	}
	a := d.apps[rng.IntN(len(d.apps))]
	a.mu.Lock()
	defer a.mu.Unlock()
	switch kind {
	case kindDesire:
		// CC re-desires with what it has; a new desire gets new values.
		instances, annotation, generation := a.instances, a.annotation, a.generation
		if !a.desired {
			instances = 1 + rng.IntN(3)
			generation = a.generation + 1
			annotation = fmt.Sprintf("%d.%d", 1700000000+generation, rng.IntN(1000))
		}
		status, body, took, err := d.call(http.MethodPut, "/apps/"+a.processGUID(), desireBody(a, instances, annotation))
		ok := status == http.StatusAccepted
		d.record(kind, status, took, err, ok, body)
		if ok {
			a.desired, a.instances, a.annotation, a.generation = true, instances, annotation, generation
		}
	case kindUpdate:
		instances := 1 + rng.IntN(3)
		generation := a.generation + 1
		annotation := fmt.Sprintf("%d.%d", 1700000000+generation, rng.IntN(1000))
		body := fixture.Scale(a.guid, a.version, instances, annotation).JSON()
		status, resp, took, err := d.call(http.MethodPost, "/apps/"+a.processGUID(), body)
		want := http.StatusNotFound
		if a.desired {
			want = http.StatusOK
		}
		d.record(kind, status, took, err, status == want, resp)
		if a.desired && status == http.StatusOK {
			a.instances, a.annotation, a.generation = instances, annotation, generation
		}
	case kindInstances:
		status, body, took, err := d.call(http.MethodGet, a.path()+"/instances", "")
		ok := status == http.StatusNotFound && strings.Contains(body, "not found")
		if a.desired {
			ok = status == http.StatusOK && !strings.Contains(body, `"error"`)
		}
		d.record(kind, status, took, err, ok, body)
	case kindStopInstance:
		index, want := 0, http.StatusNotFound
		if a.desired {
			index, want = rng.IntN(a.instances), http.StatusOK
		}
		status, body, took, err := d.call(http.MethodPut, a.path()+"/stop/"+strconv.Itoa(index), "")
		d.record(kind, status, took, err, status == want, body)
	case kindStop:
		status, body, took, err := d.call(http.MethodPut, a.path()+"/stop", "")
		ok := status == http.StatusOK
		d.record(kind, status, took, err, ok, body)
		if ok {
			a.desired = false
		}
	}
}

func (d *driver) call(method, path, body string) (int, string, time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", 0, err
	}
	// CC's client: a JSON body without a JSON Content-Type.
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, "", time.Since(start), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(start), err
}

func (d *driver) record(kind string, status int, took time.Duration, err error, expected bool, body string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats[kind]
	s.Requests++
	s.totalNs += took.Nanoseconds()
	s.maxNs = max(s.maxNs, took.Nanoseconds())
	example := ""
	switch {
	case err != nil:
		s.Transport++
		example = fmt.Sprintf("%s: %v", kind, err)
	case status >= 500:
		s.Status5xx++
		example = fmt.Sprintf("%s: %d %s", kind, status, truncate(body))
	case !expected:
		s.Unexpected++
		example = fmt.Sprintf("%s: unexpected %d %s", kind, status, truncate(body))
	}
	if example != "" && len(d.examples) < 10 {
		d.examples = append(d.examples, example)
	}
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// desireBody is the DesireLRPRequest CC sends for a with instances and annotation: fewer keys
// than the integration suite's (no egress rules, placement tags, volume mounts, http endpoint
// or annotations of the user), the load test's names.
func desireBody(a *appModel, instances int, annotation string) string {
	return fixture.DesireLRP(a.guid, a.version).Merge(map[string]any{
		"process_type": a.processType, "app_name": a.appName,
		"space_guid": "space-load", "space_name": "load", "organization_guid": "org-load", "organization_name": "load",
		"environment": map[string]string{"PORT": "8080", "VCAP_SERVICES": `{"db":[{"credentials":{"password":"load-secret"}}]}`},
		"instances":   instances, "memory_mb": a.memoryMB, "disk_mb": 64, "cpu_weight": 1,
		"health_check_timeout_ms": 1000, "last_updated": annotation,
		"routes": fixture.Routes(a.appName+".load.example.com", 8080),
	}).Without("egress_rules", "placement_tags", "volume_mounts", "health_check_http_endpoint", "user_defined_annotations").JSON()
}
