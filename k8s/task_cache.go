package k8s

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
)

// newTaskInformer adds the Job informer to the backend's factory (so Start starts it and waits
// for it): the namespace's Jobs with the TASK source label, kept as jobRecords.
func (b *Backend) newTaskInformer() {
	b.jobs = b.factory.InformerFor(&batchv1.Job{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return batchinformers.NewFilteredJobInformer(client, b.namespace, resync, cache.Indexers{changesIndex: b.countChanges(&b.jobChanges)},
			func(o *metav1.ListOptions) { o.LabelSelector = spec.LabelSourceType + "=" + spec.SourceTypeTask })
	})
	if err := b.jobs.SetTransform(recordJob); err != nil {
		b.logger.Error("set-transform", err, lager.Data{"informer": "jobs"})
	}
}

// cachedJob is the named Job as the cache holds it (shared: do not modify).
func (b *Backend) cachedJob(name string) (*jobRecord, bool) {
	obj, exists, err := b.jobs.GetIndexer().GetByKey(b.namespace + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	j, ok := obj.(*jobRecord)
	return j, ok
}

// cachedAsJob is the named Job from the cache, as what a desire needs of one that exists.
func (b *Backend) cachedAsJob(name string) (*batchv1.Job, bool) {
	r, ok := b.cachedJob(name)
	if !ok {
		return nil, false
	}
	return r.asJob(), true
}

// cachedJobs are every Job the cache holds (shared: do not modify).
func (b *Backend) cachedJobs() []*jobRecord {
	objs := b.jobs.GetIndexer().List()
	out := make([]*jobRecord, 0, len(objs))
	for _, obj := range objs {
		if j, ok := obj.(*jobRecord); ok {
			out = append(out, j)
		}
	}
	return out
}

// waitForJob waits until the cache holds Job name at resourceVersion rv or newer (or, with
// goneOK, no longer holds it). live, when not nil, tells an overtaken write (see settle).
func (b *Backend) waitForJob(ctx context.Context, logger lager.Logger, name, rv string, goneOK bool, live func(context.Context) (bool, error)) error {
	ok := b.waitForCache(ctx, func() bool {
		j, exists := b.cachedJob(name)
		if !exists {
			return goneOK
		}
		return kube.Observed(j.ResourceVersion, rv)
	})
	if !ok {
		return b.settle(ctx, logger, live, "job "+name+" written", lager.Data{"job": name, "resource-version": rv})
	}
	return nil
}
