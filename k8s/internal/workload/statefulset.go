package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/internal/informer"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
)

// statefulSetKind runs LRPs as StatefulSets (k8s.Options.Workload = StatefulSets): every
// instance has a stable ordinal, which is its index in GetInstances, the index StopInstance
// takes and the app's CF_INSTANCE_INDEX. Everything else (Secrets, Service, budget, names,
// labels, annotations, the pod template) is the Deployment kind's. docs/adr/0007 compares
// the two.
type statefulSetKind struct {
	typedKind[*appsv1.StatefulSet, *appsv1.StatefulSetList]
}

func newStatefulSetKind(cfg Config) Kind {
	return statefulSetKind{typedKind[*appsv1.StatefulSet, *appsv1.StatefulSetList]{
		name:      "StatefulSet",
		byOrdinal: true,
		informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return informer.Unindexed(f, &appsv1.StatefulSet{}, cfg.Namespace, names.AppSelector, appsinformers.NewFilteredStatefulSetInformer)
		},
		client: func() appsClient[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
			return cfg.Apps.StatefulSets(cfg.Namespace)
		},
		cached: cfg.Cached,
		stub: func(meta metav1.ObjectMeta, replicas int32) *appsv1.StatefulSet {
			return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &replicas}}
		},
		items: func(list *appsv1.StatefulSetList) []Listed {
			out := make([]Listed, 0, len(list.Items))
			for i := range list.Items {
				s := &list.Items[i]
				out = append(out, Listed{Meta: &s.ObjectMeta, Replicas: s.Spec.Replicas, Template: &s.Spec.Template})
			}
			return out
		},
	}}
}

// Build is the LRP's StatefulSet: the Deployment's metadata and pod template (with
// CF_INSTANCE_INDEX from the ordinal, see objects.PlatformEnv) and
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
func (statefulSetKind) Build(d *objects.Desire) Object {
	replicas := d.Replicas
	s := &appsv1.StatefulSet{
		ObjectMeta: d.Meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:             &replicas,
			Selector:             &metav1.LabelSelector{MatchLabels: d.Selector},
			Template:             d.Template,
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			RevisionHistoryLimit: ptr.To(int32(RevisionHistoryLimit)),
			MinReadySeconds:      d.MinReadySeconds,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
		},
	}
	return Object{Obj: s, Kind: "statefulset", Meta: &s.ObjectMeta, Template: &s.Spec.Template, Size: s.Size}
}
