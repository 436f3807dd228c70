package kube

import "strconv"

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
