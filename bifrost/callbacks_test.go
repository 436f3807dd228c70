package bifrost_test

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Callbacks", func() {
	var (
		client    *fakes.FakeCallbackClient
		callbacks *bifrost.Callbacks
		when      time.Time
	)

	BeforeEach(func() {
		client = new(fakes.FakeCallbackClient)
		callbacks = &bifrost.Callbacks{Client: client}
		when = time.Unix(1700000000, 0)
	})

	It("sends a task completion to the task's callback URL in CC's shape", func() {
		Expect(callbacks.TaskCompleted(context.Background(), opi.TaskCompletion{
			TaskGUID: "t-1", CallbackURL: "https://cc/internal/v4/tasks/t-1/completed",
			Failed: true, FailureReason: "exit status 3", OwedSince: when,
		})).To(Succeed())
		Expect(client.DeliverCallCount()).To(Equal(1))
		_, kind, target, body, owed := client.DeliverArgsForCall(0)
		Expect(kind).To(Equal("task-completed"))
		Expect(target).To(Equal("https://cc/internal/v4/tasks/t-1/completed"))
		Expect(body).To(Equal(models.TaskCompletedCallback{TaskGUID: "t-1", Failed: true, FailureReason: "exit status 3"}))
		Expect(owed).To(Equal(when))
	})

	It("passes on that a callback is still owed", func() {
		client.DeliverReturns(context.Canceled)
		Expect(callbacks.TaskCompleted(context.Background(), opi.TaskCompletion{TaskGUID: "t"})).To(MatchError(context.Canceled))
	})

	It("reports a crash at CC's crash URL of the process", func() {
		client.CrashURLReturns("https://cc/internal/v4/apps/g-v/crashed", nil)
		Expect(callbacks.InstanceCrashed(context.Background(), opi.Crash{
			LRPIdentifier: opi.LRPIdentifier{GUID: "g", Version: "v"}, InstanceGUID: "pod-a", Index: 1,
			Reason: "CRASHED", ExitStatus: 137, ExitDescription: "OOMKilled (exit code 137)",
			CrashCount: 2, CrashTimestamp: when, OwedSince: when,
		})).To(Succeed())
		Expect(client.CrashURLArgsForCall(0)).To(Equal("g-v"))
		_, kind, target, body, _ := client.DeliverArgsForCall(0)
		Expect(kind).To(Equal("crash"))
		Expect(target).To(Equal("https://cc/internal/v4/apps/g-v/crashed"))
		Expect(body).To(Equal(models.CrashReport{
			Instance: "pod-a", Index: 1, Reason: "CRASHED", ExitStatus: 137,
			ExitDescription: "OOMKilled (exit code 137)", CrashCount: 2, CrashTimestamp: 1700000000,
		}))
	})

	It("settles a crash when no CC internal URL is configured", func() {
		client.CrashURLReturns("", errors.New("no cloud controller internal url is configured"))
		Expect(callbacks.InstanceCrashed(context.Background(), opi.Crash{})).To(Succeed())
		Expect(client.DeliverCallCount()).To(Equal(0))
	})

	Describe("of stagings", func() {
		It("delivers a successful staging to its callback in Diego's docker shape", func() {
			Expect(callbacks.StagingCompleted(context.Background(), opi.StagingCompletion{
				StagingGUID: stagingGUID, CallbackURL: callbackURL, Image: "registry.example.com/team/app:v1",
				Config: &opi.ImageConfig{
					Cmd: []string{"--serve"}, Entrypoint: []string{"/bin/app"}, WorkingDir: "/srv", User: "1000",
					Ports: []opi.ImagePort{{Port: 8080, Protocol: "tcp"}, {Port: 8081, Protocol: "udp"}},
				},
				OwedSince: when,
			})).To(Succeed())
			Expect(client.DeliverCallCount()).To(Equal(1))
			_, kind, target, body, owed := client.DeliverArgsForCall(0)
			Expect(kind).To(Equal("staging-completed"))
			Expect(target).To(Equal(callbackURL))
			Expect(owed).To(Equal(when))
			encoded, err := json.Marshal(body)
			Expect(err).NotTo(HaveOccurred())
			Expect(encoded).To(MatchJSON(`{"result":{
				"lifecycle_type":"docker",
				"lifecycle_metadata":{"docker_image":"registry.example.com/team/app:v1"},
				"process_types":{"web":""},
				"execution_metadata":"{\"cmd\":[\"--serve\"],\"entrypoint\":[\"/bin/app\"],\"workdir\":\"/srv\",\"user\":\"1000\",\"ports\":[{\"Port\":8080,\"Protocol\":\"tcp\"},{\"Port\":8081,\"Protocol\":\"udp\"}]}"
			}}`))
		})

		It("leaves what the image does not set out of the execution metadata", func() {
			Expect(bifrost.ExecutionMetadata(&opi.ImageConfig{})).To(Equal(`{}`))
			Expect(bifrost.ExecutionMetadata(&opi.ImageConfig{Cmd: []string{"/start"}})).To(Equal(`{"cmd":["/start"]}`))
		})

		It("delivers a failed staging as a StagingError with the reason", func() {
			Expect(callbacks.StagingCompleted(context.Background(), opi.StagingCompletion{
				StagingGUID: stagingGUID, CallbackURL: callbackURL, Image: "busybox:nope",
				FailureReason: "image busybox:nope not found", OwedSince: when,
			})).To(Succeed())
			_, _, _, body, _ := client.DeliverArgsForCall(0)
			encoded, err := json.Marshal(body)
			Expect(err).NotTo(HaveOccurred())
			Expect(encoded).To(MatchJSON(`{"error":{"id":"StagingError","message":"image busybox:nope not found"}}`))
		})

		It("passes on that the result is still owed", func() {
			client.DeliverReturns(context.Canceled)
			Expect(callbacks.StagingCompleted(context.Background(), opi.StagingCompletion{})).To(MatchError(context.Canceled))
		})
	})
})
