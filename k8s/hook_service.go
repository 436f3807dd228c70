package k8s

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

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
	noHook
	client    kubernetes.Interface
	list      metadataLists
	namespace string
	// headless services get no cluster IP (see docs/adr/0006-headless-services.md).
	headless bool
}

func (h *serviceHook) hookName() string { return "service" }

func (h *serviceHook) desired(ctx context.Context, t hookTarget) error {
	if len(t.lrp.Ports) == 0 {
		return nil
	}
	service := spec.Service(t.lrp, t.name, t.namespace, t.owner)
	if h.headless {
		service.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if _, err := ensureOwned(ctx, h.client.CoreV1().Services(h.namespace), service, t); err != nil {
		return wrapHookErr(err, "create service")
	}
	return nil
}

func (h *serviceHook) missing(ctx context.Context, deployments []*workloadRecord) ([]*workloadRecord, error) {
	have, err := kube.ListNames(ctx, appSelector(), h.list(servicesResource))
	if err != nil {
		return nil, err
	}
	return deploymentsWithout(deployments, func(d *workloadRecord) bool {
		return len(d.ports) == 0 || have[d.Name]
	}), nil
}
