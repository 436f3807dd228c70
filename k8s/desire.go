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
	if err := b.ensureOwned(ctx, logger, envSecret.Name, deployment, owner, envCreated || created); err != nil {
		return err
	}
	if registrySecret != nil {
		if err := b.ensureOwned(ctx, logger, registrySecret.Name, deployment, owner, registryCreated || created); err != nil {
			return err
		}
	}

	if len(lrp.Ports) > 0 {
		service := toService(lrp, name, b.namespace, owner)
		if _, _, err := kube.CreateIfAbsent(ctx, b.client.CoreV1().Services(b.namespace), service); err != nil {
			return apiError(err, "create service")
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

// ensureOwned makes the named Secret controlled by owner. known says the Secret is certainly
// not yet owned by it, so it is patched without reading it first.
func (b *Backend) ensureOwned(ctx context.Context, logger lager.Logger, name string, deployment *appsv1.Deployment, owner metav1.OwnerReference, known bool) error {
	secrets := b.client.CoreV1().Secrets(b.namespace)
	if !known {
		secret, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return apiError(err, "get secret")
		}
		if metav1.IsControlledBy(secret, deployment) {
			return nil
		}
	}
	if _, err := kube.SetOwner(ctx, secrets, name, owner); err != nil {
		return apiError(err, "set secret owner")
	}
	logger.Debug("secret-owned", lager.Data{"secret": name})
	return nil
}
