package lrp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"code.cloudfoundry.org/lager/v3"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/store"
)

// BenchmarkListLRPs measures the cache-served list at 1,000 LRPs, with the conversion to
// Diego's scheduling infos and the JSON encoding that GET /apps adds.
func BenchmarkListLRPs(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := backendtest.NewClient()
	backend := backendtest.MustBackend(client, lager.NewLogger("bench"), k8s.Options{Namespace: backendtest.Namespace, Store: store.Options{ReadWaitTimeout: time.Second}})
	if err := backend.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		lrp := backendtest.SampleLRP()
		lrp.GUID = fmt.Sprintf("%08d-0000-0000-0000-000000000000", i)
		if err := backend.DesireLRP(ctx, lrp); err != nil {
			b.Fatal(err)
		}
	}
	lrpBifrost := &bifrost.LRP{Backend: backend}
	b.ResetTimer()
	b.ReportAllocs()
	for range b.N {
		infos, err := lrpBifrost.List(ctx)
		if err != nil || len(infos) != 1000 {
			b.Fatalf("%d infos, %v", len(infos), err)
		}
		if _, err := json.Marshal(infos); err != nil {
			b.Fatal(err)
		}
	}
}
