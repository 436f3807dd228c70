package task

import (
	"context"
	"fmt"

	"code.cloudfoundry.org/lager/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// DesireTask runs the task as a Job, in the order the backend's DesireLRP uses, so that a later
// desire finishes what an interrupted one started:
//
//  1. the env Secret (exists → fine);
//  2. the image pull Secret, with registry credentials (exists → fine);
//  3. the Job (exists → the desire succeeds and changes nothing);
//  4. the task's egress policy, controlled by the Job, when network policies are on and the
//     task has rules: its app's LRP's, else the operator's default (Policies.TaskPolicy);
//  5. the Secrets made controlled by the Job, so that deleting the Job deletes them.
//
// A first desire is exactly: create secrets, [create secrets], create jobs, [create
// networkpolicies], patch secrets (per Secret). The policy follows the Job: its pod may start
// a moment before it exists, with the baseline's DNS only, never with more.
func (s *Service) DesireTask(ctx context.Context, task *opi.Task) error {
	logger := s.logger.Session("desire-task", lager.Data{"task-guid": task.GUID})
	if err := s.cache.CheckWritable(ctx); err != nil {
		return err
	}
	name := names.TaskJobName(task.GUID)
	secrets := s.client.CoreV1().Secrets(s.namespace)

	envSecret := objects.TaskEnvSecret(task, name, s.namespace)
	envSeen, _, err := kube.CreateIfAbsent(ctx, secrets, envSecret.DeepCopy())
	if err != nil {
		return kube.APIError(err, "create env secret")
	}
	var registrySecretObj, registrySeen *corev1.Secret
	if task.PrivateRegistry != nil {
		registrySecretObj, err = objects.RegistrySecret(task.PrivateRegistry, task.Image, names.RegistrySecretName(name), s.namespace, objects.TaskLabels(task))
		if err != nil {
			return err
		}
		if registrySeen, _, err = kube.CreateIfAbsent(ctx, secrets, registrySecretObj.DeepCopy()); err != nil {
			return kube.APIError(err, "create registry secret")
		}
	}

	job, created, err := kube.CreateOrGet(ctx, s.client.BatchV1().Jobs(s.namespace),
		objects.Job(task, name, s.namespace, s.pods), s.cachedAsJob)
	if err != nil {
		return kube.APIError(err, "create job")
	}
	if !created && job.Annotations[names.AnnotationTaskGUID] != task.GUID {
		return fmt.Errorf("create job: %s exists and does not belong to task %s", name, task.GUID)
	}

	owner := kube.ControllerRef(job, "batch/v1", "Job")
	live := s.jobLiveCheck(job)
	appRules, found := s.cache.AppEgressRules(task.AppGUID)
	egress, err := s.policies.TaskPolicy(ctx, task, name, appRules, found, owner, live)
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
	if err := s.cache.WaitForJob(ctx, logger, job.Name, job.ResourceVersion, false, live); err != nil {
		return err
	}
	logger.Info("desired", lager.Data{"job": job.Name, "created": created, "egress": egress})
	return nil
}

// jobLiveCheck tells, from the API server, whether j is still the live Job of its name.
func (s *Service) jobLiveCheck(j *batchv1.Job) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		current, err := s.client.BatchV1().Jobs(s.namespace).Get(ctx, j.Name, metav1.GetOptions{})
		if kube.Classify(err) == kube.KindNotFound {
			return false, nil
		}
		if err != nil {
			return false, kube.APIError(err, "get job")
		}
		return current.UID == j.UID && current.DeletionTimestamp == nil, nil
	}
}
