package k8s

import "time"

// SetSyncPatience shortens how often Start checks again past its cache-sync timeout and retries
// a hook's start-up, so that tests need not wait the production intervals. Call before Start.
func (b *Backend) SetSyncPatience(recheck, hookRetry time.Duration) {
	b.cacheSync.recheck, b.cacheSync.hookRetry = recheck, hookRetry
}
