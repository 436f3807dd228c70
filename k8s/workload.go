package k8s

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// newWorkloadKind is the kind Options.Workload names ("" is deployments), reading and writing
// through b's client in b's namespace and finding existing workloads in b's cache.
func (b *Backend) newWorkloadKind(name string) workload.Kind {
	return workload.New(name, workload.Config{
		Apps:      b.client.AppsV1(),
		Namespace: b.namespace,
		Cached: func(name string) (metav1.ObjectMeta, int32, bool) {
			r, ok := b.cachedWorkloadByName(name)
			if !ok {
				return metav1.ObjectMeta{}, 0, false
			}
			return r.meta(), r.replicas, true
		},
	})
}

// kindName is the lower-case kind, for messages and log data ("deployment").
func (b *Backend) kindName() string { return strings.ToLower(b.kind.Name()) }

// controllerRef makes the workload obj the controller of a dependent.
func (b *Backend) controllerRef(obj metav1.Object) metav1.OwnerReference {
	return b.kind.ControllerRef(obj)
}

// listWorkloads reads the workloads matching opts from the API server, as records.
func (b *Backend) listWorkloads(ctx context.Context, opts metav1.ListOptions) ([]*workloadRecord, error) {
	list, err := b.kind.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]*workloadRecord, 0, len(list))
	for _, w := range list {
		out = append(out, workloadRecordOf(w.Meta, w.Replicas, w.Template))
	}
	return out, nil
}

// instancePods are the pods that report the LRP's instances: position i holds instance i, nil
// when no pod reports it (yet); at most the desired count. A kind indexed by ordinal puts each
// pod at its ordinal, the others rank them (ADR 0002).
func (b *Backend) instancePods(pods []*podRecord, w *workloadRecord) []*podRecord {
	if b.kind.IndexedByOrdinal() {
		return ordinalPods(pods, w)
	}
	return rankedPods(pods, w)
}

// ordinalPods puts each pod at its ordinal: instance i is the pod with ordinal i, and no pod
// at all while it does not exist (not created yet, or being replaced). The StatefulSet
// controller never runs two pods of one ordinal (they share a name), so no ranking is needed:
//   - terminating pods are left out (a stopped instance is not reported; its successor of the
//     same ordinal is, once created);
//   - a failed pod (evicted) keeps its ordinal as CRASHED until the controller, which deletes
//     failed pods, has replaced it;
//   - ordinals at or above the desired count (a scale-down in progress) are not reported.
//
// The slice is as long as the highest reported ordinal + 1, at most the desired count.
func ordinalPods(pods []*podRecord, w *workloadRecord) []*podRecord {
	replicas := w.replicas
	var out []*podRecord
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.ordinal < 0 || p.ordinal >= replicas {
			continue
		}
		if int(p.ordinal) >= len(out) {
			out = append(out, make([]*podRecord, int(p.ordinal)+1-len(out))...)
		}
		if cur := out[p.ordinal]; cur == nil || createdBefore(cur, p) {
			out[p.ordinal] = p
		}
	}
	return out
}
