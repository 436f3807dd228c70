package main

import (
	"fmt"
	"strings"
)

// natsRecorded is what the tables read of a nats run (-routing nats), in recordedRun. LRP runs
// leave Routing empty in the default mode (ingress) and name the mode -opi-args gave otherwise
// ("gateway", "none"); the nats figures read only nats runs, the other LRP figures none.
type natsRecorded struct {
	Routing          string            `json:"routing"`
	NATSKinds        []string          `json:"nats_objects_per_app"`
	NATSDesire       *phase            `json:"nats_desire"`
	NATSFloorOne     *phase            `json:"nats_floor_one_deployment"`
	NATSFloorSame    *phase            `json:"nats_floor_same_objects"`
	NATSRatioOne     *float64          `json:"nats_desire_ratio_one_deployment"`
	NATSRegistration *natsRegistration `json:"nats_ready_to_registered"`
	NATSBurst        *natsBurst        `json:"nats_burst"`
	NATSSteady       *natsSteady       `json:"nats_steady"`
	NATSRounds       []natsRound       `json:"nats_rounds"`
}

// roundsOf lists each round's value of a run of more than one round ("" for one).
func (r recordedRun) roundsOf(value func(natsRound) float64) string {
	if len(r.NATSRounds) < 2 {
		return ""
	}
	var vs []string
	for _, round := range r.NATSRounds {
		vs = append(vs, fmt.Sprintf("%.2f", value(round)))
	}
	return fmt.Sprintf(" (%d rounds: %s)", len(r.NATSRounds), strings.Join(vs, ", "))
}

func (r recordedRun) natsRun() bool { return r.Routing == routingNATS }

// natsFigures are the nats runs' tables, after the LRP and task ones.
var natsFigures = []figure{
	{title: "Routing nats: desire throughput, opi ÷ the one-Deployment floor (one burst of N apps, concurrency 50), ÷ the same-objects floor, and API server requests per desire", nats: true, value: func(r recordedRun) (string, string, bool) {
		if r.NATSDesire == nil || r.NATSFloorOne == nil || r.NATSRatioOne == nil {
			return "", "", false
		}
		s := fmt.Sprintf("%.2f (%.1f ÷ %.1f apps/s)%s", *r.NATSRatioOne, r.NATSDesire.Throughput, r.NATSFloorOne.Throughput,
			r.roundsOf(func(n natsRound) float64 { return n.RatioOne }))
		if r.NATSFloorSame != nil && r.DesireRatioSame != nil {
			s += fmt.Sprintf("; ÷ the same-objects floor %s (%.1f apps/s)%s", ratioString(*r.DesireRatioSame, targetDesireRatioSame), r.NATSFloorSame.Throughput,
				r.roundsOf(func(n natsRound) float64 { return n.RatioSame }))
		}
		s += fmt.Sprintf("; %.2f requests per desire", f2(r.DesireAPIPerApp))
		if r.NATSDesire.Errors > 0 {
			s += fmt.Sprintf(", %d errors", r.NATSDesire.Errors)
		}
		return s, "", true
	}},
	{title: "Routing nats: an instance Ready → its first router.register arriving (p50 / p99)", nats: true, value: func(r recordedRun) (string, string, bool) {
		g := r.NATSRegistration
		if g == nil || g.Instances == 0 {
			return "", "", false
		}
		return fmt.Sprintf("%.0f / %.0f ms from the run's pod watch (%d instances); %.0f / %.0f ms from the Ready condition's whole-second time",
			g.P50, g.P99, g.Instances, g.ConditionP50, g.ConditionP99), "", true
	}},
	{title: "Routing nats: a burst of N apps, first desire → last instance registered, against the floor's first create → all pods Running", nats: true, value: func(r recordedRun) (string, string, bool) {
		b := r.NATSBurst
		if b == nil || b.FloorRunning == 0 {
			return "", "", false
		}
		mean := ""
		if len(r.NATSRounds) > 1 {
			mean = ", each the rounds' mean"
		}
		return fmt.Sprintf("%.1f s against %.1f s%s (%.2f ×)%s", b.Registered, b.FloorRunning, mean, b.Ratio,
			r.roundsOf(func(n natsRound) float64 { return n.BurstRatio })), "", true
	}},
	{title: "Routing nats: keeping the instances registered (interval announced by router.start), register messages per second, opi's CPU and RSS", nats: true, value: func(r recordedRun) (string, string, bool) {
		s := r.NATSSteady
		if s == nil || s.WindowS == 0 {
			return "", "", false
		}
		kept := fmt.Sprintf("%d instances (%d apps × %d)", s.Registered, s.Apps, s.Instances/max(s.Apps, 1))
		if s.Registered < s.Instances {
			kept = fmt.Sprintf("%d of %d instances (%d apps × %d; the rest not started in time)", s.Registered, s.Instances, s.Apps, s.Instances/max(s.Apps, 1))
		}
		return fmt.Sprintf("%s at %.0f s: %.0f messages/s, opi %.3f cores (%.1f CPU s in %.0f s), %.1f MB; %d distinct pod IPs",
			kept, s.IntervalS, s.MessagesPerS, s.OpiCores, s.OpiCPUSeconds, s.WindowS, s.RSSMB, s.UniquePodIPs), "", true
	}},
}

func init() { figures = append(figures, natsFigures...) }
