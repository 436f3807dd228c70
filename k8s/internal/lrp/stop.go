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
// just before this stop deleted it). When there is no workload, Secrets and a Service of the
// LRP that nothing owns (left by a desire interrupted before its workload) are looked for and
// deleted, best effort. Stopping an absent LRP succeeds.
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
		err := s.kind.Delete(ctx, w.Name, kube.InBackground(metav1.DeleteOptions{}))
		if err != nil && kube.Classify(err) != kube.KindNotFound {
			return kube.APIError(err, "delete "+s.kindName())
		}
		if err := s.cache.WaitForWorkloadGone(ctx, logger, w.Name, w.UID); err != nil {
			return err
		}
	} else {
		s.deleteUnowned(ctx, logger, id)
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
// only (no Secret's value passes through opi). Failures are logged: they leave garbage behind,
// not a running app.
func (s *Service) deleteUnowned(ctx context.Context, logger lager.Logger, id opi.LRPIdentifier) {
	selector := metav1.ListOptions{LabelSelector: names.LRPSelector(id)}
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
		for i := range list.Items {
			if metav1.GetControllerOf(&list.Items[i]) == nil {
				if err := kube.DeleteAsListed(ctx, kind.del, &list.Items[i]); err != nil {
					logger.Error("delete-unowned-"+strings.TrimSuffix(kind.resource.Resource, "s"), err, lager.Data{"object": list.Items[i].Name})
				}
			}
		}
	}
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
