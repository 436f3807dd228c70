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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/task"
	"github.com/opi-bridge/opi/k8s/internal/task/taskfakes"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// The task service on its own: client-go's fake clientset for the API server and the
// counterfeiter fakes of its narrow interfaces (Cache, Policies) for the store and the network
// policy hook. The specs that go through k8s.NewBackend (the wiring, with a real store) are in
// backend_test.go and task_networkpolicy_test.go.

const (
	namespace = "cf-apps"
	taskGUID  = "5b1e5f3a-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
)

func sampleTask() *opi.Task {
	return &opi.Task{
		GUID: taskGUID, Name: "migrate", AppGUID: "app-guid", AppName: "dora",
		Image:              "registry.example.com/team/image:1",
		Command:            []string{"/bin/true"},
		Env:                map[string]string{"VCAP_SERVICES": "s3cr3t"},
		MemoryMB:           256,
		DiskMB:             512,
		CompletionCallback: "https://cc.internal/internal/v4/tasks/" + taskGUID + "/completed",
	}
}

// actions are the client's requests as "verb resource name".
func actions(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		switch a := a.(type) {
		case k8stesting.CreateAction:
			if m, ok := a.GetObject().(metav1.Object); ok {
				s += " " + m.GetName()
			}
		case k8stesting.PatchAction:
			s += " " + a.GetName()
		case k8stesting.GetAction:
			s += " " + a.GetName()
		case k8stesting.DeleteAction:
			s += " " + a.GetName()
		}
		out = append(out, s)
	}
	return out
}

var _ = Describe("the task service", func() {
	var (
		client   *fake.Clientset
		cached   *taskfakes.FakeCache
		policies *taskfakes.FakePolicies
		notifier *fakes.FakeTaskNotifier
		logger   *lagertest.TestLogger
		ctx      context.Context
		jobName  string
	)

	newService := func(opts task.Options, n opi.TaskNotifier) *task.Service {
		s, err := task.New(logger, task.Config{Namespace: namespace, Pods: objects.Workload{PodSecurity: objects.PodSecurityBaseline}, Options: opts},
			task.Deps{Client: client, Cache: cached, Policies: policies, Notifier: n})
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = fake.NewClientset()
		// Like an API server, give a created Job a uid (the Secrets' owner reference names it).
		client.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
			a.(k8stesting.CreateAction).GetObject().(*batchv1.Job).UID = "job-uid"
			return false, nil, nil
		})
		cached = new(taskfakes.FakeCache)
		policies = new(taskfakes.FakePolicies)
		policies.TaskPolicyReturns("app", nil)
		notifier = new(fakes.FakeTaskNotifier)
		logger = lagertest.NewTestLogger("task")
		jobName = names.TaskJobName(taskGUID)
	})

	Describe("New", func() {
		DescribeTable("refuses a service without what it works with",
			func(deps func() task.Deps, want string) {
				_, err := task.New(logger, task.Config{Namespace: namespace, Pods: objects.Workload{}, Options: task.Options{}}, deps())
				Expect(err).To(MatchError(ContainSubstring(want)))
			},
			Entry("no client", func() task.Deps { return task.Deps{Cache: cached, Policies: policies} }, "Kubernetes client"),
			Entry("no cache", func() task.Deps { return task.Deps{Client: client, Policies: policies} }, "Job cache"),
			Entry("no policies", func() task.Deps { return task.Deps{Client: client, Cache: cached} }, "network policies"),
		)

		It("reports task ends only with a notifier", func() {
			Expect(newService(task.Options{}, notifier).Reports()).To(BeTrue())
			Expect(newService(task.Options{}, nil).Reports()).To(BeFalse())
		})
	})

	Describe("DesireTask", func() {
		It("writes nothing while the cache is not writable", func() {
			cached.CheckWritableReturns(opi.ErrUnavailable)
			err := newService(task.Options{}, nil).DesireTask(ctx, sampleTask())
			Expect(errors.Is(err, opi.ErrUnavailable)).To(BeTrue(), "got %v", err)
			Expect(client.Actions()).To(BeEmpty())
			Expect(policies.TaskPolicyCallCount()).To(BeZero())
			Expect(cached.WaitForJobCallCount()).To(BeZero())
		})

		It("creates the Secret and the Job, hands the app's rules and the Job as owner to the policies, then waits for the cache", func() {
			rules := []opi.EgressRule{{Protocol: "tcp", Destinations: []string{"10.0.0.0/8"}}}
			cached.AppEgressRulesReturns(rules, true)
			Expect(newService(task.Options{}, nil).DesireTask(ctx, sampleTask())).To(Succeed())
			Expect(actions(client)).To(Equal([]string{
				"create secrets " + jobName + "-env",
				"create jobs " + jobName,
				"patch secrets " + jobName + "-env",
			}))

			Expect(cached.AppEgressRulesCallCount()).To(Equal(1))
			Expect(cached.AppEgressRulesArgsForCall(0)).To(Equal("app-guid"))
			Expect(policies.TaskPolicyCallCount()).To(Equal(1))
			_, gotTask, name, appRules, found, owner, live := policies.TaskPolicyArgsForCall(0)
			Expect(gotTask.GUID).To(Equal(taskGUID))
			Expect(name).To(Equal(jobName))
			Expect(appRules).To(Equal(rules))
			Expect(found).To(BeTrue())
			Expect(owner.Kind).To(Equal("Job"))
			Expect(owner.Name).To(Equal(jobName))
			Expect(owner.UID).To(Equal(types.UID("job-uid")))
			Expect(*owner.Controller).To(BeTrue())
			isLive, err := live(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(isLive).To(BeTrue(), "the Job it created is the live one")

			Expect(cached.WaitForJobCallCount()).To(Equal(1))
			_, _, waited, _, goneOK, _ := cached.WaitForJobArgsForCall(0)
			Expect(waited).To(Equal(jobName))
			Expect(goneOK).To(BeFalse())
		})

		It("refuses a Job of its name that belongs to another task, and owns nothing", func() {
			cached.JobReturns(&store.JobRecord{ObjectMeta: metav1.ObjectMeta{Name: jobName, UID: "other-uid"}, TaskGUID: "other-task"}, true)
			_, err := client.BatchV1().Jobs(namespace).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
				Name: jobName, Namespace: namespace, Annotations: map[string]string{names.AnnotationTaskGUID: "other-task"},
			}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			client.ClearActions()

			err = newService(task.Options{}, nil).DesireTask(ctx, sampleTask())
			Expect(err).To(MatchError(ContainSubstring("does not belong to task " + taskGUID)))
			Expect(policies.TaskPolicyCallCount()).To(BeZero())
			Expect(actions(client)).NotTo(ContainElement(HavePrefix("patch")))
		})
	})

	Describe("GetTask", func() {
		It("answers ErrNotFound for a Job of the task's name whose guid differs", func() {
			cached.JobReturns(&store.JobRecord{ObjectMeta: metav1.ObjectMeta{Name: jobName}, TaskGUID: "other-task"}, true)
			_, err := newService(task.Options{}, nil).GetTask(ctx, taskGUID)
			Expect(errors.Is(err, opi.ErrNotFound)).To(BeTrue(), "got %v", err)
			Expect(cached.JobArgsForCall(0)).To(Equal(jobName))
			Expect(client.Actions()).To(BeEmpty())
		})

		It("reads the task from the cached Job", func() {
			cached.JobReturns(&store.JobRecord{ObjectMeta: metav1.ObjectMeta{Name: jobName}, TaskGUID: taskGUID, AppName: "dora"}, true)
			t, err := newService(task.Options{}, nil).GetTask(ctx, taskGUID)
			Expect(err).NotTo(HaveOccurred())
			Expect(t.GUID).To(Equal(taskGUID))
			Expect(t.AppName).To(Equal("dora"))
			Expect(t.State).To(Equal(opi.TaskRunning))
		})

		It("answers what the sync gate says before the cache is synced", func() {
			cached.CheckSyncedReturns(opi.ErrUnavailable)
			_, err := newService(task.Options{}, nil).GetTask(ctx, taskGUID)
			Expect(errors.Is(err, opi.ErrUnavailable)).To(BeTrue(), "got %v", err)
			Expect(cached.JobCallCount()).To(BeZero())
		})
	})

	Describe("ListTasksVersioned", func() {
		It("lists the unreported tasks by guid, with the version read before the list", func() {
			deleting := metav1.Now()
			cached.JobChangesReturns(7)
			cached.JobsReturns([]*store.JobRecord{
				{TaskGUID: "b"},
				{TaskGUID: "c", Reported: "2026-01-01T00:00:00Z"},
				{TaskGUID: "a"},
				{TaskGUID: "d", ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}},
				{TaskGUID: ""},
			})
			tasks, version, err := newService(task.Options{}, nil).ListTasksVersioned(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(version).To(Equal(uint64(7)))
			var guids []string
			for _, t := range tasks {
				guids = append(guids, t.GUID)
			}
			Expect(guids).To(Equal([]string{"a", "b"}))
		})
	})

	Describe("CancelTask", func() {
		It("answers ErrNotFound for a cached Job whose guid differs, without writing", func() {
			cached.JobReturns(&store.JobRecord{ObjectMeta: metav1.ObjectMeta{Name: jobName}, TaskGUID: "other-task"}, true)
			err := newService(task.Options{}, nil).CancelTask(ctx, taskGUID)
			Expect(errors.Is(err, opi.ErrNotFound)).To(BeTrue(), "got %v", err)
			Expect(client.Actions()).To(BeEmpty())
		})

		It("writes nothing while the cache is not writable", func() {
			cached.CheckWritableReturns(opi.ErrUnavailable)
			err := newService(task.Options{}, nil).CancelTask(ctx, taskGUID)
			Expect(errors.Is(err, opi.ErrUnavailable)).To(BeTrue(), "got %v", err)
			Expect(client.Actions()).To(BeEmpty())
		})
	})

	Describe("Run, the reporter", func() {
		var handlers chan cache.ResourceEventHandler

		BeforeEach(func() {
			handlers = make(chan cache.ResourceEventHandler, 1)
			cached.AddJobHandlerStub = func(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
				handlers <- h
				return nil, nil
			}
		})

		// run runs the reporter until the spec ends and returns the handler it registered.
		run := func(s *task.Service) cache.ResourceEventHandler {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.Run(ctx)
			}()
			DeferCleanup(func() {
				cancel()
				Eventually(done).Should(BeClosed())
				Expect(cached.RemoveJobHandlerCallCount()).To(Equal(1))
			})
			var h cache.ResourceEventHandler
			Eventually(handlers).Should(Receive(&h))
			return h
		}

		It("tells the notifier of an ended Job's task, records the report on the Job and keeps it for the retention", func() {
			endedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
				Name: jobName, Namespace: namespace, UID: "job-uid",
				Annotations: map[string]string{
					names.AnnotationTaskGUID:           taskGUID,
					names.AnnotationCompletionCallback: "https://cc.internal/done",
				},
			}, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
				Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(endedAt),
			}}}}
			client = fake.NewClientset(job)
			record := store.JobRecordOf(job)
			cached.JobReturns(record, true)

			h := run(newService(task.Options{Retention: time.Hour}, notifier))
			h.OnAdd(record, true)

			Eventually(notifier.TaskCompletedCallCount).Should(Equal(1))
			_, completion := notifier.TaskCompletedArgsForCall(0)
			Expect(completion).To(Equal(opi.TaskCompletion{
				TaskGUID: taskGUID, CallbackURL: "https://cc.internal/done", OwedSince: endedAt,
			}))
			Eventually(cached.WaitForJobCallCount).Should(Equal(1))
			reported, err := client.BatchV1().Jobs(namespace).Get(ctx, jobName, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(reported.Annotations).To(HaveKey(names.AnnotationCompletionReported))
			Expect(reported.Annotations).To(HaveKeyWithValue(names.AnnotationTaskFailed, "false"))
			Expect(actions(client)).NotTo(ContainElement(HavePrefix("delete")), "kept for the retention")
		})
	})
})
