package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WithoutManagedFields is an informer transform for caches of *T that never need an object's
// managed fields: the API server's record of who set which field, often the largest part of
// a small object's metadata (a route's Ingress, Service or EndpointSlice carries about as many
// bytes of it as of its content). A cached object written back whole (an update) without them
// keeps the stored ones: the API server takes the live object's managed fields when a request
// carries none.
//
// It never writes to the object it is handed, which may be shared (a fake clientset's watch
// hands out the object its store keeps): the cached object is a shallow copy without them.
// Anything else (a tombstone, an object without managed fields) passes unchanged.
func WithoutManagedFields[T any, PT interface {
	*T
	metav1.Object
}](obj any) (any, error) {
	o, ok := obj.(PT)
	if !ok || len(o.GetManagedFields()) == 0 {
		return obj, nil
	}
	stripped := *(*T)(o)
	PT(&stripped).SetManagedFields(nil)
	return PT(&stripped), nil
}
