package bifrost_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

const (
	stagingGUID = "3f6b1e2a-9c4d-4e5f-8a7b-6c5d4e3f2a1b"
	callbackURL = "https://cc.internal:9023/internal/v3/staging/3f6b1e2a-9c4d-4e5f-8a7b-6c5d4e3f2a1b/build_completed?start=true"
)

// stagingRequest is a docker StagingRequest as CC sends it.
func stagingRequest() models.StagingRequest {
	return models.StagingRequest{
		AppGUID: "app-guid", AppName: "hello", StagingGUID: stagingGUID,
		OrgGUID: "org-guid", OrgName: "demo", SpaceGUID: "space-guid", SpaceName: "dev",
		Environment:        []models.EnvironmentVariable{{Name: "VCAP_APPLICATION", Value: "{}"}, {Name: "a:b", Value: "x"}},
		CompletionCallback: callbackURL,
		Lifecycle: models.Lifecycle{DockerLifecycle: &models.DockerLifecycle{
			Image: "registry.example.com/team/app:v1", RegistryUsername: "user", RegistryPassword: "s3cret-pw",
		}},
		MemoryMB: 1024, DiskMB: 4096, CPUWeight: 50,
	}
}

var _ = Describe("Staging", func() {
	var (
		stager  *fakes.FakeStager
		urls    *fakes.FakeURLChecker
		staging *bifrost.Staging
		req     models.StagingRequest
	)

	BeforeEach(func() {
		stager = new(fakes.FakeStager)
		urls = new(fakes.FakeURLChecker)
		staging = &bifrost.Staging{Stager: stager, URLs: urls}
		req = stagingRequest()
	})

	It("hands the staging, credentials included, to the stager", func() {
		Expect(staging.Stage(context.Background(), stagingGUID, req)).To(Succeed())
		Expect(urls.CheckURLArgsForCall(0)).To(Equal(callbackURL))
		Expect(stager.StageCallCount()).To(Equal(1))
		_, got := stager.StageArgsForCall(0)
		Expect(got).To(Equal(&opi.Staging{
			GUID: stagingGUID, AppGUID: "app-guid", AppName: "hello", SpaceGUID: "space-guid", OrgGUID: "org-guid",
			Image: "registry.example.com/team/app:v1", CallbackURL: callbackURL,
			PrivateRegistry: &opi.PrivateRegistry{Server: "registry.example.com", Username: "user", Password: "s3cret-pw"},
		}))
	})

	It("stages a public image without credentials, and takes a body without staging_guid", func() {
		req.Lifecycle.DockerLifecycle = &models.DockerLifecycle{Image: "busybox"}
		req.StagingGUID = ""
		Expect(staging.Stage(context.Background(), stagingGUID, req)).To(Succeed())
		_, got := stager.StageArgsForCall(0)
		Expect(got.PrivateRegistry).To(BeNil())
		Expect(got.Image).To(Equal("busybox"))
	})

	It("passes on the stager's error", func() {
		stager.StageReturns(opi.ErrUnavailable)
		Expect(staging.Stage(context.Background(), stagingGUID, req)).To(MatchError(opi.ErrUnavailable))
	})

	DescribeTable("rejects a request it cannot stage, before anything is written",
		func(guid string, change func(*models.StagingRequest), message string) {
			urls.CheckURLStub = func(u string) error {
				if strings.HasPrefix(u, "http://") {
					return errors.New("plain http is allowed only to loopback addresses")
				}
				return nil
			}
			change(&req)
			err := staging.Stage(context.Background(), guid, req)
			Expect(err).To(MatchError(opi.ErrInvalid))
			Expect(err).To(MatchError(ContainSubstring(message)))
			Expect(stager.StageCallCount()).To(BeZero())
		},
		Entry("buildpack lifecycle", stagingGUID, func(r *models.StagingRequest) {
			r.Lifecycle = models.Lifecycle{BuildpackLifecycle: json.RawMessage(`{"buildpacks":["ruby"]}`)}
		}, "opi stages docker images only"),
		Entry("no lifecycle", stagingGUID, func(r *models.StagingRequest) { r.Lifecycle = models.Lifecycle{} }, "lifecycle.docker_lifecycle is required"),
		Entry("no image", stagingGUID, func(r *models.StagingRequest) { r.Lifecycle.DockerLifecycle.Image = "" }, "image is required"),
		Entry("a blank image", stagingGUID, func(r *models.StagingRequest) { r.Lifecycle.DockerLifecycle.Image = " " }, "is not an image reference Kubernetes can pull"),
		Entry("an image that is no reference", stagingGUID, func(r *models.StagingRequest) {
			r.Lifecycle.DockerLifecycle.Image = "Registry.Example.com/UPPER::v1"
		}, "is not an image reference Kubernetes can pull"),
		Entry("a guid that is no label value", "staging-guid-", func(r *models.StagingRequest) { r.StagingGUID = "" }, "cannot be a Kubernetes label value"),
		Entry("a username without password", stagingGUID, func(r *models.StagingRequest) { r.Lifecycle.DockerLifecycle.RegistryPassword = "" }, "go together"),
		Entry("no callback", stagingGUID, func(r *models.StagingRequest) { r.CompletionCallback = "" }, "completion_callback is required"),
		Entry("an unusable callback", stagingGUID, func(r *models.StagingRequest) { r.CompletionCallback = "http://cc.example.com/cb" }, "completion_callback cannot be used"),
		Entry("a bad guid", "Not_A_GUID", func(*models.StagingRequest) {}, "staging_guid"),
		Entry("a guid too long", strings.Repeat("a", 64), func(*models.StagingRequest) {}, "staging_guid"),
		Entry("a body naming another staging", stagingGUID, func(r *models.StagingRequest) { r.StagingGUID = "other" }, "does not match"),
		Entry("memory out of range", stagingGUID, func(r *models.StagingRequest) { r.MemoryMB = -1 }, "memory_mb"),
		Entry("disk out of range", stagingGUID, func(r *models.StagingRequest) { r.DiskMB = 2 << 20 }, "disk_mb"),
		Entry("cpu weight out of range", stagingGUID, func(r *models.StagingRequest) { r.CPUWeight = 101 }, "cpu_weight"),
		Entry("an env name Kubernetes rejects", stagingGUID, func(r *models.StagingRequest) {
			r.Environment = append(r.Environment, models.EnvironmentVariable{Name: "A=B"})
		}, "environment[2].name"),
	)
})

var _ = Describe("Staging callbacks", func() {
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
