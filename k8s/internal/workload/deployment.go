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

// deploymentKind runs LRPs as Deployments.
type deploymentKind struct {
	typedKind[*appsv1.Deployment, *appsv1.DeploymentList]
}

func newDeploymentKind(cfg Config) Kind {
	return deploymentKind{typedKind[*appsv1.Deployment, *appsv1.DeploymentList]{
		name: "Deployment",
		informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return informer.Unindexed(f, &appsv1.Deployment{}, cfg.Namespace, names.AppSelector, appsinformers.NewFilteredDeploymentInformer)
		},
		client: func() appsClient[*appsv1.Deployment, *appsv1.DeploymentList] {
			return cfg.Apps.Deployments(cfg.Namespace)
		},
		cached: cfg.Cached,
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
	}}
}

// Build is the LRP's Deployment. Everything CC may read back is in labels, annotations or the
// spec; the env is only referenced (the env Secret), never copied.
//
// Rollouts (an image update) and scale-ups surge one pod at a time and never take a pod away
// before its replacement has been Ready for MinReadySeconds (maxUnavailable 0), so a 1-instance
// app keeps serving through an update too. For "process" and "none" health checks the pod is
// Ready once its container started: MinReadySeconds is then what stops a rollout from replacing
// running instances with ones that crash at once.
func (deploymentKind) Build(d *objects.Desire) Object {
	replicas := d.Replicas
	dep := &appsv1.Deployment{
		ObjectMeta: d.Meta,
		Spec: appsv1.DeploymentSpec{
			Replicas:             &replicas,
			Selector:             &metav1.LabelSelector{MatchLabels: d.Selector},
			RevisionHistoryLimit: ptr.To(int32(RevisionHistoryLimit)),
			MinReadySeconds:      d.MinReadySeconds,
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			},
			Template: d.Template,
		},
	}
	return Object{Obj: dep, Kind: "deployment", Meta: &dep.ObjectMeta, Template: &dep.Spec.Template, Size: dep.Size}
}
