package handler_test

import (
	"encoding/json"
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
	"github.com/onsi/gomega/gbytes"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

const (
	guid        = "2f3e8a2c-2c3e-4b1d-9c7e-0a1b2c3d4e5f"
	version     = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	processGUID = guid + "-" + version
)

var desireBody = `{"guid":"` + guid + `","version":"` + version + `","process_guid":"` + processGUID + `",
	"instances":2,"memory_mb":256,"disk_mb":1024,"ports":[8080],"last_updated":"1600000000.2499998",
	"environment":{"VCAP_SERVICES":"{\"password\":\"s3cret\"}"},
	"lifecycle":{"docker_lifecycle":{"image":"busybox","command":[]}}}`

var _ = Describe("Handler", func() {
	var (
		bifrost   *fakes.FakeLRPBifrost
		readiness *fakes.FakeReadinessChecker
		logger    *lagertest.TestLogger
		server    *httptest.Server
		now       time.Time // the readiness cache's clock
	)

	BeforeEach(func() {
		bifrost = new(fakes.FakeLRPBifrost)
		readiness = new(fakes.FakeReadinessChecker)
		logger = lagertest.NewTestLogger("handler")
		now = time.Unix(1600000000, 0)
		server = serve(handler.Config{
			LRP: bifrost, Logger: logger, MaxBodyBytes: 4096,
			Readiness: &handler.CachedReadiness{Checker: readiness, Now: func() time.Time { return now }},
		})
	})

	errorJSON := func(message string) string {
		b, _ := json.Marshal(models.ErrorResponse{Error: models.Error{Message: message}})
		return string(b)
	}

	Describe("PUT /apps/{process_guid}", func() {
		It("desires the LRP and answers 202 {}", func() {
			status, body := callAsCC(server, "PUT", "/apps/"+processGUID, desireBody)
			Expect(status).To(Equal(http.StatusAccepted))
			Expect(body).To(MatchJSON(`{}`))
			Expect(bifrost.DesireCallCount()).To(Equal(1))
			_, req := bifrost.DesireArgsForCall(0)
			Expect(req.GUID).To(Equal(guid))
			Expect(req.Instances).To(Equal(2))
			Expect(req.LastUpdated).To(Equal("1600000000.2499998"))
		})

		It("accepts application/json too", func() {
			resp, err := http.DefaultClient.Do(func() *http.Request {
				req, _ := http.NewRequest("PUT", server.URL+"/apps/"+processGUID, strings.NewReader(desireBody))
				req.Header.Set("Content-Type", "application/json")
				return req
			}())
			Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
		})

		DescribeTable("rejects bad bodies without desiring anything",
			func(path, body string, wantStatus int, wantMessage string) {
				status, respBody := callAsCC(server, "PUT", path, body)
				Expect(status).To(Equal(wantStatus))
				var e models.ErrorResponse
				Expect(json.Unmarshal([]byte(respBody), &e)).To(Succeed())
				Expect(e.Error.Message).To(ContainSubstring(wantMessage))
				Expect(bifrost.DesireCallCount()).To(BeZero())
			},
			Entry("malformed JSON", "/apps/"+processGUID, `{"guid":`, 400, "invalid request body"),
			Entry("empty body", "/apps/"+processGUID, ``, 400, "request body is empty"),
			Entry("body over the limit", "/apps/"+processGUID, `{"x":"`+strings.Repeat("a", 5000)+`"}`, 413, "larger than 4096 bytes"),
			Entry("string for a number", "/apps/"+processGUID, `{"guid":"`+guid+`","version":"`+version+`","instances":"3"}`, 400, "instances must be an integer"),
			Entry("path differs from body", "/apps/other-guid", desireBody, 400, "does not match"),
		)

		DescribeTable("maps bifrost errors to the contract's statuses",
			func(err error, wantStatus int, wantMessage string) {
				bifrost.DesireReturns(err)
				status, body := callAsCC(server, "PUT", "/apps/"+processGUID, desireBody)
				Expect(status).To(Equal(wantStatus))
				Expect(body).To(MatchJSON(errorJSON(wantMessage)))
			},
			Entry("invalid", fmt.Errorf("memory_mb must be between 1 and 1048576, got 0: %w", opi.ErrInvalid), 400, "memory_mb must be between 1 and 1048576, got 0: invalid"),
			Entry("unavailable", fmt.Errorf("desire lrp: %w", opi.ErrUnavailable), 503, "desire lrp: orchestrator unavailable"),
			Entry("other", errors.New("boom"), 500, "boom"),
		)

		It("keeps environment values out of the logs", func() {
			bifrost.DesireReturns(errors.New("boom"))
			callAsCC(server, "PUT", "/apps/"+processGUID, desireBody)
			Expect(logger.Buffer().Contents()).NotTo(ContainSubstring("s3cret"))
			Expect(logger.Buffer().Contents()).To(ContainSubstring(processGUID))
		})
	})

	Describe("GET /apps", func() {
		It("answers [] when nothing is desired", func() {
			status, body := callAsCC(server, "GET", "/apps", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`{"desired_lrp_scheduling_infos":[]}`))
		})

		It("lists the scheduling infos in Diego's shape", func() {
			bifrost.ListReturns([]models.DesiredLRPSchedulingInfo{{
				DesiredLRPKey:      models.DesiredLRPKey{ProcessGUID: processGUID, Domain: "cf-apps", LogGUID: "app"},
				Annotation:         "1600000000.2499998",
				Instances:          3,
				DesiredLRPResource: models.DesiredLRPResource{MemoryMB: 256, DiskMB: 1024},
				ModificationTag:    models.ModificationTag{Epoch: "e", Index: 1},
				GUID:               guid, Version: version,
			}}, nil)
			status, body := callAsCC(server, "GET", "/apps", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`{"desired_lrp_scheduling_infos":[{
				"desired_lrp_key":{"process_guid":"` + processGUID + `","domain":"cf-apps","log_guid":"app"},
				"annotation":"1600000000.2499998","instances":3,
				"desired_lrp_resource":{"memory_mb":256,"disk_mb":1024},
				"modification_tag":{"epoch":"e","index":1},
				"guid":"` + guid + `","version":"` + version + `"}]}`))
		})

		It("streams a list larger than its buffer as the response model encodes it", func() {
			infos := make([]models.DesiredLRPSchedulingInfo, 500) // ~100 KB encoded, over the 32 KB buffer
			for i := range infos {
				infos[i] = models.DesiredLRPSchedulingInfo{
					DesiredLRPKey:   models.DesiredLRPKey{ProcessGUID: fmt.Sprintf("%s-%d", processGUID, i), Domain: "cf-apps"},
					Annotation:      `quote " and <tag> & ` + fmt.Sprint(i),
					Instances:       int32(i),
					ModificationTag: models.ModificationTag{Epoch: "e", Index: int64(i)},
				}
			}
			bifrost.ListReturns(infos, nil)
			want, err := json.Marshal(models.DesiredLRPSchedulingInfosResponse{DesiredLRPSchedulingInfos: infos})
			Expect(err).NotTo(HaveOccurred())
			status, body := callAsCC(server, "GET", "/apps", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(len(body)).To(BeNumerically(">", 64<<10))
			Expect(body).To(MatchJSON(want))
		})

		It("answers 503 when the backend is unreachable", func() {
			bifrost.ListReturns(nil, fmt.Errorf("list: %w", opi.ErrUnavailable))
			status, body := callAsCC(server, "GET", "/apps", "")
			Expect(status).To(Equal(http.StatusServiceUnavailable))
			Expect(body).To(MatchJSON(errorJSON("list: orchestrator unavailable")))
		})
	})

	Describe("GET /apps/{guid}/{version}", func() {
		It("returns the desired lrp", func() {
			bifrost.GetReturns(&models.DesiredLRP{ProcessGUID: processGUID, Instances: 2, Annotation: "2.0", Image: "busybox"}, nil)
			status, body := callAsCC(server, "GET", "/apps/"+guid+"/"+version, "")
			Expect(status).To(Equal(http.StatusOK))
			var resp models.DesiredLRPResponse
			Expect(json.Unmarshal([]byte(body), &resp)).To(Succeed())
			Expect(resp.DesiredLRP.ProcessGUID).To(Equal(processGUID))
			Expect(resp.DesiredLRP.Annotation).To(Equal("2.0"))
			_, id := bifrost.GetArgsForCall(0)
			Expect(id).To(Equal(opi.LRPIdentifier{GUID: guid, Version: version}))
		})

		It("answers 404 with Diego's text when absent", func() {
			bifrost.GetReturns(nil, fmt.Errorf("get lrp: %w", opi.ErrNotFound))
			status, body := callAsCC(server, "GET", "/apps/"+guid+"/"+version, "")
			Expect(status).To(Equal(http.StatusNotFound))
			Expect(body).To(MatchJSON(`{"error":{"message":"the requested resource could not be found"}}`))
		})
	})

	Describe("POST /apps/{process_guid}", func() {
		updateBody := `{"guid":"` + guid + `","version":"` + version + `","update":{"instances":4,"annotation":"3.0"}}`

		It("updates and answers 200 {}", func() {
			status, body := callAsCC(server, "POST", "/apps/"+processGUID, updateBody)
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`{}`))
			_, req := bifrost.UpdateArgsForCall(0)
			Expect(*req.Update.Instances).To(Equal(4))
			Expect(*req.Update.Annotation).To(Equal("3.0"))
		})

		It("answers 404 with Diego's text for an absent LRP", func() {
			bifrost.UpdateReturns(fmt.Errorf("update: %w", opi.ErrNotFound))
			status, body := callAsCC(server, "POST", "/apps/"+processGUID, updateBody)
			Expect(status).To(Equal(http.StatusNotFound))
			Expect(body).To(MatchJSON(`{"error":{"message":"the requested resource could not be found"}}`))
		})

		DescribeTable("rejects bad bodies without updating",
			func(path, body string, wantStatus int, wantMessage string) {
				status, respBody := callAsCC(server, "POST", path, body)
				Expect(status).To(Equal(wantStatus))
				Expect(respBody).To(ContainSubstring(wantMessage))
				Expect(bifrost.UpdateCallCount()).To(BeZero())
			},
			Entry("empty body", "/apps/"+processGUID, "", 400, "request body is empty"),
			Entry("malformed JSON", "/apps/"+processGUID, "{", 400, "invalid request body"),
			Entry("wrong type", "/apps/"+processGUID, `{"guid":"`+guid+`","version":"`+version+`","update":{"instances":"4"}}`, 400, "instances must be an integer"),
			Entry("path differs from body", "/apps/"+guid+"-other", updateBody, 400, "does not match"),
			Entry("too large", "/apps/"+processGUID, strings.Repeat(" ", 5000), 413, "larger than"),
		)
	})

	Describe("PUT /apps/{guid}/{version}/stop", func() {
		It("stops and answers 200 {} without reading a body", func() {
			status, body := callAsCC(server, "PUT", "/apps/"+guid+"/"+version+"/stop", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`{}`))
			_, id := bifrost.StopArgsForCall(0)
			Expect(id).To(Equal(opi.LRPIdentifier{GUID: guid, Version: version}))
		})

		It("answers 503 when the backend is unreachable", func() {
			bifrost.StopReturns(fmt.Errorf("stop: %w", opi.ErrUnavailable))
			status, _ := callAsCC(server, "PUT", "/apps/"+guid+"/"+version+"/stop", "")
			Expect(status).To(Equal(http.StatusServiceUnavailable))
		})
	})

	Describe("PUT /apps/{guid}/{version}/stop/{index}", func() {
		It("stops that instance", func() {
			status, body := callAsCC(server, "PUT", "/apps/"+guid+"/"+version+"/stop/1", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`{}`))
			_, id, index := bifrost.StopInstanceArgsForCall(0)
			Expect(id.ProcessGUID()).To(Equal(processGUID))
			Expect(index).To(BeEquivalentTo(1))
		})

		DescribeTable("rejects an index that is not a non-negative integer",
			func(index string) {
				status, body := callAsCC(server, "PUT", "/apps/"+guid+"/"+version+"/stop/"+index, "")
				Expect(status).To(Equal(http.StatusBadRequest))
				Expect(body).To(ContainSubstring("is not a non-negative integer"))
				Expect(bifrost.StopInstanceCallCount()).To(BeZero())
			},
			Entry("negative", "-1"), Entry("word", "one"), Entry("fraction", "1.5"), Entry("huge", "99999999999"),
		)

		It("answers 400 for an index out of range and 404 for an absent LRP", func() {
			bifrost.StopInstanceReturnsOnCall(0, fmt.Errorf("index 5 is outside 0..1: %w", opi.ErrInvalid))
			bifrost.StopInstanceReturnsOnCall(1, fmt.Errorf("stop: %w", opi.ErrNotFound))
			status, _ := callAsCC(server, "PUT", "/apps/"+guid+"/"+version+"/stop/5", "")
			Expect(status).To(Equal(http.StatusBadRequest))
			status, body := callAsCC(server, "PUT", "/apps/"+guid+"/"+version+"/stop/0", "")
			Expect(status).To(Equal(http.StatusNotFound))
			Expect(body).To(MatchJSON(`{"error":{"message":"the requested resource could not be found"}}`))
		})
	})

	Describe("GET /apps/{guid}/{version}/instances", func() {
		It("has no error key on success", func() {
			bifrost.InstancesReturns([]models.Instance{
				{Index: 0, State: "RUNNING", Since: 1700000000123456789},
				{Index: 1, State: "UNCLAIMED", PlacementError: "Insufficient resources: memory"},
			}, nil)
			status, body := callAsCC(server, "GET", "/apps/"+guid+"/"+version+"/instances", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`{"process_guid":"` + processGUID + `","instances":[
				{"index":0,"state":"RUNNING","since":1700000000123456789},
				{"index":1,"state":"UNCLAIMED","since":0,"placement_error":"Insufficient resources: memory"}]}`))
		})

		It("answers an empty list, not null, for no instances", func() {
			status, body := callAsCC(server, "GET", "/apps/"+guid+"/"+version+"/instances", "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(MatchJSON(`{"process_guid":"` + processGUID + `","instances":[]}`))
		})

		It("says 'not found' for an absent LRP, as CC needs for stopped apps", func() {
			bifrost.InstancesReturns(nil, fmt.Errorf("get instances: %w", opi.ErrNotFound))
			status, body := callAsCC(server, "GET", "/apps/"+guid+"/"+version+"/instances", "")
			Expect(status).To(Equal(http.StatusNotFound))
			Expect(body).To(MatchJSON(`{"process_guid":"` + processGUID + `","instances":[],"error":"failed to get instances for app: not found"}`))
		})

		It("reports backend trouble in the same shape", func() {
			bifrost.InstancesReturns(nil, fmt.Errorf("get instances: %w", opi.ErrUnavailable))
			status, body := callAsCC(server, "GET", "/apps/"+guid+"/"+version+"/instances", "")
			Expect(status).To(Equal(http.StatusServiceUnavailable))
			Expect(body).To(MatchJSON(`{"process_guid":"` + processGUID + `","instances":[],"error":"get instances: orchestrator unavailable"}`))
		})
	})

	Describe("unknown routes and methods", func() {
		It("answers 404 with JSON", func() {
			status, body := callAsCC(server, "GET", "/nope", "")
			Expect(status).To(Equal(http.StatusNotFound))
			Expect(body).To(MatchJSON(errorJSON("no route for GET /nope")))
		})

		It("answers 405 with JSON", func() {
			status, body := callAsCC(server, "DELETE", "/apps", "")
			Expect(status).To(Equal(http.StatusMethodNotAllowed))
			Expect(body).To(MatchJSON(errorJSON("method DELETE is not allowed on /apps")))
		})
	})

	Describe("health", func() {
		It("is live", func() {
			status, _ := callAsCC(server, "GET", "/healthz", "")
			Expect(status).To(Equal(http.StatusOK))
		})

		It("is ready only when the backend is", func() {
			status, _ := callAsCC(server, "GET", "/readyz", "")
			Expect(status).To(Equal(http.StatusOK))
			readiness.ReadyReturns(errors.New("caches not synced"))
			now = now.Add(handler.ReadinessPeriod)
			status, body := callAsCC(server, "GET", "/readyz", "")
			Expect(status).To(Equal(http.StatusServiceUnavailable))
			// The reason is logged, never answered.
			Expect(body).To(MatchJSON(`{"status":"not ready"}`))
			Expect(logger.Buffer()).To(gbytes.Say("caches not synced"))
		})
	})
})

var _ = Describe("Handler observability", func() {
	It("reports each answer under its route pattern and serves metrics", func() {
		observer := new(fakes.FakeRequestObserver)
		bifrost := new(fakes.FakeLRPBifrost)
		bifrost.GetReturns(nil, opi.ErrNotFound)
		server := httptest.NewServer(handler.New(handler.Config{
			LRP: bifrost, Readiness: new(fakes.FakeReadinessChecker), Logger: lagertest.NewTestLogger("h"),
			Observer: observer,
			Metrics:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("opi_metric 1\n")) }),
		}))
		defer server.Close()

		resp, err := http.Get(server.URL + "/apps/" + guid + "/" + version)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(observer.ObserveHTTPCallCount()).To(Equal(1))
		route, code, _ := observer.ObserveHTTPArgsForCall(0)
		Expect(route).To(Equal("GET /apps/:guid/:version"))
		Expect(code).To(Equal(http.StatusNotFound))

		resp, err = http.Get(server.URL + "/metrics")
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(string(body)).To(Equal("opi_metric 1\n"))
	})
})
