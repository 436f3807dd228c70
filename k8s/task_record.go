package k8s

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/opi"
)

// jobRecord is a task's Job as the cache holds it. Shared: do not modify.
type jobRecord struct {
	metav1.ObjectMeta

	taskGUID, taskName, appGUID, appName   string
	spaceGUID, spaceName, orgGUID, orgName string
	callback                               string

	// cancelled and reported are the annotations' values ("" when absent).
	cancelled, reported           string
	reportedFailed, failureReason string

	// From the Job's Complete or Failed condition.
	succeeded, failed bool
	endedAt           time.Time
	conditionReason   string
	conditionMessage  string
}

// recordJob is the Job informer's transform.
func recordJob(obj any) (any, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	return jobRecordOf(j), nil
}

func jobRecordOf(j *batchv1.Job) *jobRecord {
	ann := j.Annotations
	r := &jobRecord{
		ObjectMeta: metav1.ObjectMeta{
			Name:              j.Name,
			Namespace:         j.Namespace,
			UID:               j.UID,
			ResourceVersion:   j.ResourceVersion,
			CreationTimestamp: j.CreationTimestamp,
			DeletionTimestamp: j.DeletionTimestamp,
		},
		taskGUID:       ann[spec.AnnotationTaskGUID],
		taskName:       ann[spec.AnnotationTaskName],
		appGUID:        j.Labels[spec.LabelAppGUID],
		appName:        ann[spec.AnnotationAppName],
		spaceGUID:      ann[spec.AnnotationSpaceGUID],
		spaceName:      ann[spec.AnnotationSpaceName],
		orgGUID:        ann[spec.AnnotationOrgGUID],
		orgName:        ann[spec.AnnotationOrgName],
		callback:       ann[spec.AnnotationCompletionCallback],
		cancelled:      ann[spec.AnnotationCancelled],
		reported:       ann[spec.AnnotationCompletionReported],
		reportedFailed: ann[spec.AnnotationTaskFailed],
		failureReason:  ann[spec.AnnotationFailureReason],
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			r.succeeded = true
		case batchv1.JobFailed:
			r.failed = true
		default:
			continue
		}
		r.endedAt = c.LastTransitionTime.Time
		r.conditionReason, r.conditionMessage = c.Reason, c.Message
	}
	return r
}

// ended says the task ended: its Job completed or failed, or it was cancelled.
func (r *jobRecord) ended() bool { return r.cancelled != "" || r.succeeded || r.failed }

// outcome is what the task's end looks like from the Job alone (the reporter refines a failure
// with the pod's exit) and when it ended.
func (r *jobRecord) outcome() (failed bool, reason string, at time.Time) {
	switch {
	case r.cancelled != "":
		at, err := time.Parse(time.RFC3339, r.cancelled)
		if err != nil {
			at = r.CreationTimestamp.Time
		}
		return true, opi.TaskFailureCancelled, at
	case r.failed:
		reason = r.conditionReason
		if reason == "" {
			reason = "task failed"
		}
		return true, reason, r.endedAt
	default:
		return false, "", r.endedAt
	}
}

// task is the task as reads report it.
func (r *jobRecord) task() *opi.Task {
	t := &opi.Task{
		GUID:             r.taskGUID,
		Name:             r.taskName,
		AppGUID:          r.appGUID,
		AppName:          r.appName,
		SpaceGUID:        r.spaceGUID,
		SpaceName:        r.spaceName,
		OrganizationGUID: r.orgGUID,
		OrganizationName: r.orgName,
		State:            opi.TaskRunning,
	}
	switch {
	case r.reported != "":
		t.State = opi.TaskCompleted
		t.Failed, _ = strconv.ParseBool(r.reportedFailed)
		t.FailureReason = r.failureReason
	case r.ended():
		t.State = opi.TaskCompleted
		t.Failed, t.FailureReason, _ = r.outcome()
	}
	return t
}

// asJob is the record as what a desire needs of an existing Job.
func (r *jobRecord) asJob() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name:              r.Name,
		Namespace:         r.Namespace,
		UID:               r.UID,
		ResourceVersion:   r.ResourceVersion,
		DeletionTimestamp: r.DeletionTimestamp,
		Annotations:       map[string]string{spec.AnnotationTaskGUID: r.taskGUID},
	}}
}
