// Command opi-load is opi's load test (`make load`): it starts a local control plane and the opi
// binary on it (with the namespaced permissions of deploy/rbac.yaml, or as admin), then runs
// concurrent workers that act as Cloud Controller does — desire, update, list, instances,
// stop-instance, stop — on a pool of apps for a bounded time, keeping a model of what should
// exist. At the end it waits for the cluster to settle and compares what Kubernetes holds and
// what GET /apps answers with the model. It prints a table and one JSON line, and exits non-zero
// on any 5xx answer, any answer the model did not expect, or any difference at the end.
//
// Requests go only to opi on 127.0.0.1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

type flags struct {
	duration    time.Duration
	maxRequests int
	workers     int
	apps        int
	opiBin      string
	binDir      string
	admin       bool
	settle      time.Duration
	keepLogs    bool
	seed        uint64
}

func main() {
	f, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "opi-load: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := run(ctx, f, os.Stdout)
	if report != nil {
		report.print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "opi-load: %v\n", err)
		os.Exit(1)
	}
	if !report.ok() {
		fmt.Fprintln(os.Stderr, "opi-load: FAILED (see above)")
		os.Exit(1)
	}
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("opi-load", flag.ContinueOnError)
	fs.DurationVar(&f.duration, "duration", 60*time.Second, "how long the workers send requests")
	fs.IntVar(&f.maxRequests, "max-requests", 200000, "stop sending after this many requests (whichever comes first)")
	fs.IntVar(&f.workers, "workers", 50, "concurrent clients (CC runs 50)")
	fs.IntVar(&f.apps, "apps", 150, "apps in the pool the workers act on")
	fs.StringVar(&f.opiBin, "opi-bin", "bin/opi", "the opi binary (make build makes it)")
	fs.StringVar(&f.binDir, "bin-dir", "", "folder of the control plane binaries (default: $OPI_KUBE_BIN_DIR, else build them)")
	fs.BoolVar(&f.admin, "admin", false, "run opi as cluster admin instead of with deploy/rbac.yaml")
	fs.DurationVar(&f.settle, "settle-timeout", 2*time.Minute, "how long to wait for the cluster to match the model at the end")
	fs.BoolVar(&f.keepLogs, "keep-logs", false, "keep the work folder (control plane and opi logs)")
	fs.Uint64Var(&f.seed, "seed", 0, "random seed (0: from the clock)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if f.workers < 1 || f.apps < 1 || f.duration <= 0 || f.maxRequests < 1 {
		return f, errors.New("--workers, --apps, --duration and --max-requests must be positive")
	}
	if f.seed == 0 {
		f.seed = uint64(time.Now().UnixNano())
	}
	abs, err := filepath.Abs(f.opiBin)
	if err != nil {
		return f, err
	}
	f.opiBin = abs
	if _, err := os.Stat(f.opiBin); err != nil {
		return f, fmt.Errorf("checking the opi binary (make build makes bin/opi): %w", err)
	}
	return f, nil
}

// printJSON writes v as one line.
func printJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(w, `{"error":%q}`+"\n", err.Error())
		return
	}
	fmt.Fprintln(w, string(b))
}
