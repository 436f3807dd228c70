package k8s

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"code.cloudfoundry.org/lager/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/opi"
)

// lrpIndex indexes Deployments and Pods by "<guid>/<version>" from their labels, so a read by
// LRP identifier does not depend on the object's name (which also carries app/space names).
const lrpIndex = "lrp"

func lrpIndexKey(id opi.LRPIdentifier) string { return id.GUID + "/" + id.Version }

func indexByLRP(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	guid, version := m.GetLabels()[LabelGUID], m.GetLabels()[LabelVersion]
	if guid == "" || version == "" {
		return nil, nil
	}
	return []string{lrpIndexKey(opi.LRPIdentifier{GUID: guid, Version: version})}, nil
}

// newInformers sets up (without starting) the namespace-scoped informers. They watch only
// objects with opi's source label, and keep only what reads need.
func (b *Backend) newInformers() {
	b.factory = informers.NewSharedInformerFactoryWithOptions(b.client, 0,
		informers.WithNamespace(b.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = LabelSourceType + "=" + SourceTypeApp
		}),
	)
	b.deployments = b.factory.Apps().V1().Deployments().Informer()
	b.pods = b.factory.Core().V1().Pods().Informer()
	for name, informer := range map[string]cache.SharedIndexInformer{"deployments": b.deployments, "pods": b.pods} {
		// Neither call fails on an informer that has not started.
		if err := informer.AddIndexers(cache.Indexers{lrpIndex: indexByLRP}); err != nil {
			b.logger.Error("add-indexer", err, lager.Data{"informer": name})
		}
	}
	if err := b.deployments.SetTransform(stripDeployment); err != nil {
		b.logger.Error("set-transform", err, lager.Data{"informer": "deployments"})
	}
	if err := b.pods.SetTransform(stripPod); err != nil {
		b.logger.Error("set-transform", err, lager.Data{"informer": "pods"})
	}
}

// stripDeployment keeps of a Deployment only what reads need (toLRP, toSchedulingLRP) and what
// writes take from the cache (name, UID, labels): no env, probes, security settings, selector,
// strategy, status or managed fields. Writes never send a cached Deployment back whole (update
// is a patch of the changed fields), so nothing is lost; at thousands of apps this is most of
// opi's memory.
func stripDeployment(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	out := &appsv1.Deployment{
		TypeMeta: d.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              d.Name,
			Namespace:         d.Namespace,
			UID:               d.UID,
			ResourceVersion:   d.ResourceVersion,
			Generation:        d.Generation,
			CreationTimestamp: d.CreationTimestamp,
			DeletionTimestamp: d.DeletionTimestamp,
			Labels:            d.Labels,
			Annotations:       ownAnnotations(d.Annotations),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: d.Spec.Replicas,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: d.Spec.Template.Annotations}},
		},
	}
	if c := appContainer(&d.Spec.Template.Spec); c != nil {
		out.Spec.Template.Spec.Containers = []corev1.Container{{
			Name:      c.Name,
			Image:     c.Image,
			Command:   c.Command,
			Ports:     c.Ports,
			Resources: c.Resources,
		}}
	}
	return out, nil
}

// ownAnnotations drops the annotations others put on a Deployment (the controller's revision,
// kubectl's last-applied configuration): reads only need opi's.
func ownAnnotations(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if strings.HasPrefix(k, annotationPrefix) {
			out[k] = v
		}
	}
	return out
}

// stripPod keeps of a pod only what instance reports need: identity, labels, timestamps, the
// node and the status. At thousands of pods, specs and managed fields dominate memory.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            p.Name,
			Namespace:       p.Namespace,
			UID:             p.UID,
			ResourceVersion: p.ResourceVersion,
			// The index needs only these two; the other labels (app guid, process type,
			// source, pod-template-hash) would cost a map entry each per pod.
			Labels:            map[string]string{LabelGUID: p.Labels[LabelGUID], LabelVersion: p.Labels[LabelVersion]},
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{
			Phase:             p.Status.Phase,
			Conditions:        p.Status.Conditions,
			Message:           p.Status.Message,
			Reason:            p.Status.Reason,
			HostIP:            p.Status.HostIP,
			PodIP:             p.Status.PodIP,
			StartTime:         p.Status.StartTime,
			ContainerStatuses: p.Status.ContainerStatuses,
		},
	}, nil
}

// cachedDeployment is the LRP's Deployment as the cache holds it (shared: do not modify), nil
// when absent or being deleted.
func (b *Backend) cachedDeployment(id opi.LRPIdentifier) *appsv1.Deployment {
	objs, err := b.deployments.GetIndexer().ByIndex(lrpIndex, lrpIndexKey(id))
	if err != nil {
		return nil
	}
	var found *appsv1.Deployment
	for _, obj := range objs {
		d, ok := obj.(*appsv1.Deployment)
		if !ok || d.DeletionTimestamp != nil {
			continue
		}
		if found == nil || d.Name < found.Name {
			found = d
		}
	}
	return found
}

// cachedDeploymentByName is the named Deployment as the cache holds it.
func (b *Backend) cachedDeploymentByName(name string) (*appsv1.Deployment, bool) {
	obj, exists, err := b.deployments.GetIndexer().GetByKey(b.namespace + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	d, ok := obj.(*appsv1.Deployment)
	return d, ok
}

// cachedPods are the LRP's pods as the cache holds them (shared: do not modify).
func (b *Backend) cachedPods(id opi.LRPIdentifier) []*corev1.Pod {
	objs, err := b.pods.GetIndexer().ByIndex(lrpIndex, lrpIndexKey(id))
	if err != nil {
		return nil
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods
}

// rankedPods are the pods that are not terminating, ordered by creation time then name: a
// pod's position is its instance index.
func rankedPods(pods []*corev1.Pod) []*corev1.Pod {
	live := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	sort.Slice(live, func(i, j int) bool {
		ti, tj := live[i].CreationTimestamp, live[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return live[i].Name < live[j].Name
	})
	return live
}

// findDeployment is the LRP's live Deployment: from the cache, or, when the cache does not
// have it (yet), from one label-selected LIST, since the name cannot be derived from the
// identifier alone. ErrNotFound when neither has it.
func (b *Backend) findDeployment(ctx context.Context, id opi.LRPIdentifier) (*appsv1.Deployment, error) {
	if d := b.cachedDeployment(id); d != nil {
		return d, nil
	}
	list, err := b.client.AppsV1().Deployments(b.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: lrpSelector(id),
	})
	if err != nil {
		return nil, apiError(err, "list deployments")
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			return &list.Items[i], nil
		}
	}
	return nil, notFound(id)
}

// notFound is the error for an LRP this backend does not run.
func notFound(id opi.LRPIdentifier) error {
	return fmt.Errorf("lrp %s: %w", id.ProcessGUID(), opi.ErrNotFound)
}

// The waits below make a write visible to reads of this backend before it returns. They are
// bounded by readWaitTimeout; a wait that times out is logged and the write still succeeds.

// waitForDeployment waits until the cache holds Deployment name at resourceVersion rv or
// newer; with goneOK, also until it is gone (deleted meanwhile).
func (b *Backend) waitForDeployment(ctx context.Context, logger lager.Logger, name, rv string, goneOK bool) {
	ok := kube.WaitUntil(ctx, cachePollInterval, b.readWaitTimeout, func() bool {
		d, exists := b.cachedDeploymentByName(name)
		if !exists {
			return goneOK
		}
		return kube.Observed(d.ResourceVersion, rv)
	})
	if !ok {
		logger.Info("cache-wait-timed-out", lager.Data{"deployment": name, "resource-version": rv})
	}
}

// waitForNoDeployment waits until the cache has no live Deployment of the LRP.
func (b *Backend) waitForNoDeployment(ctx context.Context, logger lager.Logger, id opi.LRPIdentifier) {
	ok := kube.WaitUntil(ctx, cachePollInterval, b.readWaitTimeout, func() bool {
		return b.cachedDeployment(id) == nil
	})
	if !ok {
		logger.Info("cache-wait-timed-out", lager.Data{"waiting-for": "deployment-gone"})
	}
}

// waitForPodGone waits until the cache no longer reports pod uid as live.
func (b *Backend) waitForPodGone(ctx context.Context, logger lager.Logger, id opi.LRPIdentifier, uid types.UID) {
	ok := kube.WaitUntil(ctx, cachePollInterval, b.readWaitTimeout, func() bool {
		for _, p := range b.cachedPods(id) {
			if p.UID == uid && p.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})
	if !ok {
		logger.Info("cache-wait-timed-out", lager.Data{"waiting-for": "pod-gone", "pod-uid": uid})
	}
}
