package lrp

import (
	"context"
	"sort"

	"github.com/opi-bridge/opi/opi"
)

// ListLRPs returns every LRP whose workload the cache holds and which is not being deleted,
// ordered by guid and version, with its scheduling fields only (see store.WorkloadRecord.SchedulingLRP). It makes
// no API call.
func (s *Service) ListLRPs(ctx context.Context) ([]*opi.LRP, error) {
	lrps, _, err := s.ListLRPsVersioned(ctx)
	return lrps, err
}

// LRPListVersion is the number of changes the workload cache has seen (the store's
// WorkloadChanges).
func (s *Service) LRPListVersion(_ context.Context) (uint64, error) {
	if err := s.cache.CheckSynced(); err != nil {
		return 0, err
	}
	return s.cache.WorkloadChanges(), nil
}

// ListLRPsVersioned is ListLRPs and the workload cache's version, read before the list: a
// list built after its version was read may reflect later changes too, never fewer, so whoever
// reads that version gets a list at least as new as the cache they read.
//
// The list is built on every call and not kept: the handler keeps the encoded body of a version
// (handler/list_body.go) and so asks for the list once per version; a copy kept here as well
// (about 6 MB of opi.LRPs at 10,000 apps) would never be read again.
func (s *Service) ListLRPsVersioned(_ context.Context) ([]*opi.LRP, uint64, error) {
	if err := s.cache.CheckSynced(); err != nil {
		return nil, 0, err
	}
	version := s.cache.WorkloadChanges()
	workloads := s.cache.Workloads()
	lrps := make([]*opi.LRP, 0, len(workloads))
	for _, d := range workloads {
		if d.DeletionTimestamp == nil && d.GUID != "" && d.Version != "" {
			lrps = append(lrps, d.SchedulingLRP())
		}
	}
	sortLRPs(lrps)
	return lrps, version, nil
}

// sortLRPs orders LRPs by guid, then version, for stable lists (without building process guids:
// a list sorts thousands).
func sortLRPs(lrps []*opi.LRP) {
	sort.Slice(lrps, func(i, j int) bool {
		if lrps[i].GUID != lrps[j].GUID {
			return lrps[i].GUID < lrps[j].GUID
		}
		return lrps[i].Version < lrps[j].Version
	})
}
