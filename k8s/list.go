package k8s

import (
	"context"
	"sync"

	"github.com/opi-bridge/opi/opi"
)

// ListLRPs returns every LRP whose workload the cache holds and which is not being deleted,
// ordered by guid and version, with its scheduling fields only (see schedulingLRP). It makes
// no API call. The LRPs are shared between calls: callers must not modify them.
//
// CC lists every app every 30 seconds, and between two lists most apps do not change; so the
// sorted list is kept and reused for as long as the cache holds the same records (a
// fingerprint of them, taken on every call, says so). A list of thousands of apps then allocates next to nothing, which matters for a heap
// kept small by a low GC target.
func (b *Backend) ListLRPs(_ context.Context) ([]*opi.LRP, error) {
	if err := b.checkSynced(); err != nil {
		return nil, err
	}
	deployments := b.cachedWorkloads()
	live := deployments[:0]
	for _, d := range deployments {
		if d.DeletionTimestamp == nil && d.lrpKey() != "" {
			live = append(live, d)
		}
	}
	return b.list.get(live), nil
}

// listCache is the last list ListLRPs built and the fingerprint of the records it came from.
type listCache struct {
	mu          sync.Mutex
	fingerprint uint64
	count       int
	lrps        []*opi.LRP
}

// get returns the scheduling LRPs of records, reusing the last list when the records are the
// same.
func (c *listCache) get(records []*workloadRecord) []*opi.LRP {
	fp := fingerprint(records)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lrps != nil && c.fingerprint == fp && c.count == len(records) {
		return c.lrps
	}
	lrps := make([]*opi.LRP, 0, len(records))
	for _, d := range records {
		lrps = append(lrps, d.schedulingLRP())
	}
	sortLRPs(lrps)
	c.fingerprint, c.count, c.lrps = fp, len(records), lrps
	return lrps
}

// fingerprint sums a hash of each record's sequence number. Records are never changed (a
// changed Deployment gets a new record with a new number), so any created, changed or deleted
// Deployment changes the sum, whatever the order the cache lists them in.
func fingerprint(records []*workloadRecord) uint64 {
	var sum uint64
	for _, d := range records {
		sum += mix(d.seq)
	}
	return sum
}

// mix spreads a hash's bits (splitmix64's finaliser), so that sums of hashes rarely collide.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
