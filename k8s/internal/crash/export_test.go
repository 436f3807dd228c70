package crash

import "context"

// Sync is sync, for the package's specs: what one worker does for a pod key.
func (c *Reporter) Sync(ctx context.Context, key string) error { return c.sync(ctx, key) }

// Remembers says the reporter holds a delivered crash of the pod key.
func (c *Reporter) Remembers(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.delivered[key]
	return ok
}
