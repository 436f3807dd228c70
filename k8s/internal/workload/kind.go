package workload

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/kube"
)

// appsClient is what a kind uses of its typed client-go client (DeploymentInterface,
// StatefulSetInterface).
type appsClient[T, L any] interface {
	kube.CreateGetter[T]
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// typedKind is a Kind over one typed client, but for Build: each kind embeds it and builds its
// own object (deployment.go, statefulset.go), so a desire reads its workload's spec where the
// kind is declared. The kinds differ in their types, in how their object stands for a cached
// one and is listed, and in what an instance's index is; the calls they make are the same and
// are written once, here.
type typedKind[T metav1.Object, L any] struct {
	name      string
	byOrdinal bool
	informer  func(informers.SharedInformerFactory) cache.SharedIndexInformer
	// client is the typed client, made on each call so that a kind built only to Build needs no
	// Apps client.
	client func() appsClient[T, L]
	cached Cached
	// stub is the object standing for a cached workload: its metadata and its replicas.
	stub func(meta metav1.ObjectMeta, replicas int32) T
	// items is what a List of the kind reads.
	items func(list L) []Listed
}

func (k typedKind[T, L]) Name() string { return k.name }

func (k typedKind[T, L]) Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return k.informer(f)
}

func (k typedKind[T, L]) Create(ctx context.Context, w Object) (metav1.Object, bool, error) {
	return kube.CreateOrGet(ctx, k.client(), w.Obj.(T), func(name string) (T, bool) {
		meta, replicas, ok := k.cached(name)
		if !ok {
			var zero T
			return zero, false
		}
		return k.stub(meta, replicas), true
	})
}

func (k typedKind[T, L]) Get(ctx context.Context, name string) (metav1.Object, error) {
	return k.client().Get(ctx, name, metav1.GetOptions{})
}

func (k typedKind[T, L]) List(ctx context.Context, opts metav1.ListOptions) ([]Listed, error) {
	list, err := k.client().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return k.items(list), nil
}

func (k typedKind[T, L]) Patch(ctx context.Context, name string, body []byte) (metav1.Object, error) {
	return k.client().Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
}

func (k typedKind[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return k.client().Delete(ctx, name, opts)
}

func (k typedKind[T, L]) ControllerRef(obj metav1.Object) metav1.OwnerReference {
	return kube.ControllerRef(obj, "apps/v1", k.name)
}

func (k typedKind[T, L]) IndexedByOrdinal() bool { return k.byOrdinal }
