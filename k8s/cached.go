package k8s

import "github.com/opi-bridge/opi/opi"

// CachedPodCount is how many pods of the LRP the pod cache holds: what a caller that made pods
// waits on before it reads instances (the specs of the backend's packages, which reach it only
// through this root).
func (b *Backend) CachedPodCount(id opi.LRPIdentifier) int {
	return len(b.store.Pods(id))
}

// CachedWorkloadVersion is the resource version of the LRP's workload as the cache holds it
// ("" without one): what a caller that changed the workload waits on before the next read.
func (b *Backend) CachedWorkloadVersion(id opi.LRPIdentifier) string {
	if w := b.store.Workload(id); w != nil {
		return w.ResourceVersion
	}
	return ""
}
