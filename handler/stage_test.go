package handler_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

const stagingGUID = "3f6b1e2a-9c4d-4e5f-8a7b-6c5d4e3f2a1b"

var stageBody = `{"app_guid":"app-guid","app_name":"hello","staging_guid":"` + stagingGUID + `",
	"org_guid":"o","org_name":"demo","space_guid":"s","space_name":"dev",
	"environment":[{"name":"VCAP_APPLICATION","value":"{}"}],
	"completion_callback":"https://cc.internal:9023/internal/v3/staging/` + stagingGUID + `/build_completed",
	"lifecycle":{"docker_lifecycle":{"image":"busybox:1.36","registry_username":"u","registry_password":"s3cret-pw"}},
	"memory_mb":1024,"disk_mb":4096,"cpu_weight":50}`

var _ = Describe("POST /stage/{staging_guid}", func() {
	var (
		staging *fakes.FakeStagingBifrost
		logger  *lagertest.TestLogger
		server  *httptest.Server
	)

	BeforeEach(func() {
		staging = new(fakes.FakeStagingBifrost)
		logger = lagertest.NewTestLogger("handler")
		server = serve(handler.Config{
			LRP: new(fakes.FakeLRPBifrost), Readiness: new(fakes.FakeReadinessChecker), Logger: logger,
			MaxBodyBytes: 4096, Staging: staging, WriteTimeout: time.Second,
		})
	})

	It("hands the request to the bifrost and answers 202 {}", func() {
		status, body := callAsCC(server, "POST", "/stage/"+stagingGUID, stageBody)
		Expect(status).To(Equal(http.StatusAccepted))
		Expect(body).To(MatchJSON(`{}`))
		Expect(staging.StageCallCount()).To(Equal(1))
		_, guid, req := staging.StageArgsForCall(0)
		Expect(guid).To(Equal(stagingGUID))
		Expect(req.AppGUID).To(Equal("app-guid"))
		Expect(req.Environment).To(Equal([]models.EnvironmentVariable{{Name: "VCAP_APPLICATION", Value: "{}"}}))
		Expect(req.Lifecycle.DockerLifecycle.Image).To(Equal("busybox:1.36"))
		Expect(req.Lifecycle.DockerLifecycle.RegistryPassword).To(Equal("s3cret-pw"))
		Expect(req.MemoryMB).To(BeEquivalentTo(1024))
		Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring("s3cret-pw"))
	})

	It("answers a buildpack staging with 400 and a message saying opi stages docker images only", func() {
		// The real bifrost, with a stager that must not be called.
		stager := new(fakes.FakeStager)
		real := serve(handler.Config{
			LRP: new(fakes.FakeLRPBifrost), Readiness: new(fakes.FakeReadinessChecker), Logger: logger,
			Staging: &bifrost.Staging{Stager: stager, URLs: new(fakes.FakeURLChecker)},
		})
		body := strings.Replace(stageBody, `"lifecycle":{"docker_lifecycle":{"image":"busybox:1.36","registry_username":"u","registry_password":"s3cret-pw"}}`,
			`"lifecycle":{"buildpack_lifecycle":{"buildpacks":["ruby_buildpack"],"stack":"cflinuxfs4"}}`, 1)
		resp, err := http.Post(real.URL+"/stage/"+stagingGUID, "", strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		Expect(b).To(MatchJSON(`{"message":"lifecycle buildpack_lifecycle is not supported: opi stages docker images only (docker_lifecycle)"}`))
		Expect(stager.StageCallCount()).To(BeZero())
	})

	DescribeTable("answers bad bodies with 400 and {\"message\"}",
		func(body, message string) {
			status, got := callAsCC(server, "POST", "/stage/"+stagingGUID, body)
			Expect(status).To(Equal(http.StatusBadRequest))
			Expect(got).To(MatchJSON(fmt.Sprintf(`{"message":%q}`, message)))
			Expect(staging.StageCallCount()).To(BeZero())
		},
		Entry("empty", ``, "request body is empty"),
		Entry("not JSON", `{"app_guid":`, "invalid request body: malformed JSON at byte 12: unexpected end of JSON input"),
		Entry("environment as an object", `{"environment":{"A":"b"}}`, "invalid request body: environment must be a list, got object"),
	)

	It("answers 413 beyond the body limit", func() {
		status, body := callAsCC(server, "POST", "/stage/"+stagingGUID, `{"app_name":"`+strings.Repeat("x", 5000)+`"}`)
		Expect(status).To(Equal(http.StatusRequestEntityTooLarge))
		Expect(body).To(MatchJSON(`{"message":"request body is larger than 4096 bytes"}`))
	})

	DescribeTable("maps the bifrost's errors to statuses with {\"message\"}",
		func(err error, status int) {
			staging.StageReturns(err)
			got, body := callAsCC(server, "POST", "/stage/"+stagingGUID, stageBody)
			Expect(got).To(Equal(status))
			Expect(body).To(MatchJSON(fmt.Sprintf(`{"message":%q}`, err.Error())))
		},
		Entry("invalid", &bifrost.ValidationError{Field: "staging_guid", Problem: "is required"}, http.StatusBadRequest),
		Entry("unavailable", fmt.Errorf("stage: record staging: %w: connection refused", opi.ErrUnavailable), http.StatusServiceUnavailable),
		Entry("anything else", errors.New("stage: record staging: boom"), http.StatusInternalServerError),
	)

	It("answers 503 when the backend does not answer within the write timeout", func() {
		staging.StageStub = func(ctx context.Context, _ string, _ models.StagingRequest) error {
			<-ctx.Done()
			return ctx.Err()
		}
		status, body := callAsCC(server, "POST", "/stage/"+stagingGUID, stageBody)
		Expect(status).To(Equal(http.StatusServiceUnavailable))
		Expect(body).To(ContainSubstring("orchestrator unavailable: no answer within 1s"))
	})

	It("is not served without a staging bifrost", func() {
		plain := serve(handler.Config{
			LRP: new(fakes.FakeLRPBifrost), Readiness: new(fakes.FakeReadinessChecker), Logger: logger,
		})
		resp, err := http.Post(plain.URL+"/stage/"+stagingGUID, "", strings.NewReader(stageBody))
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	})
})
