package k8s

import (
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/opi-bridge/opi/opi"
	"k8s.io/client-go/kubernetes"
)

// CachedPodCount is how many pods of the LRP the pod cache holds, so that tests can wait for
// the cache to see the pods they made before they read.
func (b *Backend) CachedPodCount(id opi.LRPIdentifier) int {
	return len(b.store.Pods(id))
}

// CachedWorkloadVersion is the resource version of the LRP's workload as the cache holds it
// ("" without one), so that tests can wait for the cache to see a change they made.
func (b *Backend) CachedWorkloadVersion(id opi.LRPIdentifier) string {
	if w := b.store.Workload(id); w != nil {
		return w.ResourceVersion
	}
	return ""
}

// SetSyncPatience shortens how often Start checks again past its cache-sync timeout and retries
// a hook's start-up, so that tests need not wait the production intervals. Call before Start.
func (b *Backend) SetSyncPatience(recheck, hookRetry time.Duration) {
	b.cacheSync.recheck, b.cacheSync.hookRetry = recheck, hookRetry
}

// mustNewBackend is NewBackend for the package's own tests, with options known to be good.
func mustNewBackend(client kubernetes.Interface, logger lager.Logger, opts Options) *Backend {
	b, err := NewBackend(client, logger, opts)
	if err != nil {
		panic(err)
	}
	return b
}
