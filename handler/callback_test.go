package handler_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/cc"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
)

const notAllowed = " is not cc.internal_url's endpoint nor one of cc.callback_urls (scheme, host and port must match)"

var callbackValue = regexp.MustCompile(`"completion_callback":"[^"]*"`)

// These run the real bifrost with the real CC client's URL check, as cmd/opi wires them.
var _ = Describe("Callback URLs of tasks and stagings", func() {
	const secret = "s3cr3t-0b7e41d9"

	var (
		logger  *lagertest.TestLogger
		ccOpts  cc.Options
		backend *fakes.FakeTaskBackend
		stager  *fakes.FakeStager
		server  *httptest.Server
	)

	BeforeEach(func() {
		logger = lagertest.NewTestLogger("handler")
		ccOpts = cc.Options{InternalURL: "https://cc.internal:9023"}
		backend = new(fakes.FakeTaskBackend)
		stager = new(fakes.FakeStager)
	})

	JustBeforeEach(func() {
		client, err := cc.New(ccOpts, logger)
		Expect(err).NotTo(HaveOccurred())
		server = serve(handler.Config{
			LRP: new(fakes.FakeLRPBifrost), Readiness: new(fakes.FakeReadinessChecker), Logger: logger,
			Task:    &bifrost.Task{Backend: backend, URLs: client, Defaults: bifrost.DefaultTaskDefaults},
			Staging: &bifrost.Staging{Stager: stager, URLs: client},
		})
	})

	post := func(path, body string) (int, string) {
		resp, err := http.Post(server.URL+path, "application/json", strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(b)
	}
	withCallback := func(body, callback string) string {
		return callbackValue.ReplaceAllLiteralString(body, `"completion_callback":"`+callback+`"`)
	}

	It("accepts callbacks to cc.internal_url's endpoint", func() {
		status, body := post("/tasks/"+taskGUID, withCallback(taskBody, "https://cc.internal:9023/internal/v4/tasks/"+taskGUID+"/completed"))
		Expect(status).To(Equal(http.StatusAccepted), body)
		Expect(backend.DesireTaskCallCount()).To(Equal(1))
		status, body = post("/stage/"+stagingGUID, stageBody)
		Expect(status).To(Equal(http.StatusAccepted), body)
		Expect(stager.StageCallCount()).To(Equal(1))
	})

	DescribeTable("answers 400 naming completion_callback, writes nothing, and logs no token, for a callback to another endpoint",
		func(callback, problem string) {
			message := fmt.Sprintf(`{"message":"completion_callback cannot be used: %s%s"}`, cc.Redact(callback+"/x"), problem)
			status, body := post("/tasks/"+taskGUID, withCallback(taskBody, callback+"/x?token="+secret))
			Expect(status).To(Equal(http.StatusBadRequest))
			Expect(body).To(MatchJSON(message))
			status, body = post("/stage/"+stagingGUID, withCallback(stageBody, callback+"/x?token="+secret))
			Expect(status).To(Equal(http.StatusBadRequest))
			Expect(body).To(MatchJSON(message))
			Expect(backend.DesireTaskCallCount()).To(BeZero())
			Expect(stager.StageCallCount()).To(BeZero())
			Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring(secret))
		},
		Entry("another host", "https://evil.example.com:9023", notAllowed),
		Entry("another port", "https://cc.internal:9024", notAllowed),
		Entry("another scheme", "http://cc.internal:9023", ": plain http is allowed only to loopback addresses (cc.plaintext allows it)"),
		Entry("loopback http", "http://127.0.0.1:9023", notAllowed),
	)

	Context("with neither cc.internal_url nor cc.callback_urls", func() {
		BeforeEach(func() { ccOpts = cc.Options{} })

		It("answers every task and staging 400, saying what the operator must configure", func() {
			message := `{"message":"completion_callback cannot be used: no callback endpoint is configured: the operator must configure cc.internal_url or cc.callback_urls"}`
			status, body := post("/tasks/"+taskGUID, taskBody)
			Expect(status).To(Equal(http.StatusBadRequest))
			Expect(body).To(MatchJSON(message))
			status, body = post("/stage/"+stagingGUID, stageBody)
			Expect(status).To(Equal(http.StatusBadRequest))
			Expect(body).To(MatchJSON(message))
			Expect(backend.DesireTaskCallCount()).To(BeZero())
			Expect(stager.StageCallCount()).To(BeZero())
		})
	})

	Context("with cc.callback_urls", func() {
		BeforeEach(func() {
			ccOpts = cc.Options{CallbackURLs: []string{"https://cc-a.internal:9023", "https://evil.example.com:9023"}}
		})

		It("accepts callbacks to each of them", func() {
			status, body := post("/tasks/"+taskGUID, withCallback(taskBody, "https://evil.example.com:9023/cb"))
			Expect(status).To(Equal(http.StatusAccepted), body)
			status, body = post("/stage/"+stagingGUID, withCallback(stageBody, "https://cc-a.internal:9023/cb"))
			Expect(status).To(Equal(http.StatusAccepted), body)
		})
	})
})
