//go:build tools

// Package kube pins the binaries of the local control plane used by opi's tests, benchmark and
// `make run`. Nothing imports it; the blank imports keep `go mod tidy` from dropping the pins.
package kube

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
