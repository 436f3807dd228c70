package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/opi"
)

// deploymentKind runs LRPs as Deployments.
func deploymentKind(cfg Config) Kind {
	return typedKind[*appsv1.Deployment, *appsv1.DeploymentList]{
		name: "Deployment",
		informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().Deployments().Informer()
		},
		client: func() appsClient[*appsv1.Deployment, *appsv1.DeploymentList] {
			return cfg.Apps.Deployments(cfg.Namespace)
		},
		cached: cfg.Cached,
		build: func(lrp *opi.LRP, name string, w objects.Workload) Object {
			d := objects.Deployment(lrp, name, cfg.Namespace, w)
			return Object{Obj: d, Kind: "deployment", Meta: &d.ObjectMeta, Template: &d.Spec.Template, Size: d.Size}
		},
		stub: func(meta metav1.ObjectMeta, replicas int32) *appsv1.Deployment {
			return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
		},
		items: func(list *appsv1.DeploymentList) []Listed {
			out := make([]Listed, 0, len(list.Items))
			for i := range list.Items {
				d := &list.Items[i]
				out = append(out, Listed{Meta: &d.ObjectMeta, Replicas: d.Spec.Replicas, Template: &d.Spec.Template})
			}
			return out
		},
	}
}
