package spec

import (
	"crypto/sha256"
	"encoding/hex"

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

// TaskLabels are the labels of the Job, its pod template and its Secrets.
func TaskLabels(task *opi.Task) map[string]string {
	return map[string]string{
		LabelTaskGUID:   LabelValue(task.GUID),
		LabelAppGUID:    LabelValue(task.AppGUID),
		LabelSourceType: SourceTypeTask,
		LabelManagedBy:  ManagedByOPI,
	}
}

// TaskEnvSecret holds the task's whole environment.
func TaskEnvSecret(task *opi.Task, name, namespace string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      EnvSecretName(name),
			Namespace: namespace,
			Labels:    TaskLabels(task),
		},
		Type: corev1.SecretTypeOpaque,
		Data: envSecretDataFor(task.Env, nil, false),
	}
}

// Job is the task's workload: one pod, never restarted nor retried, with the same resources
// and security settings as an LRP instance (w's pod security level).
func Job(task *opi.Task, name, namespace string, w Workload) *batchv1.Job {
	labels := TaskLabels(task)
	c := corev1.Container{
		Name:      ContainerName,
		Image:     task.Image,
		Env:       containerEnvFor(task.Env, nil, EnvSecretName(name), false),
		Resources: resourcesFor(task.MemoryMB, task.DiskMB, task.CPUWeight),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             capabilities(w.PodSecurity, nil),
		},
	}
	if len(task.Command) > 0 {
		c.Command = escapeCommand(task.Command)
	}
	var pullSecrets []corev1.LocalObjectReference
	if task.PrivateRegistry != nil {
		pullSecrets = []corev1.LocalObjectReference{{Name: RegistrySecretName(name)}}
	}
	spec := podSpec(c, pullSecrets, w.PodSecurity)
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
