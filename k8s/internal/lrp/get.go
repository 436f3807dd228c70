package lrp

import (
	"context"

	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

// GetLRP reads the LRP from the workload cache, by its guid and version labels (no API
// call). ErrNotFound when absent or being stopped.
func (s *Service) GetLRP(_ context.Context, id opi.LRPIdentifier) (*opi.LRP, error) {
	if err := s.cache.CheckSynced(); err != nil {
		return nil, err
	}
	d := s.cache.Workload(id)
	if d == nil {
		return nil, store.NotFound(id)
	}
	return d.LRP(), nil
}
