package k8s

import (
	"context"
	"fmt"
	"sort"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/opi"
)

// lrpIndex indexes workloads and pods by "<guid>/<version>" from their labels, so a read by
// LRP identifier does not depend on the object's name (which also carries app/space names).
const lrpIndex = "lrp"

func lrpIndexKey(id opi.LRPIdentifier) string { return id.GUID + "/" + id.Version }

func indexByLRP(obj any) ([]string, error) {
	r, ok := obj.(interface{ lrpKey() string })
	if !ok || r.lrpKey() == "" {
		return nil, nil
	}
	return []string{r.lrpKey()}, nil
}

// appIndex indexes workloads by their app guid label, for a task's egress rules (those of its
// app's LRP).
const appIndex = "app"

func indexByApp(obj any) ([]string, error) {
	r, ok := obj.(*workloadRecord)
	if !ok || r.appGUID == "" {
		return nil, nil
	}
	return []string{r.appGUID}, nil
}

// newInformers sets up (without starting) the namespace-scoped informers. They watch only
// objects with opi's source label, and keep only what reads need.
func (b *Backend) newInformers() {
	b.factory = informers.NewSharedInformerFactoryWithOptions(b.client, 0,
		informers.WithNamespace(b.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = spec.LabelSourceType + "=" + spec.SourceTypeApp
		}),
	)
	b.workloads = b.kind.Informer(b.factory)
	b.pods = b.factory.Core().V1().Pods().Informer()
	// AddIndexers does not fail on an informer that has not started, nor does SetTransform.
	if err := b.workloads.AddIndexers(cache.Indexers{lrpIndex: indexByLRP, appIndex: indexByApp, changesIndex: b.countChanges(&b.workloadChanges)}); err != nil {
		b.logger.Error("add-indexer", err, lager.Data{"informer": "workloads"})
	}
	if err := b.pods.AddIndexers(cache.Indexers{lrpIndex: indexByLRP, changesIndex: b.countChanges(nil)}); err != nil {
		b.logger.Error("add-indexer", err, lager.Data{"informer": "pods"})
	}
	if err := b.workloads.SetTransform(recordWorkload); err != nil {
		b.logger.Error("set-transform", err, lager.Data{"informer": "workloads"})
	}
	if err := b.pods.SetTransform(recordPod); err != nil {
		b.logger.Error("set-transform", err, lager.Data{"informer": "pods"})
	}
}

// countChanges is the index function of an informer's changes (see changesIndex): it counts
// them in c (when not nil) and wakes the writes waiting for the caches (waitForCache). The
// store calls it under its lock, with the change already in place, for every object it adds,
// updates, deletes or replaces: a waiter woken by it reads the cache once the change is
// visible, and a reader that sees the change finds the count already past it (an event
// handler, called later and asynchronously, would give neither).
func (b *Backend) countChanges(c *changeCounter) cache.IndexFunc {
	return func(any) ([]string, error) {
		if c != nil {
			c.n.Add(1)
		}
		b.cacheChanged.Fire()
		return nil, nil
	}
}

// waitForCache waits until cond holds of the caches, looking again on each of their changes,
// at most readWaitTimeout.
func (b *Backend) waitForCache(ctx context.Context, cond func() bool) bool {
	return b.cacheChanged.WaitFor(ctx, b.readWaitTimeout, cond)
}

// cachedWorkload is the LRP's workload as the cache holds it (shared: do not modify), nil
// when absent or being deleted.
func (b *Backend) cachedWorkload(id opi.LRPIdentifier) *workloadRecord {
	objs, err := b.workloads.GetIndexer().ByIndex(lrpIndex, lrpIndexKey(id))
	if err != nil {
		return nil
	}
	var found *workloadRecord
	for _, obj := range objs {
		d, ok := obj.(*workloadRecord)
		if !ok || d.DeletionTimestamp != nil {
			continue
		}
		if found == nil || d.Name < found.Name {
			found = d
		}
	}
	return found
}

// appEgressRules are the egress rules of the app's LRP (found: the app has one): the newest of
// its workloads in the cache, as LRPs of one app (its processes, versions) share its security
// groups and the newest is the one CC desired last.
func (b *Backend) appEgressRules(appGUID string) (rules []opi.EgressRule, found bool) {
	objs, err := b.workloads.GetIndexer().ByIndex(appIndex, spec.LabelValue(appGUID))
	if err != nil || appGUID == "" {
		return nil, false
	}
	var newest *workloadRecord
	for _, obj := range objs {
		d, ok := obj.(*workloadRecord)
		if !ok || d.DeletionTimestamp != nil {
			continue
		}
		if newest == nil || d.CreationTimestamp.After(newest.CreationTimestamp.Time) ||
			(d.CreationTimestamp.Equal(&newest.CreationTimestamp) && d.Name < newest.Name) {
			newest = d
		}
	}
	if newest == nil {
		return nil, false
	}
	return spec.ParseEgressAnnotation(newest.egressJSON), true
}

// cachedWorkloadByName is the named workload as the cache holds it.
func (b *Backend) cachedWorkloadByName(name string) (*workloadRecord, bool) {
	obj, exists, err := b.workloads.GetIndexer().GetByKey(b.namespace + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	d, ok := obj.(*workloadRecord)
	return d, ok
}

// cachedWorkloads are every workload the cache holds (shared: do not modify).
func (b *Backend) cachedWorkloads() []*workloadRecord {
	objs := b.workloads.GetIndexer().List()
	out := make([]*workloadRecord, 0, len(objs))
	for _, obj := range objs {
		if d, ok := obj.(*workloadRecord); ok {
			out = append(out, d)
		}
	}
	return out
}

// cachedPods are the LRP's pods as the cache holds them (shared: do not modify).
func (b *Backend) cachedPods(id opi.LRPIdentifier) []*podRecord {
	objs, err := b.pods.GetIndexer().ByIndex(lrpIndex, lrpIndexKey(id))
	if err != nil {
		return nil
	}
	pods := make([]*podRecord, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*podRecord); ok {
			pods = append(pods, p)
		}
	}
	return pods
}

// rankedPods are the pods that report a Deployment's instances, at most its desired count, in
// index order (ADR 0002). A pod that cannot serve never hides or displaces one that can:
//   - terminating pods are left out;
//   - failed pods (evicted, shut down: the ReplicaSet leaves them and starts a replacement) are
//     left out while live pods fill the desired count, and fill only the indices no live pod
//     takes, newest first, so a crash nothing has replaced yet still shows;
//   - when there are more live pods than desired (a rollout's surge, a scale-down), the ones
//     kept are, in turn, Ready pods of the current template, Ready superseded pods (an old
//     ReplicaSet's, still serving), the current template's starting or crashing pods, and
//     superseded pods that are not Ready; older before newer within each.
//
// The kept pods are then ranked by creation time, then name, so an index stays with its pod
// while the set of pods does not change.
func rankedPods(pods []*podRecord, d *workloadRecord) []*podRecord {
	replicas := int(d.replicas)
	live := make([]*podRecord, 0, len(pods))
	var failed []*podRecord
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
		case p.terminal:
			failed = append(failed, p)
		default:
			live = append(live, p)
		}
	}
	if len(live) > replicas {
		keep := func(p *podRecord) int {
			rank := 0
			if p.state != opi.InstanceRunning {
				rank += 2
			}
			if p.superseded(d) {
				rank++
			}
			return rank
		}
		sort.SliceStable(live, func(i, j int) bool {
			if ki, kj := keep(live[i]), keep(live[j]); ki != kj {
				return ki < kj
			}
			return createdBefore(live[i], live[j])
		})
		live = live[:replicas]
	}
	sort.Slice(live, func(i, j int) bool { return createdBefore(live[i], live[j]) })
	if missing := replicas - len(live); missing > 0 && len(failed) > 0 {
		sort.Slice(failed, func(i, j int) bool { return createdBefore(failed[j], failed[i]) })
		failed = failed[:min(missing, len(failed))]
		sort.Slice(failed, func(i, j int) bool { return createdBefore(failed[i], failed[j]) })
		live = append(live, failed...)
	}
	return live
}

// createdBefore orders pods by creation time, then name.
func createdBefore(a, b *podRecord) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.Name < b.Name
}

// findWorkload is the LRP's live workload: from the cache, or, when the cache does not
// have it (yet), from one label-selected LIST, since the name cannot be derived from the
// identifier alone. ErrNotFound when neither has it.
func (b *Backend) findWorkload(ctx context.Context, id opi.LRPIdentifier) (*workloadRecord, error) {
	if d := b.cachedWorkload(id); d != nil {
		return d, nil
	}
	list, err := b.listWorkloads(ctx, metav1.ListOptions{LabelSelector: spec.LRPSelector(id)})
	if err != nil {
		return nil, apiError(err, "list "+b.kindName()+"s")
	}
	for _, w := range list {
		if w.DeletionTimestamp == nil {
			return w, nil
		}
	}
	return nil, notFound(id)
}

// notFound is the error for an LRP this backend does not run.
func notFound(id opi.LRPIdentifier) error {
	return fmt.Errorf("lrp %s: %w", id.ProcessGUID(), opi.ErrNotFound)
}

// The waits below make a write visible to reads of this backend before it returns, at most
// readWaitTimeout. A wait that times out means the cache is behind the API server (in
// practice: its watch is reconnecting after the API server was unreachable, when client-go's
// reflector may pause up to a minute between attempts). The write was made, but a read right
// after it could miss it, so the call answers opi.ErrUnavailable (503): CC retries, and a desire,
// update or stop repeated completes what exists. One case is told apart with a GET: a write
// whose object a later write deleted or replaced meanwhile (a stop racing a desire) took effect
// and was overtaken, which is success.

// settle is the answer of a write whose wait for the cache timed out: success when live (nil
// for none) says the object written is no longer the live one, else opi.ErrUnavailable.
func (b *Backend) settle(ctx context.Context, logger lager.Logger, live func(context.Context) (bool, error), what string, data lager.Data) error {
	if live != nil {
		if isLive, err := live(ctx); err == nil && !isLive {
			logger.Info("overtaken-while-waiting-for-cache", data)
			return nil
		}
	}
	logger.Info("cache-wait-timed-out", data)
	return fmt.Errorf("%w: %s, but opi's cache has not seen it in time (its watch of the api server may be reconnecting): the write is kept, retry to complete it",
		opi.ErrUnavailable, what)
}

// waitForWorkload waits until the cache holds workload w at its resource version or newer;
// with goneOK, also until it is gone (deleted meanwhile).
func (b *Backend) waitForWorkload(ctx context.Context, logger lager.Logger, w metav1.Object, goneOK bool) error {
	name, rv := w.GetName(), w.GetResourceVersion()
	ok := b.waitForCache(ctx, func() bool {
		d, exists := b.cachedWorkloadByName(name)
		if !exists {
			return goneOK
		}
		return kube.Observed(d.ResourceVersion, rv)
	})
	if !ok {
		return b.settle(ctx, logger, b.liveCheck(w), b.kindName()+" "+name+" written", lager.Data{b.kindName(): name, "resource-version": rv})
	}
	return nil
}

// waitForWorkloadGone waits until the cache no longer holds workload name of uid as live: a
// namesake desired since does not hold the wait.
func (b *Backend) waitForWorkloadGone(ctx context.Context, logger lager.Logger, name string, uid types.UID) error {
	ok := b.waitForCache(ctx, func() bool {
		cached, exists := b.cachedWorkloadByName(name)
		return !exists || cached.UID != uid || cached.DeletionTimestamp != nil
	})
	if !ok {
		return b.settle(ctx, logger, nil, b.kindName()+" "+name+" deleted", lager.Data{"waiting-for": b.kindName() + "-gone", b.kindName(): name})
	}
	return nil
}

// waitForPodGone waits until the cache no longer reports pod uid as live.
func (b *Backend) waitForPodGone(ctx context.Context, logger lager.Logger, id opi.LRPIdentifier, uid types.UID) error {
	ok := b.waitForCache(ctx, func() bool {
		for _, p := range b.cachedPods(id) {
			if p.UID == uid && p.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})
	if !ok {
		return b.settle(ctx, logger, nil, "pod deleted", lager.Data{"waiting-for": "pod-gone", "pod-uid": uid})
	}
	return nil
}
