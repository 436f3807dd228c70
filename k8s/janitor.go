package k8s

import (
	"context"
	"errors"
	"time"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/opi-bridge/opi/k8s/hooks"
	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/k8s/store"
	"github.com/opi-bridge/opi/opi"
)

// DefaultJanitorPeriod is how often the janitor looks for leftovers when none is configured.
const DefaultJanitorPeriod = time.Minute

// DefaultJanitorGrace is how old a leftover must be before the janitor removes it: far longer
// than any desire takes, so it never races one in flight.
const DefaultJanitorGrace = 5 * time.Minute

// runJanitor sweeps every period until ctx ends. The first sweep is one period after start.
func (b *Backend) runJanitor(ctx context.Context) {
	logger := b.logger.Session("janitor", lager.Data{"period": b.janitorPeriod.String(), "grace": b.janitorGrace.String()})
	logger.Info("started")
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.janitorPeriod):
		}
		b.Sweep(ctx)
	}, 0)
}

// Sweep cleans up what desires that never completed left behind (opi killed between creating
// an LRP's Secret and its Deployment, and CC never desiring that LRP again): opi's Secrets and
// Services that no object controls, older than the grace period, whose LRP has no Deployment,
// are deleted. An unowned Secret whose LRP's Deployment does exist (opi killed before it set
// the owner) is given that owner instead, so that stopping the LRP removes it, and a
// Deployment older than the grace that lacks a hook's object (its Service, routing objects,
// egress policy: opi killed before the last step) gets it (each hook lists its objects once
// per sweep, see hook.missing). A Deployment older than the grace whose Secret is missing (opi
// killed between the two rounds of a desire) is deleted, so that CC desires it again (see
// deleteIncomplete). Failures are logged; the next sweep tries again. Only object names are logged,
// never their content. Its LISTs ask for metadata only (Options.Metadata): the Secrets' values
// never reach opi.
func (b *Backend) Sweep(ctx context.Context) {
	logger := b.logger.Session("sweep")
	// Not while a cache is stale: what it lacks would look like leftovers.
	if b.store.CheckWritable() != nil {
		return
	}
	selector := metav1.ListOptions{LabelSelector: spec.LabelSourceType + "=" + spec.SourceTypeApp}
	cutoff := time.Now().Add(-b.janitorGrace)

	// Metadata only (see hooks.MetadataLists), page by page: no Secret's value passes through
	// opi, and a sweep of thousands of apps holds one page of metadata at a time.
	secretNames := map[string]bool{}
	err := kube.ListPages(ctx, selector, b.listMetadata(hooks.SecretsResource), func(page *metav1.PartialObjectMetadataList) error {
		for i := range page.Items {
			secretNames[page.Items[i].Name] = true
			b.sweepSecret(ctx, logger, &page.Items[i], cutoff)
		}
		return nil
	})
	if err != nil {
		logger.Error("list-secrets", err)
		secretNames = nil
	}

	services := b.client.CoreV1().Services(b.namespace)
	err = kube.ListPages(ctx, selector, b.listMetadata(hooks.ServicesResource), func(page *metav1.PartialObjectMetadataList) error {
		for i := range page.Items {
			s := &page.Items[i]
			if _, stale := b.leftover(ctx, logger, s, cutoff); !stale {
				continue
			}
			if kube.DeleteAsListed(ctx, logger, services.Delete, s, "delete-service") {
				logger.Info("deleted-leftover-service", lager.Data{"service": s.Name})
			}
		}
		return nil
	})
	if err != nil {
		logger.Error("list-services", err)
	}

	var old []*store.WorkloadRecord
	for _, d := range b.store.Workloads() {
		if d.DeletionTimestamp == nil && d.CreationTimestamp.Time.Before(cutoff) && d.LRPKey() != "" {
			if secretNames != nil && b.deleteIncomplete(ctx, logger, d, secretNames) {
				continue
			}
			old = append(old, d)
		}
	}
	b.completeHooks(ctx, logger, old)
}

// deleteIncomplete deletes a workload older than the grace whose env Secret (or image pull
// Secret, when it names one) is missing, and says whether it did: opi was killed between
// creating the workload and its Secrets (see DesireLRP), or someone deleted a Secret. Its pods
// cannot start, and only CC has the Secret's content: with the workload gone, CC's next sync
// sees the LRP missing and desires it again. The delete is conditional on the workload's uid;
// secrets lists the names of opi's Secrets as listed in this sweep, after the cache took d.
func (b *Backend) deleteIncomplete(ctx context.Context, logger lager.Logger, d *store.WorkloadRecord, secrets map[string]bool) bool {
	missing := ""
	switch {
	case !secrets[spec.EnvSecretName(d.Name)]:
		missing = spec.EnvSecretName(d.Name)
	case d.PullsWithSecret && !secrets[spec.RegistrySecretName(d.Name)]:
		missing = spec.RegistrySecretName(d.Name)
	default:
		return false
	}
	background := metav1.DeletePropagationBackground
	opts := kube.PreconditionUID(d)
	opts.PropagationPolicy = &background
	data := lager.Data{b.kindName(): d.Name, "missing-secret": missing}
	if err := b.kind.Delete(ctx, d.Name, opts); err != nil {
		if !kube.GoneOrChanged(err) {
			logger.Error("delete-incomplete-workload", err, data)
		}
		return true
	}
	logger.Info("deleted-incomplete-workload", data)
	return true
}

// sweepSecret gives an unowned Secret of a running LRP its Deployment, or deletes a leftover;
// s is the Secret's metadata as listed.
func (b *Backend) sweepSecret(ctx context.Context, logger lager.Logger, s *metav1.PartialObjectMetadata, cutoff time.Time) {
	secrets := b.client.CoreV1().Secrets(b.namespace)
	deployment, stale := b.leftover(ctx, logger, s, cutoff)
	switch {
	case deployment != nil && s.CreationTimestamp.Time.Before(cutoff) &&
		(s.Name == spec.EnvSecretName(deployment.Name) || s.Name == spec.RegistrySecretName(deployment.Name)):
		// Only past the grace: a younger one is a desire's in flight, which owns it itself.
		// Adopted only if the Deployment is still live and the Secret unchanged since the
		// list: a desire in flight may be owning it meanwhile.
		if live, err := b.liveCheck(deployment)(ctx); err != nil || !live {
			return
		}
		if _, err := kube.SetOwner(ctx, secrets, s.Name, s.ResourceVersion, b.controllerRef(deployment)); err != nil {
			logger.Error("adopt-secret", err, lager.Data{"secret": s.Name})
			return
		}
		logger.Info("adopted-secret", lager.Data{"secret": s.Name, "deployment": deployment.Name})
	case stale:
		if kube.DeleteAsListed(ctx, logger, secrets.Delete, s, "delete-secret") {
			logger.Info("deleted-leftover-secret", lager.Data{"secret": s.Name})
		}
	}
}

// leftover looks at an object of an LRP that no object controls: it returns the LRP's live
// Deployment when there is one, else whether the object is older than cutoff (and so a
// leftover to delete). Controlled objects, and objects whose LRP cannot be checked, are
// neither.
func (b *Backend) leftover(ctx context.Context, logger lager.Logger, obj metav1.Object, cutoff time.Time) (*store.WorkloadRecord, bool) {
	if metav1.GetControllerOf(obj) != nil || obj.GetDeletionTimestamp() != nil {
		return nil, false
	}
	id := opi.LRPIdentifier{GUID: obj.GetLabels()[spec.LabelGUID], Version: obj.GetLabels()[spec.LabelVersion]}
	if id.GUID == "" || id.Version == "" {
		return nil, false
	}
	// The cache first; an object the cache does not have is confirmed absent by the API, since
	// a desire in flight may have just created it.
	deployment, err := b.store.FindWorkload(ctx, id)
	if err == nil {
		return deployment, false
	}
	if !errors.Is(err, opi.ErrNotFound) {
		logger.Error("find-deployment", err, lager.Data{"object": obj.GetName()})
		return nil, false
	}
	return nil, obj.GetCreationTimestamp().Time.Before(cutoff)
}
