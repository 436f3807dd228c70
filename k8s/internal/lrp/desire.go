package lrp

import (
	"context"
	"fmt"
	"sync"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// DesireLRP creates the LRP's objects in two rounds, so that a desire costs two API round
// trips one after the other however many objects the LRP has:
//
//  1. the workload, a Deployment or StatefulSet, shaped by the hooks (exists → the desire
//     changes nothing of it); "Deployment" below stands for either;
//  2. at once, each created controlled by the Deployment (its owner reference set at
//     creation, so no owner patch follows): the env Secret, the image pull Secret when the LRP
//     has registry credentials, and every hook's objects (the Service, routing objects, egress
//     policy, PodDisruptionBudget: see k8s/hooks). An object that exists is made controlled by
//     the Deployment (kube.EnsureControlled) and its content left.
//
// Nothing is read before it is created, so a first desire costs one call per object. A later
// desire finishes what an interrupted one started (opi may die between any two calls): the
// Deployment exists, the objects of round 2 that are missing are created. A Deployment that
// no desire completes (opi killed between the rounds and CC never desiring the LRP again)
// cannot start without its env Secret, whose content only CC has: the janitor deletes it once
// it is older than its grace, so that CC's next sync sees the LRP missing and desires it
// again (see Sweep). Round 2 uses kube.EnsureControlled, so that a desire racing a stop and
// another desire of the same LRP never leaves the live Deployment without its Secret or a
// hook's object: one holding a Deployment that the stop deleted meanwhile gives up there, and
// what it created with that owner is the garbage collector's.
//
// Before round 1 every hook checks the LRP (an isolation segment, volume claims, routes it
// cannot serve) and the objects are checked against the API server's rules (preflight): a desire
// Kubernetes would refuse writes nothing. A refusal that no check can foresee (an admission
// webhook, a quota) in either round undoes what this desire created (see undoDesire) and is
// answered as opi.ErrInvalid with Kubernetes' reason.
func (s *Service) DesireLRP(ctx context.Context, lrp *opi.LRP) error {
	logger := s.logger.Session("desire-lrp", lager.Data{"process-guid": lrp.ProcessGUID()})
	if err := s.cache.CheckWritable(ctx); err != nil {
		return err
	}
	if err := s.checkHooks(ctx, lrp); err != nil {
		logger.Info("refused-before-writing", lager.Data{"reason": err.Error()})
		return err
	}
	name := names.DeploymentName(lrp)
	secrets := []*corev1.Secret{objects.EnvSecret(lrp, name, s.namespace, s.pods)}
	secretSteps := []string{"create env secret"}
	if lrp.PrivateRegistry != nil {
		registrySecret, err := objects.LRPRegistrySecret(lrp, name, s.namespace)
		if err != nil {
			return err
		}
		secrets = append(secrets, registrySecret)
		secretSteps = append(secretSteps, "create registry secret")
	}
	deploymentWanted := s.kind.Build(lrp, name, s.pods)
	s.shapeWorkload(lrp, deploymentWanted)
	var serviceMeta *metav1.ObjectMeta
	if len(lrp.Ports) > 0 {
		serviceMeta = &objects.Service(lrp, name, s.namespace, metav1.OwnerReference{APIVersion: "apps/v1", Kind: s.kind.Name(), Name: name, UID: "preflight"}).ObjectMeta
	}
	if err := preflight(secrets, deploymentWanted, serviceMeta); err != nil {
		logger.Info("refused-before-writing", lager.Data{"reason": err.Error()})
		return err
	}

	// Round 1: the workload.
	var undo desireWrites
	deployment, created, err := s.kind.Create(ctx, deploymentWanted)
	if err != nil {
		return kube.Refusal(err, "create "+s.kindName())
	}
	if created {
		undo.workload = deployment
	} else if err := s.checkSameLRP(deployment, lrp.LRPIdentifier); err != nil {
		return err
	}

	// Round 2: what the workload controls, all at once.
	target := hooks.Target{LRP: lrp, Name: deployment.GetName(), Namespace: s.namespace, Owner: s.controllerRef(deployment), Live: s.liveCheck(deployment)}
	steps := make([]func() (raw, answer error), 0, len(secrets)+len(s.hooks))
	for i, secret := range secrets {
		steps = append(steps, func() (error, error) {
			createdSecret, err := s.ensureSecretOwned(ctx, secret, target)
			if createdSecret != nil && created {
				undo.addSecret(createdSecret)
			}
			if err != nil {
				return err, kube.OwnershipError(logger, err, secretSteps[i])
			}
			return nil, nil
		})
	}
	for _, h := range s.hooks.Desirers() {
		steps = append(steps, func() (error, error) {
			if err := h.Desired(ctx, target); err != nil {
				return err, s.hookError(logger, err, h.Name())
			}
			return nil, nil
		})
	}
	if raw, answer := inParallel(steps); answer != nil {
		return s.refused(ctx, logger, &undo, raw, answer)
	}

	if err := s.cache.WaitForWorkload(ctx, logger, deployment, false, s.liveCheck(deployment)); err != nil {
		return err
	}
	logger.Info("desired", lager.Data{s.kindName(): deployment.GetName(), "created": created})
	return nil
}

// ensureSecretOwned makes the Secret exist controlled by t's Deployment: one create (owner
// set) when it is absent, else kube.EnsureControlled on what exists. It returns the Secret
// when this call created it.
func (s *Service) ensureSecretOwned(ctx context.Context, want *corev1.Secret, t hooks.Target) (*corev1.Secret, error) {
	secrets := s.client.CoreV1().Secrets(s.namespace)
	want = want.DeepCopy()
	want.OwnerReferences = []metav1.OwnerReference{t.Owner}
	createdSecret, created, err := kube.CreateIfAbsent(ctx, secrets, want.DeepCopy())
	if err != nil || created {
		return createdSecret, err
	}
	return nil, kube.EnsureControlled(ctx, secrets, want, nil, t.Owner, t.Live)
}

// inParallel runs each step in its own goroutine and waits for all. Each step returns the
// raw error of its failed call and the error to answer with (nil, nil: done, or nothing left
// to do). It returns the first refusal among them (see isRefusal), so that what the desire
// wrote is undone; else the first failure.
func inParallel(steps []func() (raw, answer error)) (raw, answer error) {
	type result struct{ raw, answer error }
	results := make([]result, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Go(func() {
			r, a := step()
			results[i] = result{r, a}
		})
	}
	wg.Wait()
	var first *result
	for i := range results {
		r := &results[i]
		if r.answer == nil {
			continue
		}
		if kube.IsRefusal(r.raw) {
			return r.raw, r.answer
		}
		if first == nil {
			first = r
		}
	}
	if first == nil {
		return nil, nil
	}
	return first.raw, first.answer
}

// checkSameLRP guards against touching a workload of the same name that is not this LRP's,
// or one that is going away.
func (s *Service) checkSameLRP(d metav1.Object, id opi.LRPIdentifier) error {
	if d.GetLabels()[names.LabelGUID] != id.GUID || d.GetLabels()[names.LabelVersion] != id.Version {
		return fmt.Errorf("create %s: %s exists and does not belong to this lrp", s.kindName(), d.GetName())
	}
	if d.GetDeletionTimestamp() != nil {
		return fmt.Errorf("create %s: %w: %s is being deleted, retry later", s.kindName(), opi.ErrUnavailable, d.GetName())
	}
	return nil
}
