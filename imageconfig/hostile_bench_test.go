package imageconfig_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/opi-bridge/opi/imageconfig"
	"github.com/opi-bridge/opi/testsupport/registry"
)

// stagingWorkers is k8s/staging.DefaultWorkers (not imported: it would bring client-go into
// this package's tests).
const stagingWorkers = 4

// BenchmarkHostileRegistry reads from registries that declare a 1 TiB config (or stream a
// manifest) without end, and reports the peak heap of the whole process meanwhile: live heap
// objects and all memory the Go runtime holds (sampled every millisecond with runtime/metrics).
// The staging worker reads up to k8s/staging.DefaultWorkers images at once. Run without -race, which distorts heaps:
//
//	go test -run '^$' -bench HostileRegistry -benchtime 20x ./imageconfig
func BenchmarkHostileRegistry(b *testing.B) {
	for _, mode := range []registry.Hostility{registry.EndlessConfig, registry.EndlessManifest} {
		for _, atOnce := range []int{1, stagingWorkers} {
			b.Run(fmt.Sprintf("%s/%d-at-once", mode, atOnce), func(b *testing.B) { benchmarkHostile(b, mode, atOnce) })
		}
	}
}

func benchmarkHostile(b *testing.B, mode registry.Hostility, atOnce int) {
	{
		{
			r, err := registry.Start(registry.Options{Hostile: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			allowed, _ := imageconfig.ParseCIDRs([]string{"127.0.0.0/8"})
			reader := &imageconfig.Reader{Policy: imageconfig.NewAddressPolicy(allowed, nil)}
			image := r.Host + "/hostile/app:v1"

			runtime.GC()
			samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
			var peakObjects, peakTotal uint64
			done, stopped := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(stopped)
				for {
					metrics.Read(samples)
					peakObjects = max(peakObjects, samples[0].Value.Uint64())
					peakTotal = max(peakTotal, samples[1].Value.Uint64())
					select {
					case <-done:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				errs := make([]error, atOnce)
				for i := range atOnce {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, errs[i] = reader.ReadImageConfig(context.Background(), image, nil)
					}()
				}
				wg.Wait()
				for _, err := range errs {
					if err == nil || err.Error() != imageconfig.ReasonTooLarge {
						b.Fatalf("read: %v", err)
					}
				}
			}
			b.StopTimer()
			close(done)
			<-stopped
			b.ReportMetric(float64(peakObjects)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peakTotal)/(1<<20), "peak-runtime-MiB")
		}
	}
}
