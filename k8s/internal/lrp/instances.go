package lrp

import (
	"context"

	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

// GetInstances reports the LRP's instances from the pod cache (no API call): see store.InstancePods
// for which pods are instances and at which index. ErrNotFound when the LRP is absent.
func (s *Service) GetInstances(_ context.Context, id opi.LRPIdentifier) ([]*opi.Instance, error) {
	if err := s.cache.CheckSynced(); err != nil {
		return nil, err
	}
	w := s.cache.Workload(id)
	if w == nil {
		return nil, store.NotFound(id)
	}
	pods := s.cache.Instances(w)
	instances := make([]*opi.Instance, 0, len(pods))
	for i, pod := range pods {
		if pod != nil {
			instances = append(instances, pod.Instance(int32(i)))
		}
	}
	return instances, nil
}
