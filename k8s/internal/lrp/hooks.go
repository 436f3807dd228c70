package lrp

import (
	"context"
	"errors"

	"code.cloudfoundry.org/lager/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

// How the LRP's verbs run the hooks (package k8s/internal/hooks): the hooks' checks before anything is
// written, their events, and what their errors answer. (A desire asks the hook set itself to
// check and shape its workload: hooks.Set.Prepare.)

// checkHooks runs every hook's check.
func (s *Service) checkHooks(ctx context.Context, lrp *opi.LRP) error {
	return s.hooks.Check(ctx, lrp)
}

// runUpdatedHooks tells every hook about an update, before the workload is patched.
func (s *Service) runUpdatedHooks(ctx context.Context, logger lager.Logger, t hooks.Target, before *opi.LRP, update opi.LRPUpdate) error {
	if name, err := s.hooks.Updated(ctx, t, before, update); err != nil {
		return s.hookError(logger, err, name)
	}
	return nil
}

// hookError maps what a hook's desired or updated returned: a stop that deleted the workload
// meanwhile (kube.ErrSuperseded) is success, as for the Secrets (kube.OwnershipError); Kubernetes
// refusing the object (422, 403) is opi.ErrInvalid (refusal).
func (s *Service) hookError(logger lager.Logger, err error, hook string) error {
	var status apierrors.APIStatus
	if errors.Is(err, kube.ErrSuperseded) || !errors.As(err, &status) {
		return kube.OwnershipError(logger, err, hook)
	}
	var step *hooks.StepError
	if errors.As(err, &step) {
		return kube.Refusal(step.Err, step.What)
	}
	return kube.Refusal(err, hook)
}

// targetOf is the hook target of a cached workload, for updates and the janitor.
func (s *Service) targetOf(d *store.WorkloadRecord, lrp *opi.LRP) hooks.Target {
	return hooks.Target{
		LRP:       lrp,
		Name:      d.Name,
		Namespace: s.namespace,
		Owner:     s.controllerRef(d),
		Live:      s.liveCheck(d),
	}
}
