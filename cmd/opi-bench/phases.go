package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/kube"
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
	return k8s.DeploymentName(&opi.LRP{
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

	// 1. The objects opi makes for one app, read back from Kubernetes: the floor creates the same.
	logf("desiring a template app through opi and reading back what it created")
	tmpl, err := e.captureTemplate(ctx, admin)
	if err != nil {
		return err
	}

	// 2. Warm-up: 10 apps through opi, instances measured with only them in the cluster.
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

	// 3. Desire: the client-go floor and opi in alternating batches, so that both see the same
	// cluster (its size, its controllers' backlog) and the same load from outside the run.
	floorClient, err := e.client(false)
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
	batch := max(2*cfg.concurrency, (desired+9)/10)
	res.Batch = batch
	logf("desire: %d apps with client-go (floor) and %d through opi, alternating batches of %d, concurrency %d", desired, desired, batch, cfg.concurrency)
	m2, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	var (
		floorBatches, opiBatches []phase
		floorSteps               [][4]time.Duration
		floorCPU, opiCPU         cpuAcc
		retry                    []app // opi's failed desires, desired again untimed as CC's sync would
	)
	for k, lo := 0, 0; lo < desired; k, lo = k+1, lo+batch {
		hi := min(lo+batch, desired)
		runFloor := func() error {
			a := readCPU(e.ourPIDs())
			p, steps, err := e.floorBatch(ctx, floorClient, tmpl, hi-lo)
			floorCPU.add(a, readCPU(e.ourPIDs()))
			floorBatches, floorSteps = append(floorBatches, p), append(floorSteps, steps...)
			return err
		}
		runOpi := func() error {
			a := readCPU(e.ourPIDs())
			p, err := e.desirePhase(ctx, apps[lo:hi], cfg.concurrency)
			opiCPU.add(a, readCPU(e.ourPIDs()))
			opiBatches = append(opiBatches, p)
			return err
		}
		order := []func() error{runFloor, runOpi}
		if k%2 == 1 {
			order[0], order[1] = runOpi, runFloor
		}
		for _, f := range order {
			if err := f(); err != nil {
				return err
			}
		}
		ob := opiBatches[len(opiBatches)-1]
		res.RSSByApps = append(res.RSSByApps, rssPoint{Apps: warmApps + hi, MB: e.rss.current()})
		for _, i := range ob.failed {
			retry = append(retry, apps[lo+i])
		}
		fb := floorBatches[len(floorBatches)-1]
		logf("batch %d (%d apps): floor %.1f apps/s, opi %.1f apps/s", k+1, hi-lo, fb.Throughput, ob.Throughput)
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
	res.Floor, res.Desire = merge(floorBatches), merge(opiBatches)
	res.FloorSteps = stepPercentiles(floorSteps)
	res.FloorOthersCPU, res.DesireOthersCPU = floorCPU.share(), opiCPU.share()
	m3, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	res.DesireAPI = byVerb(m3.diff(m2))
	res.DesireAPIPerApp = float64(sum(res.DesireAPI)) / float64(desired)
	logf("floor: %.1f apps/s, p50 %.1f ms, p99 %.1f ms, %d errors", res.Floor.Throughput, res.Floor.P50, res.Floor.P99, res.Floor.Errors)
	logf("opi: %.1f apps/s, p50 %.1f ms, p99 %.1f ms, %d errors; %.2f API requests per desire %v",
		res.Desire.Throughput, res.Desire.P50, res.Desire.P99, res.Desire.Errors, res.DesireAPIPerApp, res.DesireAPI)

	// 4. The floor's namespace goes (and the run waits until everything in it is gone) while the
	// controllers catch up with opi's apps: every pod exists and runs.
	logf("deleting the floor namespace; waiting for it to be gone and for the %d pods to run", cfg.n)
	deleted := make(chan error, 1)
	t := time.Now()
	go func() {
		err := deleteNamespace(ctx, admin, floorNamespace, 10*time.Minute+time.Duration(cfg.n)*60*time.Millisecond)
		res.FloorCleanup = time.Since(t).Seconds()
		deleted <- err
	}()
	settled, err := waitPods(ctx, admin, opiNamespace, cfg.n, 5*time.Minute+time.Duration(cfg.n)*30*time.Millisecond)
	if err != nil {
		return err
	}
	res.PodsSettle = settled.Seconds()
	logf("all %d pods running %.1f s after the last desire", cfg.n, res.PodsSettle)
	if err := <-deleted; err != nil {
		return err
	}
	logf("floor namespace gone %.1f s after the last desire", res.FloorCleanup)

	// 6. Reads at N.
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

	// 7. Steady memory after the reads.
	logf("settling %s before sampling steady RSS", cfg.settle)
	if err := sleep(ctx, cfg.settle); err != nil {
		return err
	}
	res.SteadyRSS = e.rss.steady(ctx, 5, time.Second)
	if m, err := e.scrape(ctx); err == nil {
		res.HeapInuse = m.value("go_memstats_heap_inuse_bytes")
		res.HeapAlloc = m.value("go_memstats_heap_alloc_bytes")
		res.GoSys = m.value("go_memstats_sys_bytes")
	}

	// 8. Stop everything through opi.
	all := append(append([]app{}, warm...), apps...)
	logf("opi: stopping %d apps through PUT /apps/{guid}/{version}/stop at concurrency %d", len(all), cfg.concurrency)
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
	return err
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

func (e *env) waitOpiReady(ctx context.Context) error {
	if err := e.opi.WaitHTTP(ctx, e.opiURL+"/readyz", 2*time.Minute); err != nil {
		return fmt.Errorf("opi not ready: %w; see %s/opi.log", err, e.workDir)
	}
	return nil
}

// call sends a request as CC does: a JSON body without a JSON Content-Type.
func (e *env) call(ctx context.Context, method, path string, body []byte) ([]byte, int, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.opiURL+path, r)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

func (e *env) get(ctx context.Context, path string) ([]byte, int, error) {
	return e.call(ctx, http.MethodGet, path, nil)
}

// template is what opi created for one app, with that app's identity to substitute.
type template struct {
	app                         app
	name                        string
	secret, deployment, service string // JSON, without server-set fields
}

// captureTemplate desires one app through opi, reads back the Secret, Deployment and Service
// opi made for it, then stops it again and waits until it is gone.
func (e *env) captureTemplate(ctx context.Context, admin kubernetes.Interface) (*template, error) {
	a := newApp()
	body, code, err := e.call(ctx, http.MethodPut, "/apps/"+a.processGUID(), a.body())
	if err != nil || code != http.StatusAccepted {
		return nil, fmt.Errorf("desiring the template app: %d %s %v", code, body, err)
	}
	sel := metav1.ListOptions{LabelSelector: k8s.LabelGUID + "=" + a.guid + "," + k8s.LabelVersion + "=" + a.version}
	secrets, err := admin.CoreV1().Secrets(opiNamespace).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	workloads, err := listWorkloadJSON(ctx, admin, e.cfg.backend, opiNamespace, sel)
	if err != nil {
		return nil, err
	}
	services, err := admin.CoreV1().Services(opiNamespace).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	if len(secrets.Items) != 1 || len(workloads) != 1 || len(services.Items) != 1 {
		return nil, fmt.Errorf("the template app has %d secrets, %d workloads, %d services; the floor expects 1 of each",
			len(secrets.Items), len(workloads), len(services.Items))
	}
	name := a.deploymentName()
	if workloads[0].name != name {
		return nil, fmt.Errorf("opi named the template workload %s, k8s.DeploymentName says %s", workloads[0].name, name)
	}
	s := secrets.Items[0]
	secret := corev1.Secret{ObjectMeta: clean(s.ObjectMeta), Type: s.Type, Data: s.Data}
	v := services.Items[0]
	service := corev1.Service{ObjectMeta: clean(v.ObjectMeta), Spec: v.Spec}
	if service.Spec.ClusterIP != corev1.ClusterIPNone {
		// An allocated address is the API server's to choose; a headless Service keeps None.
		service.Spec.ClusterIP, service.Spec.ClusterIPs = "", nil
	}
	t := &template{app: a, name: name, deployment: workloads[0].json}
	for _, x := range []struct {
		obj any
		out *string
	}{{&secret, &t.secret}, {&service, &t.service}} {
		b, err := json.Marshal(x.obj)
		if err != nil {
			return nil, err
		}
		*x.out = string(b)
	}
	if !strings.Contains(t.deployment, a.guid) || !strings.Contains(t.deployment, a.version) || !strings.Contains(t.service, name) {
		return nil, errors.New("the template objects do not name the template app")
	}

	if body, code, err := e.call(ctx, http.MethodPut, a.path()+"/stop", nil); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("stopping the template app: %d %s %v", code, body, err)
	}
	// The garbage collector removes its Secret, Service, ReplicaSet and pod.
	err = poll(ctx, 2*time.Minute, func() (bool, error) {
		s, err := admin.CoreV1().Secrets(opiNamespace).List(ctx, sel)
		if err != nil {
			return false, err
		}
		p, err := admin.CoreV1().Pods(opiNamespace).List(ctx, sel)
		if err != nil {
			return false, err
		}
		return len(s.Items) == 0 && len(p.Items) == 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the template app's objects to go: %w", err)
	}
	return t, nil
}

// objects are the template's objects for app a, in namespace ns.
// The workload is JSON (a Deployment or StatefulSet, as the backend makes), with ns set in it.
func (t *template) objects(a app, ns string) (*corev1.Secret, []byte, *corev1.Service, error) {
	r := strings.NewReplacer(t.name, a.deploymentName(), t.app.guid, a.guid, t.app.version, a.version)
	var (
		s corev1.Secret
		v corev1.Service
	)
	for _, x := range []struct {
		in  string
		out any
	}{{t.secret, &s}, {t.service, &v}} {
		if err := json.Unmarshal([]byte(r.Replace(x.in)), x.out); err != nil {
			return nil, nil, nil, err
		}
	}
	s.Namespace, v.Namespace = ns, ns
	return &s, []byte(r.Replace(t.deployment)), &v, nil
}

// clean is the metadata a template keeps: name, labels, annotations.
func clean(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}
}

// workloadJSON is a workload as a template keeps it.
type workloadJSON struct{ name, json string }

// listWorkloadJSON lists the backend's workloads (Deployments or StatefulSets) as templates.
func listWorkloadJSON(ctx context.Context, client kubernetes.Interface, backend, ns string, opts metav1.ListOptions) ([]workloadJSON, error) {
	var objs []any
	if backend == k8s.WorkloadStatefulSets {
		list, err := client.AppsV1().StatefulSets(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, s := range list.Items {
			objs = append(objs, appsv1.StatefulSet{ObjectMeta: clean(s.ObjectMeta), Spec: s.Spec})
		}
	} else {
		list, err := client.AppsV1().Deployments(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, d := range list.Items {
			objs = append(objs, appsv1.Deployment{ObjectMeta: clean(d.ObjectMeta), Spec: d.Spec})
		}
	}
	out := make([]workloadJSON, 0, len(objs))
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		var m struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		out = append(out, workloadJSON{name: m.Metadata.Name, json: string(b)})
	}
	return out, nil
}

// workloadKind is the Kubernetes kind of the backend's workloads.
func workloadKind(backend string) string {
	if backend == k8s.WorkloadStatefulSets {
		return "StatefulSet"
	}
	return "Deployment"
}

// createWorkload creates the workload JSON of the backend's kind in ns, as the floor does.
func createWorkload(ctx context.Context, client kubernetes.Interface, backend, ns string, body []byte) (metav1.Object, error) {
	if backend == k8s.WorkloadStatefulSets {
		var s appsv1.StatefulSet
		if err := json.Unmarshal(body, &s); err != nil {
			return nil, err
		}
		s.Namespace = ns
		return client.AppsV1().StatefulSets(ns).Create(ctx, &s, metav1.CreateOptions{})
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, err
	}
	d.Namespace = ns
	return client.AppsV1().Deployments(ns).Create(ctx, &d, metav1.CreateOptions{})
}

// floorBatch creates, per app, what opi's desire creates, in opi's order and with opi's calls:
// the env Secret, the Deployment, a merge patch making the Deployment the Secret's controller,
// the Service owned by the Deployment. An app is done when its last write is accepted. It also
// returns each call's latency, to show which write dominates.
func (e *env) floorBatch(ctx context.Context, client kubernetes.Interface, t *template, count int) (phase, [][4]time.Duration, error) {
	secrets := client.CoreV1().Secrets(floorNamespace)
	services := client.CoreV1().Services(floorNamespace)
	steps := make([][4]time.Duration, count)
	p, err := timed(ctx, count, e.cfg.concurrency, func(ctx context.Context, i int) (time.Duration, error) {
		s, d, v, err := t.objects(newApp(), floorNamespace)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		createdSecret, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return 0, fmt.Errorf("create secret: %w", err)
		}
		t1 := time.Now()
		created, err := createWorkload(ctx, client, e.cfg.backend, floorNamespace, d)
		if err != nil {
			return 0, fmt.Errorf("create %s: %w", strings.ToLower(workloadKind(e.cfg.backend)), err)
		}
		t2 := time.Now()
		owner := kube.ControllerRef(created, "apps/v1", workloadKind(e.cfg.backend))
		if _, err := kube.SetOwner(ctx, secrets, s.Name, createdSecret.ResourceVersion, owner); err != nil {
			return 0, fmt.Errorf("set secret owner: %w", err)
		}
		t3 := time.Now()
		v.OwnerReferences = []metav1.OwnerReference{owner}
		if _, err := services.Create(ctx, v, metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("create service: %w", err)
		}
		t4 := time.Now()
		steps[i] = [4]time.Duration{t1.Sub(start), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3)}
		return t4.Sub(start), nil
	})
	return p, steps, err
}

// stepPercentiles are the p50 and p99 of each of the floor's calls.
func stepPercentiles(steps [][4]time.Duration) []step {
	var out []step
	for k, name := range []string{"create secret", "create workload", "patch secret owner", "create service"} {
		var ds []time.Duration
		for _, st := range steps {
			if st[k] > 0 {
				ds = append(ds, st[k])
			}
		}
		p50, p99 := percentiles(ds)
		out = append(out, step{Call: name, P50: p50, P99: p99})
	}
	return out
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
		if e.cfg.backend == k8s.WorkloadStatefulSets {
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
	err = kube.ListPages(ctx, metav1.ListOptions{}, c.CoreV1().Pods(ns).List, func(page *corev1.PodList) error {
		n += len(page.Items)
		return nil
	})
	return n, err
}

// deleteNamespace deletes ns and waits until it (and so everything in it) is gone.
func deleteNamespace(ctx context.Context, c kubernetes.Interface, ns string, timeout time.Duration) error {
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	err := poll(ctx, timeout, func() (bool, error) {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("waiting for namespace %s to be gone: %w", ns, err)
	}
	return nil
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
