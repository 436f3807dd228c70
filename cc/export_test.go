package cc

import (
	"context"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// SetBackoff makes retries quick in tests.
func SetBackoff(c *Client, first time.Duration) {
	c.backoff = wait.Backoff{Duration: first, Factor: 2, Steps: 1 << 20, Cap: 4 * first}
}

// Dial and DialTLS are the client's transport dialers, to show what they connect to whatever
// URL led there.
func Dial(c *Client, ctx context.Context, addr string) (net.Conn, error) {
	return c.dial(ctx, "tcp", addr)
}

func DialTLS(c *Client, ctx context.Context, addr string) (net.Conn, error) {
	return c.dialTLS(ctx, "tcp", addr)
}
