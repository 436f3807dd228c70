package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/podlogs"
)

// Defaults of Config.
const (
	DefaultPodLogs      = "/var/log/pods"
	DefaultPollInterval = time.Second
	// DefaultCheckpointInterval: while lines are acknowledged the checkpoints are saved at most
	// this often. A save (the positions written to a temporary file, fsynced, renamed, the
	// folder fsynced) per acknowledgement cost a catch-up more CPU than its lines did; a crash
	// sends again at most the lines acknowledged in the last interval, a stop none.
	DefaultCheckpointInterval = time.Second
	// NotifiedPollFactor: a folder watched for changes is read every NotifiedPollFactor poll
	// intervals as well (the Follower sees everything a poll would, a lost event is no lost line).
	NotifiedPollFactor    = 10
	DefaultLinesPerSecond = 100
	DefaultLineBurst      = 1000
	// DefaultBytesPerSecond and DefaultByteBurst bound each container's log text: 110
	// containers at their bound send about 7 MiB/s, and one container's burst is a sixteenth
	// of the Sender's 16 MiB buffer.
	DefaultBytesPerSecond = 64 << 10
	DefaultByteBurst      = 1 << 20
	// DefaultMaxBufferedEnvelopes and DefaultMaxBufferedBytes bound the agent's Sender buffer
	// (below the Sender's own defaults, which opi's emitters keep): the lines waiting for
	// Loggregator are held once, encoded, and while it is full the followers leave the files
	// unread (back pressure), so a larger buffer would cover no longer outage, only cost a
	// node's memory. 2,000 envelopes are under 0.2 s of a node at the default bound (110
	// instances × 100 lines/s) and 20 batches of the Sender's.
	DefaultMaxBufferedEnvelopes = 2000
	DefaultMaxBufferedBytes     = 4 << 20
	// WorkloadDeployments and WorkloadStatefulSets are opi's workload kinds (its `workload`
	// setting): StatefulSet instances are indexed by ordinal.
	WorkloadDeployments  = "deployments"
	WorkloadStatefulSets = "statefulsets"
)

// Config is the agent's settings.
type Config struct {
	// Node is the node the agent runs on: it follows the pods scheduled there.
	Node string
	// Namespace is opi's apps namespace.
	Namespace string
	// Workload is opi's workload kind, WorkloadDeployments (default) or WorkloadStatefulSets.
	Workload string
	// PodLogs is the kubelet's pod log folder (DefaultPodLogs); the agent only reads it.
	PodLogs string
	// StateDir is a writable folder of the agent's own for its checkpoints.
	StateDir string
	// Loggregator is the v2 ingress the lines go to (mutual TLS).
	Loggregator loggregator.SenderConfig
	// LinesPerSecond and LineBurst bound each container's lines (DefaultLinesPerSecond,
	// DefaultLineBurst); BytesPerSecond and ByteBurst its bytes of log text
	// (DefaultBytesPerSecond, DefaultByteBurst).
	LinesPerSecond float64
	LineBurst      int
	BytesPerSecond int64
	ByteBurst      int64
	// PollInterval is how often each container's log folder is read while it is not watched
	// (DefaultPollInterval); a watched folder is read when it changes, and every
	// NotifiedPollFactor poll intervals besides (a safety net).
	PollInterval time.Duration
	// CheckpointInterval is the least time between two saves of the checkpoints
	// (DefaultCheckpointInterval); the first acknowledgement after a quiet while is saved at once.
	CheckpointInterval time.Duration
	// PollOnly turns change notification off: every folder is polled.
	PollOnly bool
	// MaxLineBytes bounds a line (podlogs.DefaultMaxLineBytes when 0).
	MaxLineBytes int
	// Kubelet is where container metrics come from (none without its URL).
	Kubelet Kubelet
}

// Validate fills the defaults and refuses what the agent cannot work with.
func (c *Config) Validate() error {
	if c.PodLogs == "" {
		c.PodLogs = DefaultPodLogs
	}
	if c.Workload == "" {
		c.Workload = WorkloadDeployments
	}
	if c.LinesPerSecond == 0 {
		c.LinesPerSecond = DefaultLinesPerSecond
	}
	if c.LineBurst == 0 {
		c.LineBurst = DefaultLineBurst
	}
	if c.BytesPerSecond == 0 {
		c.BytesPerSecond = DefaultBytesPerSecond
	}
	if c.ByteBurst == 0 {
		c.ByteBurst = DefaultByteBurst
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.Kubelet.Interval <= 0 {
		c.Kubelet.Interval = DefaultMetricsInterval
	}
	if c.Loggregator.MaxBufferedEnvelopes <= 0 {
		c.Loggregator.MaxBufferedEnvelopes = DefaultMaxBufferedEnvelopes
	}
	if c.Loggregator.MaxBufferedBytes <= 0 {
		c.Loggregator.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("agent: the node name is required"))
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("agent: the apps namespace is required"))
	}
	if c.Workload != WorkloadDeployments && c.Workload != WorkloadStatefulSets {
		errs = append(errs, fmt.Errorf("agent: workload %q is neither %q nor %q", c.Workload, WorkloadDeployments, WorkloadStatefulSets))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("agent: a state folder for the checkpoints is required"))
	} else if c.StateDir == c.PodLogs || isBelow(c.StateDir, c.PodLogs) {
		errs = append(errs, fmt.Errorf("agent: the state folder %q must not be in the pod log folder %q (it stays read-only)", c.StateDir, c.PodLogs))
	}
	if c.LinesPerSecond < 0 || c.LineBurst < 0 {
		errs = append(errs, fmt.Errorf("agent: the log rate bound (%g lines per second, bursts of %d) must be positive", c.LinesPerSecond, c.LineBurst))
	}
	if c.BytesPerSecond < 0 || c.ByteBurst < 0 {
		errs = append(errs, fmt.Errorf("agent: the log rate bound (%d bytes per second, bursts of %d) must be positive", c.BytesPerSecond, c.ByteBurst))
	}
	return errors.Join(errs...)
}

func isBelow(path, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != "." && !filepath.IsAbs(rel) && !strings.HasPrefix(rel, "..")
}

// Agent follows the log files of opi's pods on one node. Build it with New, run it with Run.
type Agent struct {
	cfg    Config
	src    instances.Sources
	logger lager.Logger

	sender  *loggregator.Sender
	kubelet *kubeletClient // nil: no container metrics
	bound   *loggregator.RateBound
	ckpts   *podlogs.Checkpoints
	saveCh  chan struct{}
	notify  *notifier

	reader   *instances.Reader
	nodePods cache.SharedIndexInformer

	counters  counters // the ops endpoint's (ops.go)
	lostFiles atomic.Uint64
	// malformed counts the lines skipped as no CRI lines; unreadableCkpts is 1 if the saved
	// checkpoints could not be read at start-up.
	malformed, unreadableCkpts atomic.Uint64

	mu       sync.Mutex
	followed map[string]*followed // by pod UID
	wg       sync.WaitGroup
	ctx      context.Context
}

// New checks cfg, opens the checkpoints and prepares the sender and the informers of src, the
// apps namespace's objects (nothing runs until Run).
func New(cfg Config, src instances.Sources, logger lager.Logger) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src.Pods == nil || src.Jobs == nil || (src.Deployments == nil && src.StatefulSets == nil) {
		return nil, errors.New("agent: the apps namespace's pods, jobs and workloads are required")
	}
	bound, err := loggregator.NewRateBound(loggregator.RateBoundConfig{
		BytesPerSecond: cfg.BytesPerSecond, ByteBurst: cfg.ByteBurst,
		LinesPerSecond: cfg.LinesPerSecond, LineBurst: cfg.LineBurst,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	ckpts, err := podlogs.OpenCheckpoints(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	var kubelet *kubeletClient
	if cfg.Kubelet.URL != "" {
		if kubelet, err = newKubeletClient(cfg.Kubelet); err != nil {
			return nil, err
		}
	}
	logger = logger.Session("agent", lager.Data{"node": cfg.Node})
	if err := ckpts.Unreadable(); err != nil {
		// Starting matters more than the positions: every container is read from the start of
		// its files (lines sent twice, none lost).
		logger.Error("checkpoints-unreadable", err, lager.Data{"state-dir": cfg.StateDir, "resume": "start of the files"})
	}
	sender, err := loggregator.NewSender(cfg.Loggregator, logger)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{
		cfg: cfg, src: src, logger: logger,
		sender: sender, kubelet: kubelet, bound: bound, ckpts: ckpts,
		saveCh:   make(chan struct{}, 1),
		notify:   newNotifier(logger, cfg.PollOnly),
		followed: map[string]*followed{},
	}
	if ckpts.Unreadable() != nil {
		a.unreadableCkpts.Store(1)
	}
	a.newInformers()
	return a, nil
}

// newInformers sets up the namespace's reader (the pods' identities and indices, as opi reports
// them) and the node's pod informer (which pods to follow).
func (a *Agent) newInformers() {
	a.reader = instances.New(a.src, instances.Options{
		Namespace: a.cfg.Namespace, StatefulSets: a.cfg.Workload == WorkloadStatefulSets, Logger: a.logger,
	})
	onNode := instances.Filtered(a.src.Pods, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.Node).String()
		o.LabelSelector = names.LabelSourceType + " in (" + names.SourceTypeApp + "," + names.SourceTypeTask + ")"
	})
	a.nodePods = instances.NewInformer(onNode, &corev1.Pod{})
	if err := a.nodePods.SetTransform(nodePodOf); err != nil {
		a.logger.Error("set-transform", err)
	}
}

// Stats are the agent's counters.
type Stats struct {
	Sender loggregator.SenderStats
	// RateDropped counts the lines the rate bound dropped; Followed the pods followed now;
	// LostFiles the log files (or files' tails) that went before they were read.
	RateDropped uint64
	Followed    int
	LostFiles   uint64
	// MalformedLines counts the lines skipped because they were no CRI log lines;
	// CheckpointsUnreadable is 1 if the saved checkpoints could not be read at start-up.
	MalformedLines, CheckpointsUnreadable uint64
	// LinesRead counts the lines read from the files, GaugesSent the container metrics
	// envelopes the Sender took, KubeletErrors the failed reads of the stats summary.
	LinesRead, GaugesSent, KubeletErrors uint64
	// Ready: the caches synced and the node's pods handed to their followers.
	Ready bool
}

// Stats are the counters now.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	n := len(a.followed)
	a.mu.Unlock()
	st := Stats{
		Sender: a.sender.Stats(), RateDropped: a.bound.Dropped(), Followed: n, LostFiles: a.lostFiles.Load(),
		MalformedLines: a.malformed.Load(), CheckpointsUnreadable: a.unreadableCkpts.Load(),
	}
	a.counters.fill(&st)
	return st
}

// Run follows the node's pods until ctx ends, then stops every follower, saves the checkpoints
// of what was acknowledged and returns nil (or the error that stopped it early). Call it once.
func (a *Agent) Run(ctx context.Context) error {
	defer a.sender.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.ctx = ctx

	var bg sync.WaitGroup
	bg.Add(3)
	go func() { defer bg.Done(); _ = a.sender.Run(ctx) }()
	go func() { defer bg.Done(); a.saveLoop(ctx) }()
	go func() { defer bg.Done(); a.notify.run(ctx) }()

	if err := a.reader.Start(ctx); err != nil {
		cancel()
		a.reader.Shutdown()
		bg.Wait()
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("agent: %w", err)
	}
	reg, err := a.nodePods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.podSeen,
		UpdateFunc: func(_, obj any) { a.podSeen(obj) },
		DeleteFunc: a.podGone,
	})
	if err != nil {
		cancel()
		bg.Wait()
		return fmt.Errorf("agent: pod handler: %w", err)
	}
	bg.Add(1)
	go func() { defer bg.Done(); a.nodePods.RunWithContext(ctx) }()
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		a.pruneCheckpoints()
		a.counters.ready.Store(true)
	}
	if a.kubelet != nil {
		bg.Add(1)
		go func() { defer bg.Done(); a.metricsLoop(ctx, a.kubelet) }()
	}
	a.logger.Info("started", lager.Data{"pod-logs": a.cfg.PodLogs, "namespace": a.cfg.Namespace})

	<-ctx.Done()
	a.reader.Shutdown()
	a.wg.Wait()
	bg.Wait()
	if err := a.ckpts.Save(); err != nil {
		a.logger.Error("save-checkpoints", err)
	}
	a.logger.Info("stopped", lager.Data{"stats": a.Stats()})
	return nil
}

// pruneCheckpoints forgets the positions of pods that went while the agent was not running (once
// the node's pods were all handed to podSeen).
func (a *Agent) pruneCheckpoints() {
	a.mu.Lock()
	keep := make(map[string]bool, len(a.followed))
	for _, f := range a.followed {
		keep[f.key] = true
	}
	a.mu.Unlock()
	pruned := 0
	for _, k := range a.ckpts.Keys() {
		if !keep[k] {
			a.ckpts.Delete(k)
			pruned++
		}
	}
	if pruned > 0 {
		a.logger.Info("checkpoints-of-gone-pods-dropped", lager.Data{"count": pruned})
		a.saveSoon()
	}
}

// saveLoop saves the checkpoints after acknowledgements: coalesced (one save per wake-up) and
// at most once per CheckpointInterval (Run saves them once more when the agent stops).
func (a *Agent) saveLoop(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.saveCh:
		}
		if wait := a.cfg.CheckpointInterval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		if err := a.ckpts.Save(); err != nil {
			a.logger.Error("save-checkpoints", err)
		}
	}
}

func (a *Agent) saveSoon() { poke(a.saveCh) }

// nodePod is what the agent keeps of a pod on its node.
type nodePod struct {
	metav1.ObjectMeta
	Node       string
	Task       bool
	JobName    string
	Terminal   bool
	Containers []string
	// MemoryLimit and DiskLimit are the app container's memory and ephemeral-storage limits
	// (bytes; 0 when unset): the container metrics' quotas.
	MemoryLimit, DiskLimit uint64
	record                 *instances.Pod
}

// nodePodOf is the node pod informer's transform.
func nodePodOf(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	np := &nodePod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			Labels: map[string]string{
				names.LabelGUID:        p.Labels[names.LabelGUID],
				names.LabelVersion:     p.Labels[names.LabelVersion],
				names.LabelAppGUID:     p.Labels[names.LabelAppGUID],
				names.LabelProcessType: p.Labels[names.LabelProcessType],
			},
		},
		Node:     p.Spec.NodeName,
		Task:     p.Labels[names.LabelSourceType] == names.SourceTypeTask,
		Terminal: p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded,
		record:   instances.PodOf(p),
	}
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "Job" && ref.Controller != nil && *ref.Controller {
			np.JobName = ref.Name
		}
	}
	if np.JobName == "" {
		np.JobName = p.Labels[batchv1.JobNameLabel]
	}
	for _, c := range p.Spec.Containers {
		np.Containers = append(np.Containers, c.Name)
	}
	if c := names.AppContainer(&p.Spec); c != nil {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Sign() > 0 {
			np.MemoryLimit = uint64(q.Value())
		}
		if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && q.Sign() > 0 {
			np.DiskLimit = uint64(q.Value())
		}
	}
	return np, nil
}

func (p *nodePod) hasAppContainer() bool {
	for _, c := range p.Containers {
		if c == names.ContainerName {
			return true
		}
	}
	return false
}

// followed is one followed pod: its latest state, and its follower goroutine's signals.
type followed struct {
	key string // the checkpoint key: <ns>_<pod>_<uid>/opi
	// source is the container's rate bucket and Sender queue: <uid>/opi.
	source string
	dir    string
	gone   chan struct{}
	// wake is poked when dir changes (notifier).
	wake chan struct{}

	mu      sync.Mutex
	pod     *nodePod
	last    *instance // the last identity resolved (kept when the owner is gone)
	removed bool
	// inflight counts f's lines emitted and not yet acknowledged; skipped is the position after
	// the last line the rate bound dropped since the last one emitted.
	inflight int
	skipped  *podlogs.Position
}

func (f *followed) current() *nodePod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pod
}

// podSeen starts following a pod of the node (once) or updates what is known of it.
func (a *Agent) podSeen(obj any) {
	p, ok := obj.(*nodePod)
	if !ok || p.Node != a.cfg.Node || !p.hasAppContainer() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.followed[string(p.UID)]; f != nil {
		f.mu.Lock()
		f.pod = p
		f.mu.Unlock()
		return
	}
	podDir := p.Namespace + "_" + p.Name + "_" + string(p.UID)
	// Only the app container's files: what else runs in the pod (the SSH proxy's relay
	// container, names.RelayContainerName) is not the app's output.
	f := &followed{
		key:    podDir + "/" + names.ContainerName,
		source: loggregator.ContainerKey(string(p.UID), names.ContainerName),
		dir:    filepath.Join(a.cfg.PodLogs, podDir, names.ContainerName),
		gone:   make(chan struct{}),
		wake:   make(chan struct{}, 1),
		pod:    p,
	}
	a.followed[string(p.UID)] = f
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.follow(f)
	}()
}

// podGone lets the pod's follower read its files to their end and stop.
func (a *Agent) podGone(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*nodePod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.followed[string(p.UID)]; f != nil {
		delete(a.followed, string(p.UID))
		close(f.gone)
	}
}

// follow reads f's folder when it changes (or every poll interval while it is not watched)
// until the agent stops or the pod is gone (then once more, to the end of its files).
func (a *Agent) follow(f *followed) {
	logger := a.logger.Session("follow", lager.Data{"container": f.key})
	fl := podlogs.NewFollower(f.dir, a.ckpts.Get(f.key), podlogs.Options{MaxLineBytes: a.cfg.MaxLineBytes, Done: a.ctx.Done()})
	defer fl.Close()
	var malformed uint64 // fl's skipped lines already counted
	defer func() { malformed = a.countMalformed(fl, malformed, logger) }()
	defer a.notify.unwatch(f.dir)
	t := time.NewTicker(a.cfg.PollInterval)
	defer t.Stop()
	failing, watched := false, false
	for {
		final := false
		// Watched before the read: a line written after it wakes the follower.
		if watched = watched && a.notify.watching(f.dir); !watched {
			if watched = a.notify.watch(f.dir, f.wake); watched {
				t.Reset(NotifiedPollFactor * a.cfg.PollInterval)
			} else {
				t.Reset(a.cfg.PollInterval)
			}
		}
		malformed = a.countMalformed(fl, malformed, logger)
		if err := a.read(fl, f, false); errors.Is(err, podlogs.ErrStopped) {
			return
		} else if err != nil {
			if !failing {
				logger.Error("read-failed", err)
			}
			failing = true
		} else {
			failing = false
		}
		select {
		case <-a.ctx.Done():
			return
		case <-f.gone:
			final = true
		case <-t.C:
		case <-f.wake:
		}
		if final {
			if err := a.read(fl, f, true); errors.Is(err, podlogs.ErrStopped) {
				return // the agent stops: the checkpoint stays, the next start prunes it
			} else if err != nil {
				logger.Error("read-failed", err)
			}
			f.mu.Lock()
			f.removed = true
			f.mu.Unlock()
			a.bound.Forget(f.source)
			a.ckpts.Delete(f.key)
			a.saveSoon()
			return
		}
	}
}

// read sends what f's folder holds now. While the pod's identity is not known yet (its workload
// or Job not in the caches) it reads nothing, unless final.
func (a *Agent) read(fl *podlogs.Follower, f *followed, final bool) error {
	in, ok := a.identity(f, final)
	if !ok {
		return nil
	}
	defer a.reportLost(fl, f)
	// The identity and its tags are encoded once for all the lines of this read.
	enc := loggregator.NewLogEncoder(in.logs)
	return fl.Next(func(line podlogs.Line, pos podlogs.Position) { a.line(f, enc, line, pos) })
}

// line hands one line of f to the Sender, encoded by enc, or drops it if f is over its rate
// bound. The bound is checked first: a dropped line encodes nothing.
func (a *Agent) line(f *followed, enc *loggregator.LogEncoder, line podlogs.Line, pos podlogs.Position) {
	a.counters.linesRead.Add(1)
	now := time.Now()
	ok, notice := a.bound.Admit(f.source, len(line.Text), now)
	if !ok {
		if notice != "" {
			// Diego's notice, as its log streamer sends it: stdout, the instance's own
			// identity and tags, stamped now.
			env := enc.Encode(now, loggregator_v2.Log_OUT, notice)
			if a.sender.EmitEncoded(a.ctx, f.source, env, nil) != nil {
				return
			}
		}
		a.passed(f, pos)
		return
	}
	typ := loggregator_v2.Log_OUT
	if line.Stream == podlogs.Stderr {
		typ = loggregator_v2.Log_ERR
	}
	env := enc.Encode(line.Time, typ, line.Text)
	f.mu.Lock()
	f.inflight++
	f.skipped = nil // this line's acknowledgement records a later position
	f.mu.Unlock()
	// Back pressure: while the buffer is full this waits, and the file stays unread past this
	// line. It fails only when the agent stops (the follower stops too).
	_ = a.sender.EmitEncoded(a.ctx, f.source, env, a.ackOf(f, pos))
}

// ackOf is the acknowledgement of the line before pos. It is made here, not in line, so that
// only a line that is sent moves pos to the heap: a dropped line allocates nothing.
func (a *Agent) ackOf(f *followed, pos podlogs.Position) func() {
	return func() { a.acked(f, pos) }
}

// acked records pos once the batch holding its line is delivered (or the position after lines
// the rate bound dropped since, once nothing of f waits for delivery).
func (a *Agent) acked(f *followed, pos podlogs.Position) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removed {
		return
	}
	f.inflight--
	if f.inflight == 0 && f.skipped != nil {
		pos, f.skipped = *f.skipped, nil
	}
	a.ckpts.Set(f.key, pos)
	a.saveSoon()
}

// passed records pos, the position after a line the rate bound dropped: at once if nothing of
// f waits for delivery, else once the lines before it are acknowledged. A dropped line is not
// read again after a restart, even at the very end of a file.
func (a *Agent) passed(f *followed, pos podlogs.Position) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removed {
		return
	}
	if f.inflight > 0 {
		skipped := pos // a copy, so that only this branch allocates
		f.skipped = &skipped
		return
	}
	a.ckpts.Set(f.key, pos)
	a.saveSoon()
}

// instance is who a followed pod's envelopes are about.
type instance struct {
	// logs is the identity of its lines, Diego's: source_id the app guid, which `cf logs` reads.
	logs loggregator.Identity
	// gaugeSource is the source_id of its container gauges: the process guid (CC's guid, the
	// workload's guid), the source CC's OPI mode reads an instance's usage from; for a task,
	// whose usage CC reads nowhere, the task guid.
	gaugeSource string
}

// identity is who f's envelopes are about now. Without the pod's workload or Job in the caches
// it is the last one resolved, or, for the final read of a pod never resolved, what the pod's
// labels say.
func (a *Agent) identity(f *followed, final bool) (instance, bool) {
	p := f.current()
	in, ok := a.resolve(p)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case ok:
		f.last = &in
	case f.last != nil:
		in, ok = *f.last, true
	case final:
		in, ok = labelIdentity(p), true
	}
	return in, ok
}

func (a *Agent) resolve(p *nodePod) (instance, bool) {
	if p.Task {
		j, ok := a.reader.Job(p.JobName)
		if !ok {
			return instance{}, false
		}
		tags := loggregator.AppTags{
			SourceType: loggregator.TaskSourceType(j.TaskName),
			AppID:      j.AppGUID, AppName: j.AppName,
			SpaceID: j.SpaceGUID, SpaceName: j.SpaceName,
			OrgID: j.OrgGUID, OrgName: j.OrgName,
			ProcessInstanceID: string(p.UID),
		}
		return instance{
			logs:        loggregator.Identity{SourceID: j.AppGUID, InstanceID: "0", Tags: tags.Map()},
			gaugeSource: j.TaskGUID,
		}, true
	}
	w := a.reader.Workload(p.record.ID())
	if w == nil {
		return instance{}, false
	}
	return instance{
		logs:        instances.LogIdentity(w, p.record, a.reader.Index(p.record, w), ""),
		gaugeSource: w.GUID,
	}, true
}

// labelIdentity is what a pod's own labels say of it (its owner gone from the caches).
func labelIdentity(p *nodePod) instance {
	app := p.Labels[names.LabelAppGUID]
	if p.Task {
		return instance{logs: loggregator.Identity{SourceID: app, InstanceID: "0", Tags: loggregator.AppTags{
			SourceType: loggregator.TaskSourceType(p.JobName), AppID: app, ProcessInstanceID: string(p.UID),
		}.Map()}}
	}
	processType := p.Labels[names.LabelProcessType]
	if processType == "" {
		processType = "web"
	}
	guid := p.Labels[names.LabelGUID]
	return instance{
		logs: loggregator.Identity{SourceID: app, InstanceID: strconv.Itoa(int(max(p.record.Ordinal, 0))), Tags: loggregator.AppTags{
			SourceType: loggregator.ProcessSourceType(processType), AppID: app,
			ProcessID: guid, ProcessType: processType, ProcessInstanceID: string(p.UID),
		}.Map()},
		gaugeSource: guid,
	}
}

// countMalformed adds the lines fl skipped as no CRI lines, beyond the counted already, to the
// agent's count and returns fl's count; the container's first is logged (not each: a program
// writing garbage would flood the log).
func (a *Agent) countMalformed(fl *podlogs.Follower, counted uint64, logger lager.Logger) uint64 {
	n := fl.Malformed()
	if n == counted {
		return n
	}
	if counted == 0 {
		logger.Error("log-line-malformed", errors.New("a line of the container's log files is no CRI log line: skipped"), lager.Data{"count": n})
	}
	a.malformed.Add(n - counted)
	return n
}

// reportLost counts and logs the files of f that went before they were read (rotated away past
// what the kubelet keeps, while the agent was down or waited for Loggregator).
func (a *Agent) reportLost(fl *podlogs.Follower, f *followed) {
	for _, l := range fl.Lost() {
		a.lostFiles.Add(1)
		a.logger.Error("log-file-lost", errors.New("the log file went before it was read to its end"), lager.Data{
			"container": f.key, "file": l.Name, "unread-from": l.Offset,
		})
	}
}
