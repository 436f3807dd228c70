package k8s

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/internal/store"
)

// listWorkloads reads the workloads matching opts from the API server, as records.
func (b *Backend) listWorkloads(ctx context.Context, opts metav1.ListOptions) ([]*store.WorkloadRecord, error) {
	list, err := b.kind.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]*store.WorkloadRecord, 0, len(list))
	for _, w := range list {
		out = append(out, store.WorkloadRecordOf(w.Meta, w.Replicas, w.Template))
	}
	return out, nil
}
