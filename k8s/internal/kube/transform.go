package kube

import (
	"unique"

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

// Compacted is an informer transform for large caches of *T: WithoutManagedFields, and one
// copy of the strings the cached objects repeat. Decoding gives every object its own copy of
// every string; the keys of its labels and annotations (a handful of names, the same on every
// object of a kind: a third of a route object's metadata bytes), its namespace and the values
// under sharedValues' keys (low-cardinality values such as a managed-by label or a space guid)
// are replaced by a canonical copy (package unique), so that each is held once, not once per
// object. Other values (names, UIDs, a per-object key) stay as decoded: interning them would
// cost more than it saves.
//
// Like WithoutManagedFields, it never writes to the object it is handed: the cached object is
// a shallow copy with maps of its own.
func Compacted[T any, PT interface {
	*T
	metav1.Object
}](sharedValues ...string) func(any) (any, error) {
	shared := make(map[string]bool, len(sharedValues))
	for _, k := range sharedValues {
		shared[k] = true
	}
	compact := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return m
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			if shared[k] {
				v = unique.Make(v).Value()
			}
			out[unique.Make(k).Value()] = v
		}
		return out
	}
	return func(obj any) (any, error) {
		o, ok := obj.(PT)
		if !ok {
			return obj, nil
		}
		c := *(*T)(o)
		p := PT(&c)
		p.SetManagedFields(nil)
		p.SetNamespace(unique.Make(p.GetNamespace()).Value())
		p.SetLabels(compact(p.GetLabels()))
		p.SetAnnotations(compact(p.GetAnnotations()))
		return p, nil
	}
}
