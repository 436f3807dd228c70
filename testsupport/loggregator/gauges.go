package loggregator

import "code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"

// Gauges are gauge envelopes by instance_id, each instance's in order of arrival: the rows a
// reader of one source shows.
type Gauges map[string][]*loggregator_v2.Envelope

// GaugesBySource groups the gauge envelopes among envs by source_id, then instance_id. What
// Cloud Controller in OPI mode shows of a process (`cf app`) is GaugesBySource(envs)[its guid]:
// it reads the source named by the process's guid and keeps every envelope there, whatever its
// tags.
func GaugesBySource(envs []*loggregator_v2.Envelope) map[string]Gauges {
	out := map[string]Gauges{}
	for _, e := range envs {
		if e.GetGauge() == nil {
			continue
		}
		if out[e.SourceId] == nil {
			out[e.SourceId] = Gauges{}
		}
		out[e.SourceId][e.InstanceId] = append(out[e.SourceId][e.InstanceId], e)
	}
	return out
}

// GaugesTagged are the gauges among envs under sourceID whose process_id tag is processID, by
// instance_id: what a Diego-shaped reader (Cloud Controller in Diego mode) shows of a process,
// with sourceID the app guid.
func GaugesTagged(envs []*loggregator_v2.Envelope, sourceID, processID string) Gauges {
	out := Gauges{}
	for id, instance := range GaugesBySource(envs)[sourceID] {
		for _, e := range instance {
			if e.Tags["process_id"] == processID {
				out[id] = append(out[id], e)
			}
		}
	}
	return out
}

// GaugesBySource groups the gauges the stand-in received so far (see the function).
func (s *Server) GaugesBySource() map[string]Gauges { return GaugesBySource(s.Envelopes()) }

// Gauge is a gauge envelope in a form specs compare with Equal: its identity, tags and each
// metric's value and unit (no timestamp).
type Gauge struct {
	SourceID, InstanceID string
	Tags                 map[string]string
	Values               map[string]float64
	Units                map[string]string
}

// GaugesIn are the gauge envelopes among envs as Gauges, in order.
func GaugesIn(envs []*loggregator_v2.Envelope) []Gauge {
	var out []Gauge
	for _, e := range envs {
		if e.GetGauge() == nil {
			continue
		}
		g := Gauge{SourceID: e.SourceId, InstanceID: e.InstanceId, Tags: e.Tags, Values: map[string]float64{}, Units: map[string]string{}}
		for name, m := range e.GetGauge().Metrics {
			g.Values[name], g.Units[name] = m.Value, m.Unit
		}
		out = append(out, g)
	}
	return out
}
