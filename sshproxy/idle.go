package sshproxy

import (
	"net"
	"sync/atomic"
	"time"
)

// activityConn is a connection that records when a byte last crossed it, either way, so an
// idle one can be told from one busy in a single direction (a command printing, a user typing).
type activityConn struct {
	net.Conn
	last atomic.Int64
}

func newActivityConn(c net.Conn) *activityConn {
	ac := &activityConn{Conn: c}
	ac.touch()
	return ac
}

func (c *activityConn) touch() { c.last.Store(time.Now().UnixNano()) }

func (c *activityConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *activityConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// closeWhenIdle closes c once no byte has crossed it for timeout; the returned function stops
// the watch.
func (c *activityConn) closeWhenIdle(timeout time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				idle := time.Since(time.Unix(0, c.last.Load()))
				if idle >= timeout {
					c.Close()
					return
				}
				t.Reset(timeout - idle)
			}
		}
	}()
	return func() { close(done) }
}
