package k8s

import (
	"context"

	"code.cloudfoundry.org/lager/v3"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/opi"
)

// minBudgetInstances is the instance count from which an LRP gets a PodDisruptionBudget. A
// 1-instance app gets none: a budget allowing no disruption would block every node drain, and
// one allowing one disruption protects nothing.
const minBudgetInstances = 2

// toDisruptionBudget lets voluntary disruptions (node drains, evictions through the API) take
// at most one of the LRP's instances at a time. maxUnavailable rather than minAvailable: it
// stays right whatever the instance count, so a scale between two counts of 2 or more changes
// nothing. It is controlled by the Deployment, so the garbage collector removes it on stop.
func toDisruptionBudget(lrp *opi.LRP, name, namespace string, owner metav1.OwnerReference) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       namespace,
			Labels:          lrpLabels(lrp),
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: selectorLabels(lrp.LRPIdentifier)},
			MaxUnavailable: ptr(intstr.FromInt32(1)),
		},
	}
}

// ensureDisruptionBudget creates the LRP's budget, controlled by owner; an existing one is made
// controlled by owner as a desire does with the Service (see kube.EnsureControlled).
func (b *Backend) ensureDisruptionBudget(ctx context.Context, logger lager.Logger, lrp *opi.LRP, name string, owner metav1.OwnerReference, live func(context.Context) (bool, error)) error {
	budgets := b.client.PolicyV1().PodDisruptionBudgets(b.namespace)
	budget := toDisruptionBudget(lrp, name, b.namespace, owner)
	_, created, err := kube.CreateIfAbsent(ctx, budgets, budget.DeepCopy())
	if err != nil {
		return apiError(err, "create pod disruption budget")
	}
	if !created {
		if err := kube.EnsureControlled(ctx, budgets, budget, nil, owner, live); err != nil {
			return b.ownershipError(logger, err, "own pod disruption budget")
		}
	}
	return nil
}

// scaleDisruptionBudget keeps the budget in step with a new instance count: created (when
// absent) for 2 or more, deleted when the LRP goes below 2 from 2 or more. A create that finds
// the budget costs one call; it is made on every such scale so that a budget an earlier call
// failed to create is made by the next one.
func (b *Backend) scaleDisruptionBudget(ctx context.Context, logger lager.Logger, d *workloadRecord, instances int32) error {
	if instances >= minBudgetInstances {
		lrp := d.lrp()
		owner := b.controllerRef(d)
		budget := toDisruptionBudget(lrp, d.Name, b.namespace, owner)
		if _, _, err := kube.CreateIfAbsent(ctx, b.client.PolicyV1().PodDisruptionBudgets(b.namespace), budget); err != nil {
			return apiError(err, "create pod disruption budget")
		}
		return nil
	}
	if d.replicas < minBudgetInstances {
		return nil
	}
	// A budget left behind allows one disruption of a 1-instance app, which is no budget at
	// all: failing the update for it would be worse than keeping it until the stop.
	err := b.client.PolicyV1().PodDisruptionBudgets(b.namespace).Delete(ctx, d.Name, metav1.DeleteOptions{})
	if err != nil && kube.Classify(err) != kube.KindNotFound {
		logger.Error("delete-pod-disruption-budget", err, lager.Data{"budget": d.Name})
	}
	return nil
}
