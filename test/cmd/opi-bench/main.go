// Command opi-bench measures opi on a local control plane (see package localkube) in one run:
// desire throughput and latency through opi's HTTP API against a direct client-go floor, GET
// /apps against a live LIST of the workloads, instances at 10 apps and at N, both reads under a
// burst of concurrent callers (burst.go), stop throughput,
// the API server requests opi makes per call and opi's memory. It prints a markdown table and
// one JSON line, and with -record appends the JSON line to the runs file
// (docs/benchmarks/runs.jsonl) and, with -doc, regenerates docs/benchmarks.md's tables from it.
// `opi-bench report` only regenerates the tables (make bench-report).
//
// `make bench` runs it with a quick N; `make bench N=3000 RECORD=1` records a run. See
// docs/benchmarks.md for what is measured and how.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opi-bridge/opi/localkube"
)

// warmApps is the number of apps desired before the timed opi phase; instances are measured on
// them with 10 apps in the cluster and again at N.
const warmApps = 10

type config struct {
	n             int
	concurrency   int
	opiBin        string
	record        string
	doc           string
	note          string
	qps, burst    int
	ctrlQPS       int
	ctrlBurst     int
	nodes         int
	seqReads      int
	burstWorkers  int
	burstCalls    int
	instanceCalls int
	settle        time.Duration
	keep          bool
	// backend is opi's --backend: the workload kind opi, the floor and the live LIST use.
	backend string
	tasks   int
	opiArgs string
	// batch is the desire batch size; floorEvery runs the floors on the first batch, every
	// floorEvery-th batch after it and the last.
	batch      int
	floorEvery int
	// tune runs the control plane with localkube.LargeClusterTuning instead of its defaults.
	tune bool
	// routing nats runs the nats benchmark (nats.go) instead of the LRP phases; natsInstances
	// is the instances per app of its steady phase.
	routing       string
	natsInstances int
	natsRounds    int
	natsWait      time.Duration
	floorAtOnce   bool
	// readCallers closed-loop callers of each read for readBurst, after readSeqCalls
	// sequential calls taking at least readSeqMin (burst.go); 0 callers skips that phase.
	readCallers  int
	readBurst    time.Duration
	readSeqCalls int
	readSeqMin   time.Duration
	// profile is the length in seconds of the CPU profiles taken during opi's last desire
	// batch; 0 takes none.
	profile int
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("opi-bench", flag.ContinueOnError)
	fs.IntVar(&c.n, "n", 300, "apps in the cluster at the read phase (one instance each); the timed desire batches create n-10 through opi")
	fs.IntVar(&c.batch, "batch", 500, "desire batch size: batches end at multiples of it (apps in the cluster, the 10 warm-up apps included)")
	fs.IntVar(&c.floorEvery, "floor-every", 5, "run the two client-go floors on batch 1, every k-th batch after it and the last batch")
	fs.IntVar(&c.concurrency, "concurrency", 50, "concurrent desires and stops (CC's sync runs 50 workers)")
	fs.StringVar(&c.opiBin, "opi-bin", "bin/opi", "the opi binary (make build makes it)")
	fs.StringVar(&c.record, "record", "", "append the run's JSON line to this runs file (e.g. docs/benchmarks/runs.jsonl)")
	fs.StringVar(&c.doc, "doc", "", "with -record: regenerate this document's tables from the runs file (e.g. docs/benchmarks.md)")
	fs.StringVar(&c.note, "note", "", "a note to add to the recorded run")
	fs.IntVar(&c.qps, "kube-qps", 1000, "API request rate of opi and of the floor's client-go client")
	fs.IntVar(&c.burst, "kube-burst", 2000, "API request burst of opi and of the floor's client-go client")
	fs.IntVar(&c.ctrlQPS, "controller-qps", 1000, "API request rate of the controller-manager and scheduler")
	fs.IntVar(&c.ctrlBurst, "controller-burst", 2000, "API request burst of the controller-manager and scheduler")
	fs.IntVar(&c.nodes, "nodes", 4, "simulated (kwok) nodes; each can hold every pod of the run")
	fs.IntVar(&c.seqReads, "reads", 50, "sequential GET /apps calls (and live LISTs) at n")
	fs.IntVar(&c.burstWorkers, "burst-workers", 10, "concurrent callers in the read burst")
	fs.IntVar(&c.burstCalls, "burst-calls", 5, "calls per caller in the read burst")
	fs.IntVar(&c.instanceCalls, "instance-calls", 200, "sequential instances calls, at 10 apps and at n")
	fs.IntVar(&c.readCallers, "read-callers", 50, "reads under a burst: closed-loop callers of GET /apps, then of instances, at n (0: no such phase)")
	fs.DurationVar(&c.readBurst, "read-burst", 20*time.Second, "reads under a burst: how long the callers call each read")
	fs.IntVar(&c.readSeqCalls, "read-seq-calls", 300, "reads under a burst: the least sequential calls of each read that give its cost per call")
	fs.DurationVar(&c.readSeqMin, "read-seq-min", 5*time.Second, "reads under a burst: the least wall time of the sequential calls (CPU time is counted in 10 ms ticks)")
	fs.DurationVar(&c.settle, "settle", 10*time.Second, "pause after the reads before steady RSS is sampled")
	fs.BoolVar(&c.keep, "keep", false, "keep the work folder (opi and control plane logs)")
	fs.StringVar(&c.backend, "backend", backendDeployments, "opi's backend: deployments or statefulsets (the floor and the live LIST use the same kind)")
	fs.IntVar(&c.tasks, "tasks", 0, "measure tasks instead of LRPs: desire this many tasks, GET /tasks at that count, cancel them")
	fs.StringVar(&c.opiArgs, "opi-args", "", "more flags for opi, space-separated (e.g. \"--routing=none --headless-services\")")
	fs.BoolVar(&c.tune, "tune", true, "run the control plane with the settings large clusters raise (localkube.LargeClusterTuning); -tune=false keeps the defaults")
	fs.IntVar(&c.profile, "profile", 0, "take CPU profiles of opi and the control plane over this many seconds during opi's last desire batch, or (-routing nats) its burst (0: none); keeps the work folder")
	fs.StringVar(&c.routing, "routing", "", "nats: measure routing mode nats against an in-process nats-server instead (see nats.go)")
	fs.IntVar(&c.natsInstances, "nats-instances", 10, "with -routing nats: instances per app in the steady phase")
	fs.IntVar(&c.natsRounds, "nats-rounds", 1, "with -routing nats: rounds of the floors' and opi's bursts, one after the other (opi's apps stopped between), added up in the figures")
	fs.BoolVar(&c.floorAtOnce, "floor-at-once", false, "with -routing nats: also time the same objects created all at once, none owned by the workload (logged, not recorded)")
	fs.DurationVar(&c.natsWait, "nats-wait", 15*time.Minute, "with -routing nats: how long the steady phase waits for every instance to be registered before it measures those that are")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.routing != "" && (c.routing != routingNATS || c.tasks > 0 || c.natsInstances < 1 || c.natsRounds < 1) {
		return c, errors.New("-routing takes only nats, not with -tasks, and -nats-instances and -nats-rounds must be positive")
	}
	seqCalls, noteFlag = c.seqReads, c.note
	if c.n < 2*warmApps {
		return c, fmt.Errorf("-n must be at least %d", 2*warmApps)
	}
	if c.backend != backendDeployments && c.backend != backendStatefulSets {
		return c, fmt.Errorf("-backend %q is not one of %s, %s", c.backend, backendDeployments, backendStatefulSets)
	}
	if c.profile < 0 {
		return c, errors.New("-profile must not be negative")
	}
	if c.doc != "" && c.record == "" {
		return c, errors.New("-doc needs -record")
	}
	if c.batch < 1 || c.floorEvery < 1 {
		return c, errors.New("-batch and -floor-every must be positive")
	}
	if c.readCallers < 0 || (c.readCallers > 0 && (c.readBurst <= 0 || c.readSeqCalls < 1)) {
		return c, errors.New("-read-callers must not be negative, and with callers -read-burst and -read-seq-calls must be positive")
	}
	if c.concurrency < 1 || c.burstWorkers < 1 || c.burstCalls < 1 || c.seqReads < 1 || c.instanceCalls < 1 {
		return c, errors.New("concurrency, reads and calls must be positive")
	}
	return c, nil
}

// subcommands are opi-bench's commands other than the LRP (and -tasks) run, by their first
// argument.
var subcommands = map[string]func([]string) error{
	"agent":  func(args []string) error { return runCommand(args, parseAgentFlags, runAgent) },
	"report": reportMain,
	"ssh":    func(args []string) error { return runCommand(args, parseSSHFlags, runSSHBench) },
}

func main() {
	if len(os.Args) > 1 {
		if sub, ok := subcommands[os.Args[1]]; ok {
			if err := sub(os.Args[2:]); err != nil && !errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(os.Stderr, "opi-bench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	err := runCommand(os.Args[1:], parseFlags, run)
	var bad flagsError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
	case errors.As(err, &bad):
		fmt.Fprintln(os.Stderr, "opi-bench:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "opi-bench:", err)
		os.Exit(1)
	}
}

// runCommand is the shape of every opi-bench command that measures: its flags parsed and
// checked by parse (a failure comes back as a flagsError), then run with a context that SIGINT
// or SIGTERM cancels, so a stopped run still stops what it started.
func runCommand[C any](args []string, parse func([]string) (C, error), run func(context.Context, C) error) error {
	cfg, err := parse(args)
	if err != nil {
		return flagsError{err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, cfg)
}

// flagsError is a command's flags refused (the main run exits 2 on it, as the flag package's
// own commands do).
type flagsError struct{ err error }

func (e flagsError) Error() string { return e.err.Error() }
func (e flagsError) Unwrap() error { return e.err }

// logf prints progress to stderr, stamped with the time since start.
var benchStart = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%7.1fs] %s\n", time.Since(benchStart).Seconds(), fmt.Sprintf(format, args...))
}

// env is what the phases share: the cluster, opi and the clients.
type env struct {
	cfg     config
	cluster *localkube.Cluster
	opi     *localkube.Process
	opiBin  string
	opiArgs []string // opi's command line, for its restart
	opiURL  string
	// opsURL is opi's operations listener (metrics, pprof).
	opsURL  string
	http    *http.Client
	rss     *rssSampler
	res     *results
	workDir string
}

func run(ctx context.Context, cfg config) (err error) {
	opiBin, err := filepath.Abs(cfg.opiBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(opiBin); err != nil {
		return fmt.Errorf("checking the opi binary (make build makes it): %w", err)
	}
	workDir, err := os.MkdirTemp("", "opi-bench-")
	if err != nil {
		return err
	}
	// The profiles are files in the work folder.
	keep := cfg.keep || cfg.profile > 0
	cfg.keep = keep
	defer dropWorkFolder(workDir, keep, &err)

	res := newResults(cfg)
	cpu0 := readCPU([]int{osPid})

	// Capacity: every node can hold all pods of the run, so placement never limits it.
	podsPerNode := strconv.Itoa(cfg.podCapacity())
	var tuning localkube.Tuning
	if cfg.tune {
		tuning = localkube.LargeClusterTuning()
	}
	logf("starting the control plane: %d kwok nodes, controllers at %d/%d requests/s, %s", cfg.nodes, cfg.ctrlQPS, cfg.ctrlBurst, res.Tuning)
	t := time.Now()
	cluster, err := localkube.Start(ctx, localkube.Options{
		WorkDir:              workDir,
		KeepWorkDir:          cfg.keep,
		Nodes:                cfg.nodes,
		NodeCPU:              strconv.Itoa(cfg.n + 100), // apps ask 120m each
		NodeMemory:           strconv.Itoa((cfg.n+100)/8+16) + "Ti",
		NodePods:             podsPerNode,
		NodeEphemeralStorage: strconv.Itoa(cfg.n+100) + "Ti",
		ControllerQPS:        cfg.ctrlQPS,
		ControllerBurst:      cfg.ctrlBurst,
		Tuning:               tuning,
	})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		logf("stopping the control plane")
		if stopErr := cluster.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	logf("control plane up in %s", time.Since(t).Round(100*time.Millisecond))
	res.Phases.ControlPlane = time.Since(t).Seconds()

	if routingOf(cfg.opiArgs) == "gateway" {
		logf("installing the Gateway API's CRDs (routing gateway)")
		if err := cluster.InstallGatewayAPI(ctx); err != nil {
			return err
		}
	}
	addr, err := localkube.FreeAddr()
	if err != nil {
		return err
	}
	opsAddr, err := localkube.FreeAddr()
	if err != nil {
		return err
	}
	e := &env{
		cfg: cfg, cluster: cluster, opiURL: "http://" + addr, opsURL: "http://" + opsAddr, res: res, workDir: workDir,
		opiArgs: append([]string{
			"connect", "--kubeconfig", cluster.Kubeconfig(), "--listen", addr, "--namespace", opiNamespace,
			"--ops-listen", opsAddr, "--pprof",
			"--kube-qps", strconv.Itoa(cfg.qps), "--kube-burst", strconv.Itoa(cfg.burst), "--backend", cfg.backend,
		}, strings.Fields(cfg.opiArgs)...),
		http: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			MaxIdleConns: 4 * cfg.concurrency, MaxIdleConnsPerHost: 4 * cfg.concurrency, IdleConnTimeout: time.Minute,
		}},
	}
	var bus *natsBus
	if cfg.routing == routingNATS {
		if bus, err = startNATS(); err != nil {
			return err
		}
		defer bus.stop()
		e.opiArgs = append(e.opiArgs, "--routing", routingNATS, "--nats-url", bus.srv.URL())
	}
	logf("starting opi on %s (namespace %s)", addr, opiNamespace)
	t = time.Now()
	if e.opi, err = e.startOpi(opiBin); err != nil {
		return err
	}
	defer func() {
		logf("stopping opi")
		if stopErr := e.opi.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	if err := e.waitOpiReady(ctx); err != nil {
		return err
	}
	res.Phases.OpiStart = time.Since(t).Seconds()
	logf("opi ready after %.1f s", res.Phases.OpiStart)
	e.rss = startRSS(e.opi.Pid())
	defer e.rss.stop()

	if cfg.tasks > 0 {
		taskRes, err := e.taskPhases(ctx)
		if err != nil {
			return err
		}
		return reportTasks(cfg, taskRes)
	}
	if bus != nil {
		natsRes, err := e.natsPhases(ctx, bus)
		if err != nil {
			return err
		}
		return reportNATS(cfg, natsRes)
	}
	if err := e.phases(ctx); err != nil {
		return err
	}

	res.Peak = e.rss.peak()
	cpu1 := readCPU(e.ourPIDs())
	res.Elapsed = time.Since(benchStart).Seconds()
	res.finish(cpu0, cpu1)

	table := res.report()
	res.Notes = res.notes()
	line, err := res.jsonLine()
	if err != nil {
		return err
	}
	return printRun(table, []byte(line), cfg.record, cfg.doc)
}

// startOpi starts opi with the run's arguments, its output appended to opi.log.
func (e *env) startOpi(bin string) (*localkube.Process, error) {
	e.opiBin = bin
	return localkube.StartProcess("opi", bin, e.opiArgs, os.Environ(), nil, filepath.Join(e.workDir, "opi.log"))
}

// The values of opi's `backend` setting (the kind that runs each LRP), which the floor and the
// live LIST follow.
const (
	backendDeployments  = "deployments"
	backendStatefulSets = "statefulsets"
)
