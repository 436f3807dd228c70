// Package lifecycle sends the lifecycle lines a Diego cell sends for every app instance (source
// type CELL) from opi's leader, which sees every pod, also those no node has taken: an
// instance being created, placed on a node or not (with the scheduler's reason), its container
// started, healthy, exiting (with its status and reason), stopped and destroyed. It is leader
// work driven by the store's pod and workload events; each line is one Loggregator v2 log
// envelope handed to an Emitter (package loggregator's Sender), with the app guid as source_id,
// the index CC shows as instance_id and the tags of the instance's app logs.
//
// Each step of a pod is sent once per leader term. A new term (a restart of opi, another
// replica leading) starts from what the pods show: a step whose time the pod records as before
// the term began (in the API server's whole seconds) was the earlier leader's to send and is
// not sent again, so a leader change repeats at most the steps of the second it began in.
package lifecycle

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3"
	"k8s.io/client-go/util/workqueue"

	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/k8s/internal/queue"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate
//counterfeiter:generate . Cache
//counterfeiter:generate . Emitter

// SourceType is the source_type of the lines: Diego's cell's.
const SourceType = "CELL"

// Cache is what the reporter reads of the store (package k8s/internal/store's *Store).
type Cache interface {
	Workload(id opi.LRPIdentifier) *store.WorkloadRecord
	Pods(id opi.LRPIdentifier) []*store.PodRecord
	store.LRPEvents
}

// Emitter takes envelopes for delivery without blocking (package loggregator's *Sender): false
// means it dropped the envelope (its buffer is full; it counts and logs that itself).
type Emitter interface {
	Emit(env *loggregator_v2.Envelope, ack func()) bool
}

// Deps are what the reporter is handed.
type Deps struct {
	Cache   Cache
	Emitter Emitter
	// ByOrdinal: instances are StatefulSet ordinals (store.InstancePods).
	ByOrdinal bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Reporter sends the lines; Run is its leader work.
type Reporter struct {
	cache     Cache
	emitter   Emitter
	byOrdinal bool
	now       func() time.Time
	logger    lager.Logger

	mu sync.Mutex
	// begun is when the current term began, in Unix seconds; pods what was sent of each pod
	// (by uid) this term, lrps the pod uids of each LRP (by its lrp index key).
	begun int64
	pods  map[string]*podState
	lrps  map[string]map[string]bool
}

// podState is what was sent of one pod.
type podState struct {
	id                                loggregator.Identity
	node                              string
	created, scheduled, unschedulable bool
	started, healthy, stopping        bool
	exits                             int32
}

// New makes the reporter; a cache and an emitter are needed.
func New(logger lager.Logger, deps Deps) (*Reporter, error) {
	if deps.Cache == nil || deps.Emitter == nil {
		return nil, errors.New("lifecycle lines need a cache and an emitter")
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	return &Reporter{cache: deps.Cache, emitter: deps.Emitter, byOrdinal: deps.ByOrdinal, now: now,
		logger: logger.Session("lifecycle"), pods: map[string]*podState{}, lrps: map[string]map[string]bool{}}, nil
}

// Run is the leader work: it begins a term (forgetting what an earlier one sent), follows the
// pods and workloads until ctx ends and sends each LRP's new steps. The caches must be synced.
func (r *Reporter) Run(ctx context.Context) {
	r.begin()
	q := queue.New(queue.Config[string]{
		Name:        "lifecycle",
		Workers:     1,
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string](),
	})
	stop, err := store.FollowLRPs(r.cache, q.Add)
	if err != nil {
		r.logger.Error("add-event-handler", err)
		q.ShutDown()
		return
	}
	defer stop()
	r.logger.Info("started")
	q.Run(ctx, func(_ context.Context, key string) (time.Duration, error) {
		r.Sync(key)
		return 0, nil
	})
	r.logger.Info("stopped")
}

// begin starts a term: nothing is taken as sent, and what pods show as before now is old.
func (r *Reporter) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begun = r.now().Unix()
	r.pods = map[string]*podState{}
	r.lrps = map[string]map[string]bool{}
}

// Sync sends the new steps of the pods of one LRP (by its lrp index key), and the end of those
// gone from the cache since the last sync.
func (r *Reporter) Sync(lrpKey string) {
	id := store.LRPFromKey(lrpKey)
	w := r.cache.Workload(id)
	pods := r.cache.Pods(id)
	// The index CC shows, ranked once for the LRP; pods being deleted keep the index they last
	// had.
	var indexOf func(*store.PodRecord) int32
	if w != nil {
		indexOf = store.InstanceIndexer(pods, w, r.byOrdinal)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	seen := map[string]bool{}
	for _, p := range pods {
		uid := string(p.UID)
		seen[uid] = true
		st := r.pods[uid]
		if st == nil {
			if w == nil {
				continue // its workload is not in the cache (yet): nothing to tag the lines with
			}
			st = r.firstSight(p)
			r.pods[uid] = st
			if r.lrps[lrpKey] == nil {
				r.lrps[lrpKey] = map[string]bool{}
			}
			r.lrps[lrpKey][uid] = true
		}
		if w != nil && p.DeletionTimestamp == nil {
			st.id = identity(w, p, indexOf(p))
		}
		if p.Node != "" {
			st.node = p.Node
		}
		r.steps(now, p, st)
	}
	for uid := range r.lrps[lrpKey] {
		if seen[uid] {
			continue
		}
		st := r.pods[uid]
		if !st.stopping {
			r.send(now, st, r.cell(st, "stopping instance "+uid))
		}
		r.send(now, st, r.cell(st, "destroying container for instance "+uid))
		r.send(now, st, r.cell(st, "successfully destroyed container for instance "+uid))
		delete(r.pods, uid)
		delete(r.lrps[lrpKey], uid)
	}
	if len(r.lrps[lrpKey]) == 0 {
		delete(r.lrps, lrpKey)
	}
}

// firstSight is the state of a pod first seen this term: the steps it shows as done before the
// term began are taken as sent.
func (r *Reporter) firstSight(p *store.PodRecord) *podState {
	old := func(t int64) bool { return t < r.begun }
	st := &podState{
		created:       old(p.CreationTimestamp.Unix()),
		scheduled:     p.Steps.ScheduledAt != 0 && old(p.Steps.ScheduledAt),
		unschedulable: p.Steps.Unschedulable != "" && old(p.Steps.UnschedulableAt),
		started:       p.Steps.StartedAt != 0 && old(p.Steps.StartedAt),
		healthy:       p.ReadySince != 0 && old(p.ReadySince/int64(time.Second)),
	}
	if p.DeletionTimestamp != nil {
		grace := int64(0)
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		st.stopping = old(p.DeletionTimestamp.Unix() - grace)
	}
	if c := p.Crash; c != nil {
		// The last exit is new only if the pod says it ended this term; the ones before it
		// were the earlier leader's.
		st.exits = c.Count
		if c.FinishedAt != 0 && !old(c.FinishedAt) {
			st.exits--
		}
	}
	return st
}

// steps sends the steps of p not sent yet, in the order a cell goes through them.
func (r *Reporter) steps(now time.Time, p *store.PodRecord, st *podState) {
	uid := string(p.UID)
	if !st.created {
		st.created = true
		r.send(now, st, "Creating instance "+uid)
	}
	if p.Steps.Unschedulable != "" && p.Node == "" && !st.unschedulable && !st.scheduled {
		st.unschedulable = true
		r.send(now, st, "No cell can place instance "+uid+": "+p.Steps.Unschedulable)
	}
	if p.Node != "" && !st.scheduled {
		st.scheduled = true
		r.send(now, st, r.cell(st, "creating container for instance "+uid))
	}
	if p.Steps.StartedAt != 0 && !st.started {
		st.started = true
		r.send(now, st, r.cell(st, "successfully created container for instance "+uid))
	}
	if p.ReadySince != 0 && !st.healthy {
		st.healthy = true
		r.send(now, st, "Container became healthy")
	}
	if c := p.Crash; c != nil && c.Count > st.exits {
		st.exits = c.Count
		line := "Exit status " + strconv.Itoa(int(c.ExitCode))
		if c.Reason != "" {
			line += " (" + c.Reason + ")"
		}
		r.send(now, st, line)
	}
	if p.DeletionTimestamp != nil && !st.stopping {
		st.stopping = true
		r.send(now, st, r.cell(st, "stopping instance "+uid))
	}
}

// cell is a line of the cell the instance is on, "Cell <node> <what>", or, before a node took
// it, the line without the cell.
func (r *Reporter) cell(st *podState, what string) string {
	if st.node == "" {
		return strings.ToUpper(what[:1]) + what[1:]
	}
	return "Cell " + st.node + " " + what
}

func (r *Reporter) send(now time.Time, st *podState, line string) {
	r.emitter.Emit(loggregator.NewLog(st.id, now, loggregator_v2.Log_OUT, []byte(line)), nil)
}

// identity is who a pod's lines are about: as its app logs' (package agent), with the CELL
// source type.
func identity(w *store.WorkloadRecord, p *store.PodRecord, index int32) loggregator.Identity {
	return instances.LogIdentity(w, p, index, SourceType)
}
