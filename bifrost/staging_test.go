package bifrost_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

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
