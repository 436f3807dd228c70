package kube

import (
	"context"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
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
// ends. It reports whether cond held (looking once more at the end).
func WaitUntil(ctx context.Context, interval, timeout time.Duration, cond func() bool) bool {
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	return err == nil || cond()
}
