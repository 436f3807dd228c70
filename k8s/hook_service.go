package k8s

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/hooks"
	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
)

// serviceHook gives an LRP with ports a Service named like its Deployment, one port per LRP
// port, controlled by the Deployment. Routing objects point at it.
//
//   - desired: create the Service (exists: made controlled by the Deployment if it is not);
//   - updated: nothing (ports only change with a new version);
//   - missing: Deployments with ports and no Service.
type serviceHook struct {
	client    kubernetes.Interface
	list      metadataLists
	namespace string
	// headless services get no cluster IP (see docs/adr/0006-headless-services.md).
	headless bool
}

func (h *serviceHook) Name() string { return "service" }

func (h *serviceHook) Desired(ctx context.Context, t hooks.Target) error {
	if len(t.LRP.Ports) == 0 {
		return nil
	}
	service := spec.Service(t.LRP, t.Name, t.Namespace, t.Owner)
	if h.headless {
		service.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if _, err := hooks.EnsureOwned(ctx, h.client.CoreV1().Services(h.namespace), service, t); err != nil {
		return hooks.WrapErr(err, "create service")
	}
	return nil
}

func (h *serviceHook) Missing(ctx context.Context, deployments []hooks.Workload) ([]hooks.Workload, error) {
	have, err := kube.ListNames(ctx, hooks.AppSelector(), h.list(servicesResource))
	if err != nil {
		return nil, err
	}
	return hooks.Without(deployments, func(d hooks.Workload) bool {
		return !d.HasPorts() || have[d.GetName()]
	}), nil
}
