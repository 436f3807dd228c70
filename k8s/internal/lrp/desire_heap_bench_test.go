package lrp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/opi"
)

// maximalDesireVersion is the version of every maximal desire (their guids differ).
const maximalDesireVersion = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"

// maximalDesireBody is a desire of the app guid at every bound at once, as large as the default
// body limit allows (handler.DefaultMaxBodyBytes, less 4 KiB): an environment of nearly
// bifrost.MaxEnvBytes of names and values (a VCAP_SERVICES of escaped JSON, as CC sends it, and
// many plain variables), bifrost.MaxRoutes routes with the longest hostnames opi's own
// annotations leave room for (the Deployment's routes annotation: an object's annotations may
// hold 256 KiB, and preflight refuses more), bifrost.MaxEgressRules egress rules and
// bifrost.MaxPorts ports. What the body limit leaves after those is filled with control
// characters in the plain variables' values (a tenant's `cf set-env` may hold any): JSON
// escapes each as \u0001, six bytes in the body for one in the environment, so the body grows
// to the limit with the environment still within its bound.
func maximalDesireBody(tb testing.TB, guid string) []byte {
	// VCAP_SERVICES: JSON in a string, so its quotes are escaped in the body. ~600 KiB.
	var services strings.Builder
	services.WriteString(`{"user-provided":[`)
	for i := 0; services.Len() < 600<<10; i++ {
		if i > 0 {
			services.WriteByte(',')
		}
		fmt.Fprintf(&services, `{"name":"svc-%d","credentials":{"uri":"postgres://u:p@db-%d.internal:5432/app","password":"%032d"}}`, i, i, i)
	}
	services.WriteString(`]}`)
	size := len("VCAP_SERVICES") + services.Len()
	var names []string
	for i := 0; len(names)+1 < bifrost.MaxEnvEntries; i++ {
		name := fmt.Sprintf("VAR_%04d", i)
		if size+len(name)+380 > bifrost.MaxEnvBytes-1024 {
			break
		}
		names = append(names, name)
		size += len(name) + 380
	}
	// Hostnames of 47 characters: the egress rules are recorded on the Deployment beside the
	// routes (about 170 bytes a rule), and the two must fit in 256 KiB together.
	label := strings.Repeat("h", 25)
	routes := make([]map[string]any, bifrost.MaxRoutes)
	for i := range routes {
		routes[i] = map[string]any{"hostname": fmt.Sprintf("r%04d%s.apps.example.com", i, label), "port": 8080 + i%bifrost.MaxPorts}
	}
	egress := make([]map[string]any, bifrost.MaxEgressRules)
	for i := range egress {
		egress[i] = map[string]any{"protocol": "tcp", "destinations": []string{fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)},
			"ports": []int{443, 5432, 6379}, "log": false}
	}
	ports := make([]int, bifrost.MaxPorts)
	for i := range ports {
		ports[i] = 8080 + i
	}
	// build makes the body with fill control characters spread over the plain variables'
	// values.
	build := func(fill int) []byte {
		env := map[string]string{"VCAP_SERVICES": services.String()}
		for i, name := range names {
			q := min(fill/len(names)+boolInt(i < fill%len(names)), 380)
			env[name] = strings.Repeat("\x01", q) + strings.Repeat("v", 380-q)
		}
		body, err := json.Marshal(map[string]any{
			"guid": guid, "version": maximalDesireVersion, "process_guid": guid + "-" + maximalDesireVersion,
			"process_type": "web", "app_guid": "app", "app_name": "dora", "space_guid": "space", "organization_guid": "org",
			"instances": 2, "memory_mb": 1024, "disk_mb": 1024, "cpu_weight": 50, "health_check_type": "port",
			"last_updated": "1600000000.2499998", "ports": ports, "environment": env, "egress_rules": egress,
			"routes":    map[string]any{"cf-router": routes},
			"lifecycle": map[string]any{"docker_lifecycle": map[string]any{"image": "registry.example.com/team/dora:v1", "command": []string{"/bin/sh", "-c", "./run"}}},
		})
		if err != nil {
			tb.Fatal(err)
		}
		return body
	}
	body := build(0)
	room := handler.DefaultMaxBodyBytes - 4096 - len(body)
	if room < 0 {
		tb.Fatalf("the maximal desire is %d bytes, more than the default body limit %d", len(body), handler.DefaultMaxBodyBytes)
	}
	return build(room / (len(`\u0001`) - 1))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// heapObjects is the heap's objects, live and not yet swept, in bytes: what the heap takes
// between two collections.
func heapObjects() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// barrier holds the first n callers until all n have arrived, then runs atAll once (while
// they are still held) and lets them go; later callers pass at once. It gives up after a
// minute (a desire that never arrives, for a bug in the benchmark) rather than hang.
type barrier struct {
	n       int
	atAll   func()
	mu      sync.Mutex
	arrived int
	open    chan struct{}
}

func newBarrier(n int, atAll func()) *barrier {
	return &barrier{n: n, atAll: atAll, open: make(chan struct{})}
}

func (w *barrier) wait() {
	w.mu.Lock()
	w.arrived++
	if w.arrived == w.n {
		if w.atAll != nil {
			w.atAll()
		}
		close(w.open)
	}
	w.mu.Unlock()
	select {
	case <-w.open:
	case <-time.After(time.Minute):
	}
}

// BenchmarkMaximalDesireHeap measures the heap that n maximal desires (maximalDesireBody,
// about 2 MiB each) take at once on their whole way: opi's router with its in-flight bound,
// bifrost's validation and conversion, and the k8s backend with every object of a desire in
// the manifests' configuration (ingress routing, network policies; Deployments or
// StatefulSets) on client-go's fake clientset, started and synced as opi's own is.
// handler.DefaultMaxInFlight is derived from it (docs/reliability.md, "Request bounds"). Run it without -race (which distorts heaps):
//
//	go test -run '^$' -bench MaximalDesireHeap -benchtime 5x ./k8s
//
// It runs with GOGC=25, as opi does. The n requests are made concurrent and held together at
// the backend's door (read, decoded, validated and converted: what the handler and bifrost keep
// live while the backend works), then let into the backend at once, while a sampler reads the
// heap every 50 µs. (They cannot be held inside the backend: the fake clientset runs its
// reactors under one lock, so a held write would hold every other.) Per request, with the heap
// before the requests as the base:
//
//   - peak-B/req: the highest heap (live and unswept objects) seen while they ran, the figure
//     the bound is derived from. An upper bound: it includes what the fake clientset's tracker
//     keeps of the objects (in opi it is the API server that keeps them) and the informers'
//     copies of them (which stay in opi's caches, and which the caches' figures of
//     docs/benchmarks.md count for real apps);
//   - held-live-B/req: the live heap (after a collection) while all n are held at the backend;
//   - retained-B/req: the live heap after they all ended (the tracker's objects and the
//     caches' copies), which peak-B/req overcounts by at most;
//   - encoded-B/req: the protobuf size of the objects a desire wrote. The fake clientset does
//     not encode; opi's client encodes each object it writes (protobuf) and reads the API
//     server's answer, about twice this in buffers, which the figure lets one add.
//
// With n=1 the figure is one request alone; n×(its peak) is the worst case of n at once, each
// at its own peak, which n concurrent requests on a few cores approach from below.
func BenchmarkMaximalDesireHeap(b *testing.B) {
	for _, workload := range []string{workload.Deployments, workload.StatefulSets} {
		for _, n := range []int{1, handler.DefaultMaxInFlight} {
			b.Run(fmt.Sprintf("%s/inflight-%d", workload, n), func(b *testing.B) { benchmarkMaximalDesireHeap(b, workload, n) })
		}
	}
}

func benchmarkMaximalDesireHeap(b *testing.B, workload string, n int) {
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	bodies := make([][]byte, n)
	guids := make([]string, n)
	for i := range n {
		guids[i] = fmt.Sprintf("%08x-2c3e-4b1d-9c7e-0a1b2c3d4e5f", i)
		bodies[i] = maximalDesireBody(b, guids[i])
	}
	var peak, heldLive, retained, encoded float64
	b.SetBytes(int64(len(bodies[0])))
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		client := backendtest.NewClient()
		var held uint64
		atBackend := newBarrier(n, func() {
			runtime.GC()
			held = heapObjects()
		})
		backend := backendtest.MustBackend(client, lager.NewLogger("bench"), k8s.Options{
			Namespace: backendtest.Namespace,
			Workload:  workload,
			Store:     store.Options{ReadWaitTimeout: time.Minute},
			Hooks:     hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingIngress}, NetworkPolicy: hooks.NetworkPolicyOptions{Enabled: true, Routers: []hooks.PolicyPeer{{Namespace: "ingress-nginx"}}, DNSNamespace: "kube-system"}},
		})
		if err := backend.Start(ctx); err != nil {
			b.Fatal(err)
		}
		router := handler.New(handler.Config{LRP: &bifrost.LRP{Backend: heldBackend{backend, atBackend}}, Logger: lager.NewLogger("bench"), MaxInFlight: n})

		runtime.GC()
		base := heapObjects()
		var highest atomic.Uint64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				if h := heapObjects(); h > highest.Load() {
					highest.Store(h)
				}
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Microsecond):
				}
			}
		}()
		var done sync.WaitGroup
		codes := make([]int, n)
		answers := make([]string, n)
		for i := range n {
			done.Add(1)
			go func() {
				defer done.Done()
				req := httptest.NewRequest(http.MethodPut, "/apps/"+guids[i]+"-"+maximalDesireVersion, bytes.NewReader(bodies[i]))
				rec := httptest.NewRecorder()
				router.ServeHTTP(rec, req)
				codes[i], answers[i] = rec.Code, rec.Body.String()
			}()
		}
		done.Wait()
		close(stop)
		<-sampled
		for i, code := range codes {
			if code != http.StatusAccepted {
				b.Fatalf("a maximal desire got %d: %s", code, answers[i])
			}
		}
		runtime.GC()
		after := heapObjects()
		peak += float64(highest.Load()) - float64(base)
		heldLive += float64(held) - float64(base)
		retained += float64(after) - float64(base)
		b.StopTimer()
		encoded += float64(encodedSize(b, client))
		cancel()
		b.StartTimer()
	}
	perRequest := func(total float64) float64 { return total / float64(b.N) / float64(n) }
	b.ReportMetric(perRequest(peak), "peak-B/req")
	b.ReportMetric(perRequest(heldLive), "held-live-B/req")
	b.ReportMetric(perRequest(retained), "retained-B/req")
	b.ReportMetric(perRequest(encoded), "encoded-B/req")
	b.ReportMetric(float64(len(bodies[0])), "body-B")
}

// heldBackend holds each desire at a barrier before the backend gets it.
type heldBackend struct {
	*k8s.Backend
	at *barrier
}

func (h heldBackend) DesireLRP(ctx context.Context, lrp *opi.LRP) error {
	h.at.wait()
	return h.Backend.DesireLRP(ctx, lrp)
}

// encodedSize is the protobuf size of the objects the tracker holds in the apps' namespace.
func encodedSize(b *testing.B, client interface {
	Tracker() k8stesting.ObjectTracker
}) int {
	total := 0
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "services"},
		{Group: "apps", Version: "v1", Resource: "deployments"}, {Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
		{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	} {
		list, err := client.Tracker().List(gvr, schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: kindOf(gvr.Resource)}, backendtest.Namespace)
		if err != nil {
			b.Fatal(err)
		}
		sized, ok := list.(interface{ Size() int })
		if !ok {
			b.Fatalf("%s: %T has no protobuf size", gvr.Resource, list)
		}
		total += sized.Size()
	}
	return total
}

func kindOf(resource string) string {
	return map[string]string{
		"secrets": "Secret", "services": "Service", "deployments": "Deployment", "statefulsets": "StatefulSet",
		"networkpolicies": "NetworkPolicy", "ingresses": "Ingress", "poddisruptionbudgets": "PodDisruptionBudget",
	}[resource]
}
