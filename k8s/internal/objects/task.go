package objects

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// TaskLabels are the labels of the Job, its pod template and its Secrets.
func TaskLabels(task *opi.Task) map[string]string {
	return map[string]string{
		names.LabelTaskGUID:   names.LabelValue(task.GUID),
		names.LabelAppGUID:    names.LabelValue(task.AppGUID),
		names.LabelSourceType: names.SourceTypeTask,
		names.LabelManagedBy:  names.ManagedByOPI,
	}
}

// TaskEnvSecret holds the task's whole environment.
func TaskEnvSecret(task *opi.Task, name, namespace string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.EnvSecretName(name),
			Namespace: namespace,
			Labels:    TaskLabels(task),
		},
		Type: corev1.SecretTypeOpaque,
		Data: taskEnvData(task, name),
	}
}

// taskEnvData is the content of the task's env Secret.
func taskEnvData(task *opi.Task, name string) map[string][]byte {
	data, _ := envFor(task.Env, nil, names.EnvSecretName(name), false)
	return data
}

// taskEnv is the task container's variables, read from its env Secret.
func taskEnv(task *opi.Task, name string) []corev1.EnvVar {
	_, env := envFor(task.Env, nil, names.EnvSecretName(name), false)
	return env
}

// Job is the task's workload: one pod, never restarted nor retried, with the same resources
// and security settings as an LRP instance (w's pod security level).
func Job(task *opi.Task, name, namespace string, w Workload) *batchv1.Job {
	labels := TaskLabels(task)
	c := corev1.Container{
		Name:      names.ContainerName,
		Image:     task.Image,
		Env:       taskEnv(task, name),
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
		pullSecrets = []corev1.LocalObjectReference{{Name: names.RegistrySecretName(name)}}
	}
	spec := podSpec(c, pullSecrets, w.PodSecurity)
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			Labels:    labels,
			Annotations: map[string]string{
				names.AnnotationTaskGUID:           task.GUID,
				names.AnnotationTaskName:           task.Name,
				names.AnnotationAppName:            task.AppName,
				names.AnnotationSpaceGUID:          task.SpaceGUID,
				names.AnnotationSpaceName:          task.SpaceName,
				names.AnnotationOrgGUID:            task.OrganizationGUID,
				names.AnnotationOrgName:            task.OrganizationName,
				names.AnnotationCompletionCallback: task.CompletionCallback,
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
