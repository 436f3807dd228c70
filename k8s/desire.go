package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/opi"
)

// DesireLRP creates the LRP's objects, in an order that lets a later desire finish what an
// interrupted one started (opi may die between any two calls):
//
//  1. the env Secret (exists → fine);
//  2. the image pull Secret, when the LRP has registry credentials (exists → fine);
//  3. the workload, a Deployment or StatefulSet, shaped by the hooks (exists → the desire
//     changes nothing of it); "Deployment" below stands for either;
//  4. the Secrets made controlled by the Deployment;
//  5. every hook's objects (the Service, routing objects, egress policy, PodDisruptionBudget:
//     see hooks.go), each created controlled by the Deployment (exists → made controlled,
//     content left).
//
// Nothing is read before it is created, so a first desire costs one call per object plus one
// owner patch per Secret. Steps 4 and 5 use kube.EnsureControlled, so that a desire racing a
// stop and another desire of the same LRP never leaves the live Deployment without its Secret
// or a hook's object: one holding a Deployment that the stop deleted meanwhile gives up there.
//
// Before step 1 every hook checks the LRP (an isolation segment, volume claims, routes it
// cannot serve) and the objects are checked against the API server's rules (preflight): a desire
// Kubernetes would refuse writes nothing. A refusal that no check can foresee (an admission
// webhook, a quota) at a later step undoes what this desire created (see undoDesire) and is
// answered as opi.ErrInvalid with Kubernetes' reason.
func (b *Backend) DesireLRP(ctx context.Context, lrp *opi.LRP) error {
	logger := b.logger.Session("desire-lrp", lager.Data{"process-guid": lrp.ProcessGUID()})
	if err := b.checkSynced(); err != nil {
		return err
	}
	if err := b.checkHooks(ctx, lrp); err != nil {
		logger.Info("refused-before-writing", lager.Data{"reason": err.Error()})
		return err
	}
	name := DeploymentName(lrp)
	secrets := b.client.CoreV1().Secrets(b.namespace)

	envSecret := toEnvSecret(lrp, name, b.namespace, b.workload)
	var registrySecret, registrySeen *corev1.Secret
	checked := []*corev1.Secret{envSecret}
	if lrp.PrivateRegistry != nil {
		var err error
		if registrySecret, err = toRegistrySecret(lrp, name, b.namespace); err != nil {
			return err
		}
		checked = append(checked, registrySecret)
	}
	deploymentWanted := b.kind.build(lrp, name, b.namespace, b.workload)
	b.shapeWorkload(lrp, deploymentWanted)
	var serviceMeta *metav1.ObjectMeta
	if len(lrp.Ports) > 0 {
		serviceMeta = &toService(lrp, name, b.namespace, metav1.OwnerReference{APIVersion: "apps/v1", Kind: b.kind.kind(), Name: name, UID: "preflight"}).ObjectMeta
	}
	if err := preflight(checked, deploymentWanted, serviceMeta); err != nil {
		logger.Info("refused-before-writing", lager.Data{"reason": err.Error()})
		return err
	}

	var undo desireWrites
	envSeen, envCreated, err := kube.CreateIfAbsent(ctx, secrets, envSecret.DeepCopy())
	if err != nil {
		return refusal(err, "create env secret")
	}
	if envCreated {
		undo.secrets = append(undo.secrets, envSeen)
	}

	if registrySecret != nil {
		var created bool
		if registrySeen, created, err = kube.CreateIfAbsent(ctx, secrets, registrySecret.DeepCopy()); err != nil {
			return b.refused(ctx, logger, &undo, err, refusal(err, "create registry secret"))
		}
		if created {
			undo.secrets = append(undo.secrets, registrySeen)
		}
	}

	deployment, created, err := b.kind.create(ctx, b, deploymentWanted)
	if err != nil {
		return b.refused(ctx, logger, &undo, err, refusal(err, "create "+b.kindName()))
	}
	if !created {
		if err := b.checkSameLRP(deployment, lrp.LRPIdentifier); err != nil {
			return err
		}
		// The LRP existed: what this desire made completes it and is its now.
		undo = desireWrites{}
	} else {
		undo.workload = deployment
	}

	owner := b.controllerRef(deployment)
	live := b.liveCheck(deployment)
	if err := kube.EnsureControlled(ctx, secrets, envSecret, envSeen, owner, live); err != nil {
		return b.refused(ctx, logger, &undo, err, b.ownershipError(logger, err, "own env secret"))
	}
	if registrySecret != nil {
		if err := kube.EnsureControlled(ctx, secrets, registrySecret, registrySeen, owner, live); err != nil {
			return b.refused(ctx, logger, &undo, err, b.ownershipError(logger, err, "own registry secret"))
		}
	}
	undo.owned = true

	target := hookTarget{lrp: lrp, name: deployment.GetName(), namespace: b.namespace, owner: owner, live: live}
	for _, h := range b.hooks {
		if err := h.desired(ctx, target); err != nil {
			return b.refused(ctx, logger, &undo, err, b.hookError(logger, err, h.hookName()))
		}
	}

	b.waitForWorkload(ctx, logger, deployment.GetName(), deployment.GetResourceVersion(), false)
	logger.Info("desired", lager.Data{b.kindName(): deployment.GetName(), "created": created})
	return nil
}

// liveCheck tells, from the API server, whether d is still the live workload of its name.
func (b *Backend) liveCheck(d metav1.Object) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		current, err := b.kind.get(ctx, b, d.GetName())
		if kube.Classify(err) == kube.KindNotFound {
			return false, nil
		}
		if err != nil {
			return false, apiError(err, "get "+b.kindName())
		}
		return current.GetUID() == d.GetUID() && current.GetDeletionTimestamp() == nil, nil
	}
}

// ownershipError maps what kube.EnsureControlled returned. ErrSuperseded is success: a stop
// deleted the Deployment while this desire ran, so the desire took effect and was then undone
// (or the LRP was desired again by another call, which completes it).
func (b *Backend) ownershipError(logger lager.Logger, err error, what string) error {
	if errors.Is(err, kube.ErrSuperseded) {
		logger.Info("superseded-by-stop", lager.Data{"step": what})
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return refusal(err, what)
	}
	// Contention that outlasted the attempts: CC retries later.
	return fmt.Errorf("%s: %w: %w", what, opi.ErrUnavailable, err)
}

// checkSameLRP guards against touching a workload of the same name that is not this LRP's,
// or one that is going away.
func (b *Backend) checkSameLRP(d metav1.Object, id opi.LRPIdentifier) error {
	if d.GetLabels()[LabelGUID] != id.GUID || d.GetLabels()[LabelVersion] != id.Version {
		return fmt.Errorf("create %s: %s exists and does not belong to this lrp", b.kindName(), d.GetName())
	}
	if d.GetDeletionTimestamp() != nil {
		return fmt.Errorf("create %s: %w: %s is being deleted, retry later", b.kindName(), opi.ErrUnavailable, d.GetName())
	}
	return nil
}

// kindName is the workload kind in lower case, for messages and log keys ("deployment").
func (b *Backend) kindName() string { return strings.ToLower(b.kind.kind()) }
