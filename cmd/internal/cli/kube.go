package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountDir is where Kubernetes mounts a pod's service-account token and CA.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// KubeConfig is the configuration of the kubeconfig at path, else the in-cluster one.
func KubeConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return InClusterConfig(os.Getenv("OPI_SERVICEACCOUNT_DIR"))
}

// InClusterConfig is client-go's in-cluster configuration (the API server from
// KUBERNETES_SERVICE_HOST and _PORT, the service account's token and CA), read from dir instead
// of the fixed path client-go reads. The integration suite runs opi as a process, not in a pod,
// and has no way to write to that path: OPI_SERVICEACCOUNT_DIR lets it exercise this code path
// with a token and CA it writes itself. In a pod it is unset and the standard path is used.
func InClusterConfig(dir string) (*rest.Config, error) {
	if dir == "" || dir == ServiceAccountDir {
		return rest.InClusterConfig()
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, rest.ErrNotInCluster
	}
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if _, err := os.Stat(tokenFile); err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	if _, err := os.Stat(caFile); err != nil {
		return nil, fmt.Errorf("service account ca: %w", err)
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
		// A file, not its contents: client-go rereads it, as the kubelet rotates the token.
		BearerTokenFile: tokenFile,
	}, nil
}

// RunSubcommand reads a subcommand's settings from args with load and runs it until SIGINT or
// SIGTERM: it exits 0 after -h, 2 on settings load refuses, 1 when run fails.
func RunSubcommand[C any](name string, args []string, load func([]string) (C, error), run func(context.Context, C) error) {
	cfg, err := load(args)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
