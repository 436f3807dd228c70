package kube

import (
	"context"
	"strconv"
	"time"
)

// Observed reports whether a cache that holds an object at resource version cached has seen
// the write that produced version want. Resource versions are opaque in general; when both
// parse as unsigned integers (as etcd's do) a newer cached version also counts.
func Observed(cached, want string) bool {
	if cached == want {
		return true
	}
	c, errC := strconv.ParseUint(cached, 10, 64)
	w, errW := strconv.ParseUint(want, 10, 64)
	return errC == nil && errW == nil && c >= w
}

// WaitUntil checks cond now and then every interval until it holds, timeout passes or ctx
// ends. It reports whether cond held.
func WaitUntil(ctx context.Context, interval, timeout time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return cond()
		case <-ticker.C:
			if cond() {
				return true
			}
		}
	}
}
