// Package informer makes the informers of opi's caches.
package informer

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// NewFilteredInformer is the shape of client-go's NewFiltered<Kind>Informer constructors.
type NewFilteredInformer func(kubernetes.Interface, string, time.Duration, cache.Indexers, internalinterfaces.TweakListOptionsFunc) cache.SharedIndexInformer

// Unindexed is factory's informer of obj's type, made by newInformer for namespace's
// objects matching selector, without the index by namespace a factory's own informers carry:
// opi's informers each watch one namespace, so that index is one set of every cached object's
// key, which no read of opi's uses (about 45 bytes of heap per object, measured with 10,000
// route objects). The caller adds the indexes it reads.
func Unindexed(factory informers.SharedInformerFactory, obj runtime.Object, namespace, selector string, newInformer NewFilteredInformer) cache.SharedIndexInformer {
	return factory.InformerFor(obj, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return newInformer(client, namespace, resync, cache.Indexers{}, func(o *metav1.ListOptions) { o.LabelSelector = selector })
	})
}
