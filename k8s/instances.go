package k8s

import (
	"context"

	"github.com/opi-bridge/opi/k8s/store"
	"github.com/opi-bridge/opi/opi"
)

// GetInstances reports the LRP's instances from the pod cache (no API call): see instancePods
// for which pods are instances and at which index. ErrNotFound when the LRP is absent.
func (b *Backend) GetInstances(_ context.Context, id opi.LRPIdentifier) ([]*opi.Instance, error) {
	if err := b.store.CheckSynced(); err != nil {
		return nil, err
	}
	deployment := b.store.Workload(id)
	if deployment == nil {
		return nil, store.NotFound(id)
	}
	pods := b.store.Instances(deployment)
	instances := make([]*opi.Instance, 0, len(pods))
	for i, pod := range pods {
		if pod != nil {
			instances = append(instances, pod.Instance(int32(i)))
		}
	}
	return instances, nil
}
