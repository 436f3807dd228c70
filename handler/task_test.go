package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

const taskGUID = "5b1e5f3a-1c2d-4e3f-8a9b-0c1d2e3f4a5b"

var taskBody = `{"name":"migrate","app_guid":"app","environment":[{"name":"MEMORY_LIMIT","value":"256m"}],
	"completion_callback":"https://cc.internal/internal/v4/tasks/` + taskGUID + `/completed",
	"lifecycle":{"docker_lifecycle":{"image":"busybox","command":["/bin/sh","-c","exit 0"]}}}`

var _ = Describe("Task routes", func() {
	var (
		tasks  *fakes.FakeTaskBifrost
		server *httptest.Server
	)

	BeforeEach(func() {
		tasks = new(fakes.FakeTaskBifrost)
		server = serve(handler.Config{
			LRP: new(fakes.FakeLRPBifrost), Task: tasks, Readiness: new(fakes.FakeReadinessChecker),
			Logger: lagertest.NewTestLogger("handler"), MaxBodyBytes: 4096,
		})
	})

	Describe("POST /tasks/{task_guid}", func() {
		It("desires the task and answers 202 {}", func() {
			status, body := call(server, "POST", "/tasks/"+taskGUID, taskBody)
			Expect(status).To(Equal(http.StatusAccepted))
			Expect(body).To(MatchJSON(`{}`))
			Expect(tasks.DesireCallCount()).To(Equal(1))
			_, guid, req := tasks.DesireArgsForCall(0)
			Expect(guid).To(Equal(taskGUID))
			Expect(req.Name).To(Equal("migrate"))
			Expect(req.Environment).To(Equal([]models.EnvironmentVariable{{Name: "MEMORY_LIMIT", Value: "256m"}}))
			Expect(req.Lifecycle.DockerLifecycle.Command).To(Equal([]string{"/bin/sh", "-c", "exit 0"}))
		})

		DescribeTable("answers errors as {\"message\"} with the status of their kind",
			func(body string, err error, wantStatus int, wantMessage string) {
				tasks.DesireReturns(err)
				status, resp := call(server, "POST", "/tasks/"+taskGUID, body)
				Expect(status).To(Equal(wantStatus))
				Expect(resp).To(MatchJSON(fmt.Sprintf(`{"message":%q}`, wantMessage)))
			},
			Entry("empty body", "", nil, http.StatusBadRequest, "request body is empty"),
			Entry("environment as a map", `{"environment":{"A":"b"}}`, nil, http.StatusBadRequest, "invalid request body: environment must be a list, got object"),
			Entry("invalid", taskBody, fmt.Errorf("lifecycle.docker_lifecycle.image is required: %w", opi.ErrInvalid), http.StatusBadRequest, "lifecycle.docker_lifecycle.image is required: invalid"),
			Entry("unavailable", taskBody, fmt.Errorf("desire task: %w", opi.ErrUnavailable), http.StatusServiceUnavailable, "desire task: orchestrator unavailable"),
			Entry("other", taskBody, errors.New("boom"), http.StatusInternalServerError, "boom"),
		)

		It("does not call the bifrost for a body it cannot decode", func() {
			status, _ := call(server, "POST", "/tasks/"+taskGUID, `{"name":`)
			Expect(status).To(Equal(http.StatusBadRequest))
			Expect(tasks.DesireCallCount()).To(BeZero())
		})
	})

	Describe("GET /tasks/{task_guid}", func() {
		It("answers the task", func() {
			tasks.GetReturns(&models.TaskResponse{GUID: taskGUID, Name: "migrate", AppGUID: "app", State: "COMPLETED", Failed: true, FailureReason: "Error (exit code 3)"}, nil)
			status, body := call(server, "GET", "/tasks/"+taskGUID, "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`{"guid":"` + taskGUID + `","name":"migrate","app_guid":"app","state":"COMPLETED","failed":true,"failure_reason":"Error (exit code 3)"}`))
			_, guid := tasks.GetArgsForCall(0)
			Expect(guid).To(Equal(taskGUID))
		})

		It("answers 404 {\"message\"} for an unknown task", func() {
			tasks.GetReturns(nil, fmt.Errorf("get task: %w", opi.ErrNotFound))
			status, body := call(server, "GET", "/tasks/"+taskGUID, "")
			Expect(status).To(Equal(http.StatusNotFound))
			Expect(body).To(MatchJSON(`{"message":"the requested resource could not be found"}`))
		})
	})

	Describe("GET /tasks", func() {
		It("answers a JSON array, never null", func() {
			status, body := call(server, "GET", "/tasks", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`[]`))

			tasks.ListReturns([]models.TaskResponse{{GUID: "a", State: "RUNNING"}}, nil)
			status, body = call(server, "GET", "/tasks", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`[{"guid":"a","name":"","app_guid":"","state":"RUNNING","failed":false,"failure_reason":""}]`))
		})

		It("answers 503 {\"message\"} before the caches synced", func() {
			tasks.ListReturns(nil, opi.ErrUnavailable)
			status, body := call(server, "GET", "/tasks", "")
			Expect(status).To(Equal(http.StatusServiceUnavailable))
			Expect(body).To(MatchJSON(`{"message":"orchestrator unavailable"}`))
		})
	})

	Describe("DELETE /tasks/{task_guid}", func() {
		It("cancels and answers 204 without a body", func() {
			status, body := call(server, "DELETE", "/tasks/"+taskGUID, "")
			Expect(status).To(Equal(http.StatusNoContent))
			Expect(body).To(BeEmpty())
			_, guid := tasks.CancelArgsForCall(0)
			Expect(guid).To(Equal(taskGUID))
		})

		It("answers 404 {\"message\"} for an unknown task, never a 5xx", func() {
			tasks.CancelReturns(fmt.Errorf("cancel task: %w", opi.ErrNotFound))
			status, body := call(server, "DELETE", "/tasks/"+taskGUID, "")
			Expect(status).To(Equal(http.StatusNotFound))
			Expect(body).To(MatchJSON(`{"message":"the requested resource could not be found"}`))
		})

		It("bounds the cancel by the write timeout", func() {
			tasks.CancelStub = func(ctx context.Context, _ string) error {
				<-ctx.Done()
				return ctx.Err()
			}
			server.Config.Handler = handler.New(handler.Config{
				LRP: new(fakes.FakeLRPBifrost), Task: tasks, Readiness: new(fakes.FakeReadinessChecker),
				Logger: lagertest.NewTestLogger("handler"), WriteTimeout: 1,
			})
			status, body := call(server, "DELETE", "/tasks/"+taskGUID, "")
			Expect(status).To(Equal(http.StatusServiceUnavailable))
			Expect(body).To(ContainSubstring(`"message"`))
		})
	})

	It("serves no task routes without a task bifrost", func() {
		plain := httptest.NewServer(handler.New(handler.Config{
			LRP: new(fakes.FakeLRPBifrost), Readiness: new(fakes.FakeReadinessChecker), Logger: lagertest.NewTestLogger("handler"),
		}))
		defer plain.Close()
		resp, err := http.Get(plain.URL + "/tasks")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	})
})
