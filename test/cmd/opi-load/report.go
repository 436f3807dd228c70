package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// report is the outcome of a run: per kind of request, and the end state against the model.
type report struct {
	Workers   int                   `json:"workers"`
	Apps      int                   `json:"apps"`
	Seed      uint64                `json:"seed"`
	Identity  string                `json:"identity"`
	Seconds   float64               `json:"duration_seconds"`
	Requests  int64                 `json:"requests"`
	PerSecond float64               `json:"requests_per_second"`
	Status5xx int64                 `json:"status_5xx"`
	Errors    int64                 `json:"other_errors"`
	Kinds     map[string]*kindStats `json:"kinds"`
	Examples  []string              `json:"examples,omitempty"`
	Final     final                 `json:"final"`
}

func (d *driver) report() *report {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &report{
		Workers: d.f.workers, Apps: d.f.apps, Seed: d.f.seed,
		Seconds: d.took.Round(time.Millisecond).Seconds(), Kinds: d.stats, Examples: d.examples,
	}
	for _, s := range d.stats {
		r.Requests += s.Requests
		r.Status5xx += s.Status5xx
		r.Errors += s.Unexpected + s.Transport
		if s.Requests > 0 {
			s.MeanMs = float64(s.totalNs) / float64(s.Requests) / 1e6
		}
		s.MaxMs = float64(s.maxNs) / 1e6
	}
	if r.Seconds > 0 {
		r.PerSecond = float64(r.Requests) / r.Seconds
	}
	return r
}

// ok says whether the run passed: no 5xx, no answer the model did not expect, and an end state
// equal to the model.
func (r *report) ok() bool {
	return r.Status5xx == 0 && r.Errors == 0 && len(r.Final.Mismatches) == 0
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n%d workers, %d apps, %.1f s, %d requests (%.0f/s), opi as %s, seed %d\n\n",
		r.Workers, r.Apps, r.Seconds, r.Requests, r.PerSecond, r.Identity, r.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\trequests\t5xx\tunexpected\ttransport errors\tmean ms\tmax ms\t")
	for _, k := range kinds {
		s := r.Kinds[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.0f\t\n", k, s.Requests, s.Status5xx, s.Unexpected, s.Transport, s.MeanMs, s.MaxMs)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t\t\t\t\n", r.Requests, r.Status5xx, r.Errors)
	_ = tw.Flush()
	f := r.Final
	fmt.Fprintf(w, "\nend state (settled in %.1f s): model %d desired / %d stopped; Kubernetes %d Deployments, %d Secrets, %d Services; GET /apps lists %d\n",
		f.SettledSeconds, f.ModelDesired, f.ModelStopped, f.KubeDeploy, f.KubeSecrets, f.KubeServices, f.Listed)
	for _, e := range r.Examples {
		fmt.Fprintf(w, "  unexpected answer: %s\n", e)
	}
	for _, m := range f.Mismatches {
		fmt.Fprintf(w, "  mismatch: %s\n", m)
	}
	if r.ok() {
		fmt.Fprintln(w, "PASS: no 5xx, every answer as the model expected, Kubernetes and GET /apps equal the model")
	}
	printJSON(w, r)
}
