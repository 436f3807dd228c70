package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/opi-bridge/opi/testsupport/fixture"
)

// With -tasks N the run measures tasks instead of LRPs: N task desires through opi (tasks whose
// pods keep running, kwok's task stages), GET /tasks at N (sequential, then a burst) with the API
// server requests opi made meanwhile (the list is served from the Job cache: the target is
// zero), and N cancels.

// taskResults is the task run; it is the JSON line.
type taskResults struct {
	Date          string         `json:"date"`
	Tasks         int            `json:"tasks"`
	Concurrency   int            `json:"concurrency"`
	Desire        phase          `json:"desire"`
	DesireAPI     map[string]int `json:"desire_api_requests"`
	DesirePerTask float64        `json:"desire_api_requests_per_task"`
	List          reads          `json:"get_tasks"`
	APIPerList    float64        `json:"api_requests_per_get_tasks"`
	Cancel        phase          `json:"cancel"`
	Elapsed       float64        `json:"elapsed_s"`
	LoadEnd       string         `json:"loadavg_end"`
	// Note is -note.
	Note string `json:"note,omitempty"`
}

// taskBody is the TaskRequest CC sends for a task that keeps running; its callback goes nowhere
// (the benchmark cancels every task).
func taskBody(guid string) []byte {
	return fixture.Task("http://127.0.0.1:9/internal/v4/tasks/"+guid+"/completed", "sleep 3600").Merge(map[string]any{
		"name": "bench", "app_guid": "bench-app", "app_name": "bench", "org_guid": "o", "org_name": "o",
		"space_guid": "s", "space_name": "s", "environment": fixture.Env("MEMORY_LIMIT", "64m"),
	}).Bytes()
}

func (e *env) taskPhases(ctx context.Context) (*taskResults, error) {
	cfg := e.cfg
	res := &taskResults{Date: time.Now().UTC().Format(time.RFC3339), Tasks: cfg.tasks, Concurrency: cfg.concurrency}
	guids := make([]string, cfg.tasks)
	for i := range guids {
		guids[i] = fixture.NewGUID()
	}

	logf("desiring %d tasks through opi, %d at once", cfg.tasks, cfg.concurrency)
	m0, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	res.Desire, err = timed(ctx, cfg.tasks, cfg.concurrency, func(ctx context.Context, i int) (time.Duration, error) {
		start := time.Now()
		resp, code, err := e.call(ctx, http.MethodPost, "/tasks/"+guids[i], taskBody(guids[i]))
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if code != http.StatusAccepted {
			return 0, fmt.Errorf("desire task: %d %s", code, strings.TrimSpace(string(resp)))
		}
		return took, nil
	})
	if err != nil {
		return nil, err
	}
	m1, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	res.DesireAPI = byVerb(m1.diff(m0))
	res.DesirePerTask = ratio(float64(sum(res.DesireAPI)), float64(cfg.tasks-res.Desire.Errors))
	logf("desired: %.1f/s, p50 %.0f ms, p99 %.0f ms, %d errors", res.Desire.Throughput, res.Desire.P50, res.Desire.P99, res.Desire.Errors)

	logf("GET /tasks at %d tasks", cfg.tasks)
	want := cfg.tasks - res.Desire.Errors
	body, _, err := e.get(ctx, "/tasks")
	if err != nil {
		return nil, err
	}
	res.List.Bytes = len(body)
	one := func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		body, code, err := e.get(ctx, "/tasks")
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		var list []json.RawMessage
		if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list) != want {
			return 0, fmt.Errorf("GET /tasks: %d, %d tasks, want %d", code, len(list), want)
		}
		return took, nil
	}
	m2, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	if res.List, err = e.readPhases(ctx, res.List, one); err != nil {
		return nil, err
	}
	m3, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	// Requests of the LRP janitor (its Secret and Service LISTs) run on their own clock.
	var verbs map[string]int
	res.List.APIRequests, res.List.Janitor, verbs = readRequests(m3.diff(m2))
	res.List.ByVerb = verbs
	res.APIPerList = ratio(res.List.APIRequests, float64(res.List.Calls))
	logf("GET /tasks: p50 %.1f ms, p99 %.1f ms, %.0f API requests in %d calls", res.List.P50, res.List.P99, res.List.APIRequests, res.List.Calls)

	logf("cancelling the tasks")
	res.Cancel, err = timed(ctx, cfg.tasks, cfg.concurrency, func(ctx context.Context, i int) (time.Duration, error) {
		start := time.Now()
		resp, code, err := e.call(ctx, http.MethodDelete, "/tasks/"+guids[i], nil)
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if code != http.StatusNoContent && code != http.StatusNotFound {
			return 0, fmt.Errorf("cancel task: %d %s", code, strings.TrimSpace(string(resp)))
		}
		return took, nil
	})
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(benchStart).Seconds()
	res.LoadEnd = loadavg()
	return res, nil
}

// table is the task run as markdown.
func (r *taskResults) table() string {
	b := newMeasureTable()
	fmt.Fprintf(b, "| task desires (POST /tasks/{guid}), %d at once | %d in %.1f s: %.1f/s, p50 %.0f ms, p99 %.0f ms, %d errors |\n",
		r.Concurrency, r.Desire.Count, r.Desire.Seconds, r.Desire.Throughput, r.Desire.P50, r.Desire.P99, r.Desire.Errors)
	fmt.Fprintf(b, "| API requests per task desire | %.2f (%s) |\n", r.DesirePerTask, verbs(r.DesireAPI))
	fmt.Fprintf(b, "| GET /tasks at %d tasks (%d KB) | p50 %.1f ms, p99 %.1f ms; burst p50 %.1f ms, p99 %.1f ms |\n",
		r.Tasks, r.List.Bytes/1000, r.List.P50, r.List.P99, r.List.BurstP50, r.List.BurstP99)
	fmt.Fprintf(b, "| API requests per GET /tasks | %.2f (%.0f in %d calls; janitor LISTs apart: %.0f) |\n",
		r.APIPerList, r.List.APIRequests, r.List.Calls, r.List.Janitor)
	fmt.Fprintf(b, "| task cancels (DELETE), %d at once | %.1f/s, p50 %.0f ms, p99 %.0f ms, %d errors |\n",
		r.Concurrency, r.Cancel.Throughput, r.Cancel.P50, r.Cancel.P99, r.Cancel.Errors)
	return b.String()
}

// reportTasks prints the task run and, with -record, appends it to the runs file.
func reportTasks(cfg config, r *taskResults) error {
	table := r.table()
	r.Note = strings.TrimSpace(noteFlag)
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return printRun(table, line, cfg.record, cfg.doc)
}
