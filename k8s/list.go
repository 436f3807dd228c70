package k8s

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/opi-bridge/opi/opi"
)

var _ opi.LRPListVersioner = (*Backend)(nil)

// ListLRPs returns every LRP whose workload the cache holds and which is not being deleted,
// ordered by guid and version, with its scheduling fields only (see schedulingLRP). It makes
// no API call. The LRPs are shared between calls: callers must not modify them.
func (b *Backend) ListLRPs(ctx context.Context) ([]*opi.LRP, error) {
	lrps, _, err := b.ListLRPsVersioned(ctx)
	return lrps, err
}

// LRPListVersion is the number of changes the workload cache has seen (see changeCounter).
func (b *Backend) LRPListVersion(_ context.Context) (uint64, error) {
	if err := b.checkSynced(); err != nil {
		return 0, err
	}
	return b.workloadChanges.count(), nil
}

// ListLRPsVersioned is ListLRPs and the workload cache's version, read before the list.
//
// CC lists every app every 30 seconds, and between two lists most apps do not change; so the
// sorted list is kept and reused for as long as the cache does not change. A list of
// thousands of apps then allocates next to nothing, which matters for a heap kept small by a
// low GC target.
func (b *Backend) ListLRPsVersioned(_ context.Context) ([]*opi.LRP, uint64, error) {
	if err := b.checkSynced(); err != nil {
		return nil, 0, err
	}
	version := b.workloadChanges.count()
	lrps := b.list.get(version, func() []*opi.LRP {
		deployments := b.cachedWorkloads()
		lrps := make([]*opi.LRP, 0, len(deployments))
		for _, d := range deployments {
			if d.DeletionTimestamp == nil && d.guid != "" && d.version != "" {
				lrps = append(lrps, d.schedulingLRP())
			}
		}
		sortLRPs(lrps)
		return lrps
	})
	return lrps, version, nil
}

// changesIndex is the name of an index that holds nothing: its function (countChanges) counts
// an informer cache's changes and wakes the writes waiting for the caches.
const changesIndex = "changes"

// changeCounter counts the changes of an informer's cache at the moment they become visible
// (see countChanges).
type changeCounter struct {
	n atomic.Uint64
}

func (c *changeCounter) count() uint64 { return c.n.Load() }

// listCache is the last list a read built and the cache version it was built at.
type listCache[T any] struct {
	mu      sync.Mutex
	version uint64
	items   []T // nil until built
}

// get returns the list built at version, building it unless the last one was built at that
// version. A list built after its version was read may reflect later changes too, never
// fewer: whoever reads that version gets a list at least as new as the cache they read.
func (c *listCache[T]) get(version uint64, build func() []T) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items != nil && c.version == version {
		return c.items
	}
	c.items, c.version = build(), version
	return c.items
}
