package routes_test

import (
	"fmt"
	"testing"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s/internal/routes"
	"github.com/opi-bridge/opi/k8s/internal/routes/routesfakes"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

// BenchmarkReplaceAll fills the table from one LRP of 200 Ready instances, ranked by the
// store's own functions (what a sync of that LRP costs).
func BenchmarkReplaceAll(b *testing.B) {
	id := opi.LRPIdentifier{GUID: "g", Version: "v"}
	created := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := &store.WorkloadRecord{LRPRef: store.LRPRef{GUID: id.GUID, Version: id.Version}, ReplicaCount: 200,
		RoutesAnnotation: `[{"hostname":"dora.example.com","port":8080}]`}
	var pods []*store.PodRecord
	for i := range 200 {
		pods = append(pods, &store.PodRecord{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%03d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
				CreationTimestamp: metav1.NewTime(created.Add(time.Duration(i) * time.Millisecond))},
			LRPRef: w.LRPRef, IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Ordinal: -1,
			ReadySince: created.UnixNano(), State: opi.InstanceRunning,
		})
	}
	fakeCache := &routesfakes.FakeCache{}
	fakeCache.WorkloadsReturns([]*store.WorkloadRecord{w})
	fakeCache.PodsReturns(pods)
	fakeCache.InstanceIndexerStub = func(pods []*store.PodRecord, w *store.WorkloadRecord) func(*store.PodRecord) int32 {
		return store.InstanceIndexer(pods, w, false)
	}
	table := &lastReplace{}
	registrar, err := routes.New(lagertest.NewTestLogger("routes"), routes.Deps{Cache: fakeCache, Table: table, Records: &routesfakes.FakeRecords{}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		routes.ReplaceAll(registrar)
	}
	got := table.regs
	if len(got) != 200 || got["uid-199/8080"].PrivateInstanceIndex != "199" {
		b.Fatalf("registrations: %d, last index %q", len(got), got["uid-199/8080"].PrivateInstanceIndex)
	}
}

// lastReplace is a table that keeps only the last Replace (a fake would keep every call's).
type lastReplace struct {
	routes.Table
	regs map[string]gorouter.Registration
}

func (t *lastReplace) Replace(regs map[string]gorouter.Registration) { t.regs = regs }
