package hooks

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
)

// serviceHook gives an LRP with ports a Service named like its workload, one port per LRP
// port, controlled by the workload. Routing objects point at it.
//
//   - desired: create the Service (exists: made controlled by the workload if it is not);
//   - updated: nothing (ports only change with a new version);
//   - missing: workloads with ports and no Service.
type serviceHook struct {
	client    kubernetes.Interface
	list      MetadataLists
	namespace string
	// headless services get no cluster IP (see docs/adr/0006-headless-services.md).
	headless bool
}

// NewService is the service hook: Services in namespace, listed through list for the janitor;
// headless makes them without a cluster IP.
func NewService(client kubernetes.Interface, list MetadataLists, namespace string, headless bool) Hook {
	return &serviceHook{client: client, list: list, namespace: namespace, headless: headless}
}

func (h *serviceHook) Name() string { return "service" }

func (h *serviceHook) Desired(ctx context.Context, t Target) error {
	if len(t.LRP.Ports) == 0 {
		return nil
	}
	service := objects.Service(t.LRP, t.Name, t.Namespace, t.Owner)
	if h.headless {
		service.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if _, _, err := kube.EnsureOwned(ctx, h.client.CoreV1().Services(h.namespace), service, t.Owner, t.Live); err != nil {
		return WrapErr(err, "create service")
	}
	return nil
}

func (h *serviceHook) Missing(ctx context.Context, workloads []Workload) ([]Workload, error) {
	have, err := apiclient.ListNames(ctx, metav1.ListOptions{LabelSelector: names.AppSelector}, h.list(ServicesResource))
	if err != nil {
		return nil, err
	}
	return Without(workloads, func(d Workload) bool {
		return !d.HasPorts() || have[d.GetName()]
	}), nil
}
