package cc

import (
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// SetBackoff makes retries quick in tests.
func SetBackoff(c *Client, first time.Duration) {
	c.backoff = wait.Backoff{Duration: first, Factor: 2, Steps: 1 << 20, Cap: 4 * first}
}
