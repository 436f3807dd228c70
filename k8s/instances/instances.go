// Package instances is the read side of opi's objects for a reader outside the backend (the
// node agent, an SSH proxy): one namespace's LRP workloads, their pods and the task Jobs, held
// as the backend's records, with the instance index `GET /instances` reports. It is the only
// door from outside k8s/ to the backend's store and ranking: what it returns is what opi
// itself answers CC with, computed by the same code.
package instances

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"code.cloudfoundry.org/lager/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/opi"
)

// The records a Reader holds: the backend's own (package store), named here for readers that
// cannot import it.
type (
	// Pod is an LRP's pod as the ranking reads it: its name, uid, creation and deletion times,
	// its LRP, its state, whether it ended, its image, ordinal and IP.
	Pod = store.PodRecord
	// Workload is an LRP's Deployment or StatefulSet: its LRP, CC's names and the counts the
	// ranking needs.
	Workload = store.WorkloadRecord
	// Job is a task's Job: the task's and its app's names and guids.
	Job = store.JobRecord
	// LRPRef names the LRP an object belongs to.
	LRPRef = store.LRPRef
)

// Options configure a Reader.
type Options struct {
	// Namespace is where opi runs apps.
	Namespace string
	// StatefulSets: opi runs LRPs as StatefulSets (its `backend: statefulsets`), whose
	// instances are indexed by ordinal.
	StatefulSets bool
	Logger       lager.Logger
}

// Sources list and watch the objects of opi's apps namespace a Reader holds, one ListerWatcher
// of the namespace per kind, unfiltered (the Reader narrows them to opi's with its selectors):
// from a clientset (package k8s/instances/clientset) or from REST clients of only the API
// groups they need (package k8s/instances/restsources, the node agent's). StatefulSets is only
// read with Options.StatefulSets, Deployments only without.
type Sources struct {
	Deployments, StatefulSets, Pods, Jobs cache.ListerWatcher
}

// Filtered is lw with tweak applied to the options of each list and watch (selectors).
func Filtered(lw cache.ListerWatcher, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	return filtered{lw: lw, tweak: tweak}
}

type filtered struct {
	lw    cache.ListerWatcher
	tweak func(*metav1.ListOptions)
}

func (f filtered) List(o metav1.ListOptions) (runtime.Object, error) {
	f.tweak(&o)
	return f.lw.List(o)
}

func (f filtered) Watch(o metav1.ListOptions) (watch.Interface, error) {
	f.tweak(&o)
	return f.lw.Watch(o)
}

// IsWatchListSemanticsUnSupported passes on what lw says of streaming lists (client-go's
// informers ask it: a fake clientset has none).
func (f filtered) IsWatchListSemanticsUnSupported() bool {
	u, ok := f.lw.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// NewInformer is an informer of lw's objects (of type obj) indexed by namespace, not started.
func NewInformer(lw cache.ListerWatcher, obj runtime.Object) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// Reader holds the namespace's LRP workloads, their pods and the task Jobs in informer caches.
// Build it with New, then Start it; its look-ups answer from the caches.
type Reader struct {
	informers []cache.SharedIndexInformer
	running   sync.WaitGroup
	pods      cache.SharedIndexInformer
	store     *store.Store
	namespace string
	byOrdinal bool
}

// New builds a Reader on its own informers of src (not started). Its pod cache keeps of each
// pod only what the ranking reads (Pod), so a node's reader stays small.
func New(src Sources, o Options) *Reader {
	appsOnly := func(lo *metav1.ListOptions) { lo.LabelSelector = names.AppSelector }
	var workloads cache.SharedIndexInformer
	kind, resource := "deployment", "deployments"
	if o.StatefulSets {
		kind, resource = "statefulset", "statefulsets"
		workloads = NewInformer(Filtered(src.StatefulSets, appsOnly), &appsv1.StatefulSet{})
	} else {
		workloads = NewInformer(Filtered(src.Deployments, appsOnly), &appsv1.Deployment{})
	}
	pods := NewInformer(Filtered(src.Pods, appsOnly), &corev1.Pod{})
	jobs := NewInformer(Filtered(src.Jobs, func(lo *metav1.ListOptions) { lo.LabelSelector = names.TaskSelector }), &batchv1.Job{})
	s := store.New(store.Config{
		Namespace: o.Namespace, Workloads: workloads, Pods: pods, Jobs: jobs,
		Resources: [3]string{resource, "pods", "jobs"}, KindName: kind,
		ByOrdinal: o.StatefulSets,
		Logger:    o.Logger,
	})
	// After store.New, whose transform (a full record) this one replaces.
	if err := pods.SetTransform(rankedPodOf); err != nil {
		o.Logger.Error("set-transform", err, lager.Data{"informer": "pods"})
	}
	return &Reader{informers: []cache.SharedIndexInformer{workloads, pods, jobs}, pods: pods, store: s, namespace: o.Namespace, byOrdinal: o.StatefulSets}
}

// rankedPodOf is the pod cache's transform: the store's record, cut to what the ranking reads.
func rankedPodOf(obj any) (any, error) {
	r, err := store.RecordPod(obj)
	if err != nil {
		return r, err
	}
	p, ok := r.(*store.PodRecord)
	if !ok {
		return r, nil
	}
	return &store.PodRecord{
		ObjectMeta: p.ObjectMeta, LRPRef: p.LRPRef,
		State: p.State, Terminal: p.Terminal, Image: p.Image, Ordinal: p.Ordinal,
		// An SSH tunnel may name the instance by its IP.
		IP: p.IP,
	}, nil
}

// Start starts the informers and waits until every cache has synced. It fails when ctx ends
// first, naming the cache.
func (r *Reader) Start(ctx context.Context) error {
	for _, inf := range r.informers {
		r.running.Add(1)
		go func() { defer r.running.Done(); inf.RunWithContext(ctx) }()
	}
	for i, inf := range r.informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("the %s cache did not sync", [...]string{"workload", "pod", "job"}[i])
		}
	}
	r.store.SetSynced()
	return nil
}

// Shutdown waits for the informers, which stop when Start's context ends.
func (r *Reader) Shutdown() { r.running.Wait() }

// Job is the task Job of that name.
func (r *Reader) Job(name string) (*Job, bool) { return r.store.Job(name) }

// Workload is the workload of the LRP, nil when the cache has none.
func (r *Reader) Workload(id opi.LRPIdentifier) *Workload { return r.store.Workload(id) }

// Index is the instance index opi reports for the pod of the workload w.
func (r *Reader) Index(pod *Pod, w *Workload) int32 {
	return store.InstanceIndex(pod, r.store.Pods(w.ID()), w, r.byOrdinal)
}

// Instance is the pod `GET /instances` reports at that index for the LRP (with the LRP's
// workload, whose counts and names it was ranked by); false when the LRP has no workload or no
// pod reports that index.
func (r *Reader) Instance(id opi.LRPIdentifier, index int32) (*Pod, *Workload, bool) {
	w := r.store.Workload(id)
	if w == nil || index < 0 {
		return nil, nil, false
	}
	pods := r.store.Instances(w)
	if int(index) >= len(pods) || pods[index] == nil {
		return nil, nil, false
	}
	return pods[index], w, true
}

// Pod is the LRP pod of that name (an SSH session follows the pod it entered), false when the
// cache has none.
func (r *Reader) Pod(name string) (*Pod, bool) { return r.store.PodByKey(r.namespace + "/" + name) }

// CachedPods are the objects the pod cache holds (what a memory bound is about).
func (r *Reader) CachedPods() []any { return r.pods.GetStore().List() }

// PodOf is the record of a pod the caller holds (from an informer of its own).
func PodOf(p *corev1.Pod) *Pod { return store.PodRecordOf(p) }

// LogIdentity is who an instance's log lines are about, as every line opi sends for it carries
// it: the app guid as source_id, the index as instance_id, and the app's tags with that source
// type ("" is the process's own, APP/PROC/<TYPE>).
func LogIdentity(w *Workload, p *Pod, index int32, sourceType string) loggregator.Identity {
	processType := w.ProcessType
	if processType == "" {
		processType = "web"
	}
	if sourceType == "" {
		sourceType = loggregator.ProcessSourceType(processType)
	}
	return loggregator.Identity{SourceID: w.AppGUID, InstanceID: strconv.Itoa(int(index)), Tags: loggregator.AppTags{
		SourceType: sourceType,
		AppID:      w.AppGUID, AppName: w.AppName,
		SpaceID: w.SpaceGUID, SpaceName: w.SpaceName,
		OrgID: w.OrgGUID, OrgName: w.OrgName,
		ProcessID: w.GUID, ProcessType: processType,
		ProcessInstanceID: string(p.UID),
	}.Map()}
}
