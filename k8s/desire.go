package k8s

import (
	"context"
	"fmt"

	"code.cloudfoundry.org/lager/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/opi"
)

// DesireLRP creates the LRP's objects, in an order that lets a later desire finish what an
// interrupted one started (opi may die between any two calls):
//
//  1. the env Secret (exists → fine);
//  2. the image pull Secret, when the LRP has registry credentials (exists → fine);
//  3. the Deployment (exists → the desire succeeds and changes nothing);
//  4. owner references from the Secrets to the Deployment, where missing;
//  5. the Service, owned by the Deployment, when the LRP has ports (exists → fine).
//
// Nothing is read before it is created, so a first desire costs one call per object plus one
// owner patch per Secret.
func (b *Backend) DesireLRP(ctx context.Context, lrp *opi.LRP) error {
	logger := b.logger.Session("desire-lrp", lager.Data{"process-guid": lrp.ProcessGUID()})
	if err := b.checkSynced(); err != nil {
		return err
	}
	name := DeploymentName(lrp)
	secrets := b.client.CoreV1().Secrets(b.namespace)

	envSecret := toEnvSecret(lrp, name, b.namespace)
	_, envCreated, err := kube.CreateIfAbsent(ctx, secrets, envSecret)
	if err != nil {
		return apiError(err, "create env secret")
	}

	var registrySecret *corev1.Secret
	registryCreated := false
	if lrp.PrivateRegistry != nil {
		if registrySecret, err = toRegistrySecret(lrp, name, b.namespace); err != nil {
			return err
		}
		if _, registryCreated, err = kube.CreateIfAbsent(ctx, secrets, registrySecret); err != nil {
			return apiError(err, "create registry secret")
		}
	}

	deployment, created, err := kube.CreateOrGet(ctx, b.client.AppsV1().Deployments(b.namespace),
		toDeployment(lrp, name, b.namespace), b.cachedDeploymentByName)
	if err != nil {
		return apiError(err, "create deployment")
	}
	if !created {
		if err := checkSameLRP(deployment, lrp.LRPIdentifier); err != nil {
			return err
		}
	}

	owner := kube.ControllerRef(deployment, "apps/v1", "Deployment")
	// A Secret made by this call, or any Secret when the Deployment is new, cannot be owned by
	// this Deployment yet: patch without reading. Otherwise read it to see.
	if err := b.ensureOwned(ctx, logger, envSecret, deployment, owner, envCreated || created); err != nil {
		return err
	}
	if registrySecret != nil {
		if err := b.ensureOwned(ctx, logger, registrySecret, deployment, owner, registryCreated || created); err != nil {
			return err
		}
	}

	if len(lrp.Ports) > 0 {
		service := toService(lrp, name, b.namespace, owner)
		_, serviceCreated, err := kube.CreateIfAbsent(ctx, b.client.CoreV1().Services(b.namespace), service)
		if err != nil {
			return apiError(err, "create service")
		}
		if created && !serviceCreated {
			if err := b.replaceStaleService(ctx, logger, service, deployment); err != nil {
				return err
			}
		}
	}

	b.waitForDeployment(ctx, logger, deployment.Name, deployment.ResourceVersion, false)
	logger.Info("desired", lager.Data{"deployment": deployment.Name, "created": created})
	return nil
}

// checkSameLRP guards against touching a Deployment of the same name that is not this LRP's,
// or one that is going away.
func checkSameLRP(d *appsv1.Deployment, id opi.LRPIdentifier) error {
	if d.Labels[LabelGUID] != id.GUID || d.Labels[LabelVersion] != id.Version {
		return fmt.Errorf("create deployment: %s exists and does not belong to this lrp", d.Name)
	}
	if d.DeletionTimestamp != nil {
		return fmt.Errorf("create deployment: %w: %s is being deleted, retry later", opi.ErrUnavailable, d.Name)
	}
	return nil
}

// ensureOwned makes the Secret controlled by owner. known says the Secret is certainly not yet
// owned by it, so it is patched without reading it first. A Secret that went away meanwhile (a
// concurrent stop, or the janitor, deleted it as a leftover) is created again, owned.
func (b *Backend) ensureOwned(ctx context.Context, logger lager.Logger, secret *corev1.Secret, deployment *appsv1.Deployment, owner metav1.OwnerReference, known bool) error {
	secrets := b.client.CoreV1().Secrets(b.namespace)
	name := secret.Name
	if !known {
		existing, err := secrets.Get(ctx, name, metav1.GetOptions{})
		switch {
		case kube.Classify(err) == kube.KindNotFound:
			return b.recreateOwned(ctx, logger, secret, owner)
		case err != nil:
			return apiError(err, "get secret")
		case metav1.IsControlledBy(existing, deployment):
			return nil
		}
	}
	if _, err := kube.SetOwner(ctx, secrets, name, owner); err != nil {
		if kube.Classify(err) == kube.KindNotFound {
			return b.recreateOwned(ctx, logger, secret, owner)
		}
		return apiError(err, "set secret owner")
	}
	logger.Debug("secret-owned", lager.Data{"secret": name})
	return nil
}

// recreateOwned creates secret, owned by owner, after it was found missing.
func (b *Backend) recreateOwned(ctx context.Context, logger lager.Logger, secret *corev1.Secret, owner metav1.OwnerReference) error {
	owned := secret.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{owner}
	if _, _, err := kube.CreateIfAbsent(ctx, b.client.CoreV1().Secrets(b.namespace), owned); err != nil {
		return apiError(err, "create secret again")
	}
	logger.Info("secret-recreated", lager.Data{"secret": secret.Name})
	return nil
}

// replaceStaleService makes sure the Service of a Deployment this desire just created is owned
// by it. One that existed before the Deployment is a leftover of an earlier incarnation of the
// LRP (owned by a Deployment of the same name stopped meanwhile, which the garbage collector is
// about to delete, or by none): it is deleted, if still the same object, and created again.
func (b *Backend) replaceStaleService(ctx context.Context, logger lager.Logger, service *corev1.Service, deployment *appsv1.Deployment) error {
	services := b.client.CoreV1().Services(b.namespace)
	existing, err := services.Get(ctx, service.Name, metav1.GetOptions{})
	switch {
	case kube.Classify(err) == kube.KindNotFound:
	case err != nil:
		return apiError(err, "get service")
	case metav1.IsControlledBy(existing, deployment):
		return nil
	default:
		err := services.Delete(ctx, existing.Name, preconditionUID(existing))
		if err != nil && kube.Classify(err) != kube.KindNotFound && kube.Classify(err) != kube.KindConflict {
			return apiError(err, "delete stale service")
		}
		logger.Info("stale-service-deleted", lager.Data{"service": existing.Name})
	}
	if _, _, err := kube.CreateIfAbsent(ctx, services, service); err != nil {
		return apiError(err, "create service")
	}
	return nil
}
