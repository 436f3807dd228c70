package localkube

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// InstallGatewayAPI installs the Gateway API's standard CRDs (GatewayClass, Gateway, HTTPRoute)
// from the Go module opi builds against (found with `go list -m` from the working directory, so
// it must be inside opi's module), as an operator would from its release, and waits until the
// API server serves them.
func (c *Cluster) InstallGatewayAPI(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return fmt.Errorf("finding the gateway-api module (run from inside opi's module): %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	kubectl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir(), "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	apply := []string{"apply", "--server-side"}
	for _, kind := range []string{"gatewayclasses", "gateways", "httproutes"} {
		apply = append(apply, "-f", filepath.Join(dir, "gateway.networking.k8s.io_"+kind+".yaml"))
	}
	if err := kubectl(apply...); err != nil {
		return err
	}
	return kubectl("wait", "--for", "condition=established", "--timeout", "60s",
		"crd/gatewayclasses.gateway.networking.k8s.io", "crd/gateways.gateway.networking.k8s.io", "crd/httproutes.gateway.networking.k8s.io")
}
