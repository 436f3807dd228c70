// Package workload holds the workload kinds that can run an LRP's pods (Deployment,
// StatefulSet) behind one interface, Kind. A kind is built with what it needs handed in (the
// apps client, the namespace, a look-up of the cached workload); it never sees the root
// package's Backend (k8s/README.md, "Packages and the rules that make them last").
package workload

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
)

// RevisionHistoryLimit is how many old revisions a workload keeps (ReplicaSets or
// ControllerRevisions).
const RevisionHistoryLimit = 2

// The kinds an operator chooses between (k8s.Options.Workload).
const (
	// Deployments runs each LRP as a Deployment (the default): parallel pod creation, surge
	// rollouts, an instance index from the pods' rank (ADR 0002), no CF_INSTANCE_INDEX.
	Deployments = "deployments"
	// StatefulSets runs each LRP as a StatefulSet with parallel pod management: the instance
	// index is the pod's ordinal, passed to the app as CF_INSTANCE_INDEX (ADR 0007).
	StatefulSets = "statefulsets"
)

// Kind is what differs between the Kubernetes objects that can run an LRP's pods. Everything
// else (Secrets, Service, disruption budget, records and reads, crash reports, the janitor) is
// shared and talks to the workload only through this. Implementations: deploymentKind
// (deployment.go) and statefulSetKind (statefulset.go), each a typedKind (kind.go) with its own Build.
type Kind interface {
	// Name is the Kubernetes kind, for owner references and messages ("Deployment").
	Name() string
	// Informer is the kind's informer from the backend's factory.
	Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer
	// Build is the LRP's workload of the desire d (its metadata, selector, replicas and pod
	// template), as the desire creates it. The workload takes d's maps and template over:
	// they are not to be used after.
	Build(d *objects.Desire) Object
	// Create makes the workload built, or returns the existing one of that name (from the
	// cache when it has it, see Config.Cached) with created false.
	Create(ctx context.Context, w Object) (obj metav1.Object, created bool, err error)
	// Get reads the named workload from the API server.
	Get(ctx context.Context, name string) (metav1.Object, error)
	// List reads the workloads matching opts from the API server.
	List(ctx context.Context, opts metav1.ListOptions) ([]Listed, error)
	// Patch applies a strategic merge patch and returns the result.
	Patch(ctx context.Context, name string, body []byte) (metav1.Object, error)
	// Delete deletes the named workload.
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	// ControllerRef makes the workload obj the controller of a dependent.
	ControllerRef(obj metav1.Object) metav1.OwnerReference
	// IndexedByOrdinal says instance indices are pod ordinals (a pod knows its index): the
	// instances are ordered by ordinal rather than ranked.
	IndexedByOrdinal() bool
}

// Object is an LRP's workload as a desire makes it, before it is created: the object and what
// preflight checks of it.
type Object struct {
	// Obj is the *appsv1.Deployment or *appsv1.StatefulSet.
	Obj metav1.Object
	// Kind is the lower-case kind, for messages ("deployment").
	Kind     string
	Meta     *metav1.ObjectMeta
	Template *corev1.PodTemplateSpec
	// Size is the encoded size of Obj.
	Size func() int
}

// Listed is a workload as a List read it: what a record of it is made from. The pointers point
// into the list's items.
type Listed struct {
	Meta     *metav1.ObjectMeta
	Replicas *int32
	Template *corev1.PodTemplateSpec
}

// Cached is the named workload as the cache holds it: its identity, version and opi's labels
// (what a write needs of an existing workload) and its desired replicas.
type Cached func(name string) (meta metav1.ObjectMeta, replicas int32, ok bool)

// Config is what a kind is built with.
type Config struct {
	// Apps is the client the kind reads and writes its objects with.
	Apps appsv1client.AppsV1Interface
	// Namespace is where the workloads live.
	Namespace string
	// Cached looks a workload up in the cache (nil: never cached, every existing workload is
	// read from the API server).
	Cached Cached
}

// New is the kind named name (Deployments or StatefulSets; "" and anything else is
// Deployments: the root validates the name).
func New(name string, cfg Config) Kind {
	if cfg.Cached == nil {
		cfg.Cached = func(string) (metav1.ObjectMeta, int32, bool) { return metav1.ObjectMeta{}, 0, false }
	}
	if name == StatefulSets {
		return newStatefulSetKind(cfg)
	}
	return newDeploymentKind(cfg)
}

// LiveCheck tells, from the API server, whether obj is still the live workload of its name (not
// deleted, nor replaced by a namesake): what a write asks while its wait for the cache goes on
// past the read wait and when it timed out (store.WaitFor), or before it adopts an object for
// obj.
func LiveCheck(k Kind, obj metav1.Object) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		current, err := k.Get(ctx, obj.GetName())
		if kube.Classify(err) == kube.KindNotFound {
			return false, nil
		}
		if err != nil {
			return false, kube.APIError(err, "get "+strings.ToLower(k.Name()))
		}
		return current.GetUID() == obj.GetUID() && current.GetDeletionTimestamp() == nil, nil
	}
}
