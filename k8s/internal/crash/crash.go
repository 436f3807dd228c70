// Package crash is the crash reporter: the leader's work that tells Cloud Controller about the
// crashes of LRP instances, exactly once each, driven by the pod cache (k8s/README.md,
// "Packages and the rules that make them last": layer 5). Every pod whose crash count is above
// its names.AnnotationCrashesReported is queued; a worker reports its last crash to the notifier
// and, once the notifier returned nil, patches the annotation to the count reported. The
// informer's initial list (replayed to the handler when it is added) covers a restart and a new
// leader.
package crash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/queue"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate
//counterfeiter:generate -o ../../../fakes/crash_notifier.go github.com/opi-bridge/opi/opi.CrashNotifier
//counterfeiter:generate . Pods

const (
	// crashReason is Diego's reason for an instance whose process exited.
	crashReason = "CRASHED"
	// workers deliver crash reports at once: a delivery to a CC that does not answer blocks
	// its worker for up to the delivery bound, and should not hold up every other app.
	workers = 4
	// markTimeout bounds the patch that records a delivered crash. It runs even when the
	// leader's context has just ended: CC has the report, so recording it avoids a duplicate
	// from the next leader.
	markTimeout = 10 * time.Second
	// Retries of a crash whose notifier failed (the context ended) or whose mark failed.
	retryBase = 500 * time.Millisecond
	retryMax  = 2 * time.Minute
)

// Pods is what the reporter reads of the pod cache (*store.Store is one): the pods by key,
// the instance index of one, and the cache's events.
type Pods interface {
	PodByKey(key string) (*store.PodRecord, bool)
	InstanceIndex(pod *store.PodRecord) int32
	AddPodHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RemovePodHandler(r cache.ResourceEventHandlerRegistration) error
}

// Deps is what the reporter is handed: the clientset it marks pods with, the pod cache and the
// notifier crashes are reported to. All are needed.
type Deps struct {
	Client   kubernetes.Interface
	Pods     Pods
	Notifier opi.CrashNotifier
}

// Reporter tells Cloud Controller about crashes of LRP instances, exactly once each.
type Reporter struct {
	client   kubernetes.Interface
	pods     Pods
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

// New makes the reporter; it refuses deps with any of them missing (a reporter without a
// notifier would mark nothing and report nothing: the root makes none when CC's crash notifier
// is not configured). It logs in the session crash-reporter of logger.
func New(logger lager.Logger, deps Deps) (*Reporter, error) {
	switch {
	case deps.Notifier == nil:
		return nil, errors.New("crash reporter needs a crash notifier")
	case deps.Client == nil:
		return nil, errors.New("crash reporter needs a kubernetes client")
	case deps.Pods == nil:
		return nil, errors.New("crash reporter needs the pod cache")
	}
	return &Reporter{
		client:    deps.Client,
		pods:      deps.Pods,
		notifier:  deps.Notifier,
		logger:    logger.Session("crash-reporter"),
		delivered: map[string]deliveredCrash{},
	}, nil
}

// Run reports crashes until ctx ends: the leader work "crash-reporter".
func (c *Reporter) Run(ctx context.Context) {
	q := queue.New(queue.Config[string]{
		Name:        "crash-reporter",
		Workers:     workers,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax),
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
	registration, err := c.pods.AddPodHandler(cache.ResourceEventHandlerFuncs{
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
	if err := c.pods.RemovePodHandler(registration); err != nil {
		c.logger.Error("remove-event-handler", err)
	}
	c.logger.Info("stopped")
}

// sync reports what the pod key still owes CC: nil when nothing is owed (any more), an error
// to try again later.
func (c *Reporter) sync(ctx context.Context, key string) error {
	pod, exists := c.pods.PodByKey(key)
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
		Index:           c.pods.InstanceIndex(pod),
		Reason:          crashReason,
		ExitStatus:      crash.ExitCode,
		ExitDescription: objects.ExitDescription(&corev1.ContainerStateTerminated{ExitCode: crash.ExitCode, Reason: crash.Reason}),
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
func (c *Reporter) mark(ctx context.Context, pod *store.PodRecord, count int32) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pod.UID,
		"annotations": map[string]string{names.AnnotationCrashesReported: strconv.Itoa(int(count))},
	}})
	if err != nil {
		return fmt.Errorf("encode crash mark: %w", err)
	}
	key := pod.Namespace + "/" + pod.Name
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
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
func (c *Reporter) forget(key string) {
	c.mu.Lock()
	delete(c.delivered, key)
	c.mu.Unlock()
}
