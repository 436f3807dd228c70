package k8s

import (
	"context"

	"code.cloudfoundry.org/lager/v3"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
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
	noHook
	client    kubernetes.Interface
	list      metadataLists
	namespace string
	logger    lager.Logger
}

func (h *disruptionHook) hookName() string { return "disruption-budget" }

func (h *disruptionHook) desired(ctx context.Context, t hookTarget) error {
	if t.lrp.Instances < minBudgetInstances {
		return nil
	}
	_, err := ensureOwned(ctx, h.client.PolicyV1().PodDisruptionBudgets(h.namespace), toDisruptionBudget(t), t)
	return wrapHookErr(err, "create pod disruption budget")
}

func (h *disruptionHook) updated(ctx context.Context, t hookTarget, before *opi.LRP, update opi.LRPUpdate) error {
	if update.Instances == nil {
		return nil
	}
	budgets := h.client.PolicyV1().PodDisruptionBudgets(h.namespace)
	if *update.Instances >= minBudgetInstances {
		budget := toDisruptionBudget(t)
		budget.OwnerReferences = []metav1.OwnerReference{t.owner}
		_, _, err := kube.CreateIfAbsent(ctx, budgets, budget)
		return wrapHookErr(err, "create pod disruption budget")
	}
	if before.Instances < minBudgetInstances {
		return nil
	}
	if err := deleteIfPresent(ctx, budgets.Delete, t.name); err != nil {
		h.logger.Error("delete-pod-disruption-budget", err, lager.Data{"budget": t.name})
	}
	return nil
}

func (h *disruptionHook) missing(ctx context.Context, deployments []*workloadRecord) ([]*workloadRecord, error) {
	have, err := kube.ListNames(ctx, appSelector(), h.list(disruptionBudgetsResource))
	if err != nil {
		return nil, err
	}
	return deploymentsWithout(deployments, func(d *workloadRecord) bool {
		return d.replicas < minBudgetInstances || have[d.Name]
	}), nil
}

// toDisruptionBudget: maxUnavailable rather than minAvailable, which stays right whatever the
// instance count, so a scale between two counts of 2 or more changes nothing.
func toDisruptionBudget(t hookTarget) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name:      t.name,
			Namespace: t.namespace,
			Labels:    spec.LRPLabels(t.lrp),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: spec.SelectorLabels(t.lrp.LRPIdentifier)},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}
}
