package workload

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
)

// deploymentKind runs LRPs as Deployments.
type deploymentKind struct{ cfg Config }

func (deploymentKind) Name() string { return "Deployment" }

func (deploymentKind) Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Apps().V1().Deployments().Informer()
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

func (k deploymentKind) Create(ctx context.Context, w Object) (metav1.Object, bool, error) {
	return kube.CreateOrGet(ctx, k.cfg.Apps.Deployments(k.cfg.Namespace), w.Obj.(*appsv1.Deployment),
		func(name string) (*appsv1.Deployment, bool) {
			meta, replicas, ok := k.cfg.Cached(name)
			if !ok {
				return nil, false
			}
			return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &replicas}}, true
		})
}

func (k deploymentKind) Get(ctx context.Context, name string) (metav1.Object, error) {
	return k.cfg.Apps.Deployments(k.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
}

func (k deploymentKind) List(ctx context.Context, opts metav1.ListOptions) ([]Listed, error) {
	list, err := k.cfg.Apps.Deployments(k.cfg.Namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]Listed, 0, len(list.Items))
	for i := range list.Items {
		d := &list.Items[i]
		out = append(out, Listed{Meta: &d.ObjectMeta, Replicas: d.Spec.Replicas, Template: &d.Spec.Template})
	}
	return out, nil
}

func (k deploymentKind) Patch(ctx context.Context, name string, body []byte) (metav1.Object, error) {
	return k.cfg.Apps.Deployments(k.cfg.Namespace).Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
}

func (k deploymentKind) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return k.cfg.Apps.Deployments(k.cfg.Namespace).Delete(ctx, name, opts)
}

func (k deploymentKind) ControllerRef(obj metav1.Object) metav1.OwnerReference {
	return kube.ControllerRef(obj, "apps/v1", k.Name())
}

func (deploymentKind) IndexedByOrdinal() bool { return false }
