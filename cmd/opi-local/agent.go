package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/kubeletlogs"
	"github.com/opi-bridge/opi/testsupport/kubeletstats"
	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

// The kubelet stand-in's pace: how often it looks for new Running pods, and how often it writes
// a line for each.
const (
	podScanInterval = time.Second
	podLineInterval = 5 * time.Second
	// printInterval is how often new envelopes at the Loggregator stand-in are printed.
	printInterval = 250 * time.Millisecond
)

// The made-up stats the kubelet stand-in serves for each Running pod (no container runs).
const (
	standinCPUNanoCores = 20_000_000 // 2 % of a core
	standinMemoryBytes  = 24 << 20
	standinRootfsBytes  = 8 << 20
)

// standinToken is the bearer token the kubelet stats stand-in accepts.
const standinToken = "opi-local-agent-token"

// localAgent is what `opi-local run --agent` starts: before opi, a Loggregator v2 ingress
// stand-in (mutual TLS) whose envelopes are printed with a "loggregator-standin:" prefix (opi's
// lifecycle lines go there too); once opi is ready, one `opi agent` per kwok node sending to it;
// and, since kwok writes no log files and serves no
// stats, a kubelet stand-in writing a few lines in the kubelet's layout for each of opi's pods
// that is Running and serving made-up stats for them.
type localAgent struct {
	ingress *standin.Server
	stats   *kubeletstats.Server
	agents  []*localkube.Process
	guide   agentGuide
	token   string // the kubelet stand-in's token file

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// agentGuide is what the printed guide says of the agents.
type agentGuide struct {
	Ingress  string
	Nodes    []string
	PodLogs  string
	AgentLog string
	// Namespace is the apps' namespace, for the example of a line written by hand.
	Namespace string
}

// agentOptions are the settings `--agent` starts the agents with.
type agentOptions struct {
	opiBin, kubeconfig, namespace, backend string
	// dir is the folder of the run's files: pod logs, the agents' state, certificates, logs.
	dir string
}

// startStandins starts the Loggregator and kubelet stand-ins, the printing of the envelopes and
// the writing of the pods' files (before opi, which sends its lifecycle lines to the same
// stand-in).
func startStandins(client kubernetes.Interface, o agentOptions, out io.Writer) (*localAgent, error) {
	certs, podLogs := filepath.Join(o.dir, "loggregator-standin"), filepath.Join(o.dir, "pod-logs")
	for _, d := range []string{certs, podLogs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("making the agents' folders: %w", err)
		}
	}
	l := &localAgent{guide: agentGuide{PodLogs: podLogs, Namespace: o.namespace, AgentLog: filepath.Join(o.dir, "opi-agent-<node>.log")}}
	var err error
	if l.ingress, err = standin.Start(certs); err != nil {
		return nil, fmt.Errorf("starting the loggregator stand-in: %w", err)
	}
	l.guide.Ingress = l.ingress.Addr()
	l.token = filepath.Join(certs, "kubelet-token")
	if err := os.WriteFile(l.token, []byte(standinToken+"\n"), 0o600); err != nil {
		return l, fmt.Errorf("writing the kubelet stand-in's token: %w", err)
	}
	if l.stats, err = kubeletstats.Start(certs, standinToken); err != nil {
		return l, fmt.Errorf("starting the kubelet stats stand-in: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Add(2)
	go func() { defer l.wg.Done(); printEnvelopes(runCtx, l.ingress, out) }()
	go func() { defer l.wg.Done(); writePodLogs(runCtx, client, o.namespace, podLogs, l.stats) }()
	fmt.Fprintf(out, "loggregator stand-in at %s, kubelet stand-in writing pod logs into %s\n", l.ingress.Addr(), podLogs)
	return l, nil
}

// opiArgs are the flags that make opi's leader send its lifecycle lines (CELL, STG) to the
// stand-in.
func (l *localAgent) opiArgs() []string {
	files := l.ingress.ClientFiles()
	return []string{"--loggregator-addr", l.ingress.Addr(), "--loggregator-ca", files.CA, "--loggregator-cert", files.Cert, "--loggregator-key", files.Key}
}

// startAgents runs opi agent for each node against the stand-ins.
func (l *localAgent) startAgents(ctx context.Context, client kubernetes.Interface, o agentOptions, out io.Writer) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the nodes for the agents: %w", err)
	}
	files := l.ingress.ClientFiles()
	for _, n := range nodes.Items {
		state := filepath.Join(o.dir, "agent-state", n.Name)
		args := []string{"agent", "--node", n.Name, "--kubeconfig", o.kubeconfig, "--namespace", o.namespace, "--backend", o.backend,
			"--pod-logs", l.guide.PodLogs, "--state-dir", state,
			"--loggregator-addr", l.ingress.Addr(), "--loggregator-ca", files.CA, "--loggregator-cert", files.Cert, "--loggregator-key", files.Key,
			"--kubelet-url", l.stats.URL(), "--kubelet-ca", l.stats.CAFile(), "--kubelet-token-file", l.token}
		if err := os.MkdirAll(state, 0o755); err != nil {
			return fmt.Errorf("making the agent's state folder: %w", err)
		}
		// Each agent its own ops endpoint on loopback (the default, :8090, would be shared).
		ops, err := localkube.FreeAddr()
		if err != nil {
			return err
		}
		args = append(args, "--ops-listen", ops)
		logPath := filepath.Join(o.dir, "opi-agent-"+n.Name+".log")
		fmt.Fprintf(out, "starting %s %s (log %s)\n", o.opiBin, strings.Join(args, " "), logPath)
		p, err := localkube.StartProcess("opi-agent-"+n.Name, o.opiBin, args, os.Environ(), nil, logPath)
		if err != nil {
			return err
		}
		l.agents = append(l.agents, p)
		l.guide.Nodes = append(l.guide.Nodes, n.Name)
	}
	return nil
}

// done is closed when one of the agents has exited.
func (l *localAgent) done() <-chan struct{} {
	done := make(chan struct{})
	var once sync.Once
	for _, p := range l.agents {
		go func() {
			<-p.Done()
			once.Do(func() { close(done) })
		}()
	}
	return done
}

// close stops the agents (SIGTERM: they save their checkpoints), then the stand-ins.
func (l *localAgent) close() error {
	var errs []error
	for _, p := range l.agents {
		errs = append(errs, p.Stop())
	}
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
	}
	if l.stats != nil {
		l.stats.Close()
	}
	if l.ingress != nil {
		l.ingress.Stop()
	}
	return errors.Join(errs...)
}

// printEnvelopes prints each envelope the stand-in receives, in order of arrival, until ctx ends.
func printEnvelopes(ctx context.Context, ingress *standin.Server, out io.Writer) {
	t := time.NewTicker(printInterval)
	defer t.Stop()
	printed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		envs := ingress.Envelopes()
		for _, e := range envs[printed:] {
			fmt.Fprintln(out, formatEnvelope(e))
		}
		printed = len(envs)
	}
}

// formatEnvelope is one line for an envelope: its source_id, instance_id and source_type, then
// for a log OUT or ERR and the text, for gauges each value compactly.
func formatEnvelope(e *loggregator_v2.Envelope) string {
	head := fmt.Sprintf("loggregator-standin: %s [%s]", e.SourceId, e.InstanceId)
	switch {
	case e.GetLog() != nil:
		return fmt.Sprintf("%s %s %s %s", head, e.Tags["source_type"], e.GetLog().GetType(), e.GetLog().GetPayload())
	case e.GetGauge() != nil:
		names := make([]string, 0, len(e.GetGauge().Metrics))
		for name := range e.GetGauge().Metrics {
			names = append(names, name)
		}
		sort.Strings(names)
		var b strings.Builder
		b.WriteString(head + " gauges")
		for _, name := range names {
			m := e.GetGauge().Metrics[name]
			fmt.Fprintf(&b, " %s=%s", name, compact(m.Value, m.Unit))
		}
		return b.String()
	default:
		return head + " (neither a log nor a gauge)"
	}
}

// compact is a gauge value with its unit: percentages with one decimal, bytes in KiB/MiB/GiB.
func compact(v float64, unit string) string {
	switch unit {
	case "percentage":
		return fmt.Sprintf("%.1f%%", v)
	case "bytes":
		for _, u := range []struct {
			name string
			size float64
		}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if v >= u.size {
				return fmt.Sprintf("%.1f%s", v/u.size, u.name)
			}
		}
		return fmt.Sprintf("%.0fB", v)
	default:
		return fmt.Sprintf("%g%s", v, unit)
	}
}

// writePodLogs plays the kubelet's part for opi's pods in namespace: for each pod that is
// Running it writes its start command, then a line every podLineInterval (every third one on
// stderr), into root in the kubelet's layout, and serves made-up stats of the Running pods.
func writePodLogs(ctx context.Context, client kubernetes.Interface, namespace, root string, stats *kubeletstats.Server) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = names.LabelSourceType + " in (" + names.SourceTypeApp + "," + names.SourceTypeTask + ")"
		}))
	lister := factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())

	w := &podLogWriter{root: root, pods: map[string]*writtenPod{}}
	t := time.NewTicker(podScanInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			stats.SetSummary(w.scan(lister, now))
		}
	}
}

// podLogWriter is the kubelet stand-in's state: the pods it writes for.
type podLogWriter struct {
	root string
	pods map[string]*writtenPod // by uid
}

type writtenPod struct {
	c     *kubeletlogs.Container
	lines int
	last  time.Time
}

// scan writes the lines due at now and returns the stats summary of the Running pods.
func (w *podLogWriter) scan(lister listersv1.PodLister, now time.Time) statsv1alpha1.Summary {
	pods, _ := lister.List(labels.Everything())
	seen := map[string]bool{}
	var summary statsv1alpha1.Summary
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			continue
		}
		uid := string(pod.UID)
		seen[uid] = true
		wp := w.pods[uid]
		if wp == nil {
			c, err := kubeletlogs.New(w.root, pod.Namespace, pod.Name, uid, names.ContainerName)
			if err != nil {
				continue
			}
			wp = &writtenPod{c: c, last: now}
			w.pods[uid] = wp
			_ = c.Line(now, kubeletlogs.Stdout, "$ "+startCommand(pod))
		}
		if now.Sub(wp.last) >= podLineInterval {
			wp.lines++
			wp.last = now
			stream := kubeletlogs.Stdout
			if wp.lines%3 == 0 {
				stream = kubeletlogs.Stderr
			}
			_ = wp.c.Line(now, stream, fmt.Sprintf("%s: line %d from the kubelet stand-in (%s)", pod.Name, wp.lines, stream))
		}
		summary.Pods = append(summary.Pods, statsv1alpha1.PodStats{
			PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: uid},
			Containers: []statsv1alpha1.ContainerStats{{
				Name:   names.ContainerName,
				CPU:    &statsv1alpha1.CPUStats{UsageNanoCores: ptr.To[uint64](standinCPUNanoCores)},
				Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To[uint64](standinMemoryBytes)},
				Rootfs: &statsv1alpha1.FsStats{UsedBytes: ptr.To[uint64](standinRootfsBytes)},
				Logs:   &statsv1alpha1.FsStats{UsedBytes: ptr.To(logBytes(wp.c.Dir()))},
			}},
		})
	}
	for uid := range w.pods {
		if !seen[uid] {
			delete(w.pods, uid)
		}
	}
	return summary
}

// startCommand is what the pod's app container runs, as a shell line.
func startCommand(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == names.ContainerName {
			if cmd := append(append([]string{}, c.Command...), c.Args...); len(cmd) > 0 {
				return strings.Join(cmd, " ")
			}
			return "(the image's entrypoint of " + c.Image + ")"
		}
	}
	return "(no app container)"
}

// logBytes is the size of the files in a container's log folder.
func logBytes(dir string) uint64 {
	entries, _ := os.ReadDir(dir)
	var n uint64
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			n += uint64(info.Size())
		}
	}
	return n
}

// printAgentGuide tells how to watch the envelopes and write a line by hand.
func printAgentGuide(out io.Writer, g agentGuide) {
	fmt.Fprintf(out, `
The node agent: opi agent runs for each node (%[1]s; log %[2]s), follows the log files of
opi's pods on its node in %[3]s
and sends every line, and every 15 s each instance's container metrics, to a Loggregator v2
stand-in at %[4]s (mutual TLS). No kubelet writes files under kwok: a kubelet stand-in writes,
for each of opi's pods once it is Running, its start command, then a line every 5 s (every third
on stderr), and serves made-up stats (2%% of a core, 24 MiB memory) for the metrics.

Each envelope the stand-in receives is printed here, one line each:
  loggregator-standin: <app guid> [<instance_id>] <source_type> OUT|ERR <text>
  loggregator-standin: <process guid> [<instance_id>] gauges cpu=... disk=... disk_quota=... memory=... memory_quota=...
  (only those: make run RUN_FLAGS="--agent" | grep --line-buffered loggregator-standin:)
  Lines go under the app guid, which cf logs reads; an instance's gauges under its process's
  guid (the desire's "guid", %[6]s for the example app), which Cloud Controller reads for
  cf app: each process's usage apart, a worker's and a rolling deploy's new web process's too.

  (a task shows APP/TASK/<name> lines if it keeps running: the example's "exit 0" ends before
  the kubelet stand-in sees it Running; "sleep 3600" as its command does not)

  # desire the app above, then write a line of your own as its instance's stdout (CRI format)
  ls %[3]s
  echo "$(date -u +%%Y-%%m-%%dT%%H:%%M:%%S.%%NZ) stdout F hello from my terminal" >> %[3]s/%[5]s_<pod>_<uid>/opi/0.log

opi's leader sends its lifecycle lines (source_type CELL, STG for docker staging) there too.

Ctrl-C also stops the agents (they save their positions) and the stand-ins, after opi.
`, strings.Join(g.Nodes, ", "), g.AgentLog, g.PodLogs, g.Ingress, g.Namespace, exampleGUID)
}
