package k8s

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/opi"
)

// Workload kinds an operator chooses between (Options.Workload).
const (
	// WorkloadDeployments runs each LRP as a Deployment (the default): parallel pod creation,
	// surge rollouts, an instance index from the pods' rank (ADR 0002), no CF_INSTANCE_INDEX.
	WorkloadDeployments = "deployments"
	// WorkloadStatefulSets runs each LRP as a StatefulSet with parallel pod management: the
	// instance index is the pod's ordinal, passed to the app as CF_INSTANCE_INDEX (ADR 0007).
	WorkloadStatefulSets = "statefulsets"
)

// workloadKind is what differs between the Kubernetes objects that can run an LRP's pods.
// Everything else (Secrets, Service, disruption budget, records and reads, crash reports, the
// janitor) is shared and talks to the workload only through this. Implementations:
// deploymentKind (deployment.go) and statefulSetKind (statefulset.go).
type workloadKind interface {
	// kind is the Kubernetes kind, for owner references and messages ("Deployment").
	kind() string
	// informer is the kind's informer from the backend's factory.
	informer(f informers.SharedInformerFactory) cache.SharedIndexInformer
	// build is the LRP's workload named name, as a desire would create it.
	build(lrp *opi.LRP, name, namespace string, w spec.Workload) workloadObject
	// create makes the workload built, or returns the existing one of that name (from the
	// cache when it has it) with created false.
	create(ctx context.Context, b *Backend, w workloadObject) (obj metav1.Object, created bool, err error)
	// get reads the named workload from the API server.
	get(ctx context.Context, b *Backend, name string) (metav1.Object, error)
	// list reads the workloads matching opts from the API server, as records.
	list(ctx context.Context, b *Backend, opts metav1.ListOptions) ([]*workloadRecord, error)
	// patch applies a strategic merge patch (see updatePatch) and returns the result.
	patch(ctx context.Context, b *Backend, name string, body []byte) (metav1.Object, error)
	// delete deletes the named workload.
	delete(ctx context.Context, b *Backend, name string, opts metav1.DeleteOptions) error
	// instancePods are the pods that report the LRP's instances: position i holds instance
	// i, nil when no pod reports it (yet); at most the desired count.
	instancePods(pods []*podRecord, w *workloadRecord) []*podRecord
	// indexedByOrdinal says instance indices are pod ordinals (a pod knows its index).
	indexedByOrdinal() bool
}

// workloadObject is an LRP's workload as a desire makes it, before it is created: the object
// and what preflight checks of it.
type workloadObject struct {
	// obj is the *appsv1.Deployment or *appsv1.StatefulSet.
	obj metav1.Object
	// kind is the lower-case kind, for messages ("deployment").
	kind     string
	meta     *metav1.ObjectMeta
	template *corev1.PodTemplateSpec
	// size is the encoded size of obj.
	size func() int
}

// newWorkloadKind is the kind Options.Workload names ("" is deployments).
func newWorkloadKind(name string) workloadKind {
	if name == WorkloadStatefulSets {
		return statefulSetKind{}
	}
	return deploymentKind{}
}

// controllerRef makes the workload obj the controller of a dependent.
func (b *Backend) controllerRef(obj metav1.Object) metav1.OwnerReference {
	return kube.ControllerRef(obj, "apps/v1", b.kind.kind())
}

// deploymentKind runs LRPs as Deployments.
type deploymentKind struct{}

func (deploymentKind) kind() string { return "Deployment" }

func (deploymentKind) informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Apps().V1().Deployments().Informer()
}

func (deploymentKind) build(lrp *opi.LRP, name, namespace string, w spec.Workload) workloadObject {
	d := spec.Deployment(lrp, name, namespace, w)
	return workloadObject{obj: d, kind: "deployment", meta: &d.ObjectMeta, template: &d.Spec.Template, size: d.Size}
}

func (deploymentKind) create(ctx context.Context, b *Backend, w workloadObject) (metav1.Object, bool, error) {
	return kube.CreateOrGet(ctx, b.client.AppsV1().Deployments(b.namespace), w.obj.(*appsv1.Deployment),
		func(name string) (*appsv1.Deployment, bool) {
			r, ok := b.cachedWorkloadByName(name)
			if !ok {
				return nil, false
			}
			return r.asDeployment(), true
		})
}

func (deploymentKind) get(ctx context.Context, b *Backend, name string) (metav1.Object, error) {
	return b.client.AppsV1().Deployments(b.namespace).Get(ctx, name, metav1.GetOptions{})
}

func (deploymentKind) list(ctx context.Context, b *Backend, opts metav1.ListOptions) ([]*workloadRecord, error) {
	list, err := b.client.AppsV1().Deployments(b.namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]*workloadRecord, 0, len(list.Items))
	for i := range list.Items {
		d := &list.Items[i]
		out = append(out, workloadRecordOf(&d.ObjectMeta, d.Spec.Replicas, &d.Spec.Template))
	}
	return out, nil
}

func (deploymentKind) patch(ctx context.Context, b *Backend, name string, body []byte) (metav1.Object, error) {
	return b.client.AppsV1().Deployments(b.namespace).Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
}

func (deploymentKind) delete(ctx context.Context, b *Backend, name string, opts metav1.DeleteOptions) error {
	return b.client.AppsV1().Deployments(b.namespace).Delete(ctx, name, opts)
}

func (deploymentKind) instancePods(pods []*podRecord, w *workloadRecord) []*podRecord {
	return rankedPods(pods, w)
}

func (deploymentKind) indexedByOrdinal() bool { return false }
