package k8s

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/opi"
)

// Labels and annotations of tasks. A task is a Job with the source type TASK, its task guid in
// a label (for selection) and, exactly, in an annotation.
const (
	// SourceTypeTask marks tasks; the Job informer selects on it.
	SourceTypeTask = "TASK"
	LabelTaskGUID  = "opi-bridge.io/task-guid"

	AnnotationTaskGUID = annotationPrefix + "task-guid"
	AnnotationTaskName = annotationPrefix + "task-name"
	// AnnotationCompletionCallback is CC's completion_callback URL (not a secret: CC's internal
	// API authenticates opi by its client certificate).
	AnnotationCompletionCallback = annotationPrefix + "completion-callback"
	// AnnotationCancelled records a cancel (RFC 3339 time of it): the reporter owes CC a
	// "task was cancelled".
	AnnotationCancelled = annotationPrefix + "cancelled"
	// AnnotationCompletionReported records (RFC 3339) that CC accepted the task's end; the Job is
	// deleted a retention after it. AnnotationTaskFailed ("true"/"false") and
	// AnnotationFailureReason keep what was reported, for reads until then.
	AnnotationCompletionReported = annotationPrefix + "completion-reported"
	AnnotationTaskFailed         = annotationPrefix + "task-failed"
	AnnotationFailureReason      = annotationPrefix + "failure-reason"

	// jobControllerUIDLabel is set by the Job controller on the Job's pods.
	jobControllerUIDLabel = "batch.kubernetes.io/controller-uid"
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

// taskLabels are the labels of the Job, its pod template and its Secrets.
func taskLabels(task *opi.Task) map[string]string {
	return map[string]string{
		LabelTaskGUID:   labelValue(task.GUID),
		LabelAppGUID:    labelValue(task.AppGUID),
		LabelSourceType: SourceTypeTask,
		LabelManagedBy:  ManagedByOPI,
	}
}

// toTaskEnvSecret holds the task's whole environment.
func toTaskEnvSecret(task *opi.Task, name, namespace string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      envSecretName(name),
			Namespace: namespace,
			Labels:    taskLabels(task),
		},
		Type: corev1.SecretTypeOpaque,
		Data: envSecretDataFor(task.Env, nil, false),
	}
}

// toJob is the task's workload: one pod, never restarted nor retried, with the same resources
// and security settings as an LRP instance (w's pod security level).
func toJob(task *opi.Task, name, namespace string, w workloadSpec) *batchv1.Job {
	labels := taskLabels(task)
	c := corev1.Container{
		Name:      ContainerName,
		Image:     task.Image,
		Env:       containerEnvFor(task.Env, nil, envSecretName(name), false),
		Resources: resourcesFor(task.MemoryMB, task.DiskMB, task.CPUWeight),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             capabilities(w.podSecurity, nil),
		},
	}
	if len(task.Command) > 0 {
		c.Command = escapeCommand(task.Command)
	}
	var pullSecrets []corev1.LocalObjectReference
	if task.PrivateRegistry != nil {
		pullSecrets = []corev1.LocalObjectReference{{Name: registrySecretName(name)}}
	}
	spec := podSpec(c, pullSecrets, w.podSecurity)
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			Labels:    labels,
			Annotations: map[string]string{
				AnnotationTaskGUID:           task.GUID,
				AnnotationTaskName:           task.Name,
				AnnotationAppName:            task.AppName,
				AnnotationSpaceGUID:          task.SpaceGUID,
				AnnotationSpaceName:          task.SpaceName,
				AnnotationOrgGUID:            task.OrganizationGUID,
				AnnotationOrgName:            task.OrganizationName,
				AnnotationCompletionCallback: task.CompletionCallback,
			},
		},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To(int32(1)),
			Completions:  ptr.To(int32(1)),
			BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec,
			},
		},
	}
}

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
		taskGUID:       ann[AnnotationTaskGUID],
		taskName:       ann[AnnotationTaskName],
		appGUID:        j.Labels[LabelAppGUID],
		appName:        ann[AnnotationAppName],
		spaceGUID:      ann[AnnotationSpaceGUID],
		spaceName:      ann[AnnotationSpaceName],
		orgGUID:        ann[AnnotationOrgGUID],
		orgName:        ann[AnnotationOrgName],
		callback:       ann[AnnotationCompletionCallback],
		cancelled:      ann[AnnotationCancelled],
		reported:       ann[AnnotationCompletionReported],
		reportedFailed: ann[AnnotationTaskFailed],
		failureReason:  ann[AnnotationFailureReason],
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
		Annotations:       map[string]string{AnnotationTaskGUID: r.taskGUID},
	}}
}
