package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"code.cloudfoundry.org/lager/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// CancelTask records the cancel on the task's Job (names.AnnotationCancelled) and suspends it, which
// makes the Job controller delete its pod; the task reporter then tells CC "task was
// cancelled" and deletes the Job. One patch, conditional on the version read, so that a task
// that ended meanwhile is not cancelled after the fact. Cancelling a task that was cancelled or
// has ended succeeds without writing; ErrNotFound for an unknown task (or one already cleaned
// up).
func (s *Service) CancelTask(ctx context.Context, guid string) error {
	logger := s.logger.Session("cancel-task", lager.Data{"task-guid": guid})
	if err := s.cache.CheckWritable(ctx); err != nil {
		return err
	}
	name := names.TaskJobName(guid)
	jobs := s.client.BatchV1().Jobs(s.namespace)
	current, fromCache := s.cache.Job(name)
	var patched *batchv1.Job
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !fromCache {
			// Not in the cache (yet), or it changed since: ask the API.
			j, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = store.JobRecordOf(j)
		}
		fromCache = false
		if current.TaskGUID != guid {
			return taskNotFound(guid)
		}
		if current.Ended() || current.DeletionTimestamp != nil {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{
				"resourceVersion": current.ResourceVersion,
				"annotations":     map[string]string{names.AnnotationCancelled: time.Now().UTC().Format(time.RFC3339)},
			},
			"spec": map[string]any{"suspend": true},
		})
		if err != nil {
			return fmt.Errorf("marshal cancel patch: %w", err)
		}
		patched, err = jobs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	switch {
	case err == nil:
	case errors.Is(err, opi.ErrNotFound):
		return err
	case kube.Classify(err) == kube.KindNotFound:
		return taskNotFound(guid)
	default:
		return kube.APIError(err, "cancel job")
	}
	if patched == nil {
		logger.Info("already-ended")
		return nil
	}
	if err := s.cache.WaitForJob(ctx, logger, name, patched.ResourceVersion, true, nil); err != nil {
		return err
	}
	logger.Info("cancelled", lager.Data{"job": name})
	return nil
}
