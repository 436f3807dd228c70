package lrp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// StopLRP deletes the LRP's workload (Deployment or StatefulSet) with background propagation: the garbage collector then
// removes its ReplicaSets and pods and the Secrets and Service it owns; one API call. When there
// is no workload, Secrets and a Service of the LRP that nothing owns (left by a desire
// interrupted before its workload) are looked for and deleted, best effort; leftovers beside a
// workload (a desire interrupted before it set owners) are the janitor's. Stopping an absent
// LRP succeeds.
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
