package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"code.cloudfoundry.org/lager/v3"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/opi"
)

// maximalDesireBody is a desire at every bound at once, within DefaultMaxBodyBytes: an
// environment of nearly bifrost.MaxEnvBytes (a VCAP_SERVICES of escaped JSON, as CC sends it,
// and many plain variables), bifrost.MaxRoutes routes, bifrost.MaxEgressRules egress rules and
// bifrost.MaxPorts ports.
func maximalDesireBody(tb testing.TB) []byte {
	env := map[string]string{}
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
	env["VCAP_SERVICES"] = services.String()
	size := len("VCAP_SERVICES") + services.Len()
	for i := 0; len(env) < bifrost.MaxEnvEntries; i++ {
		name, value := fmt.Sprintf("VAR_%04d", i), strings.Repeat("v", 380)
		if size+len(name)+len(value) > bifrost.MaxEnvBytes-1024 {
			break
		}
		env[name] = value
		size += len(name) + len(value)
	}
	routes := make([]map[string]any, bifrost.MaxRoutes)
	for i := range routes {
		routes[i] = map[string]any{"hostname": fmt.Sprintf("route-%04d.%s.apps.example.com", i, strings.Repeat("a", 60)), "port": 8080}
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
	body, err := json.Marshal(map[string]any{
		"guid": guid, "version": version, "process_guid": processGUID,
		"process_type": "web", "app_guid": "app", "app_name": "dora", "space_guid": "space", "organization_guid": "org",
		"instances": 2, "memory_mb": 1024, "disk_mb": 1024, "cpu_weight": 50, "health_check_type": "port",
		"last_updated": "1600000000.2499998", "ports": ports, "environment": env, "egress_rules": egress,
		"routes":    map[string]any{"cf-router": routes},
		"lifecycle": map[string]any{"docker_lifecycle": map[string]any{"image": "registry.example.com/team/dora:v1", "command": []string{"/bin/sh", "-c", "./run"}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(body) > handler.DefaultMaxBodyBytes {
		tb.Fatalf("the maximal desire is %d bytes, more than the default body limit %d", len(body), handler.DefaultMaxBodyBytes)
	}
	return body
}

// BenchmarkMaximalDesireHeap measures the heap one maximal desire takes in the handler and
// bifrost (body read, decoded, validated and converted to the LRP the backend gets), which
// handler.DefaultMaxInFlight is derived from. Run it without -race (which distorts heaps):
//
//	go test -run '^$' -bench MaximalDesireHeap -benchtime 10x ./handler
//
// live-B/req: the heap held by each of DefaultMaxInFlight requests that wait in the backend at
// once (after a GC: what is live, the worst case of the bound); alloc-B/req: all a request
// allocates, garbage included.
func BenchmarkMaximalDesireHeap(b *testing.B) {
	body := maximalDesireBody(b)
	concurrent := handler.DefaultMaxInFlight
	var arrived sync.WaitGroup
	release := make(chan struct{})
	backend := new(fakes.FakeLRPBackend)
	backend.DesireLRPStub = func(context.Context, *opi.LRP) error {
		arrived.Done()
		<-release
		return nil
	}
	h := handler.New(handler.Config{
		LRP: &bifrost.LRP{Backend: backend}, Readiness: new(fakes.FakeReadinessChecker),
		Logger: lager.NewLogger("bench"), MaxInFlight: concurrent,
	})
	var live, alloc float64
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var before, during, after runtime.MemStats
		runtime.ReadMemStats(&before)
		release = make(chan struct{})
		arrived.Add(concurrent)
		var done sync.WaitGroup
		codes := make([]int, concurrent)
		for i := range concurrent {
			done.Add(1)
			go func() {
				defer done.Done()
				req := httptest.NewRequest(http.MethodPut, "/apps/"+processGUID, bytes.NewReader(body))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				codes[i] = rec.Code
			}()
		}
		arrived.Wait()
		runtime.GC()
		runtime.ReadMemStats(&during)
		close(release)
		done.Wait()
		runtime.ReadMemStats(&after)
		for _, code := range codes {
			if code != http.StatusAccepted {
				b.Fatalf("a maximal desire got %d", code)
			}
		}
		live += float64(during.HeapAlloc) - float64(before.HeapAlloc)
		alloc += float64(after.TotalAlloc - before.TotalAlloc)
	}
	b.ReportMetric(live/float64(b.N)/float64(concurrent), "live-B/req")
	b.ReportMetric(alloc/float64(b.N)/float64(concurrent), "alloc-B/req")
	b.ReportMetric(float64(len(body)), "body-B")
}
