package names

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels and annotations of tasks. A task is a Job with the source type TASK, its task guid in
// a label (for selection) and, exactly, in an annotation.
const (
	// SourceTypeTask marks tasks; the Job informer selects on it.
	SourceTypeTask = "TASK"
	LabelTaskGUID  = "opi-bridge.io/task-guid"

	AnnotationTaskGUID = AnnotationPrefix + "task-guid"
	AnnotationTaskName = AnnotationPrefix + "task-name"
	// AnnotationCompletionCallback is CC's completion_callback URL (not a secret: CC's internal
	// API authenticates opi by its client certificate).
	AnnotationCompletionCallback = AnnotationPrefix + "completion-callback"
	// AnnotationCancelled records a cancel (RFC 3339 time of it): the reporter owes CC a
	// "task was cancelled".
	AnnotationCancelled = AnnotationPrefix + "cancelled"
	// AnnotationCompletionReported records (RFC 3339) that CC accepted the task's end; the Job is
	// deleted a retention after it. AnnotationTaskFailed ("true"/"false") and
	// AnnotationFailureReason keep what was reported, for reads until then.
	AnnotationCompletionReported = AnnotationPrefix + "completion-reported"
	AnnotationTaskFailed         = AnnotationPrefix + "task-failed"
	AnnotationFailureReason      = AnnotationPrefix + "failure-reason"

	// JobControllerUIDLabel is set by the Job controller on the Job's pods.
	JobControllerUIDLabel = "batch.kubernetes.io/controller-uid"
	taskNamePrefix        = "task-"
)

// TaskJobName is the deterministic name of the task's Job: "task-<guid>" when that is a valid
// DNS-1123 label of at most 63 chars (Job names become pod label values), else "task-" and the
// first 20 hex digits of sha256(guid). A repeated desire hits "already exists".
func TaskJobName(guid string) string {
	name := taskNamePrefix + guid
	if len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(guid))
	return taskNamePrefix + hex.EncodeToString(sum[:])[:20]
}
