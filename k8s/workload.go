package k8s

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/store"
	"github.com/opi-bridge/opi/k8s/workload"
)

// Workload kinds an operator chooses between (Options.Workload); package k8s/workload holds
// the kinds themselves.
const (
	// WorkloadDeployments runs each LRP as a Deployment (the default): parallel pod creation,
	// surge rollouts, an instance index from the pods' rank (ADR 0002), no CF_INSTANCE_INDEX.
	WorkloadDeployments = workload.Deployments
	// WorkloadStatefulSets runs each LRP as a StatefulSet with parallel pod management: the
	// instance index is the pod's ordinal, passed to the app as CF_INSTANCE_INDEX (ADR 0007).
	WorkloadStatefulSets = workload.StatefulSets
)

// kindName is the lower-case kind, for messages and log data ("deployment").
func (b *Backend) kindName() string { return strings.ToLower(b.kind.Name()) }

// controllerRef makes the workload obj the controller of a dependent.
func (b *Backend) controllerRef(obj metav1.Object) metav1.OwnerReference {
	return b.kind.ControllerRef(obj)
}

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

// liveCheck tells, from the API server, whether d is still the live workload of its name.
func (b *Backend) liveCheck(d metav1.Object) func(context.Context) (bool, error) {
	return workload.LiveCheck(b.kind, d)
}
