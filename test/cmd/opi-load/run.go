package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

const namespace = "opi-load"

// run sets up the control plane and opi, drives the load, checks the end state and tears
// everything down.
func run(ctx context.Context, f flags, out io.Writer) (rep *report, err error) {
	binDir := f.binDir
	if binDir == "" {
		binDir = os.Getenv("OPI_KUBE_BIN_DIR")
	}
	fmt.Fprintln(out, "starting a local control plane...")
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cluster, err := localkube.Start(startCtx, localkube.Options{
		BinDir: binDir, KeepWorkDir: f.keepLogs, Nodes: 2, NodeMemory: "512Gi", NodePods: "2000",
		ControllerQPS: 200, ControllerBurst: 400,
	})
	if err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	defer func() {
		if stopErr := cluster.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stop the control plane: %w", stopErr))
		}
		if f.keepLogs {
			fmt.Fprintf(out, "logs kept in %s\n", cluster.WorkDir())
		}
	}()

	kubeconfig := cluster.Kubeconfig()
	args := []string{"--create-namespace=true"}
	identity := "admin"
	if !f.admin {
		if kubeconfig, err = fixture.RestrictedKubeconfig(ctx, cluster, namespace); err != nil {
			return nil, err
		}
		args = []string{"--create-namespace=false"}
		identity = "deploy/rbac.yaml"
	}
	addr, err := localkube.FreeAddr()
	if err != nil {
		return nil, err
	}
	args = append([]string{"connect", "--kubeconfig", kubeconfig, "--listen", addr, "--namespace", namespace, "--log-level", "info"}, args...)
	fmt.Fprintf(out, "starting opi on %s as %s...\n", addr, identity)
	opi, err := localkube.StartProcess("opi", f.opiBin, args, os.Environ(), nil, filepath.Join(cluster.WorkDir(), "opi.log"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopErr := opi.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stop opi: %w", stopErr))
		}
	}()
	base := "http://" + addr
	if err := waitReady(ctx, base+"/readyz", opi); err != nil {
		return nil, err
	}

	d := newDriver(base, f)
	fmt.Fprintf(out, "%d workers on %d apps for %s (at most %d requests), seed %d...\n", f.workers, f.apps, f.duration, f.maxRequests, f.seed)
	d.run(ctx)
	select {
	case <-opi.Done():
		return nil, fmt.Errorf("opi exited during the load: %v", opi.Err())
	default:
	}
	fmt.Fprintln(out, "load done; waiting for the cluster to match the model...")
	rep = d.report()
	rep.Identity = identity
	rep.Final = settle(ctx, d, cluster.Clientset(), f.settle)
	return rep, nil
}

// waitReady waits until opi answers url with 200 (two minutes at most).
func waitReady(ctx context.Context, url string, opi *localkube.Process) error {
	if err := opi.WaitHTTP(ctx, url, 2*time.Minute); err != nil {
		return fmt.Errorf("waiting for opi to be ready: %w", err)
	}
	return nil
}
