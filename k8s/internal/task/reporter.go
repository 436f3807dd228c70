package task

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/queue"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

const (
	// taskReporterWorkers deliver task ends at once: a callback CC does not answer is retried
	// for minutes and must not hold up the others.
	taskReporterWorkers = 8
	// reporterRetryBase and reporterRetryMax bound the backoff after a failed report (an API
	// error, or the notifier stopped by the end of leadership).
	reporterRetryBase = 500 * time.Millisecond
	reporterRetryMax  = time.Minute
)

// Run is leader work (the root adds it as "task-reporter" when Reports): it tells CC (the TaskNotifier) about every task whose Job
// ended or was cancelled and whose end is not yet recorded as reported, records the report on
// the Job (names.AnnotationCompletionReported) only once the notifier returned nil, and deletes the
// Job (background propagation: its pod and Secrets go with it) a retention later. It is driven
// by the Job informer through a workqueue: registering its handler replays every cached Job, so
// a new leader or a restarted opi picks up whatever is still owed.
func (s *Service) Run(ctx context.Context) {
	logger := s.logger.Session("task-reporter")
	q := queue.New(queue.Config[string]{
		Name:        "task-reporter",
		Workers:     taskReporterWorkers,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](reporterRetryBase, reporterRetryMax),
		OnError: func(ctx context.Context, name string, err error) {
			if ctx.Err() == nil {
				logger.Error("report-failed", err, lager.Data{"job": name})
			}
		},
	})
	enqueue := func(obj any) {
		if j, ok := obj.(*store.JobRecord); ok && j.Ended() && j.DeletionTimestamp == nil {
			q.Add(j.Name)
		}
	}
	registration, err := s.cache.AddJobHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		logger.Error("add-event-handler", err)
		q.ShutDown()
		return
	}
	defer func() { _ = s.cache.RemoveJobHandler(registration) }()
	q.Run(ctx, func(ctx context.Context, name string) (time.Duration, error) {
		return s.reportTask(ctx, logger, name)
	})
}

// reportTask reports the end of the named task's Job if it is still owed, and deletes the Job
// once its retention has passed; it returns how long until that deletion is due.
func (s *Service) reportTask(ctx context.Context, logger lager.Logger, name string) (time.Duration, error) {
	j, ok := s.cache.Job(name)
	if !ok || j.DeletionTimestamp != nil || !j.Ended() {
		return 0, nil
	}
	logger = logger.WithData(lager.Data{"task-guid": j.TaskGUID, "job": name})
	reported := j.Reported
	if reported == "" {
		failed, reason, endedAt := j.Outcome()
		if j.Failed && j.Cancelled == "" {
			var err error
			if reason, err = s.podFailureReason(ctx, j, reason); err != nil {
				return 0, err
			}
		}
		if endedAt.IsZero() {
			endedAt = time.Now()
		}
		completion := opi.TaskCompletion{
			TaskGUID:      j.TaskGUID,
			CallbackURL:   j.Callback,
			Failed:        failed,
			FailureReason: reason,
			OwedSince:     endedAt,
		}
		if err := s.notifier.TaskCompleted(ctx, completion); err != nil {
			return 0, fmt.Errorf("notify task completion: %w", err)
		}
		reported = time.Now().UTC().Format(time.RFC3339)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			names.AnnotationCompletionReported: reported,
			names.AnnotationTaskFailed:         strconv.FormatBool(failed),
			names.AnnotationFailureReason:      reason,
		}}})
		if err != nil {
			return 0, fmt.Errorf("marshal reported patch: %w", err)
		}
		patched, err := s.client.BatchV1().Jobs(s.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if kube.Classify(err) == kube.KindNotFound {
			return 0, nil
		}
		if err != nil {
			// CC was told, the record failed: the next attempt tells CC again (at least once).
			return 0, kube.APIError(err, "record task completion reported")
		}
		// Wait for the cache, so that a later turn of this Job does not take it as still owed
		// (a timeout is logged: such a turn tells CC again, which it takes as at least once).
		_ = s.cache.WaitForJob(ctx, logger, name, patched.ResourceVersion, true, nil)
		logger.Info("reported", lager.Data{"failed": failed, "failure-reason": reason})
	}

	reportedAt, err := time.Parse(time.RFC3339, reported)
	if err != nil {
		reportedAt = time.Time{} // unreadable: the retention has passed
	}
	if left := time.Until(reportedAt.Add(s.retention)); left > 0 {
		return left, nil
	}
	opts := kube.InBackground(kube.PreconditionUID(j))
	err = s.client.BatchV1().Jobs(s.namespace).Delete(ctx, name, opts)
	if err != nil && !kube.GoneOrChanged(err) {
		return 0, kube.APIError(err, "delete job")
	}
	// Until the cache drops it, a queued turn of this Job would delete it again (a timeout is
	// logged: that delete finds it gone).
	_ = s.cache.WaitForJob(ctx, logger, name, "", true, nil)
	logger.Info("deleted")
	return 0, nil
}

// podFailureReason is why the failed task's pod failed, from its app container's termination
// (objects.ExitDescription: "Exited with status 3"), or the pod's own reason; fallback when neither says. One LIST of the
// Job's pods (the Job controller labels them with its uid).
func (s *Service) podFailureReason(ctx context.Context, j *store.JobRecord, fallback string) (string, error) {
	pods, err := s.client.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: names.JobControllerUIDLabel + "=" + string(j.UID),
	})
	if err != nil {
		return "", kube.APIError(err, "list task pods")
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name != names.ContainerName {
				continue
			}
			t := cs.State.Terminated
			if t == nil {
				t = cs.LastTerminationState.Terminated
			}
			if t != nil && (t.ExitCode != 0 || t.Reason != "") {
				return objects.ExitDescription(t), nil
			}
		}
		if pod.Status.Reason != "" {
			return pod.Status.Reason, nil
		}
	}
	return fallback, nil
}
