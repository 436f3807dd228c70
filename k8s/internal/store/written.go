package store

import (
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/kube"
)

// A desire answers once its writes return: the workload its create (or get) returned is read
// from then on, before the informer's watch delivers it (ADR 0011). Waiting for the watch made
// a desire under a burst wait as long again as its writes took; the reads' promise (a read
// after a write's answer sees it) is kept by this overlay of written workloads instead.
//
// The rules, which make the overlay never show what the API server no longer has for longer than
// writtenTTL, and never hide what the watch delivered:
//   - Wrote adds a record unless the cache (or the overlay) holds that name at its version or
//     later, or the watch delivered the delete of its uid within writtenTTL.
//   - A read takes, for each name, the cache's record when it is at the overlay's version or
//     later (a namesake created after it included), else the overlay's.
//   - The informer's events drop an entry: one of its name at its version or later (the cache
//     now serves it), or the delete of its uid. An entry the watch never confirms (the cache
//     far behind, or a workload created and deleted while the watch was being re-established)
//     is dropped after writtenTTL.
//
// The overlay holds only what the API server answered, so a restart loses nothing: the caches
// list it again.

// writtenTTL bounds how long the overlay serves a workload the watch has not confirmed. A watch
// late by this much is an outage: the cache's readers see what it holds, as before the overlay.
const writtenTTL = time.Minute

// written is the overlay of workloads opi wrote and the watch has not delivered yet.
type written struct {
	mu sync.Mutex
	// entries are by cache key ("namespace/name").
	entries map[string]*WorkloadRecord
	// deleted are the uids whose delete the watch delivered, with when, kept writtenTTL: a
	// Wrote that comes after the delete of what it wrote adds nothing.
	deleted   map[types.UID]time.Time
	lastPrune time.Time
	ttl       time.Duration
	// size is len(entries), read without the lock: reads skip the overlay when it is empty.
	size atomic.Int64
}

func newWritten() *written {
	return &written{entries: map[string]*WorkloadRecord{}, deleted: map[types.UID]time.Time{}, ttl: writtenTTL}
}

func (s *Store) workloadKey(name string) string { return s.cfg.Namespace + "/" + name }

// overlayChanged counts a change of what the workload reads show and wakes the writes waiting
// for the caches (as countChanges does for the informer's changes).
func (s *Store) overlayChanged() {
	s.workloadChanges.Add(1)
	s.changed.Fire()
}

// Wrote makes workload w, as a write's answer from the API server returned it (a Deployment or
// StatefulSet), read from now on, as if the watch had delivered it (see written).
func (s *Store) Wrote(w metav1.Object) {
	r, ok := mustRecord(w)
	if !ok {
		return
	}
	key := s.workloadKey(r.Name)
	o := s.written
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, gone := o.deleted[r.UID]; gone {
		return
	}
	if cached, exists := recordByKey[*WorkloadRecord](s.cfg.Workloads, key); exists && kube.Observed(cached.ResourceVersion, r.ResourceVersion) {
		return
	}
	if e, exists := o.entries[key]; exists && kube.Observed(e.ResourceVersion, r.ResourceVersion) {
		return
	}
	o.entries[key] = r
	o.size.Store(int64(len(o.entries)))
	time.AfterFunc(o.ttl, func() { s.dropWritten(key, r) })
	s.overlayChanged()
}

func mustRecord(w metav1.Object) (*WorkloadRecord, bool) {
	obj, _ := RecordWorkload(w)
	r, ok := obj.(*WorkloadRecord)
	return r, ok
}

// dropWritten removes r from the overlay, if it is still its entry.
func (s *Store) dropWritten(key string, r *WorkloadRecord) {
	o := s.written
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.entries[key] != r {
		return
	}
	delete(o.entries, key)
	o.size.Store(int64(len(o.entries)))
	s.overlayChanged()
}

// writtenHandler follows the informer's events for the overlay (see written). Entries the
// cache serves now go without a change count: the reads already prefer the cache's record.
func (s *Store) writtenHandler() cache.ResourceEventHandler {
	seen := func(obj any) {
		r, ok := obj.(*WorkloadRecord)
		if !ok {
			return
		}
		o := s.written
		o.mu.Lock()
		defer o.mu.Unlock()
		key := s.workloadKey(r.Name)
		if e, exists := o.entries[key]; exists && kube.Observed(r.ResourceVersion, e.ResourceVersion) {
			delete(o.entries, key)
			o.size.Store(int64(len(o.entries)))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen(obj) },
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			r, ok := obj.(*WorkloadRecord)
			if !ok {
				return
			}
			o := s.written
			o.mu.Lock()
			defer o.mu.Unlock()
			now := time.Now()
			o.deleted[r.UID] = now
			if now.Sub(o.lastPrune) > o.ttl {
				for uid, at := range o.deleted {
					if now.Sub(at) > o.ttl {
						delete(o.deleted, uid)
					}
				}
				o.lastPrune = now
			}
			key := s.workloadKey(r.Name)
			if e, exists := o.entries[key]; exists && e.UID == r.UID {
				delete(o.entries, key)
				o.size.Store(int64(len(o.entries)))
				s.overlayChanged()
			}
		},
	}
}

// overlay is a copy of the overlay's entries, nil when it is empty.
func (s *Store) overlay() map[string]*WorkloadRecord {
	o := s.written
	if o.size.Load() == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]*WorkloadRecord, len(o.entries))
	for k, r := range o.entries {
		out[k] = r
	}
	return out
}

// newer is the record a read takes of a name: the cache's when it is at the overlay's version
// or later, else the overlay's (either may be nil).
func newer(cached, wrote *WorkloadRecord) *WorkloadRecord {
	if wrote == nil || (cached != nil && kube.Observed(cached.ResourceVersion, wrote.ResourceVersion)) {
		return cached
	}
	return wrote
}

// writtenByName is the overlay's entry of the name, nil when none.
func (s *Store) writtenByName(name string) *WorkloadRecord {
	o := s.written
	if o.size.Load() == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.entries[s.workloadKey(name)]
}

// withOverlay is records (the cache's, of a selection match tells) with the overlay applied:
// each name's newer record (see newer) where it matches, and the overlay's matching names that
// records lack added unless the cache holds them newer.
func (s *Store) withOverlay(records []*WorkloadRecord, match func(*WorkloadRecord) bool) []*WorkloadRecord {
	over := s.overlay()
	if over == nil {
		return records
	}
	out := records[:0]
	for _, r := range records {
		key := s.workloadKey(r.Name)
		w, exists := over[key]
		if !exists {
			out = append(out, r)
			continue
		}
		delete(over, key)
		if r = newer(r, w); match(r) {
			out = append(out, r)
		}
	}
	for key, w := range over {
		if !match(w) {
			continue
		}
		if cached, exists := recordByKey[*WorkloadRecord](s.cfg.Workloads, key); exists && newer(cached, w) == cached {
			continue // the cache holds the name newer, outside the selection
		}
		out = append(out, w)
	}
	return out
}

// CachedWorkloadCount is how many workloads the informer's cache holds, the overlay aside.
func (s *Store) CachedWorkloadCount() int { return len(s.cfg.Workloads.GetIndexer().ListKeys()) }
