package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/opi"
)

// statefulSetKind runs LRPs as StatefulSets (k8s.Options.Workload = StatefulSets): every
// instance has a stable ordinal, which is its index in GetInstances, the index StopInstance
// takes and the app's CF_INSTANCE_INDEX. Everything else (Secrets, Service, budget, names,
// labels, annotations, the pod template) is the Deployment kind's. docs/adr/0007 compares
// the two.
func statefulSetKind(cfg Config) Kind {
	return typedKind[*appsv1.StatefulSet, *appsv1.StatefulSetList]{
		name:      "StatefulSet",
		byOrdinal: true,
		informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().StatefulSets().Informer()
		},
		client: func() appsClient[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
			return cfg.Apps.StatefulSets(cfg.Namespace)
		},
		cached: cfg.Cached,
		build: func(lrp *opi.LRP, name string, w objects.Workload) Object {
			s := objects.StatefulSet(lrp, name, cfg.Namespace, w)
			return Object{Obj: s, Kind: "statefulset", Meta: &s.ObjectMeta, Template: &s.Spec.Template, Size: s.Size}
		},
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
	}
}
