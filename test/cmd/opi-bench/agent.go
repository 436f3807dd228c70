package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/agent"
	"github.com/opi-bridge/opi/k8s/instances/clientset"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/loggregator"
	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

// `opi-bench agent` measures the node agent (`opi agent`): the driver writes the kubelet's log files
// of P pods (F files in all, rotated ones included, L lines spread over them) into a temp folder
// and runs the agent as a child process (this binary with -child: agent.New and Run with a fake
// clientset holding the P pods, one app each, on its node) sending to the
// testsupport/loggregator stand-in (mutual TLS, loopback) in the driver. It measures
//   - lines per CPU second: the L lines, all written before the agent starts, to the last one
//     received; the child's user+system CPU time (start-up included) over the lines delivered,
//     with the rate bound lifted (the default would hold 110 pods to 100 lines/s each);
//   - the child's RSS: its peak while it catches up (its Loggregator buffer full) and, after,
//     steady with the P pods and F files;
//   - the delay from a line written (its CRI timestamp is the write time) to its envelope
//     received by the stand-in, p50/p99, at a steady rate R lines/s spread over the pods' files,
//     with the agent's default poll interval (1 s); R/P lines/s per pod is below the default
//     rate bound, which stays lifted.

const agentNamespace = "bench-apps"
const agentNode = "bench-node"

type agentBenchConfig struct {
	pods, files, lines int
	rate               int
	delayFor           time.Duration
	poll               time.Duration
	record, doc, note  string
	keep               bool
	agentBin           string
	// child mode: run the agent.
	child                               bool
	podLogs, state, addr, ca, cert, key string
	linesPerSecond                      float64
	burst                               int
	bytesRate, bytesBurst               int64
	// bounds: the log bounds' run (agent_bounds.go) instead.
	bounds bool
}

// agentRun is an agent run's JSON line (its figures under "agent", apart from the LRP runs').
type agentRun struct {
	Date    string       `json:"date"`
	Agent   agentFigures `json:"agent"`
	Machine machine      `json:"machine"`
	Note    string       `json:"note,omitempty"`
}

type agentFigures struct {
	Pods  int `json:"pods"`
	Files int `json:"files"`
	Lines int `json:"lines"`
	// CatchUp is the L lines: wall seconds, the child's CPU seconds, lines per CPU second.
	CatchUpSeconds    float64 `json:"catch_up_s"`
	CatchUpCPUSeconds float64 `json:"catch_up_cpu_s"`
	LinesPerCPUSecond float64 `json:"lines_per_cpu_s"`
	LinesPerSecond    float64 `json:"lines_per_s"`
	CatchUpOthersCPU  float64 `json:"catch_up_others_cpu_share"`
	RSSPeak           float64 `json:"rss_peak_mb"`
	RSSSteady         float64 `json:"rss_steady_mb"`
	// RSSAnon and RSSFile split the steady RSS: anonymous memory (the Go heap and stacks) and
	// file-backed pages (the binary).
	RSSAnon float64 `json:"rss_steady_anon_mb"`
	RSSFile float64 `json:"rss_steady_file_mb"`
	// Delay phase.
	DelayRate      int     `json:"delay_rate_lines_per_s"`
	DelaySeconds   float64 `json:"delay_s"`
	DelayLines     int     `json:"delay_lines"`
	DelayP50       float64 `json:"delay_p50_ms"`
	DelayP99       float64 `json:"delay_p99_ms"`
	PollMS         float64 `json:"poll_interval_ms"`
	DelayOthersCPU float64 `json:"delay_others_cpu_share"`
}

func parseAgentFlags(args []string) (agentBenchConfig, error) {
	var c agentBenchConfig
	fs := flag.NewFlagSet("opi-bench agent", flag.ContinueOnError)
	fs.IntVar(&c.pods, "pods", 110, "pods on the node (one app each), the kubelet's default pod limit")
	fs.IntVar(&c.files, "files", 1000, "log files on the node in all (each pod's live 0.log and rotated ones)")
	fs.IntVar(&c.lines, "lines", 1000000, "lines in the files before the agent starts (the catch-up)")
	fs.IntVar(&c.rate, "rate", 500, "lines per second written in the delay phase, over all pods")
	fs.DurationVar(&c.delayFor, "delay-for", 30*time.Second, "length of the delay phase")
	fs.DurationVar(&c.poll, "poll", agent.DefaultPollInterval, "the agent's poll interval")
	fs.StringVar(&c.record, "record", "", "append the run's JSON line to this runs file")
	fs.StringVar(&c.doc, "doc", "", "with -record: regenerate this document's tables")
	fs.StringVar(&c.note, "note", "", "a note to add to the recorded run")
	fs.BoolVar(&c.keep, "keep", false, "keep the work folder (the agent's log)")
	fs.StringVar(&c.agentBin, "agent-bin", "bin/opi-agent", "the agent binary measured (make build's bin/opi-agent)")
	fs.BoolVar(&c.child, "child", false, "run the agent in this binary (the -bounds run starts itself so)")
	fs.StringVar(&c.podLogs, "pod-logs", "", "child: the pod log folder")
	fs.StringVar(&c.state, "state", "", "child: the state folder")
	fs.StringVar(&c.addr, "loggregator-addr", "", "child: the stand-in")
	fs.StringVar(&c.ca, "ca", "", "child: the stand-in's CA")
	fs.StringVar(&c.cert, "cert", "", "child: the client certificate")
	fs.StringVar(&c.key, "key", "", "child: the client key")
	fs.Float64Var(&c.linesPerSecond, "lines-per-second", 0, "child: the rate bound (0: the agent's default)")
	fs.IntVar(&c.burst, "burst", 0, "child: the rate bound's burst (0: the agent's default)")
	fs.Int64Var(&c.bytesRate, "bytes-rate", 0, "child: the byte bound (0: the agent's default)")
	fs.Int64Var(&c.bytesBurst, "bytes-burst", 0, "child: the byte bound's burst (0: the agent's default)")
	fs.BoolVar(&c.bounds, "bounds", false, "measure the log bounds instead: CPU per dropped and per sent line, quiet tenants' delay beside a noisy one")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.pods < 1 || c.files < c.pods || c.lines < c.pods || c.rate < 1 || c.delayFor <= 0 {
		return c, errors.New("-pods, -lines and -rate must be positive, -files at least -pods, -delay-for above 0")
	}
	if c.doc != "" && c.record == "" {
		return c, errors.New("-doc needs -record")
	}
	return c, nil
}

// runAgent runs `opi-bench agent` as its flags say: the agent itself (-child), the bounds'
// measurement (-bounds) or the agent's benchmark.
func runAgent(ctx context.Context, cfg agentBenchConfig) error {
	if cfg.child {
		return runAgentChild(ctx, cfg)
	}
	if cfg.bounds {
		return runAgentBounds(ctx, cfg)
	}
	return runAgentBench(ctx, cfg)
}

// benchPod is pod i of the node: its objects and its log folder.
func benchPod(i int) (*appsv1.Deployment, *corev1.Pod) {
	guid := fmt.Sprintf("lrp-%04d", i)
	labels := map[string]string{
		names.LabelGUID: guid, names.LabelVersion: "v1", names.LabelAppGUID: fmt.Sprintf("app-%04d", i),
		names.LabelProcessType: "web", names.LabelSourceType: names.SourceTypeApp,
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "bench-" + guid, Namespace: agentNamespace, UID: types.UID("deploy-" + guid), Labels: labels,
			Annotations: map[string]string{
				names.AnnotationProcessType: "web", names.AnnotationAppName: "bench-" + guid,
				names.AnnotationSpaceGUID: "space", names.AnnotationSpaceName: "bench",
				names.AnnotationOrgGUID: "org", names.AnnotationOrgName: "bench",
			},
		},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))},
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "bench-" + guid + "-5d8f9-abcde", Namespace: agentNamespace, UID: types.UID("pod-" + guid),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
			Labels:            labels,
		},
		Spec: corev1.PodSpec{NodeName: agentNode, Containers: []corev1.Container{{Name: names.ContainerName}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	return d, p
}

func benchLogDir(root string, p *corev1.Pod) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), names.ContainerName)
}

// runAgentChild runs the agent until ctx ends.
func runAgentChild(ctx context.Context, cfg agentBenchConfig) error {
	var objs []runtime.Object
	for i := range cfg.pods {
		d, p := benchPod(i)
		objs = append(objs, d, p)
	}
	logger := lager.NewLogger("opi-bench-agent")
	logger.RegisterSink(lager.NewWriterSink(os.Stderr, lager.INFO))
	a, err := agent.New(agent.Config{
		Node: agentNode, Namespace: agentNamespace, PodLogs: cfg.podLogs, StateDir: cfg.state,
		Loggregator:    loggregator.SenderConfig{Addr: cfg.addr, CAFile: cfg.ca, CertFile: cfg.cert, KeyFile: cfg.key},
		LinesPerSecond: cfg.linesPerSecond, LineBurst: cfg.burst, PollInterval: cfg.poll,
		BytesPerSecond: cfg.bytesRate, ByteBurst: cfg.bytesBurst,
	}, clientset.Sources(fake.NewClientset(objs...), agentNamespace), logger)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// criLine is one CRI log line of about 120 bytes, stamped at.
func criLine(b []byte, at time.Time, pod, n int) []byte {
	b = at.AppendFormat(b, time.RFC3339Nano)
	b = fmt.Appendf(b, " stdout F GET /v2/things/%d 200 %d bytes in 3 ms pod=%04d request_id=5f1c9a2e-77aa-4c1e-9f00-%012d\n", n, 1000+n%500, pod, n)
	return b
}

// writeAgentFiles writes every pod's files: rotated ones (oldest first) and 0.log, the lines
// spread evenly, stamped in the past.
func writeAgentFiles(root string, cfg agentBenchConfig) error {
	base := time.Now().Add(-time.Hour)
	n := 0
	for i := range cfg.pods {
		_, p := benchPod(i)
		dir := benchLogDir(root, p)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		files := cfg.files / cfg.pods
		if i < cfg.files%cfg.pods {
			files++
		}
		lines := cfg.lines / cfg.pods
		if i < cfg.lines%cfg.pods {
			lines++
		}
		for k := range files {
			name := "0.log"
			if k < files-1 {
				name = fmt.Sprintf("0.log.%s", base.Add(time.Duration(k)*time.Second).UTC().Format("20060102-150405"))
			}
			f, err := os.Create(filepath.Join(dir, name))
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(f, 1<<20)
			var buf []byte
			for range lines/files + btoi(k < lines%files) {
				buf = criLine(buf[:0], base.Add(time.Duration(n)*time.Microsecond), i, n)
				n++
				if _, err := w.Write(buf); err != nil {
					f.Close()
					return err
				}
			}
			if err := w.Flush(); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
	if n != cfg.lines {
		return fmt.Errorf("wrote %d lines, not %d", n, cfg.lines)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// received counts the stand-in's envelopes and, once delays is set, the delay of each.
type received struct {
	n      atomic.Int64
	mu     sync.Mutex
	timing bool
	delays []time.Duration
}

func (r *received) observe(at time.Time, envs []*loggregator_v2.Envelope) {
	r.n.Add(int64(len(envs)))
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.timing {
		return
	}
	for _, e := range envs {
		r.delays = append(r.delays, at.Sub(time.Unix(0, e.Timestamp)))
	}
}

func runAgentBench(ctx context.Context, cfg agentBenchConfig) (err error) {
	workDir, err := os.MkdirTemp("", "opi-bench-agent-")
	if err != nil {
		return err
	}
	defer dropWorkFolder(workDir, cfg.keep, &err)
	podLogs, state, pki := filepath.Join(workDir, "pods"), filepath.Join(workDir, "state"), filepath.Join(workDir, "pki")
	for _, d := range []string{podLogs, state, pki} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	res := agentRun{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Note: strings.TrimSpace(cfg.note)}
	res.Machine = thisMachine()
	fig := &res.Agent
	fig.Pods, fig.Files, fig.Lines, fig.DelayRate, fig.PollMS = cfg.pods, cfg.files, cfg.lines, cfg.rate, float64(cfg.poll)/float64(time.Millisecond)

	logf("writing %d lines into %d files of %d pods", cfg.lines, cfg.files, cfg.pods)
	if err := writeAgentFiles(podLogs, cfg); err != nil {
		return fmt.Errorf("writing the log files: %w", err)
	}
	ingress, err := standin.Start(pki)
	if err != nil {
		return err
	}
	defer ingress.Stop()
	var recv received
	ingress.Observe(recv.observe)

	api, err := startAPIStandin(cfg.pods)
	if err != nil {
		return err
	}
	defer api.stop()
	kubeconfig := filepath.Join(workDir, "kubeconfig")
	if err := api.kubeconfig(kubeconfig); err != nil {
		return err
	}
	files := ingress.ClientFiles()
	logFile, err := os.Create(filepath.Join(workDir, "agent.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	// The binary as shipped, with its own flags; the bounds lifted (the default would hold 110
	// pods to 100 lines/s and 64 KiB/s each), no ops endpoint, no kubelet (no metrics).
	cmd := exec.Command(cfg.agentBin, "--node", agentNode, "--namespace", agentNamespace, "--kubeconfig", kubeconfig,
		"--pod-logs", podLogs, "--state-dir", state, "--ops-listen", "", "--kubelet-url", "",
		"--loggregator-addr", ingress.Addr(), "--loggregator-ca", files.CA, "--loggregator-cert", files.Cert, "--loggregator-key", files.Key,
		"--log-rate", "1e9", "--log-burst", strconv.Itoa(1<<30), "--log-bytes-rate", strconv.Itoa(1<<40), "--log-bytes-burst", strconv.Itoa(1<<40))
	cmd.Env = append(os.Environ(), "NODE_IP=", "KUBECONFIG=")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	logf("starting the agent (rate bound lifted for the catch-up)")
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopChild := func() error {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			return err
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			return errors.New("the agent did not stop within 30 s of SIGINT: killed")
		}
	}
	cpu0 := readCPU([]int{osPid, pid})
	cpuChild0 := readCPU([]int{pid})
	rss := startRSS(pid)
	defer rss.stop()

	if err := waitReceived(ctx, &recv, int64(cfg.lines), 15*time.Minute, exited); err != nil {
		_ = stopChild()
		return fmt.Errorf("catch-up: %w (%d of %d received)", err, recv.n.Load(), cfg.lines)
	}
	cpu1 := readCPU([]int{osPid, pid})
	cpuChild1 := readCPU([]int{pid})
	fig.CatchUpSeconds = time.Since(start).Seconds()
	fig.CatchUpCPUSeconds = (cpuChild1.ours - cpuChild0.ours) / 100
	fig.LinesPerCPUSecond = ratio(float64(cfg.lines), fig.CatchUpCPUSeconds)
	fig.LinesPerSecond = ratio(float64(cfg.lines), fig.CatchUpSeconds)
	fig.CatchUpOthersCPU = othersShare(cpu0, cpu1)
	fig.RSSPeak = rss.own()
	logf("caught up: %d lines in %.1f s, %.2f CPU s: %.0f lines per CPU second; peak RSS %.1f MB",
		cfg.lines, fig.CatchUpSeconds, fig.CatchUpCPUSeconds, fig.LinesPerCPUSecond, fig.RSSPeak)

	// Steady RSS with every pod and file, then the delay phase.
	fig.RSSSteady = rss.steady(ctx, 5, time.Second)
	fig.RSSAnon, fig.RSSFile = rssSplit(pid)
	logf("steady RSS %.1f MB; writing %d lines/s for %s", fig.RSSSteady, cfg.rate, cfg.delayFor)
	recv.mu.Lock()
	recv.timing = true
	recv.mu.Unlock()
	before := recv.n.Load()
	cpu2 := readCPU([]int{osPid, pid})
	written, err := writeSteady(ctx, podLogs, cfg)
	if err != nil {
		_ = stopChild()
		return err
	}
	if err := waitReceived(ctx, &recv, before+int64(written), time.Minute, exited); err != nil {
		_ = stopChild()
		return fmt.Errorf("delay phase: %w", err)
	}
	cpu3 := readCPU([]int{osPid, pid})
	recv.mu.Lock()
	fig.DelayLines = len(recv.delays)
	fig.DelayP50, fig.DelayP99 = percentiles(recv.delays)
	recv.mu.Unlock()
	fig.DelaySeconds = cfg.delayFor.Seconds()
	fig.DelayOthersCPU = othersShare(cpu2, cpu3)
	if err := stopChild(); err != nil {
		return fmt.Errorf("the agent: %w", err)
	}
	if got, want := recv.n.Load(), int64(cfg.lines+written); got != want {
		return fmt.Errorf("the stand-in received %d envelopes, %d lines were written", got, want)
	}
	res.Machine.LoadEnd = loadavg()
	res.Machine.OthersCPU = othersShare(cpu0, cpu3)
	logf("delay: %d lines, p50 %.0f ms, p99 %.0f ms", fig.DelayLines, fig.DelayP50, fig.DelayP99)

	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return printRun(res.table(), line, cfg.record, cfg.doc)
}

// waitReceived waits until the stand-in has received n envelopes.
func waitReceived(ctx context.Context, r *received, n int64, timeout time.Duration, exited <-chan error) error {
	deadline := time.After(timeout)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for r.n.Load() < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not all received within %s", timeout)
		case err := <-exited:
			return fmt.Errorf("the agent exited: %v", err)
		case <-t.C:
		}
	}
	return nil
}

// writeSteady appends cfg.rate lines per second for cfg.delayFor to the pods' 0.log files, in
// ticks of 10 ms, round-robin over the pods; each line is stamped with its write time.
func writeSteady(ctx context.Context, root string, cfg agentBenchConfig) (int, error) {
	files, err := openPodLogs(root, cfg.pods)
	if err != nil {
		return 0, err
	}
	defer closeAll(files)
	written := 0
	var buf []byte
	err = everyTick(ctx, cfg.delayFor, func(elapsed time.Duration) error {
		for due := int(elapsed.Seconds() * float64(cfg.rate)); written < due; written++ {
			pod := written % cfg.pods
			buf = criLine(buf[:0], time.Now(), pod, cfg.lines+written)
			if _, err := files[pod].Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
	return written, err
}

// openPodLogs opens the first pods' 0.log files for appending (none left open on an error).
func openPodLogs(root string, pods int) ([]*os.File, error) {
	files := make([]*os.File, 0, pods)
	for i := range pods {
		_, p := benchPod(i)
		f, err := os.OpenFile(filepath.Join(benchLogDir(root, p), "0.log"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			closeAll(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// everyTick calls write every 10 ms with the time since its start, until d has passed, ctx
// ends (its error) or write fails (write's error).
func everyTick(ctx context.Context, d time.Duration, write func(elapsed time.Duration) error) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	for {
		elapsed := time.Since(start)
		if elapsed >= d {
			return nil
		}
		if err := write(elapsed); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// newMeasureTable starts a run's markdown table of measures and their values.
func newMeasureTable() *strings.Builder {
	b := new(strings.Builder)
	b.WriteString("| measure | value |\n| --- | --- |\n")
	return b
}

func (r agentRun) table() string {
	f := r.Agent
	b := newMeasureTable()
	fmt.Fprintf(b, "| catch-up: %d lines in %d files of %d pods | %.1f s, %.2f CPU s: %.0f lines per CPU second (%.0f lines/s wall; others used %.0f %% of the CPUs) |\n",
		f.Lines, f.Files, f.Pods, f.CatchUpSeconds, f.CatchUpCPUSeconds, f.LinesPerCPUSecond, f.LinesPerSecond, 100*f.CatchUpOthersCPU)
	fmt.Fprintf(b, "| agent RSS, %d pods, %d files | peak %.1f MB (catching up), steady %.1f MB (anonymous %.1f MB, file-backed %.1f MB) |\n", f.Pods, f.Files, f.RSSPeak, f.RSSSteady, f.RSSAnon, f.RSSFile)
	fmt.Fprintf(b, "| delay, line written to envelope received, %d lines/s for %.0f s, poll %.0f ms | p50 %.0f ms, p99 %.0f ms (%d lines) |\n",
		f.DelayRate, f.DelaySeconds, f.PollMS, f.DelayP50, f.DelayP99, f.DelayLines)
	return b.String()
}

// agentTables are the generated tables of the agent runs ("" without any).
func agentTables(runs []recordedRun) string {
	rows := slices.DeleteFunc(slices.Clone(runs), func(r recordedRun) bool { return r.Agent == nil })
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### Node agent (`make bench-agent`): lines per CPU second, RSS, delay line written → envelope received\n\n")
	b.WriteString("| pods, files, lines | lines per CPU second (wall lines/s) | RSS peak / steady | delay p50 / p99 (rate, poll) | others' CPU share | date |\n")
	b.WriteString("| --- | ---: | --- | --- | ---: | --- |\n")
	for _, r := range rows {
		f := r.Agent
		split := ""
		if f.RSSAnon > 0 {
			split = fmt.Sprintf(" (steady: %.1f anonymous, %.1f file-backed)", f.RSSAnon, f.RSSFile)
		}
		fmt.Fprintf(&b, "| %d, %d, %d | %.0f (%.0f) | %.1f / %.1f MB%s | %.0f / %.0f ms (%d lines/s, %.0f ms) | %.0f %% | %s |\n",
			f.Pods, f.Files, f.Lines, f.LinesPerCPUSecond, f.LinesPerSecond, f.RSSPeak, f.RSSSteady, split,
			f.DelayP50, f.DelayP99, f.DelayRate, f.PollMS, 100*f.CatchUpOthersCPU, r.at.Format(runDateLayouts[0]))
	}
	return b.String()
}

// rssSplit reads RssAnon and RssFile (MB) of pid from /proc.
func rssSplit(pid int) (anon, file float64) {
	kib := procStatusKiB(pid)
	return kibToMB(kib["RssAnon"]), kibToMB(kib["RssFile"])
}
