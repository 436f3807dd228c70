package k8s

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/opi"
)

// statefulSetKind runs LRPs as StatefulSets (Options.Workload = WorkloadStatefulSets): every
// instance has a stable ordinal, which is its index in GetInstances, the index StopInstance
// takes and the app's CF_INSTANCE_INDEX. Everything else (Secrets, Service, budget, names,
// labels, annotations, the pod template) is the Deployment backend's. docs/adr/0007 compares
// the two.
type statefulSetKind struct{}

func (statefulSetKind) kind() string { return "StatefulSet" }

func (statefulSetKind) informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Apps().V1().StatefulSets().Informer()
}

func (statefulSetKind) build(lrp *opi.LRP, name, namespace string, w spec.Workload) workloadObject {
	s := toStatefulSet(lrp, name, namespace, w)
	return workloadObject{obj: s, kind: "statefulset", meta: &s.ObjectMeta, template: &s.Spec.Template, size: s.Size}
}

func (statefulSetKind) create(ctx context.Context, b *Backend, w workloadObject) (metav1.Object, bool, error) {
	return kube.CreateOrGet(ctx, b.client.AppsV1().StatefulSets(b.namespace), w.obj.(*appsv1.StatefulSet),
		func(name string) (*appsv1.StatefulSet, bool) {
			r, ok := b.cachedWorkloadByName(name)
			if !ok {
				return nil, false
			}
			return r.asStatefulSet(), true
		})
}

func (statefulSetKind) get(ctx context.Context, b *Backend, name string) (metav1.Object, error) {
	return b.client.AppsV1().StatefulSets(b.namespace).Get(ctx, name, metav1.GetOptions{})
}

func (statefulSetKind) list(ctx context.Context, b *Backend, opts metav1.ListOptions) ([]*workloadRecord, error) {
	list, err := b.client.AppsV1().StatefulSets(b.namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]*workloadRecord, 0, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		out = append(out, workloadRecordOf(&s.ObjectMeta, s.Spec.Replicas, &s.Spec.Template))
	}
	return out, nil
}

func (statefulSetKind) patch(ctx context.Context, b *Backend, name string, body []byte) (metav1.Object, error) {
	return b.client.AppsV1().StatefulSets(b.namespace).Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
}

func (statefulSetKind) delete(ctx context.Context, b *Backend, name string, opts metav1.DeleteOptions) error {
	return b.client.AppsV1().StatefulSets(b.namespace).Delete(ctx, name, opts)
}

func (statefulSetKind) instancePods(pods []*podRecord, w *workloadRecord) []*podRecord {
	return ordinalPods(pods, w)
}

func (statefulSetKind) indexedByOrdinal() bool { return true }

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

// toStatefulSet is the LRP's workload as a StatefulSet: the Deployment's metadata and pod
// template (with CF_INSTANCE_INDEX from the ordinal, see spec.PlatformEnv) and
//   - parallel pod management: CF starts and stops all instances at once, and a crashed
//     instance must not hold back the start of the others (the default OrderedReady would);
//   - rolling updates of the template, one pod at a time from the highest ordinal, each
//     waiting until its replacement has been Ready for minReadySeconds. A StatefulSet cannot
//     surge (a second pod of the same ordinal would share its name): each replaced instance is
//     down while its successor starts, and a 1-instance app is down during an image update.
//     maxUnavailable is 1 (also the default): the MaxUnavailableStatefulSet feature gate is on
//     in the local control plane (a StatefulSet with 2 had two pods replaced at once), and
//     where it is off the API server drops the field and the controller replaces one at a time;
//   - no serviceName: the LRP's Service is an ordinary ClusterIP Service (per-pod DNS names,
//     which a headless governing Service would give, are nothing CF apps use);
//   - no volume claim templates: CF apps are stateless; the StatefulSet is for its ordinals.
func toStatefulSet(lrp *opi.LRP, name, namespace string, w spec.Workload) *appsv1.StatefulSet {
	replicas := lrp.Instances
	return &appsv1.StatefulSet{
		ObjectMeta: spec.WorkloadMeta(lrp, name, namespace),
		Spec: appsv1.StatefulSetSpec{
			Replicas:             &replicas,
			Selector:             &metav1.LabelSelector{MatchLabels: spec.SelectorLabels(lrp.LRPIdentifier)},
			Template:             spec.PodTemplate(lrp, name, w),
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			RevisionHistoryLimit: ptr.To(int32(spec.RevisionHistoryLimit)),
			MinReadySeconds:      w.MinReadySeconds,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
		},
	}
}
