package bifrost_test

import (
	"context"
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Task", func() {
	const guid = "5b1e5f3a-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
	var (
		backend *fakes.FakeTaskBackend
		urls    *fakes.FakeURLChecker
		task    *bifrost.Task
		req     models.TaskRequest
	)

	BeforeEach(func() {
		backend = new(fakes.FakeTaskBackend)
		urls = new(fakes.FakeURLChecker)
		task = &bifrost.Task{Backend: backend, URLs: urls, Defaults: bifrost.TaskDefaults{MemoryMB: 512, DiskMB: 2048, CPUWeight: 7}}
		req = models.TaskRequest{
			Name: "migrate", AppGUID: "app", AppName: "dora", OrgGUID: "o", OrgName: "org", SpaceGUID: "s", SpaceName: "space",
			Environment: []models.EnvironmentVariable{
				{Name: "MEMORY_LIMIT", Value: "256m"}, {Name: "a:b", Value: "1"}, {Name: "X", Value: "first"}, {Name: "X", Value: "second"},
			},
			CompletionCallback: "https://cc.internal/internal/v4/tasks/" + guid + "/completed",
			Lifecycle: models.Lifecycle{DockerLifecycle: &models.DockerLifecycle{
				Image: "registry.example.com/team/image:1", Command: []string{"/bin/sh", "-c", "rake db:migrate"},
				RegistryUsername: "user", RegistryPassword: "secret",
			}},
		}
	})

	Describe("Desire", func() {
		It("converts the request and hands the task to the backend", func() {
			Expect(task.Desire(context.Background(), guid, req)).To(Succeed())
			Expect(urls.CheckURLArgsForCall(0)).To(Equal(req.CompletionCallback))
			Expect(backend.DesireTaskCallCount()).To(Equal(1))
			_, got := backend.DesireTaskArgsForCall(0)
			Expect(got).To(Equal(&opi.Task{
				GUID: guid, Name: "migrate", AppGUID: "app", AppName: "dora", SpaceGUID: "s", SpaceName: "space",
				OrganizationGUID: "o", OrganizationName: "org",
				Image: "registry.example.com/team/image:1", Command: []string{"/bin/sh", "-c", "rake db:migrate"},
				PrivateRegistry: &opi.PrivateRegistry{Server: "registry.example.com", Username: "user", Password: "secret"},
				Env:             map[string]string{"MEMORY_LIMIT": "256m", "a:b": "1", "X": "second"},
				MemoryMB:        256, DiskMB: 2048, CPUWeight: 7,
				CompletionCallback: req.CompletionCallback,
			}))
		})

		It("takes memory_mb, disk_mb and cpu_weight when sent, and the defaults without MEMORY_LIMIT", func() {
			req.MemoryMB, req.DiskMB, req.CPUWeight = 128, 64, 50
			converted, err := task.ConvertTask(guid, req)
			Expect(err).NotTo(HaveOccurred())
			Expect([]int64{converted.MemoryMB, converted.DiskMB, int64(converted.CPUWeight)}).To(Equal([]int64{128, 64, 50}))

			req = models.TaskRequest{CompletionCallback: "https://cc/x", Lifecycle: models.Lifecycle{DockerLifecycle: &models.DockerLifecycle{Image: "busybox"}}}
			converted, err = task.ConvertTask(guid, req)
			Expect(err).NotTo(HaveOccurred())
			Expect([]int64{converted.MemoryMB, converted.DiskMB, int64(converted.CPUWeight)}).To(Equal([]int64{512, 2048, 7}))
			Expect(converted.PrivateRegistry).To(BeNil())
		})

		DescribeTable("rejects bad requests before anything is written",
			func(guid string, change func(*models.TaskRequest), urlErr error, field string) {
				urls.CheckURLReturns(urlErr)
				change(&req)
				err := task.Desire(context.Background(), guid, req)
				Expect(err).To(MatchError(opi.ErrInvalid))
				Expect(err.Error()).To(HavePrefix(field))
				Expect(backend.DesireTaskCallCount()).To(BeZero())
			},
			Entry("upper-case guid", "ABC", func(*models.TaskRequest) {}, nil, "task_guid"),
			Entry("long guid", fmt.Sprintf("%064d", 1), func(*models.TaskRequest) {}, nil, "task_guid"),
			Entry("no callback", guid, func(r *models.TaskRequest) { r.CompletionCallback = "" }, nil, "completion_callback"),
			Entry("unusable callback", guid, func(*models.TaskRequest) {}, errors.New("plain http is allowed only to loopback"), "completion_callback"),
			Entry("buildpack lifecycle", guid, func(r *models.TaskRequest) {
				r.Lifecycle = models.Lifecycle{BuildpackLifecycle: []byte(`{"droplet_uri":"x"}`)}
			}, nil, "lifecycle buildpack_lifecycle is not supported"),
			Entry("no lifecycle", guid, func(r *models.TaskRequest) { r.Lifecycle = models.Lifecycle{} }, nil, "lifecycle.docker_lifecycle"),
			Entry("no image", guid, func(r *models.TaskRequest) { r.Lifecycle.DockerLifecycle.Image = " " }, nil, "lifecycle.docker_lifecycle.image"),
			Entry("env name with '='", guid, func(r *models.TaskRequest) {
				r.Environment = append(r.Environment, models.EnvironmentVariable{Name: "A=B"})
			}, nil, "environment[4].name"),
			Entry("empty env name", guid, func(r *models.TaskRequest) { r.Environment[0].Name = "" }, nil, "environment[0].name"),
			Entry("bad MEMORY_LIMIT", guid, func(r *models.TaskRequest) { r.Environment[0].Value = "lots" }, nil, "environment.MEMORY_LIMIT"),
			Entry("memory_mb too large", guid, func(r *models.TaskRequest) { r.MemoryMB = bifrost.MaxMemoryMB + 1 }, nil, "memory_mb"),
			Entry("negative disk_mb", guid, func(r *models.TaskRequest) { r.DiskMB = -1 }, nil, "disk_mb"),
			Entry("cpu_weight over 100", guid, func(r *models.TaskRequest) { r.CPUWeight = 101 }, nil, "cpu_weight"),
		)

		It("wraps the backend's error", func() {
			backend.DesireTaskReturns(opi.ErrUnavailable)
			Expect(task.Desire(context.Background(), guid, req)).To(MatchError(opi.ErrUnavailable))
		})
	})

	DescribeTable("ParseMemoryLimit",
		func(in string, want int64, ok bool) {
			got, err := bifrost.ParseMemoryLimit(in)
			if !ok {
				Expect(err).To(HaveOccurred())
				return
			}
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(want))
		},
		Entry("m", "256m", int64(256), true),
		Entry("M with B", "512MB", int64(512), true),
		Entry("g", "1g", int64(1024), true),
		Entry("G", "2G", int64(2048), true),
		Entry("k rounds up", "1500k", int64(2), true),
		Entry("bare number is MiB", "128", int64(128), true),
		Entry("zero", "0m", int64(0), false),
		Entry("words", "lots", int64(0), false),
		Entry("negative", "-1m", int64(0), false),
		Entry("too large", "2t", int64(0), false),
		Entry("overflow", "99999999999999999999m", int64(0), false),
	)

	Describe("reads and cancel", func() {
		It("answers a task in CC's shape", func() {
			backend.GetTaskReturns(&opi.Task{GUID: guid, Name: "migrate", AppGUID: "app", State: opi.TaskCompleted, Failed: true, FailureReason: "Error (exit code 3)"}, nil)
			got, err := task.Get(context.Background(), guid)
			Expect(err).NotTo(HaveOccurred())
			Expect(*got).To(Equal(models.TaskResponse{GUID: guid, Name: "migrate", AppGUID: "app", State: "COMPLETED", Failed: true, FailureReason: "Error (exit code 3)"}))
		})

		It("lists never nil", func() {
			got, err := task.List(context.Background())
			Expect(err).NotTo(HaveOccurred())
			Expect(got).NotTo(BeNil())
			Expect(got).To(BeEmpty())
		})

		It("passes not found through and rejects a bad guid without calling the backend", func() {
			backend.CancelTaskReturns(opi.ErrNotFound)
			Expect(task.Cancel(context.Background(), guid)).To(MatchError(opi.ErrNotFound))
			Expect(task.Cancel(context.Background(), "Bad Guid")).To(MatchError(opi.ErrInvalid))
			_, err := task.Get(context.Background(), "Bad Guid")
			Expect(err).To(MatchError(opi.ErrInvalid))
			Expect(backend.CancelTaskCallCount()).To(Equal(1))
			Expect(backend.GetTaskCallCount()).To(BeZero())
		})
	})
})
