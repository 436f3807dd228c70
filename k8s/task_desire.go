package k8s

import (
	"context"
	"fmt"

	"code.cloudfoundry.org/lager/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/opi"
)

// DesireTask runs the task as a Job, in the order DesireLRP uses, so that a later desire
// finishes what an interrupted one started:
//
//  1. the env Secret (exists → fine);
//  2. the image pull Secret, with registry credentials (exists → fine);
//  3. the Job (exists → the desire succeeds and changes nothing);
//  4. the task's egress policy, controlled by the Job, when network policies are on and the
//     task has rules: its app's LRP's, else the operator's default (networkPolicyHook);
//  5. the Secrets made controlled by the Job, so that deleting the Job deletes them.
//
// A first desire is exactly: create secrets, [create secrets], create jobs, [create
// networkpolicies], patch secrets (per Secret). The policy follows the Job: its pod may start
// a moment before it exists, with the baseline's DNS only, never with more.
func (b *Backend) DesireTask(ctx context.Context, task *opi.Task) error {
	logger := b.logger.Session("desire-task", lager.Data{"task-guid": task.GUID})
	if err := b.store.CheckWritable(); err != nil {
		return err
	}
	name := spec.TaskJobName(task.GUID)
	secrets := b.client.CoreV1().Secrets(b.namespace)

	envSecret := spec.TaskEnvSecret(task, name, b.namespace)
	envSeen, _, err := kube.CreateIfAbsent(ctx, secrets, envSecret.DeepCopy())
	if err != nil {
		return apiError(err, "create env secret")
	}
	var registrySecretObj, registrySeen *corev1.Secret
	if task.PrivateRegistry != nil {
		registrySecretObj, err = spec.RegistrySecret(task.PrivateRegistry, task.Image, spec.RegistrySecretName(name), b.namespace, spec.TaskLabels(task))
		if err != nil {
			return err
		}
		if registrySeen, _, err = kube.CreateIfAbsent(ctx, secrets, registrySecretObj.DeepCopy()); err != nil {
			return apiError(err, "create registry secret")
		}
	}

	job, created, err := kube.CreateOrGet(ctx, b.client.BatchV1().Jobs(b.namespace),
		spec.Job(task, name, b.namespace, b.workload), b.cachedAsJob)
	if err != nil {
		return apiError(err, "create job")
	}
	if !created && job.Annotations[spec.AnnotationTaskGUID] != task.GUID {
		return fmt.Errorf("create job: %s exists and does not belong to task %s", name, task.GUID)
	}

	owner := kube.ControllerRef(job, "batch/v1", "Job")
	live := b.jobLiveCheck(job)
	appRules, found := b.store.AppEgressRules(task.AppGUID)
	egress, err := b.policies.TaskPolicy(ctx, task, name, appRules, found, owner, live)
	if err != nil {
		return kube.OwnershipError(logger, err, "task network policy")
	}
	if err := kube.EnsureControlled(ctx, secrets, envSecret, envSeen, owner, live); err != nil {
		return kube.OwnershipError(logger, err, "own env secret")
	}
	if registrySecretObj != nil {
		if err := kube.EnsureControlled(ctx, secrets, registrySecretObj, registrySeen, owner, live); err != nil {
			return kube.OwnershipError(logger, err, "own registry secret")
		}
	}
	if err := b.store.WaitForJob(ctx, logger, job.Name, job.ResourceVersion, false, live); err != nil {
		return err
	}
	logger.Info("desired", lager.Data{"job": job.Name, "created": created, "egress": egress})
	return nil
}

// jobLiveCheck tells, from the API server, whether j is still the live Job of its name.
func (b *Backend) jobLiveCheck(j *batchv1.Job) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		current, err := b.client.BatchV1().Jobs(b.namespace).Get(ctx, j.Name, metav1.GetOptions{})
		if kube.Classify(err) == kube.KindNotFound {
			return false, nil
		}
		if err != nil {
			return false, apiError(err, "get job")
		}
		return current.UID == j.UID && current.DeletionTimestamp == nil, nil
	}
}
