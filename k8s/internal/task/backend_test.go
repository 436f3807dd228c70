package task_test

import (
	"context"
	"errors"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/task"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// startTaskBackend starts a backend with a task notifier and returns once its informers watch.
func startTaskBackend(client *fake.Clientset, notifier opi.TaskNotifier, retention time.Duration) *k8s.Backend {
	if notifier == nil { // a typed nil would count as a notifier
		return startTaskBackendWithout(client)
	}
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	backend := backendtest.MustBackend(client, lagertest.NewTestLogger("k8s"), k8s.Options{
		Namespace: backendtest.Namespace,
		Store:     store.Options{ReadWaitTimeout: 2 * time.Second},
		Tasks:     task.Options{Retention: retention},
		Notifiers: k8s.Notifiers{Task: notifier},
	})
	from := len(client.Actions())
	Expect(backend.Start(ctx)).To(Succeed())
	Eventually(func() int {
		n := 0
		for _, a := range client.Actions()[from:] {
			if a.GetVerb() == "watch" {
				n++
			}
		}
		return n
	}).Should(Equal(3))
	return backend
}

// startTaskBackendWithout starts a backend without a task reporter.
func startTaskBackendWithout(client *fake.Clientset) *k8s.Backend {
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	backend := backendtest.MustBackend(client, lagertest.NewTestLogger("k8s"), k8s.Options{Namespace: backendtest.Namespace, Store: store.Options{ReadWaitTimeout: 2 * time.Second}})
	Expect(backend.Start(ctx)).To(Succeed())
	return backend
}

// runLeaderWork runs the backend's leader work until the spec ends (or stop is called).
func runLeaderWork(backend *k8s.Backend) (stop func()) {
	return backendtest.Lead(backend.RunLeaderWork)
}

func getJob(client *fake.Clientset, name string) *batchv1.Job {
	j, err := client.BatchV1().Jobs(backendtest.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return j
}

// endJob sets the Job's Complete or Failed condition, as the Job controller does.
func endJob(client *fake.Clientset, name string, kind batchv1.JobConditionType, at time.Time) {
	j := getJob(client, name)
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
		Type: kind, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: metav1.NewTime(at),
	})
	_, err := client.BatchV1().Jobs(backendtest.Namespace).UpdateStatus(context.Background(), j, metav1.UpdateOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
}

var _ = Describe("Tasks", func() {
	var (
		client   *fake.Clientset
		backend  *k8s.Backend
		notifier *fakes.FakeTaskNotifier
		ctx      context.Context
		jobName  string
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		notifier = new(fakes.FakeTaskNotifier)
		jobName = names.TaskJobName(backendtest.SampleTaskGUID)
	})

	Describe("TaskJobName", func() {
		It("is task-<guid> when that is a DNS label, else a hash within 63 chars", func() {
			Expect(jobName).To(Equal("task-" + backendtest.SampleTaskGUID))
			long := names.TaskJobName("a123456789012345678901234567890123456789012345678901234567890")
			Expect(long).To(HavePrefix("task-"))
			Expect(len(long)).To(BeNumerically("<=", 63))
			Expect(names.TaskJobName("ends-with-")).NotTo(Equal("task-ends-with-"))
			Expect(names.TaskJobName("ends-with-")).To(Equal(names.TaskJobName("ends-with-")))
		})
	})

	Describe("DesireTask", func() {
		BeforeEach(func() { backend = startTaskBackend(client, notifier, 0) })

		It("creates the Secrets and a one-pod Job, then makes the Job own the Secrets", func() {
			from := len(client.Actions())
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			Expect(backendtest.ActionsSince(client, from)).To(Equal([]string{
				"create secrets " + jobName + "-env",
				"create secrets " + jobName + "-registry",
				"create jobs " + jobName,
				"patch secrets " + jobName + "-env",
				"patch secrets " + jobName + "-registry",
			}))

			job := getJob(client, jobName)
			Expect(job.Labels).To(Equal(map[string]string{
				names.LabelSourceType: names.SourceTypeTask, names.LabelTaskGUID: backendtest.SampleTaskGUID,
				names.LabelAppGUID: "app-guid", names.LabelManagedBy: names.ManagedByOPI,
			}))
			Expect(job.Annotations).To(HaveKeyWithValue(names.AnnotationTaskGUID, backendtest.SampleTaskGUID))
			Expect(job.Annotations).To(HaveKeyWithValue(names.AnnotationTaskName, "migrate"))
			Expect(job.Annotations).To(HaveKeyWithValue(names.AnnotationCompletionCallback, backendtest.SampleTask().CompletionCallback))
			Expect(*job.Spec.BackoffLimit).To(BeZero())
			Expect(*job.Spec.Completions).To(Equal(int32(1)))
			Expect(*job.Spec.Parallelism).To(Equal(int32(1)))
			pod := job.Spec.Template.Spec
			Expect(job.Spec.Template.Labels).To(Equal(job.Labels))
			Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
			Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
			Expect(pod.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: jobName + "-registry"}}))
			c := pod.Containers[0]
			Expect(c.Name).To(Equal(names.ContainerName))
			Expect(c.Image).To(Equal("registry.example.com/team/image:1"))
			Expect(c.Command).To(Equal([]string{"/bin/sh", "-c", "echo $$HOME; exit 0"}))
			Expect(c.Resources.Limits.Memory().String()).To(Equal("256Mi"))
			Expect(c.Resources.Limits.StorageEphemeral().String()).To(Equal("512Mi"))
			Expect(c.Resources.Requests.Cpu().String()).To(Equal("200m"))
			Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
			var envNames []string
			for _, e := range c.Env {
				envNames = append(envNames, e.Name)
				Expect(e.Value).NotTo(ContainSubstring("s3cr3t"))
			}
			Expect(envNames).To(Equal([]string{"VCAP_SERVICES", "a:b", "CF_INSTANCE_GUID", "CF_INSTANCE_IP", "CF_INSTANCE_INTERNAL_IP"}))
			Expect(c.Env[0].ValueFrom.SecretKeyRef.Name).To(Equal(jobName + "-env"))

			env := backendtest.GetSecret(client, jobName+"-env")
			Expect(env.Data).To(HaveKeyWithValue("VCAP_SERVICES", []byte("s3cr3t")))
			Expect(env.Data).NotTo(HaveKey("CF_INSTANCE_GUID"))
			Expect(env.Labels).To(HaveKeyWithValue(names.LabelSourceType, names.SourceTypeTask))
			for _, name := range []string{jobName + "-env", jobName + "-registry"} {
				owner := metav1.GetControllerOf(backendtest.GetSecret(client, name))
				Expect(owner).NotTo(BeNil())
				Expect(owner.Kind).To(Equal("Job"))
				Expect(owner.UID).To(Equal(job.UID))
			}
			Expect(backendtest.GetSecret(client, jobName+"-registry").Type).To(Equal(corev1.SecretTypeDockerConfigJson))

			task, err := backend.GetTask(ctx, backendtest.SampleTaskGUID)
			Expect(err).NotTo(HaveOccurred(), "reads reflect the desire at once")
			Expect(task.State).To(Equal(opi.TaskRunning))
		})

		It("answers ErrUnavailable when the API server cannot be reached, and ErrInvalid when it rejects the Job", func() {
			client.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, backendtest.ConnectionRefused
			})
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(MatchError(opi.ErrUnavailable))

			other := backendtest.NewClient()
			other.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, jobName, nil)
			})
			Expect(startTaskBackend(other, notifier, 0).DesireTask(ctx, backendtest.SampleTask())).To(MatchError(opi.ErrInvalid))
		})

		It("gives the task's pod the pod security level of LRP instances", func() {
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			baseline := getJob(client, jobName).Spec.Template.Spec
			Expect(baseline.Containers[0].SecurityContext.Capabilities.Add).To(ContainElement(corev1.Capability("CHOWN")))

			restrictedClient := backendtest.NewClient()
			restricted := backendtest.MustBackend(restrictedClient, lagertest.NewTestLogger("k8s"), k8s.Options{
				Namespace: backendtest.Namespace,
				Pods:      objects.PodOptions{PodSecurity: objects.PodSecurityRestricted},
			})
			startCtx, cancel := context.WithCancel(ctx)
			DeferCleanup(cancel)
			Expect(restricted.Start(startCtx)).To(Succeed())
			Expect(restricted.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			spec := getJob(restrictedClient, jobName).Spec.Template.Spec
			Expect(*spec.SecurityContext.RunAsNonRoot).To(BeTrue())
			Expect(spec.Containers[0].SecurityContext.Capabilities.Add).To(BeEmpty())
			Expect(spec.Containers[0].SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
		})

		It("does nothing more on a second desire of the same task", func() {
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			task := backendtest.SampleTask()
			task.PrivateRegistry = nil
			from := len(client.Actions())
			Expect(backend.DesireTask(ctx, task)).To(Succeed())
			Expect(backendtest.ActionsSince(client, from)).To(Equal([]string{
				"create secrets " + jobName + "-env",
				"create jobs " + jobName,
				"get secrets " + jobName + "-env",
			}))
			_, err := client.BatchV1().Jobs(backendtest.Namespace).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
		})
	})

	Describe("GetTask and ListTasks", func() {
		BeforeEach(func() { backend = startTaskBackend(client, notifier, 0) })

		It("report running, ended and cancelled tasks from the cache, and list only the unreported", func() {
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			other := backendtest.SampleTask()
			other.GUID = "0-other"
			Expect(backend.DesireTask(ctx, other)).To(Succeed())

			from := len(client.Actions())
			list, err := backend.ListTasks(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(list).To(HaveLen(2))
			Expect(list[0].GUID).To(Equal("0-other"))
			Expect(list[1]).To(Equal(&opi.Task{
				GUID: backendtest.SampleTaskGUID, Name: "migrate", AppGUID: "app-guid", AppName: "dora",
				SpaceGUID: "space-guid", SpaceName: "dev", OrganizationGUID: "org-guid", OrganizationName: "acme",
				State: opi.TaskRunning,
			}))
			Expect(backendtest.ActionsSince(client, from)).To(BeEmpty(), "reads make no API call")

			endJob(client, jobName, batchv1.JobFailed, time.Now())
			Eventually(func() string {
				t, _ := backend.GetTask(ctx, backendtest.SampleTaskGUID)
				return t.State + " " + t.FailureReason
			}).Should(Equal("COMPLETED BackoffLimitExceeded"))

			j := getJob(client, jobName)
			j.Annotations[names.AnnotationCompletionReported] = time.Now().UTC().Format(time.RFC3339)
			j.Annotations[names.AnnotationTaskFailed] = "true"
			j.Annotations[names.AnnotationFailureReason] = "Exited with status 3"
			_, err = client.BatchV1().Jobs(backendtest.Namespace).Update(ctx, j, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() []*opi.Task {
				l, _ := backend.ListTasks(ctx)
				return l
			}).Should(HaveLen(1), "a reported task is no longer listed")
			task, err := backend.GetTask(ctx, backendtest.SampleTaskGUID)
			Expect(err).NotTo(HaveOccurred(), "but still found until its Job is deleted")
			Expect([]any{task.State, task.Failed, task.FailureReason}).To(Equal([]any{"COMPLETED", true, "Exited with status 3"}))
		})

		It("answers ErrNotFound for an unknown task", func() {
			_, err := backend.GetTask(ctx, "unknown")
			Expect(err).To(MatchError(opi.ErrNotFound))
		})
	})

	Describe("CancelTask", func() {
		BeforeEach(func() {
			backend = startTaskBackend(client, notifier, 0)
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
		})

		It("records the cancel and suspends the Job with one patch; a second cancel writes nothing", func() {
			from := len(client.Actions())
			Expect(backend.CancelTask(ctx, backendtest.SampleTaskGUID)).To(Succeed())
			Expect(backendtest.ActionsSince(client, from)).To(Equal([]string{"patch jobs " + jobName}))
			job := getJob(client, jobName)
			Expect(*job.Spec.Suspend).To(BeTrue())
			Expect(job.Annotations).To(HaveKey(names.AnnotationCancelled))

			task, err := backend.GetTask(ctx, backendtest.SampleTaskGUID)
			Expect(err).NotTo(HaveOccurred())
			Expect([]any{task.State, task.Failed, task.FailureReason}).To(Equal([]any{"COMPLETED", true, "task was cancelled"}))

			from = len(client.Actions())
			Expect(backend.CancelTask(ctx, backendtest.SampleTaskGUID)).To(Succeed())
			Expect(backendtest.ActionsSince(client, from)).To(BeEmpty())
		})

		It("does not cancel a task that has ended", func() {
			endJob(client, jobName, batchv1.JobComplete, time.Now())
			Eventually(func() string {
				t, _ := backend.GetTask(ctx, backendtest.SampleTaskGUID)
				return t.State
			}).Should(Equal(opi.TaskCompleted))
			from := len(client.Actions())
			Expect(backend.CancelTask(ctx, backendtest.SampleTaskGUID)).To(Succeed())
			Expect(backendtest.ActionsSince(client, from)).To(BeEmpty())
		})

		It("answers ErrNotFound for an unknown task after asking the API once", func() {
			from := len(client.Actions())
			Expect(backend.CancelTask(ctx, "unknown")).To(MatchError(opi.ErrNotFound))
			Expect(backendtest.ActionsSince(client, from)).To(Equal([]string{"get jobs task-unknown"}))
		})
	})

	Describe("the task reporter", func() {
		completedCalls := func() []opi.TaskCompletion {
			var out []opi.TaskCompletion
			for i := range notifier.TaskCompletedCallCount() {
				_, c := notifier.TaskCompletedArgsForCall(i)
				out = append(out, c)
			}
			return out
		}
		jobExists := func() bool {
			_, err := client.BatchV1().Jobs(backendtest.Namespace).Get(ctx, jobName, metav1.GetOptions{})
			return !apierrors.IsNotFound(err)
		}

		It("reports a succeeded task, marks it after the notifier's nil, and deletes its Job", func() {
			backend = startTaskBackend(client, notifier, 0)
			runLeaderWork(backend)
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			ended := time.Now().Add(-time.Minute).Truncate(time.Second)
			endJob(client, jobName, batchv1.JobComplete, ended)

			Eventually(jobExists).Should(BeFalse())
			Expect(completedCalls()).To(HaveLen(1))
			c := completedCalls()[0]
			Expect(c.TaskGUID).To(Equal(backendtest.SampleTaskGUID))
			Expect(c.CallbackURL).To(Equal(backendtest.SampleTask().CompletionCallback))
			Expect(c.Failed).To(BeFalse())
			Expect(c.FailureReason).To(BeEmpty())
			Expect(c.OwedSince.Equal(ended)).To(BeTrue(), "owed since the Job ended")

			var verbs []string
			for _, a := range backendtest.ActionsSince(client, 0) {
				if a == "patch jobs "+jobName || a == "delete jobs "+jobName {
					verbs = append(verbs, a)
				}
			}
			Expect(verbs).To(Equal([]string{"patch jobs " + jobName, "delete jobs " + jobName}))
		})

		It("reports a failed task with its pod's exit, and keeps the Job for the retention", func() {
			backend = startTaskBackend(client, notifier, time.Hour)
			runLeaderWork(backend)
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			job := getJob(client, jobName)
			_, err := client.CoreV1().Pods(backendtest.Namespace).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: jobName + "-abcde", Labels: map[string]string{
					"batch.kubernetes.io/controller-uid": string(job.UID), names.LabelSourceType: names.SourceTypeTask,
				}},
				Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
					Name: names.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}},
				}}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			endJob(client, jobName, batchv1.JobFailed, time.Now())

			Eventually(func() string { return getJob(client, jobName).Annotations[names.AnnotationCompletionReported] }).ShouldNot(BeEmpty())
			Expect(completedCalls()).To(HaveLen(1))
			Expect(completedCalls()[0].Failed).To(BeTrue())
			Expect(completedCalls()[0].FailureReason).To(Equal("Exited with status 3"))
			Expect(getJob(client, jobName).Annotations).To(HaveKeyWithValue(names.AnnotationFailureReason, "Exited with status 3"))
			Expect(jobExists()).To(BeTrue(), "kept for the retention")
			Eventually(func() int {
				l, _ := backend.ListTasks(ctx)
				return len(l)
			}).Should(BeZero())
			task, err := backend.GetTask(ctx, backendtest.SampleTaskGUID)
			Expect(err).NotTo(HaveOccurred())
			Expect(task.FailureReason).To(Equal("Exited with status 3"))
		})

		It("reports a cancelled task as cancelled", func() {
			backend = startTaskBackend(client, notifier, 0)
			runLeaderWork(backend)
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			Expect(backend.CancelTask(ctx, backendtest.SampleTaskGUID)).To(Succeed())
			Eventually(jobExists).Should(BeFalse())
			Expect(completedCalls()).To(HaveLen(1))
			Expect(completedCalls()[0].Failed).To(BeTrue())
			Expect(completedCalls()[0].FailureReason).To(Equal("task was cancelled"))
		})

		It("does not mark a task whose report failed, and tries again", func() {
			notifier.TaskCompletedReturnsOnCall(0, errors.New("context canceled"))
			backend = startTaskBackend(client, notifier, time.Hour)
			runLeaderWork(backend)
			Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
			endJob(client, jobName, batchv1.JobComplete, time.Now())

			Eventually(notifier.TaskCompletedCallCount).Should(Equal(1))
			Expect(getJob(client, jobName).Annotations).NotTo(HaveKey(names.AnnotationCompletionReported))
			Eventually(func() string { return getJob(client, jobName).Annotations[names.AnnotationCompletionReported] }).ShouldNot(BeEmpty())
			Expect(notifier.TaskCompletedCallCount()).To(Equal(2))
		})

		It("resumes after a restart: reports what is owed, not what was reported, and deletes what is due", func() {
			owed := backendtest.SampleTask()
			reported := backendtest.SampleTask()
			reported.GUID = "already-reported"
			running := backendtest.SampleTask()
			running.GUID = "still-running"
			first := startTaskBackendWithout(client) // no reporter: an opi that died before reporting
			for _, t := range []*opi.Task{owed, reported, running} {
				Expect(first.DesireTask(ctx, t)).To(Succeed())
			}
			endJob(client, jobName, batchv1.JobComplete, time.Now())
			endJob(client, names.TaskJobName(reported.GUID), batchv1.JobComplete, time.Now())
			j := getJob(client, names.TaskJobName(reported.GUID))
			j.Annotations[names.AnnotationCompletionReported] = time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
			_, err := client.BatchV1().Jobs(backendtest.Namespace).Update(ctx, j, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())

			backend = startTaskBackend(client, notifier, time.Minute)
			runLeaderWork(backend)
			Eventually(func() bool {
				_, err := client.BatchV1().Jobs(backendtest.Namespace).Get(ctx, names.TaskJobName(reported.GUID), metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}).Should(BeTrue(), "reported an hour ago: past the retention")
			Eventually(func() string { return getJob(client, jobName).Annotations[names.AnnotationCompletionReported] }).ShouldNot(BeEmpty())
			Expect(completedCalls()).To(HaveLen(1))
			Expect(completedCalls()[0].TaskGUID).To(Equal(backendtest.SampleTaskGUID))
			Expect(getJob(client, names.TaskJobName(running.GUID)).Annotations).NotTo(HaveKey(names.AnnotationCompletionReported))
		})
	})
})
