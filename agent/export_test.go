package agent

import (
	"testing"
	"time"

	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/podlogs"
)

// HeldPods are the objects the namespace's pod informer holds (for the specs).
func HeldPods(a *Agent) []any { return a.reader.CachedPods() }

// DroppedLineAllocs is the mean allocations of one line of a container over its bound on the
// agent's per-line path (a's bound must let next to nothing through).
func DroppedLineAllocs(a *Agent, runs int) float64 {
	f := &followed{key: "ns_pod_uid/opi", source: loggregator.ContainerKey("uid", "opi")}
	enc := loggregator.NewLogEncoder(loggregator.Identity{SourceID: "app", InstanceID: "0", Tags: loggregator.AppTags{
		SourceType: "APP/PROC/WEB", AppID: "app", AppName: "dora", SpaceID: "space", OrgID: "org",
		ProcessID: "lrp", ProcessType: "web", ProcessInstanceID: "uid",
	}.Map()})
	line := podlogs.Line{Text: "GET /v2/things 200 512 bytes in 3 ms", Time: time.Now()}
	// The first line takes the burst, the second the notice: the rest are dropped quietly.
	a.line(f, enc, line, podlogs.Position{})
	a.line(f, enc, line, podlogs.Position{})
	f.inflight = 0 // as if the first line's batch were acknowledged (a runs no Sender)
	return testing.AllocsPerRun(runs, func() { a.line(f, enc, line, podlogs.Position{}) })
}
