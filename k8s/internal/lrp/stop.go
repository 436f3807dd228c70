package lrp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// StopLRP deletes the LRP's Secrets by name (nothing owns them: see DesireLRP), then its
// workload (Deployment or StatefulSet) with background propagation: the garbage collector then
// removes its ReplicaSets and pods and the Service and routing objects it owns; one API call
// per object. The Secrets go first: a desire of the same LRP made again between the calls
// finds the workload still there, so the Secrets it creates are its own and never deleted by
// this stop (were the workload deleted first, such a desire could make the old Secret its own
// just before this stop deleted it).
//
// The workload is deleted conditional on its uid. When a namesake has replaced it (a racing
// desire created it after the cache showed the old one, and this stop may have taken its
// Secret by name), every live workload of the LRP is deleted too. A workload that lands after
// these deletes finds its Secret gone and makes it again (see keepSecret): the LRP ends absent
// or complete. When there is no workload, the LRP's Secrets and Service that nothing owns
// (left by a desire interrupted before its workload, or a racing desire's) are deleted, and
// then a workload that landed meanwhile (see deleteUnowned). Stopping an absent LRP succeeds.
func (s *Service) StopLRP(ctx context.Context, id opi.LRPIdentifier) error {
	logger := s.logger.Session("stop-lrp", lager.Data{"process-guid": id.ProcessGUID()})
	if err := s.cache.CheckWritable(ctx); err != nil {
		return err
	}
	w, err := s.cache.FindWorkload(ctx, id)
	if err != nil && !errors.Is(err, opi.ErrNotFound) {
		return err
	}
	if w != nil {
		if err := s.deleteSecrets(ctx, w); err != nil {
			return err
		}
		err := s.kind.Delete(ctx, w.Name, kube.InBackground(kube.PreconditionUID(&w.ObjectMeta)))
		switch kube.Classify(err) {
		case kube.KindConflict:
			// A namesake replaced w after the cache showed it: a racing desire's, which may
			// have lost its Secret to this stop.
			if err := s.deleteLanded(ctx, logger, metav1.ListOptions{LabelSelector: names.LRPSelector(id)}); err != nil {
				return err
			}
		case kube.KindNotFound:
		default:
			if err != nil {
				return kube.APIError(err, "delete "+s.kindName())
			}
		}
		if err := s.cache.WaitForWorkloadGone(ctx, logger, w.Name, w.UID); err != nil {
			return err
		}
	} else if err := s.deleteUnowned(ctx, logger, id); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// deleteSecrets deletes the Secrets of the workload w by name, at once; one that is gone
// already is not an error.
func (s *Service) deleteSecrets(ctx context.Context, w *store.WorkloadRecord) error {
	secrets := []string{names.EnvSecretName(w.Name)}
	if w.PullsWithSecret {
		secrets = append(secrets, names.RegistrySecretName(w.Name))
	}
	client := s.client.CoreV1().Secrets(s.namespace)
	errs := make([]error, len(secrets))
	var wg sync.WaitGroup
	for i, name := range secrets {
		wg.Go(func() {
			if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && kube.Classify(err) != kube.KindNotFound {
				errs[i] = kube.APIError(err, "delete secret")
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// deleteUnowned deletes the LRP's Secrets and Service that have no controller. The names are
// not known without the workload, so they are found by their labels, listing their metadata
// only (no Secret's value passes through opi). Each delete is conditional on the object as
// listed. A Service's failed delete is logged: it leaves garbage behind, not a running app.
//
// A Secret owned by nothing may be a racing desire's, whose workload create is still in flight
// (a desire creates both at once, see DesireLRP). So once this stop may have deleted one (its
// delete succeeded, or failed in a way that does not say it did not happen), a workload of the
// LRP that exists now (it landed after the stop looked) is deleted too: every delete of an
// LRP's Secret is followed by a delete of the workload that exists after it, and a desire
// whose workload lands after that delete finds its Secret gone and makes it again
// (keepSecret). Either way the LRP ends absent or complete, never a workload without its
// Secret. A failed Secret delete, or a failure to delete that workload, is the stop's error,
// for CC to retry.
func (s *Service) deleteUnowned(ctx context.Context, logger lager.Logger, id opi.LRPIdentifier) error {
	selector := metav1.ListOptions{LabelSelector: names.LRPSelector(id)}
	var secretErrs []error
	mayHaveDeletedSecret := false
	for _, kind := range []struct {
		resource schema.GroupVersionResource
		del      func(context.Context, string, metav1.DeleteOptions) error
	}{
		{hooks.SecretsResource, s.client.CoreV1().Secrets(s.namespace).Delete},
		{hooks.ServicesResource, s.client.CoreV1().Services(s.namespace).Delete},
	} {
		list, err := s.lists(kind.resource)(ctx, selector)
		if err != nil {
			logger.Error("list-"+kind.resource.Resource, err)
			continue
		}
		isSecret := kind.resource == hooks.SecretsResource
		for i := range list.Items {
			if metav1.GetControllerOf(&list.Items[i]) != nil {
				continue
			}
			err := kind.del(ctx, list.Items[i].Name, kube.Unchanged(&list.Items[i]))
			if kube.GoneOrChanged(err) {
				continue
			}
			mayHaveDeletedSecret = mayHaveDeletedSecret || isSecret
			if err != nil {
				logger.Error("delete-unowned-"+strings.TrimSuffix(kind.resource.Resource, "s"), err, lager.Data{"object": list.Items[i].Name})
				if isSecret {
					secretErrs = append(secretErrs, kube.APIError(err, "delete secret"))
				}
			}
		}
	}
	if mayHaveDeletedSecret {
		if err := s.deleteLanded(ctx, logger, selector); err != nil {
			return err
		}
	}
	return errors.Join(secretErrs...)
}

// deleteLanded deletes, conditional on its uid, each live workload the API server lists for
// selector (one LRP's), and waits until the cache no longer holds it. A workload the cache has
// not shown yet (one that landed after the stop looked) is waited for first, so that the wait
// for it to go does not end at once with its events still to come: reads after the stop's
// answer do not list it.
func (s *Service) deleteLanded(ctx context.Context, logger lager.Logger, selector metav1.ListOptions) error {
	landed, err := s.kind.List(ctx, selector)
	if err != nil {
		return kube.APIError(err, "list "+s.kindName()+"s")
	}
	for _, w := range landed {
		if w.Meta.DeletionTimestamp != nil {
			continue
		}
		if err := s.cache.WaitForWorkload(ctx, logger, w.Meta, false, s.liveCheck(w.Meta)); err != nil {
			return err
		}
		err := s.kind.Delete(ctx, w.Meta.Name, kube.InBackground(kube.PreconditionUID(w.Meta)))
		if kube.GoneOrChanged(err) {
			continue
		}
		if err != nil {
			return kube.APIError(err, "delete "+s.kindName())
		}
		logger.Info("deleted-workload-that-landed", lager.Data{s.kindName(): w.Meta.Name})
		if err := s.cache.WaitForWorkloadGone(ctx, logger, w.Meta.Name, w.Meta.UID); err != nil {
			return err
		}
	}
	return nil
}

// StopInstance deletes the pod reported at index (store.InstancePods at this moment); the workload
// replaces it (a StatefulSet under the same name). ErrNotFound when the cache has no such LRP,
// ErrInvalid for an index outside 0..instances-1; no pod at a valid index is success.
func (s *Service) StopInstance(ctx context.Context, id opi.LRPIdentifier, index int32) error {
	logger := s.logger.Session("stop-instance", lager.Data{"process-guid": id.ProcessGUID(), "index": index})
	if err := s.cache.CheckWritable(ctx); err != nil {
		return err
	}
	w := s.cache.Workload(id)
	if w == nil {
		return store.NotFound(id)
	}
	replicas := w.ReplicaCount
	if index < 0 || index >= replicas {
		if replicas == 0 {
			return fmt.Errorf("%w: instance index %d out of range: lrp has no instances", opi.ErrInvalid, index)
		}
		return fmt.Errorf("%w: instance index %d out of range 0..%d", opi.ErrInvalid, index, replicas-1)
	}
	pods := s.cache.Instances(w)
	if int(index) >= len(pods) || pods[index] == nil {
		logger.Info("no-pod-at-index")
		return nil
	}
	pod := pods[index]
	err := s.client.CoreV1().Pods(s.namespace).Delete(ctx, pod.Name, kube.PreconditionUID(pod))
	switch kube.Classify(err) {
	case kube.KindNotFound, kube.KindConflict:
		// Gone already, or replaced by a namesake: the instance named has stopped.
		logger.Info("pod-already-gone", lager.Data{"pod": pod.Name})
		return nil
	}
	if err != nil {
		return kube.APIError(err, "delete pod")
	}
	if err := s.cache.WaitForPodGone(ctx, logger, id, pod.UID); err != nil {
		return err
	}
	logger.Info("stopped", lager.Data{"pod": pod.Name})
	return nil
}
