package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"

	"github.com/opi-bridge/opi/agent"
	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

// `opi-bench agent -bounds` measures the per-instance log bound and the Sender's fair sharing,
// with the agent as a child process as the other agent runs:
//   - CPU per dropped line: -bound-lines lines written before the agent starts, over
//     -bound-pods pods, every container bounded to 1 byte per second (all but the first line
//     of each dropped); the child's CPU (start-up included) until every file's checkpoint is at
//     its end, over the lines;
//   - CPU per admitted line: the same lines with the bound lifted, until all are received;
//   - the quiet tenants' delay (line written to envelope received, p50/p99) with a noisy
//     neighbour writing 1 KiB lines at 10× the default byte bound, the other pods 2 lines/s
//     each, all with the default bounds, for -bound-for.

// boundsFigures are a -bounds run's figures (under "agent_bounds").
type boundsFigures struct {
	Pods             int     `json:"pods"`
	Lines            int     `json:"lines"`
	DroppedCPUUs     float64 `json:"dropped_line_cpu_us"`
	AdmittedCPUUs    float64 `json:"admitted_line_cpu_us"`
	DroppedShare     float64 `json:"dropped_share"`
	BoundBytes       int64   `json:"bound_bytes_per_s"`
	NoisyBytes       float64 `json:"noisy_written_bytes_per_s"`
	NoisyDelivered   float64 `json:"noisy_delivered_bytes_per_s"`
	QuietPods        int     `json:"quiet_pods"`
	QuietRate        int     `json:"quiet_lines_per_s_each"`
	QuietLines       int     `json:"quiet_lines"`
	QuietP50         float64 `json:"quiet_delay_p50_ms"`
	QuietP99         float64 `json:"quiet_delay_p99_ms"`
	NoisySeconds     float64 `json:"noisy_s"`
	OthersCPUShare   float64 `json:"others_cpu_share"`
	PollMS           float64 `json:"poll_interval_ms"`
	NoticesDelivered int     `json:"notices"`
}

// boundsRun is a -bounds run's JSON line.
type boundsRun struct {
	Date    string        `json:"date"`
	Bounds  boundsFigures `json:"agent_bounds"`
	Machine machine       `json:"machine"`
	Note    string        `json:"note,omitempty"`
}

const (
	quietRate      = 2
	noisyLineBytes = 1 << 10
)

// boundsChild is a child agent of a -bounds phase.
type boundsChild struct {
	cmd    *exec.Cmd
	pid    int
	exited chan error
}

func startBoundsChild(workDir, name string, ingress *standin.Server, cfg agentBenchConfig, bytesRate, bytesBurst int64, lifted bool) (string, *boundsChild, error) {
	podLogs, state := filepath.Join(workDir, name, "pods"), filepath.Join(workDir, name, "state")
	for _, d := range []string{podLogs, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", nil, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	files := ingress.ClientFiles()
	logFile, err := os.Create(filepath.Join(workDir, name, "agent.log"))
	if err != nil {
		return "", nil, err
	}
	args := []string{"agent", "-child", "-pod-logs", podLogs, "-state", state,
		"-loggregator-addr", ingress.Addr(), "-ca", files.CA, "-cert", files.Cert, "-key", files.Key,
		"-pods", strconv.Itoa(cfg.pods), "-poll", cfg.poll.String(),
		"-bytes-rate", strconv.FormatInt(bytesRate, 10), "-bytes-burst", strconv.FormatInt(bytesBurst, 10)}
	if lifted {
		args = append(args, "-lines-per-second", "1e9", "-burst", strconv.Itoa(1<<30))
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	return podLogs, &boundsChild{cmd: cmd, exited: make(chan error, 1)}, nil
}

func (c *boundsChild) start() error {
	if err := c.cmd.Start(); err != nil {
		return err
	}
	c.pid = c.cmd.Process.Pid
	go func() { c.exited <- c.cmd.Wait() }()
	return nil
}

func (c *boundsChild) stop() error {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-c.exited:
		return err
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		return errors.New("the agent did not stop within 30 s of SIGINT: killed")
	}
}

// waitCheckpointed waits until the checkpoints in state hold every file at its end.
func waitCheckpointed(ctx context.Context, state string, total int64, exited <-chan error) error {
	deadline := time.After(10 * time.Minute)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		var positions map[string]struct {
			Offset int64 `json:"offset"`
		}
		if data, err := os.ReadFile(filepath.Join(state, "positions.json")); err == nil && json.Unmarshal(data, &positions) == nil {
			var sum int64
			for _, p := range positions {
				sum += p.Offset
			}
			if sum >= total {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errors.New("the checkpoints did not reach the files' ends within 10 minutes")
		case err := <-exited:
			return fmt.Errorf("the agent exited: %v", err)
		case <-t.C:
		}
	}
}

func dirBytes(root string) (int64, error) {
	var total int64
	err := filepath.Walk(root, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return err
	})
	return total, err
}

// boundsReceived sorts the stand-in's envelopes: the noisy pod's bytes, the notices, and the
// quiet pods' delays.
type boundsReceived struct {
	mu          sync.Mutex
	n           int
	noisyBytes  int
	notices     int
	quietDelays []time.Duration
}

func (r *boundsReceived) observe(at time.Time, envs []*loggregator_v2.Envelope) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range envs {
		r.n++
		payload := e.GetLog().GetPayload()
		switch {
		case strings.HasPrefix(string(payload), "app instance exceeded log rate limit"):
			r.notices++
		case e.SourceId == "app-0000":
			r.noisyBytes += len(payload)
		default:
			r.quietDelays = append(r.quietDelays, at.Sub(time.Unix(0, e.Timestamp)))
		}
	}
}

func runAgentBounds(ctx context.Context, cfg agentBenchConfig) (err error) {
	workDir, err := os.MkdirTemp("", "opi-bench-agent-bounds-")
	if err != nil {
		return err
	}
	defer dropWorkFolder(workDir, cfg.keep, &err)
	res := boundsRun{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Note: strings.TrimSpace(cfg.note)}
	res.Machine = thisMachine()
	fig := &res.Bounds
	fig.Pods, fig.Lines, fig.BoundBytes, fig.PollMS = cfg.pods, cfg.lines, agent.DefaultBytesPerSecond, float64(cfg.poll)/float64(time.Millisecond)
	pki := filepath.Join(workDir, "pki")
	if err := os.MkdirAll(pki, 0o755); err != nil {
		return err
	}
	ingress, err := standin.Start(pki)
	if err != nil {
		return err
	}
	defer ingress.Stop()
	var recv received
	var sorted boundsReceived
	ingress.Observe(func(at time.Time, envs []*loggregator_v2.Envelope) {
		recv.observe(at, envs)
		sorted.observe(at, envs)
	})
	files := cfg
	files.files = cfg.pods
	cpu0 := readCPU([]int{osPid})

	// Dropped: 1 byte per second, a burst of 1: all but about one line per second and pod go.
	podLogs, child, err := startBoundsChild(workDir, "dropped", ingress, cfg, 1, 1, true)
	if err != nil {
		return err
	}
	if err := writeAgentFiles(podLogs, files); err != nil {
		return err
	}
	total, err := dirBytes(podLogs)
	if err != nil {
		return err
	}
	logf("dropped: %d lines over %d pods, bound 1 byte/s", cfg.lines, cfg.pods)
	if err := child.start(); err != nil {
		return err
	}
	c0 := readCPU([]int{child.pid})
	if err := waitCheckpointed(ctx, filepath.Join(filepath.Dir(podLogs), "state"), total, child.exited); err != nil {
		_ = child.stop()
		return fmt.Errorf("dropped phase: %w", err)
	}
	c1 := readCPU([]int{child.pid})
	if err := child.stop(); err != nil {
		return err
	}
	sent := recv.n.Load()
	fig.DroppedShare = 1 - float64(sent)/float64(cfg.lines)
	fig.DroppedCPUUs = 1e6 * (c1.ours - c0.ours) / 100 / float64(cfg.lines)

	// Admitted: the same lines, the bound lifted.
	podLogs, child, err = startBoundsChild(workDir, "admitted", ingress, cfg, 1<<40, 1<<40, true)
	if err != nil {
		return err
	}
	if err := writeAgentFiles(podLogs, files); err != nil {
		return err
	}
	logf("admitted: the same lines, the bound lifted")
	before := recv.n.Load()
	if err := child.start(); err != nil {
		return err
	}
	c0 = readCPU([]int{child.pid})
	if err := waitReceived(ctx, &recv, before+int64(cfg.lines), 10*time.Minute, child.exited); err != nil {
		_ = child.stop()
		return fmt.Errorf("admitted phase: %w", err)
	}
	c1 = readCPU([]int{child.pid})
	if err := child.stop(); err != nil {
		return err
	}
	fig.AdmittedCPUUs = 1e6 * (c1.ours - c0.ours) / 100 / float64(cfg.lines)

	// Noisy and quiet, the default bounds.
	podLogs, child, err = startBoundsChild(workDir, "noisy", ingress, cfg, agent.DefaultBytesPerSecond, agent.DefaultByteBurst, false)
	if err != nil {
		return err
	}
	one := files
	one.lines = cfg.pods
	if err := writeAgentFiles(podLogs, one); err != nil {
		return err
	}
	if err := child.start(); err != nil {
		return err
	}
	// Each pod's one line received: the agent follows them all.
	before = recv.n.Load()
	if err := waitReceived(ctx, &recv, before+int64(cfg.pods), time.Minute, child.exited); err != nil {
		_ = child.stop()
		return fmt.Errorf("noisy phase: %w", err)
	}
	sorted.mu.Lock()
	sorted.noisyBytes, sorted.notices, sorted.quietDelays = 0, 0, nil
	sorted.mu.Unlock()
	fig.QuietPods, fig.QuietRate, fig.NoisySeconds = cfg.pods-1, quietRate, cfg.delayFor.Seconds()
	fig.NoisyBytes = float64(10 * agent.DefaultBytesPerSecond)
	logf("noisy: pod 0 writes %.0f bytes/s (10× its bound), %d pods %d lines/s each, for %s", fig.NoisyBytes, fig.QuietPods, quietRate, cfg.delayFor)
	quiet, err := writeNoisy(ctx, podLogs, cfg)
	if err != nil {
		_ = child.stop()
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		sorted.mu.Lock()
		got := len(sorted.quietDelays)
		sorted.mu.Unlock()
		if got >= quiet {
			break
		}
		if time.Now().After(deadline) {
			_ = child.stop()
			return fmt.Errorf("noisy phase: %d of %d quiet lines received", got, quiet)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := child.stop(); err != nil {
		return err
	}
	sorted.mu.Lock()
	fig.QuietLines = len(sorted.quietDelays)
	fig.QuietP50, fig.QuietP99 = percentiles(sorted.quietDelays)
	fig.NoisyDelivered = float64(sorted.noisyBytes) / cfg.delayFor.Seconds()
	fig.NoticesDelivered = sorted.notices
	sorted.mu.Unlock()
	res.Machine.LoadEnd = loadavg()
	res.Machine.OthersCPU = othersShare(cpu0, readCPU([]int{osPid}))
	fig.OthersCPUShare = res.Machine.OthersCPU

	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return printRun(res.table(), line, cfg.record, cfg.doc)
}

// writeNoisy appends, for cfg.delayFor, 1 KiB lines at 10× the default byte bound to pod 0's
// 0.log and quietRate lines per second to each other pod's; it returns the quiet lines written.
func writeNoisy(ctx context.Context, root string, cfg agentBenchConfig) (int, error) {
	files, err := openPodLogs(root, cfg.pods)
	if err != nil {
		return 0, err
	}
	defer closeAll(files)
	noisyRate := float64(10*agent.DefaultBytesPerSecond) / noisyLineBytes
	pad := strings.Repeat("x", noisyLineBytes-100)
	noisy, quiet := 0, 0
	var buf []byte
	err = everyTick(ctx, cfg.delayFor, func(elapsed time.Duration) error {
		for due := int(elapsed.Seconds() * noisyRate); noisy < due; noisy++ {
			buf = time.Now().AppendFormat(buf[:0], time.RFC3339Nano)
			buf = fmt.Appendf(buf, " stdout F noisy %d %s\n", noisy, pad)
			if _, err := files[0].Write(buf); err != nil {
				return err
			}
		}
		for due := int(elapsed.Seconds() * float64(quietRate*(cfg.pods-1))); quiet < due; quiet++ {
			pod := 1 + quiet%(cfg.pods-1)
			buf = criLine(buf[:0], time.Now(), pod, quiet)
			if _, err := files[pod].Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
	return quiet, err
}

func (r boundsRun) table() string {
	f := r.Bounds
	b := newMeasureTable()
	fmt.Fprintf(b, "| CPU per line read and dropped by the bound (%d lines, %d pods, %.1f %% dropped) | %.2f µs |\n", f.Lines, f.Pods, 100*f.DroppedShare, f.DroppedCPUUs)
	fmt.Fprintf(b, "| CPU per line read and sent (the same lines, bound lifted) | %.2f µs |\n", f.AdmittedCPUUs)
	fmt.Fprintf(b, "| quiet tenants' delay, line written to envelope received, %d pods × %d lines/s beside one writing %.0f KiB/s (10× its %d KiB/s bound) for %.0f s, poll %.0f ms | p50 %.0f ms, p99 %.0f ms (%d lines); the noisy one delivered %.0f KiB/s, %d notices |\n",
		f.QuietPods, f.QuietRate, f.NoisyBytes/1024, f.BoundBytes/1024, f.NoisySeconds, f.PollMS, f.QuietP50, f.QuietP99, f.QuietLines, f.NoisyDelivered/1024, f.NoticesDelivered)
	return b.String()
}

// boundsTables is the generated table of the -bounds runs ("" without any).
func boundsTables(runs []recordedRun) string {
	var b strings.Builder
	for _, r := range runs {
		f := r.AgentBounds
		if f == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n### Node agent, log bounds (`make bench-agent BENCH_FLAGS=-bounds`): CPU per dropped and per sent line, quiet tenants' delay beside a noisy one\n\n")
			b.WriteString("| lines, pods | CPU per dropped line | CPU per sent line | quiet delay p50 / p99 (noisy at 10× its bound) | noisy delivered | others' CPU share | date |\n")
			b.WriteString("| --- | ---: | ---: | --- | ---: | ---: | --- |\n")
		}
		fmt.Fprintf(&b, "| %d, %d | %.2f µs | %.2f µs | %.0f / %.0f ms (%d pods × %d lines/s, poll %.0f ms) | %.0f KiB/s (bound %d KiB/s) | %.0f %% | %s |\n",
			f.Lines, f.Pods, f.DroppedCPUUs, f.AdmittedCPUUs, f.QuietP50, f.QuietP99, f.QuietPods, f.QuietRate, f.PollMS,
			f.NoisyDelivered/1024, f.BoundBytes/1024, 100*f.OthersCPUShare, r.at.Format(runDateLayouts[0]))
	}
	return b.String()
}
