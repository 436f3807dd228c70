package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/queue"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/k8s/store"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate
//counterfeiter:generate -o ../fakes/crash_notifier.go github.com/opi-bridge/opi/opi.CrashNotifier

// AnnotationCrashesReported is spec.AnnotationCrashesReported (the pod cache decodes it).
const AnnotationCrashesReported = spec.AnnotationCrashesReported

const (
	// crashReason is Diego's reason for an instance whose process exited.
	crashReason = "CRASHED"
	// crashWorkers deliver crash reports at once: a delivery to a CC that does not answer
	// blocks its worker for up to the delivery bound, and should not hold up every other app.
	crashWorkers = 4
	// crashMarkTimeout bounds the patch that records a delivered crash. It runs even when the
	// leader's context has just ended: CC has the report, so recording it avoids a duplicate
	// from the next leader.
	crashMarkTimeout = 10 * time.Second
	// Retries of a crash whose notifier failed (the context ended) or whose mark failed.
	crashRetryBase = 500 * time.Millisecond
	crashRetryMax  = 2 * time.Minute
)

// crashReporter tells Cloud Controller about crashes of LRP instances, exactly once each: the
// leader's work, driven by the pod informer. Every pod whose crash count is above its
// AnnotationCrashesReported is queued; a worker reports its last crash to the notifier and,
// once the notifier returned nil, patches the annotation to the count reported. The informer's
// initial list (replayed to the handler when it is added) covers a restart and a new leader.
type crashReporter struct {
	backend  *Backend
	notifier opi.CrashNotifier
	logger   lager.Logger

	// delivered holds, per pod key, the crash counts that were delivered but are not yet
	// visible in the cache's annotation (the patch is in flight or failed, or the cache lags
	// behind it), so that an event the cache had before the patch does not report them again.
	mu        sync.Mutex
	delivered map[string]deliveredCrash
}

type deliveredCrash struct {
	uid     types.UID
	count   int32
	patched bool
}

func newCrashReporter(b *Backend, notifier opi.CrashNotifier) *crashReporter {
	return &crashReporter{
		backend:   b,
		notifier:  notifier,
		logger:    b.logger.Session("crash-reporter"),
		delivered: map[string]deliveredCrash{},
	}
}

// run reports crashes until ctx ends.
func (c *crashReporter) run(ctx context.Context) {
	q := queue.New(queue.Config[string]{
		Name:        "crash-reporter",
		Workers:     crashWorkers,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](crashRetryBase, crashRetryMax),
		OnError: func(_ context.Context, key string, err error) {
			c.logger.Info("will-retry", lager.Data{"pod": key, "error": err.Error()})
		},
	})
	enqueue := func(obj any) {
		if r, ok := obj.(*store.PodRecord); ok && r.Owes() {
			if key, err := cache.MetaNamespaceKeyFunc(r); err == nil {
				q.Add(key)
			}
		}
	}
	registration, err := c.backend.store.AddPodHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.forget(key)
			}
		},
	})
	if err != nil {
		c.logger.Error("add-event-handler", err)
		q.ShutDown()
		return
	}
	c.logger.Info("started")
	q.Run(ctx, func(ctx context.Context, key string) (time.Duration, error) {
		return 0, c.sync(ctx, key)
	})
	if err := c.backend.store.RemovePodHandler(registration); err != nil {
		c.logger.Error("remove-event-handler", err)
	}
	c.logger.Info("stopped")
}

// sync reports what the pod key still owes CC: nil when nothing is owed (any more), an error
// to try again later.
func (c *crashReporter) sync(ctx context.Context, key string) error {
	pod, exists := c.backend.store.PodByKey(key)
	if !exists || pod.Crash == nil || pod.LRPKey() == "" {
		c.forget(key)
		return nil
	}
	crash := pod.Crash
	reported := crash.Reported

	c.mu.Lock()
	d, ok := c.delivered[key]
	c.mu.Unlock()
	switch {
	case ok && (d.uid != pod.UID || d.count <= reported):
		c.forget(key) // another pod of the same name, or the cache shows the mark now
	case ok:
		if !d.patched {
			if err := c.mark(ctx, pod, d.count); err != nil {
				return err
			}
		}
		reported = d.count
	}
	if crash.Count <= reported {
		return nil
	}

	report := opi.Crash{
		LRPIdentifier:   pod.ID(),
		InstanceGUID:    pod.Name,
		Index:           c.backend.store.InstanceIndex(pod),
		Reason:          crashReason,
		ExitStatus:      crash.ExitCode,
		ExitDescription: spec.ExitDescription(&corev1.ContainerStateTerminated{ExitCode: crash.ExitCode, Reason: crash.Reason}),
		CrashCount:      crash.Count,
		OwedSince:       time.Now(),
	}
	if crash.FinishedAt > 0 {
		// The bound counts from the crash, which survives a restart of opi.
		report.CrashTimestamp = time.Unix(crash.FinishedAt, 0).UTC()
		report.OwedSince = report.CrashTimestamp
	} else {
		report.CrashTimestamp = report.OwedSince
	}
	logger := c.logger.Session("report", lager.Data{
		"process-guid": report.ProcessGUID(), "pod": pod.Name, "index": report.Index,
		"crash-count": report.CrashCount, "exit-status": report.ExitStatus,
	})
	if err := c.notifier.InstanceCrashed(ctx, report); err != nil {
		return fmt.Errorf("report crash: %w", err)
	}
	logger.Info("reported")
	c.mu.Lock()
	c.delivered[key] = deliveredCrash{uid: pod.UID, count: crash.Count}
	c.mu.Unlock()
	return c.mark(ctx, pod, crash.Count)
}

// mark records on the pod that its crashes up to count were reported. The patch carries the
// pod's uid, so it never marks a new pod of the same name; a pod that is gone needs no mark.
func (c *crashReporter) mark(ctx context.Context, pod *store.PodRecord, count int32) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), crashMarkTimeout)
	defer cancel()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pod.UID,
		"annotations": map[string]string{AnnotationCrashesReported: strconv.Itoa(int(count))},
	}})
	if err != nil {
		return fmt.Errorf("encode crash mark: %w", err)
	}
	key := pod.Namespace + "/" + pod.Name
	_, err = c.backend.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch kind := kube.Classify(err); {
	case err == nil:
	case kind == kube.KindNotFound || kind == kube.KindConflict || kind == kube.KindInvalid:
		c.logger.Info("mark-skipped", lager.Data{"pod": key, "reason": err.Error()})
		c.forget(key)
		return nil
	default:
		return fmt.Errorf("mark crash reported on pod %s: %w", key, err)
	}
	c.mu.Lock()
	if d, ok := c.delivered[key]; ok && d.uid == pod.UID && d.count == count {
		d.patched = true
		c.delivered[key] = d
	}
	c.mu.Unlock()
	return nil
}

// forget drops what the reporter remembers of a pod.
func (c *crashReporter) forget(key string) {
	c.mu.Lock()
	delete(c.delivered, key)
	c.mu.Unlock()
}
