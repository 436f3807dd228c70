package k8s

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/opi-bridge/opi/opi"
)

// ListLRPs returns every LRP whose Deployment the cache holds and which is not being deleted,
// ordered by guid and version, with its scheduling fields only (see toSchedulingLRP). It makes
// no API call.
func (b *Backend) ListLRPs(_ context.Context) ([]*opi.LRP, error) {
	if err := b.checkSynced(); err != nil {
		return nil, err
	}
	deployments, err := b.factory.Apps().V1().Deployments().Lister().Deployments(b.namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list cached deployments: %w", err)
	}
	lrps := make([]*opi.LRP, 0, len(deployments))
	for _, d := range deployments {
		if d.DeletionTimestamp != nil || d.Labels[LabelGUID] == "" || d.Labels[LabelVersion] == "" {
			continue
		}
		lrps = append(lrps, toSchedulingLRP(d))
	}
	sortLRPs(lrps)
	return lrps, nil
}
