// Package store is the backend's read side: the informers' records (their transforms), the
// look-ups every read is served from, the change counters the lists are versioned by, the waits
// that make a write visible to reads before it answers, and the sync gate (no call is served
// before the caches are synced, no write while a cache is not watching).
//
// It is handed the informers of the one shared factory the root builds (workloads, pods, Jobs)
// and adds its indexers and transforms to them before they start, so that the change counter is
// registered before the informers start. It imports no hook: what the read path decodes lives
// here or in package k8s/internal/objects.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// DefaultReadWaitTimeout is how long a write waits for the caches to observe it before it
// checks that the API server answers (see Options.ReadWaitTimeout).
const DefaultReadWaitTimeout = 5 * time.Second

// watchGrace is how long a cache may go without a LIST or WATCH in flight before it counts as
// not watching: longer than the moment between a watch that ends at its timeout and the next,
// and than the reflector's first retry (0.8 to 1.6 s) after a blip.
const watchGrace = 2 * time.Second

// contactPeriod is how recent what opi's requests told of the API server must be to decide
// whether it answers without asking it; older, the probe (Config.Probe) asks.
const contactPeriod = 5 * time.Second

// probeTimeout bounds the probe: an API server that does not answer a GET /readyz in it is not
// answering.
const probeTimeout = 2 * time.Second

// recheckInterval is how often a write waiting past its read wait timeout checks that the API
// server still answers (and, every few of them, whether the object it wrote is still live: see
// WaitFor).
const recheckInterval = time.Second

// Options are the store's settings.
type Options struct {
	// ReadWaitTimeout is how long a write waits for the informer cache to observe it (default
	// DefaultReadWaitTimeout) before it checks that the API server answers. While it answers,
	// the write keeps waiting, up to its own deadline (a watch is being re-established: the
	// reflector may pause up to a minute between attempts; or a watch is open but late, as
	// under a burst); when it does not, or the write has no deadline, the write answers
	// opi.ErrUnavailable (503): what it wrote is kept, and repeating it completes it.
	ReadWaitTimeout time.Duration
}

// WorkloadLister lists workloads from the API server, as records (the workload kind's List).
type WorkloadLister func(ctx context.Context, opts metav1.ListOptions) ([]*WorkloadRecord, error)

// Config is what the store is built with: its settings and what it is handed.
type Config struct {
	Options
	// Namespace is the informers' namespace.
	Namespace string
	// Workloads, Pods and Jobs are the informers of the root's factory (not started yet).
	Workloads, Pods, Jobs cache.SharedIndexInformer
	// Resources name the three caches as apiclient.Watches does ("deployments", "pods", "jobs").
	Resources [3]string
	// KindName is the workload kind in lower case, for messages ("deployment").
	KindName string
	// ByOrdinal: instances are indexed by the pods' ordinals (StatefulSets).
	ByOrdinal bool
	// ListWorkloads reads workloads the cache does not have (yet) from the API server.
	ListWorkloads WorkloadLister
	// Watches, when set, follows the client's LISTs and WATCHes and whether the API server
	// answers: while a cache is not watching and the API server does not answer, writes answer
	// ErrUnavailable (CheckWritable), and the janitor waits (CheckWatching). Nil: the caches are
	// taken to be watching once synced.
	Watches *apiclient.Watches
	// Probe asks the API server whether it answers (a GET /readyz), when what opi's requests
	// told of it is not recent (see CheckWritable). Its requests go through Watches' transport.
	// Nil: an API server nothing was heard from lately counts as answering.
	Probe  func(ctx context.Context) error
	Logger lager.Logger
}

// Store serves reads from the caches. Build it with New before the informers start.
type Store struct {
	cfg Config

	synced atomic.Bool
	// changed fires on every change of the workload, pod and Job caches: a write waiting until
	// the cache holds what it wrote looks again then (see countChanges).
	changed kube.Signal
	// The changes of the caches the LRP and task lists are built from (their versions).
	workloadChanges, jobChanges atomic.Uint64
}

// lrpIndex indexes workloads and pods by "<guid>/<version>" from their labels, so a read by
// LRP identifier does not depend on the object's name (which also carries app/space names).
const lrpIndex = "lrp"

func lrpIndexKey(id opi.LRPIdentifier) string { return id.GUID + "/" + id.Version }

func indexByLRP(obj any) ([]string, error) {
	r, ok := obj.(interface{ LRPKey() string })
	if !ok || r.LRPKey() == "" {
		return nil, nil
	}
	return []string{r.LRPKey()}, nil
}

// appIndex indexes workloads by their app guid label, for a task's egress rules (those of its
// app's LRP).
const appIndex = "app"

func indexByApp(obj any) ([]string, error) {
	r, ok := obj.(*WorkloadRecord)
	if !ok || r.AppGUID == "" {
		return nil, nil
	}
	return []string{r.AppGUID}, nil
}

// changesIndex is the name of an index that holds nothing: its function (countChanges) counts
// an informer cache's changes and wakes the writes waiting for the caches.
const changesIndex = "changes"

// New adds the store's indexers and transforms to the informers in cfg (which must not have
// started) and returns the store.
func New(cfg Config) *Store {
	if cfg.ReadWaitTimeout <= 0 {
		cfg.ReadWaitTimeout = DefaultReadWaitTimeout
	}
	s := &Store{cfg: cfg}
	logger := cfg.Logger
	add := func(name string, informer cache.SharedIndexInformer, indexers cache.Indexers, transform cache.TransformFunc) {
		// AddIndexers does not fail on an informer that has not started, nor does SetTransform.
		if err := informer.AddIndexers(indexers); err != nil {
			logger.Error("add-indexer", err, lager.Data{"informer": name})
		}
		if err := informer.SetTransform(transform); err != nil {
			logger.Error("set-transform", err, lager.Data{"informer": name})
		}
	}
	add("workloads", cfg.Workloads, cache.Indexers{lrpIndex: indexByLRP, appIndex: indexByApp, changesIndex: s.countChanges(&s.workloadChanges)}, RecordWorkload)
	add("pods", cfg.Pods, cache.Indexers{lrpIndex: indexByLRP, changesIndex: s.countChanges(nil)}, RecordPod)
	add("jobs", cfg.Jobs, cache.Indexers{changesIndex: s.countChanges(&s.jobChanges)}, RecordJob)
	return s
}

// countChanges is the index function of an informer's changes (see changesIndex): it counts
// them in c (when not nil) and wakes the writes waiting for the caches (WaitFor). The informer's
// store calls it under its lock, with the change already in place, for every object it adds,
// updates, deletes or replaces: a waiter woken by it reads the cache once the change is
// visible, and a reader that sees the change finds the count already past it (an event
// handler, called later and asynchronously, would give neither).
func (s *Store) countChanges(c *atomic.Uint64) cache.IndexFunc {
	return func(any) ([]string, error) {
		if c != nil {
			c.Add(1)
		}
		s.changed.Fire()
		return nil, nil
	}
}

// WorkloadChanges is the number of changes the workload cache has seen: the LRP list's version.
func (s *Store) WorkloadChanges() uint64 { return s.workloadChanges.Load() }

// JobChanges is the number of changes the Job cache has seen: the task list's version.
func (s *Store) JobChanges() uint64 { return s.jobChanges.Load() }

// The sync gate.

// SetSynced opens the gate: Start calls it once the caches are synced and the hooks started.
func (s *Store) SetSynced() { s.synced.Store(true) }

// CheckSynced fails with opi.ErrUnavailable until the caches are synced.
func (s *Store) CheckSynced() error {
	if !s.synced.Load() {
		return fmt.Errorf("%w: caches not synced", opi.ErrUnavailable)
	}
	return nil
}

// CheckWritable is CheckSynced for the calls that write and then wait for the caches to see
// it: it also fails while a cache is not watching the API server (Config.Watches) and the API
// server does not answer (an outage: the write would fail or hang). A cache whose watch is being
// re-established while the API server answers is no outage: the API server ends watches
// routinely, and the write's wait for the cache (WaitFor) waits for the watch to be back.
func (s *Store) CheckWritable(ctx context.Context) error {
	if err := s.CheckSynced(); err != nil {
		return err
	}
	unwatched := s.unwatched()
	if len(unwatched) == 0 {
		return nil
	}
	if err := s.apiServerAnswers(ctx); err != nil {
		return fmt.Errorf("%w: caches not watching the api server (%s) and it does not answer: %w", opi.ErrUnavailable, strings.Join(unwatched, ", "), err)
	}
	return nil
}

// CheckWatching is CheckSynced for work that takes the caches for the cluster's state (the
// janitor: what a stale cache lacks would look like leftovers): it also fails while a cache
// is not watching the API server, whether or not the API server answers.
func (s *Store) CheckWatching() error {
	if err := s.CheckSynced(); err != nil {
		return err
	}
	if unwatched := s.unwatched(); len(unwatched) > 0 {
		return fmt.Errorf("%w: caches not watching the api server yet (%s)", opi.ErrUnavailable, strings.Join(unwatched, ", "))
	}
	return nil
}

func (s *Store) unwatched() []string {
	if s.cfg.Watches == nil {
		return nil
	}
	return s.cfg.Watches.Unwatched(s.cfg.Resources[:], watchGrace)
}

// errUnreachable is what the last request that failed to reach the API server meant.
var errUnreachable = errors.New("api server unreachable")

// apiServerAnswers says, as an error, whether the API server answers: from what opi's requests
// told of it within contactPeriod, or else from the probe, bounded by probeTimeout.
func (s *Store) apiServerAnswers(ctx context.Context) error {
	if s.cfg.Watches == nil {
		return nil
	}
	switch s.cfg.Watches.Contact(contactPeriod) {
	case apiclient.ContactAnswered:
		return nil
	case apiclient.ContactUnreachable:
		return errUnreachable
	}
	if s.cfg.Probe == nil {
		return nil
	}
	probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := s.cfg.Probe(probeCtx); err != nil {
		return fmt.Errorf("probe api server: %w", err)
	}
	return nil
}

// Look-ups. Every record returned is shared: do not modify.

// Workload is the LRP's workload as the cache holds it, nil when absent or being deleted.
func (s *Store) Workload(id opi.LRPIdentifier) *WorkloadRecord {
	objs, err := s.cfg.Workloads.GetIndexer().ByIndex(lrpIndex, lrpIndexKey(id))
	if err != nil {
		return nil
	}
	var found *WorkloadRecord
	for _, obj := range objs {
		d, ok := obj.(*WorkloadRecord)
		if !ok || d.DeletionTimestamp != nil {
			continue
		}
		if found == nil || d.Name < found.Name {
			found = d
		}
	}
	return found
}

// AppEgressRules are the egress rules of the app's LRP (found: the app has one): the newest of
// its workloads in the cache, as LRPs of one app (its processes, versions) share its security
// groups and the newest is the one CC desired last.
func (s *Store) AppEgressRules(appGUID string) (rules []opi.EgressRule, found bool) {
	objs, err := s.cfg.Workloads.GetIndexer().ByIndex(appIndex, names.LabelValue(appGUID))
	if err != nil || appGUID == "" {
		return nil, false
	}
	var newest *WorkloadRecord
	for _, obj := range objs {
		d, ok := obj.(*WorkloadRecord)
		if !ok || d.DeletionTimestamp != nil {
			continue
		}
		if newest == nil || d.CreationTimestamp.After(newest.CreationTimestamp.Time) ||
			(d.CreationTimestamp.Equal(&newest.CreationTimestamp) && d.Name < newest.Name) {
			newest = d
		}
	}
	if newest == nil {
		return nil, false
	}
	return objects.ParseEgressAnnotation(newest.EgressAnnotation), true
}

// WorkloadByName is the named workload as the cache holds it.
func (s *Store) WorkloadByName(name string) (*WorkloadRecord, bool) {
	return recordByKey[*WorkloadRecord](s.cfg.Workloads, s.cfg.Namespace+"/"+name)
}

// Workloads are every workload the cache holds.
func (s *Store) Workloads() []*WorkloadRecord {
	return recordsOf[*WorkloadRecord](s.cfg.Workloads.GetIndexer().List())
}

// Pods are the LRP's pods as the cache holds them.
func (s *Store) Pods(id opi.LRPIdentifier) []*PodRecord {
	objs, err := s.cfg.Pods.GetIndexer().ByIndex(lrpIndex, lrpIndexKey(id))
	if err != nil {
		return nil
	}
	return recordsOf[*PodRecord](objs)
}

// PodByKey is the pod of the cache key ("namespace/name").
func (s *Store) PodByKey(key string) (*PodRecord, bool) {
	return recordByKey[*PodRecord](s.cfg.Pods, key)
}

// Instances are the pods that report w's instances (InstancePods over the LRP's cached pods).
func (s *Store) Instances(w *WorkloadRecord) []*PodRecord {
	return InstancePods(s.Pods(w.ID()), w, s.cfg.ByOrdinal)
}

// InstanceIndex is the pod's index as GetInstances reports it (see InstanceIndex).
func (s *Store) InstanceIndex(pod *PodRecord) int32 {
	return InstanceIndex(pod, s.Pods(pod.ID()), s.Workload(pod.ID()), s.cfg.ByOrdinal)
}

// InstanceIndexer gives each of pods, the LRP's pods, with w its workload (nil when gone), the
// index InstanceIndex gives it, ranking them once (see the function InstanceIndexer).
func (s *Store) InstanceIndexer(pods []*PodRecord, w *WorkloadRecord) func(pod *PodRecord) int32 {
	return InstanceIndexer(pods, w, s.cfg.ByOrdinal)
}

// Job is the named Job as the cache holds it.
func (s *Store) Job(name string) (*JobRecord, bool) {
	return recordByKey[*JobRecord](s.cfg.Jobs, s.cfg.Namespace+"/"+name)
}

// Jobs are every Job the cache holds.
func (s *Store) Jobs() []*JobRecord {
	return recordsOf[*JobRecord](s.cfg.Jobs.GetIndexer().List())
}

// recordByKey is the record of the cache key ("namespace/name") in informer's cache.
func recordByKey[R any](informer cache.SharedIndexInformer, key string) (R, bool) {
	obj, exists, err := informer.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		var zero R
		return zero, false
	}
	r, ok := obj.(R)
	return r, ok
}

func recordsOf[R any](objs []any) []R {
	out := make([]R, 0, len(objs))
	for _, obj := range objs {
		if r, ok := obj.(R); ok {
			out = append(out, r)
		}
	}
	return out
}

// Handlers of the caches' events, for leader work driven by them (the reporters).

// AddPodHandler registers h on the pod informer: it is replayed every cached pod at once.
func (s *Store) AddPodHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return s.cfg.Pods.AddEventHandler(h)
}

// RemovePodHandler removes a handler AddPodHandler registered.
func (s *Store) RemovePodHandler(r cache.ResourceEventHandlerRegistration) error {
	return s.cfg.Pods.RemoveEventHandler(r)
}

// AddWorkloadHandler registers h on the workload informer: it is replayed every cached
// workload at once.
func (s *Store) AddWorkloadHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return s.cfg.Workloads.AddEventHandler(h)
}

// RemoveWorkloadHandler removes a handler AddWorkloadHandler registered.
func (s *Store) RemoveWorkloadHandler(r cache.ResourceEventHandlerRegistration) error {
	return s.cfg.Workloads.RemoveEventHandler(r)
}

// AddJobHandler registers h on the Job informer: it is replayed every cached Job at once.
func (s *Store) AddJobHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return s.cfg.Jobs.AddEventHandler(h)
}

// RemoveJobHandler removes a handler AddJobHandler registered.
func (s *Store) RemoveJobHandler(r cache.ResourceEventHandlerRegistration) error {
	return s.cfg.Jobs.RemoveEventHandler(r)
}

// FindWorkload is the LRP's live workload: from the cache, or, when the cache does not
// have it (yet), from one label-selected LIST, since the name cannot be derived from the
// identifier alone. ErrNotFound when neither has it.
func (s *Store) FindWorkload(ctx context.Context, id opi.LRPIdentifier) (*WorkloadRecord, error) {
	if d := s.Workload(id); d != nil {
		return d, nil
	}
	list, err := s.cfg.ListWorkloads(ctx, metav1.ListOptions{LabelSelector: names.LRPSelector(id)})
	if err != nil {
		return nil, kube.APIError(err, "list "+s.cfg.KindName+"s")
	}
	for _, w := range list {
		if w.DeletionTimestamp == nil {
			return w, nil
		}
	}
	return nil, NotFound(id)
}

// NotFound is the error for an LRP this backend does not run.
func NotFound(id opi.LRPIdentifier) error {
	return fmt.Errorf("lrp %s: %w", id.ProcessGUID(), opi.ErrNotFound)
}
