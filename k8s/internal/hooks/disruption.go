package hooks

import (
	"context"

	"code.cloudfoundry.org/lager/v3"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// minBudgetInstances is the instance count from which an LRP gets a PodDisruptionBudget. A
// 1-instance app gets none: a budget allowing no disruption would block every node drain, and
// one allowing one disruption protects nothing.
const minBudgetInstances = 2

// disruptionHook gives an LRP of 2 or more instances a PodDisruptionBudget named like its
// Deployment, so that voluntary disruptions (node drains, evictions through the API) take at
// most one of its instances at a time:
//
//   - desired: create it for 2+ instances (exists: made controlled by the Deployment);
//   - updated (instances given): 2+ → create it when absent (one call, so that a budget an
//     earlier call failed to create is made by the next one); below 2 from 2 or more → delete
//     it (a failure is logged: a budget left behind allows one disruption of a 1-instance app,
//     which is no budget at all, and failing the update for it would be worse);
//   - missing: Deployments of 2+ replicas without a budget.
type disruptionHook struct {
	client    kubernetes.Interface
	list      MetadataLists
	namespace string
	logger    lager.Logger
}

// NewDisruption is the disruption budget hook: budgets in namespace, listed through list for
// the janitor; logger logs a budget it failed to delete.
func NewDisruption(client kubernetes.Interface, list MetadataLists, namespace string, logger lager.Logger) Hook {
	return &disruptionHook{client: client, list: list, namespace: namespace, logger: logger}
}

func (h *disruptionHook) Name() string { return "disruption-budget" }

func (h *disruptionHook) Desired(ctx context.Context, t Target) error {
	if t.LRP.Instances < minBudgetInstances {
		return nil
	}
	_, err := EnsureOwned(ctx, h.client.PolicyV1().PodDisruptionBudgets(h.namespace), toDisruptionBudget(t), t)
	return WrapErr(err, "create pod disruption budget")
}

func (h *disruptionHook) Updated(ctx context.Context, t Target, before *opi.LRP, update opi.LRPUpdate) error {
	if update.Instances == nil {
		return nil
	}
	budgets := h.client.PolicyV1().PodDisruptionBudgets(h.namespace)
	if *update.Instances >= minBudgetInstances {
		budget := toDisruptionBudget(t)
		budget.OwnerReferences = []metav1.OwnerReference{t.Owner}
		_, _, err := kube.CreateIfAbsent(ctx, budgets, budget)
		return WrapErr(err, "create pod disruption budget")
	}
	if before.Instances < minBudgetInstances {
		return nil
	}
	if err := DeleteIfPresent(ctx, budgets.Delete, t.Name); err != nil {
		h.logger.Error("delete-pod-disruption-budget", err, lager.Data{"budget": t.Name})
	}
	return nil
}

func (h *disruptionHook) Missing(ctx context.Context, deployments []Workload) ([]Workload, error) {
	have, err := apiclient.ListNames(ctx, AppSelector(), h.list(DisruptionBudgetsResource))
	if err != nil {
		return nil, err
	}
	return Without(deployments, func(d Workload) bool {
		return d.Replicas() < minBudgetInstances || have[d.GetName()]
	}), nil
}

// toDisruptionBudget: maxUnavailable rather than minAvailable, which stays right whatever the
// instance count, so a scale between two counts of 2 or more changes nothing.
func toDisruptionBudget(t Target) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name:      t.Name,
			Namespace: t.Namespace,
			Labels:    names.LRPLabels(t.LRP),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: names.SelectorLabels(t.LRP.LRPIdentifier)},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}
}
