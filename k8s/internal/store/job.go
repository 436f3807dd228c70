package store

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// JobRecord is a task's Job as the cache holds it.
type JobRecord struct {
	metav1.ObjectMeta

	TaskGUID, TaskName, AppGUID, AppName   string
	SpaceGUID, SpaceName, OrgGUID, OrgName string
	Callback                               string

	// Cancelled and Reported are the annotations' values ("" when absent).
	Cancelled, Reported           string
	ReportedFailed, FailureReason string

	// From the Job's Complete or Failed condition.
	Succeeded, Failed bool
	EndedAt           time.Time
	ConditionReason   string
	ConditionMessage  string
}

// RecordJob is the Job informer's transform.
func RecordJob(obj any) (any, error) { return recordAs(obj, JobRecordOf) }

// JobRecordOf is the record of a Job.
func JobRecordOf(j *batchv1.Job) *JobRecord {
	ann := j.Annotations
	r := &JobRecord{
		ObjectMeta:     identity(&j.ObjectMeta, 0),
		TaskGUID:       ann[names.AnnotationTaskGUID],
		TaskName:       ann[names.AnnotationTaskName],
		AppGUID:        j.Labels[names.LabelAppGUID],
		AppName:        ann[names.AnnotationAppName],
		SpaceGUID:      ann[names.AnnotationSpaceGUID],
		SpaceName:      ann[names.AnnotationSpaceName],
		OrgGUID:        ann[names.AnnotationOrgGUID],
		OrgName:        ann[names.AnnotationOrgName],
		Callback:       ann[names.AnnotationCompletionCallback],
		Cancelled:      ann[names.AnnotationCancelled],
		Reported:       ann[names.AnnotationCompletionReported],
		ReportedFailed: ann[names.AnnotationTaskFailed],
		FailureReason:  ann[names.AnnotationFailureReason],
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			r.Succeeded = true
		case batchv1.JobFailed:
			r.Failed = true
		default:
			continue
		}
		r.EndedAt = c.LastTransitionTime.Time
		r.ConditionReason, r.ConditionMessage = c.Reason, c.Message
	}
	return r
}

// Ended says the task ended: its Job completed or failed, or it was cancelled.
func (r *JobRecord) Ended() bool { return r.Cancelled != "" || r.Succeeded || r.Failed }

// Outcome is what the task's end looks like from the Job alone (the reporter refines a failure
// with the pod's exit) and when it ended.
func (r *JobRecord) Outcome() (failed bool, reason string, at time.Time) {
	switch {
	case r.Cancelled != "":
		at, err := time.Parse(time.RFC3339, r.Cancelled)
		if err != nil {
			at = r.CreationTimestamp.Time
		}
		return true, opi.TaskFailureCancelled, at
	case r.Failed:
		reason = r.ConditionReason
		if reason == "" {
			reason = "task failed"
		}
		return true, reason, r.EndedAt
	default:
		return false, "", r.EndedAt
	}
}

// Task is the task as reads report it.
func (r *JobRecord) Task() *opi.Task {
	t := &opi.Task{
		GUID:             r.TaskGUID,
		Name:             r.TaskName,
		AppGUID:          r.AppGUID,
		AppName:          r.AppName,
		SpaceGUID:        r.SpaceGUID,
		SpaceName:        r.SpaceName,
		OrganizationGUID: r.OrgGUID,
		OrganizationName: r.OrgName,
		State:            opi.TaskRunning,
	}
	switch {
	case r.Reported != "":
		t.State = opi.TaskCompleted
		t.Failed, _ = strconv.ParseBool(r.ReportedFailed)
		t.FailureReason = r.FailureReason
	case r.Ended():
		t.State = opi.TaskCompleted
		t.Failed, t.FailureReason, _ = r.Outcome()
	}
	return t
}

// AsJob is the record as what a desire needs of an existing Job.
func (r *JobRecord) AsJob() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name:              r.Name,
		Namespace:         r.Namespace,
		UID:               r.UID,
		ResourceVersion:   r.ResourceVersion,
		DeletionTimestamp: r.DeletionTimestamp,
		Annotations:       map[string]string{names.AnnotationTaskGUID: r.TaskGUID},
	}}
}
