package staging

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/queue"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// AbandonedReason is what CC is told of a staging settled at its bounds.
const AbandonedReason = "staging gave up reading the image after repeated attempts"

var errBounds = errors.New("staging record at its bounds")

// bounds are the most read attempts and the greatest age of a staging record.
type bounds struct {
	attempts int
	age      time.Duration
}

// worker is one leadership term's staging work: an informer on the staging Secrets (only
// the leader watches them) feeding a workqueue of Secret keys.
type worker struct {
	s        *Service
	logger   lager.Logger
	informer cache.SharedIndexInformer
	keys     *queue.Queue[string]

	// settled holds the uids of records whose callback CC has settled but whose deletion the
	// informer has not shown yet: a record seen again meanwhile (a relist) is only deleted,
	// never delivered twice.
	mu      sync.Mutex
	settled map[types.UID]bool
	// read holds, per record uid, the outcome of a read whose callback CC has not accepted yet:
	// a delivery that fails (CC down, or its endpoint's share in use) is retried with what was
	// read, neither reading again nor counting an attempt, so a slow CC never turns a good
	// image into an abandoned staging. Lost with the process, when the next leader reads again.
	read map[types.UID]opi.StagingCompletion
}

// Run is the leader's staging work: it works off every staging record until ctx ends, those
// left from before a restart or a change of leader, then each new one as the informer sees it.
// Run it only when the service is Enabled.
func (s *Service) Run(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0,
		informers.WithNamespace(s.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = names.LabelSourceType + "=" + SourceTypeStaging
		}),
	)
	logger := s.logger.Session("staging")
	w := &worker{
		s:        s,
		logger:   logger,
		informer: factory.Core().V1().Secrets().Informer(),
		keys: queue.New(queue.Config[string]{
			Name:        "staging",
			Workers:     s.workers,
			RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string](),
			OnError: func(ctx context.Context, key string, err error) {
				if ctx.Err() == nil {
					logger.Error("process-failed", err, lager.Data{"secret": key})
				}
			},
		}),
		settled: map[types.UID]bool{},
		read:    map[types.UID]opi.StagingCompletion{},
	}
	if err := w.informer.SetTransform(kube.WithoutManagedFields[corev1.Secret]); err != nil {
		w.logger.Error("set-transform", err)
	}
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			w.keys.Add(key)
		}
	}
	if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			// A changed attempt count is the worker's own doing (countAttempt), while it works
			// on the record: nothing new to work on.
			if attemptsOf(old) != attemptsOf(obj) {
				return
			}
			enqueue(obj)
		},
		DeleteFunc: w.forget,
	}); err != nil {
		w.logger.Error("add-event-handler", err)
		w.keys.ShutDown()
		return
	}

	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		w.keys.ShutDown()
		return
	}
	w.logger.Info("started", lager.Data{"workers": s.workers})
	w.keys.Run(ctx, func(ctx context.Context, key string) (time.Duration, error) {
		return 0, w.process(ctx, key)
	})
	w.logger.Info("stopped")
}

// attemptsOf is obj's attempt count annotation, as written.
func attemptsOf(obj any) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetAnnotations()[AnnotationStagingAttempts]
	}
	return ""
}

// process settles one staging: read the image's configuration, tell CC, delete the record. An
// error means the staging is still owed (the record stays and the key comes back).
//
// A key still queued when the leadership ends is the next leader's: the queue (k8s/internal/queue) hands
// none to an ended ctx.
func (w *worker) process(ctx context.Context, key string) error {
	obj, exists, err := w.informer.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok || secret.DeletionTimestamp != nil || secret.Labels[names.LabelSourceType] != SourceTypeStaging {
		return nil
	}
	logger := w.logger.Session("process", lager.Data{"secret": secret.Name})
	if w.isSettled(secret.UID) {
		return w.remove(ctx, logger, secret)
	}
	pending, err := fromSecret(secret)
	if err != nil {
		// Not one opi wrote whole: nothing can be delivered from it.
		logger.Error("unusable-record", err)
		return w.remove(ctx, logger, secret)
	}
	logger = logger.WithData(lager.Data{"staging-guid": pending.guid})

	completion := opi.StagingCompletion{
		StagingGUID: pending.guid,
		CallbackURL: pending.callbackURL,
		Image:       pending.image,
		OwedSince:   pending.acceptedAt,
	}
	bounds := w.s.bounds
	fresh := true // the outcome is this call's, not one read before: its line is sent
	if done, ok := w.readOutcome(secret.UID); ok {
		completion = done
		fresh = false
	} else if age := time.Since(pending.acceptedAt); pending.attempts >= bounds.attempts || age > bounds.age {
		// Settled without reading: a read that cannot complete (or kills opi) is not tried
		// forever.
		logger.Error("staging-abandoned", errBounds, lager.Data{"attempts": pending.attempts, "age": age.Round(time.Second).String(),
			"max-attempts": bounds.attempts, "max-age": bounds.age.String()})
		completion.FailureReason = AbandonedReason
	} else {
		// Counted before the read starts, on the record as the cache has it (a stale copy
		// conflicts and comes back): the next leader sees it even if this read kills opi.
		if err := w.countAttempt(ctx, secret, pending.attempts+1); err != nil {
			return err
		}
		w.s.line(pending.appGUID, readingLine(pending.image, pending.registry != nil))
		cfg, err := w.s.reader.ReadImageConfig(ctx, pending.image, pending.registry)
		switch {
		case err != nil && ctx.Err() != nil:
			return err
		case err != nil:
			data := lager.Data{"reason": err.Error(), "attempt": pending.attempts + 1}
			var detailed interface{ Detail() string }
			if errors.As(err, &detailed) {
				data["detail"] = detailed.Detail()
			}
			logger.Info("image-unreadable", data)
			completion.FailureReason = err.Error()
		default:
			completion.Config = cfg
		}
	}
	if fresh {
		w.s.line(pending.appGUID, resultLine(completion))
	}
	if err := w.s.notifier.StagingCompleted(ctx, completion); err != nil {
		w.mu.Lock()
		w.read[secret.UID] = completion
		w.mu.Unlock()
		return err
	}
	logger.Info("settled", lager.Data{"failed": completion.Failed()})
	w.mu.Lock()
	w.settled[secret.UID] = true
	delete(w.read, secret.UID)
	w.mu.Unlock()
	return w.remove(ctx, logger, secret)
}

// countAttempt records on the staging Secret that attempt is begun: a merge patch with the
// resource version of the copy it was given as a precondition, so that a record changed since
// (another leader's count) conflicts. (A patch: opi's Role may not update Secrets.)
func (w *worker) countAttempt(ctx context.Context, secret *corev1.Secret, attempt int) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": secret.ResourceVersion,
		"annotations":     map[string]string{AnnotationStagingAttempts: strconv.Itoa(attempt)},
	}})
	if err != nil {
		return err
	}
	if _, err := w.s.client.CoreV1().Secrets(secret.Namespace).Patch(ctx, secret.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return kube.APIError(err, "count the attempt of staging record "+secret.Name)
	}
	return nil
}

// remove deletes the record it was given (not a namesake made since: the uid is a
// precondition).
func (w *worker) remove(ctx context.Context, logger lager.Logger, secret *corev1.Secret) error {
	err := w.s.client.CoreV1().Secrets(secret.Namespace).Delete(ctx, secret.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &secret.UID},
	})
	switch kind := kube.Classify(err); {
	case err == nil, kind == kube.KindNotFound, kind == kube.KindConflict:
		// Conflict: the uid differs, so the record settled here is gone already.
		logger.Info("record-deleted")
		return nil
	default:
		return kube.APIError(err, "delete staging record "+secret.Name)
	}
}

// readOutcome is what an earlier read of the record uid found, while its delivery is owed.
func (w *worker) readOutcome(uid types.UID) (opi.StagingCompletion, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.read[uid]
	return c, ok
}

func (w *worker) isSettled(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.settled[uid]
}

// forget drops a deleted record's uid from settled and read.
func (w *worker) forget(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if secret, ok := obj.(*corev1.Secret); ok {
		w.mu.Lock()
		delete(w.settled, secret.UID)
		delete(w.read, secret.UID)
		w.mu.Unlock()
	}
}
