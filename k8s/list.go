package k8s

import (
	"context"

	"github.com/opi-bridge/opi/opi"
)

// ListLRPs returns every LRP whose Deployment the cache holds and which is not being deleted,
// ordered by guid and version, with its scheduling fields only (see toSchedulingLRP). It makes
// no API call.
func (b *Backend) ListLRPs(_ context.Context) ([]*opi.LRP, error) {
	if err := b.checkSynced(); err != nil {
		return nil, err
	}
	deployments := b.cachedDeployments()
	lrps := make([]*opi.LRP, 0, len(deployments))
	for _, d := range deployments {
		if d.DeletionTimestamp != nil || d.lrpKey() == "" {
			continue
		}
		lrps = append(lrps, d.schedulingLRP())
	}
	sortLRPs(lrps)
	return lrps, nil
}
