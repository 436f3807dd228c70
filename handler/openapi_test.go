package handler_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/yaml"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
)

// openAPIDoc is the part of an OpenAPI 3 document these tests read.
type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

type openAPIOperation struct {
	OperationID string                     `json:"operationId"`
	Responses   map[string]json.RawMessage `json:"responses"`
}

var pathParam = regexp.MustCompile(`[:*]([A-Za-z_]+)`)

// described lists "METHOD /path" for every operation of the document, paths in httprouter's
// form turned into OpenAPI's ("{name}").
func described(doc openAPIDoc) []string {
	var out []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// missingFrom lists what of want is not in have.
func missingFrom(have, want []string) []string {
	in := map[string]bool{}
	for _, h := range have {
		in[h] = true
	}
	var missing []string
	for _, w := range want {
		if !in[w] {
			missing = append(missing, w)
		}
	}
	return missing
}

func registered(routers ...*handler.Router) []string {
	seen := map[string]bool{}
	for _, r := range routers {
		for _, route := range r.Routes() {
			seen[route.Method+" "+pathParam.ReplaceAllString(route.Path, "{$1}")] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var _ = Describe("The API description", func() {
	var (
		doc      openAPIDoc
		api, ops *handler.Router
	)

	BeforeEach(func() {
		Expect(yaml.Unmarshal(handler.OpenAPIYAML, &doc)).To(Succeed())
		logger := lagertest.NewTestLogger("openapi")
		metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
		// Every optional part of the routers is switched on: the description covers them all.
		api = handler.New(handler.Config{
			LRP: new(fakes.FakeLRPBifrost), Readiness: new(fakes.FakeReadinessChecker),
			Logger: logger, Metrics: metrics, Staging: new(fakes.FakeStagingBifrost), Task: new(fakes.FakeTaskBifrost),
		})
		ops = handler.NewOps(handler.OpsConfig{
			Readiness: new(fakes.FakeReadinessChecker), Logger: logger, Metrics: metrics, Pprof: true,
		})
	})

	It("is an OpenAPI 3 document", func() {
		Expect(doc.OpenAPI).To(HavePrefix("3."))
		// kube-openapi's OpenAPI 3 types read it whole: every object has the spec's shape.
		jsonDoc, err := yaml.YAMLToJSON(handler.OpenAPIYAML)
		Expect(err).NotTo(HaveOccurred())
		var typed spec3.OpenAPI
		Expect(json.Unmarshal(jsonDoc, &typed)).To(Succeed())
		Expect(typed.Info.Title).To(Equal("opi"))
		Expect(typed.Paths.Paths).To(HaveLen(len(doc.Paths)))
		for path, item := range typed.Paths.Paths {
			for _, op := range []*spec3.Operation{item.Get, item.Put, item.Post, item.Delete} {
				if op != nil {
					Expect(op.Responses.StatusCodeResponses).NotTo(BeEmpty(), path)
				}
			}
		}
		for path, item := range doc.Paths {
			for method, raw := range item {
				if method == "parameters" {
					continue
				}
				var op openAPIOperation
				Expect(json.Unmarshal(raw, &op)).To(Succeed(), "%s %s", method, path)
				Expect(op.OperationID).NotTo(BeEmpty(), "%s %s has no operationId", method, path)
				Expect(op.Responses).NotTo(BeEmpty(), "%s %s describes no response", method, path)
			}
		}
	})

	It("describes exactly the routes the API and operations routers register", func() {
		// When this fails: a route was added to handler.New or handler.NewOps without being
		// described in handler/openapi.yaml, or described there without being registered.
		desc, reg := described(doc), registered(api, ops)
		Expect(missingFrom(desc, reg)).To(BeEmpty(), "registered but not described in handler/openapi.yaml")
		Expect(missingFrom(reg, desc)).To(BeEmpty(), "described in handler/openapi.yaml but not registered")
	})

	It("resolves every reference", func() {
		jsonDoc, err := yaml.YAMLToJSON(handler.OpenAPIYAML)
		Expect(err).NotTo(HaveOccurred())
		var whole map[string]any
		Expect(json.Unmarshal(jsonDoc, &whole)).To(Succeed())
		refs := regexp.MustCompile(`"\$ref":"#/([^"]+)"`).FindAllStringSubmatch(string(jsonDoc), -1)
		Expect(refs).NotTo(BeEmpty())
		for _, ref := range refs {
			var node any = whole
			for _, part := range strings.Split(ref[1], "/") {
				m, ok := node.(map[string]any)
				Expect(ok).To(BeTrue(), "reference #/%s", ref[1])
				node, ok = m[part]
				Expect(ok).To(BeTrue(), "reference #/%s does not resolve", ref[1])
			}
		}
	})

	It("is served as JSON at /openapi.json on both listeners", func() {
		want, err := yaml.YAMLToJSON(handler.OpenAPIYAML)
		Expect(err).NotTo(HaveOccurred())
		for _, router := range []*handler.Router{api, ops} {
			server := httptest.NewServer(router)
			resp, err := http.Get(server.URL + "/openapi.json")
			Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			server.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
			Expect(body).To(MatchJSON(want))
		}
	})
})

var _ = Describe("The operations router", func() {
	var readiness *fakes.FakeReadinessChecker

	serveOps := func(pprof bool) *httptest.Server {
		readiness = new(fakes.FakeReadinessChecker)
		server := httptest.NewServer(handler.NewOps(handler.OpsConfig{
			Readiness: readiness, Logger: lagertest.NewTestLogger("ops"), Pprof: pprof,
			Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("opi_metric 1\n")) }),
		}))
		DeferCleanup(server.Close)
		return server
	}
	get := func(server *httptest.Server, path string) (int, string) {
		resp, err := http.Get(server.URL + path)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	It("serves health, readiness (without the reason) and metrics", func() {
		server := serveOps(false)
		status, _ := get(server, "/healthz")
		Expect(status).To(Equal(http.StatusOK))
		status, body := get(server, "/metrics")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(Equal("opi_metric 1\n"))
		readiness.ReadyReturns(errorString("dial tcp 10.0.0.1:6443: connection refused"))
		status, body = get(server, "/readyz")
		Expect(status).To(Equal(http.StatusServiceUnavailable))
		Expect(body).To(MatchJSON(`{"status":"not ready"}`))
	})

	It("serves pprof only when asked", func() {
		status, _ := get(serveOps(false), "/debug/pprof/")
		Expect(status).To(Equal(http.StatusNotFound))

		server := serveOps(true)
		status, body := get(server, "/debug/pprof/")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("goroutine"))
		status, body = get(server, "/debug/pprof/goroutine?debug=1")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("goroutine profile"))
	})

	It("refuses a pprof duration its write timeout would not cover", func() {
		server := serveOps(true)
		status, body := get(server, "/debug/pprof/profile?seconds=3600")
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring("seconds must be a number from 0 to 30"))
		status, _ = get(server, "/debug/pprof/trace?seconds=31")
		Expect(status).To(Equal(http.StatusBadRequest))
		status, _ = get(server, "/debug/pprof/goroutine?seconds=nope")
		Expect(status).To(Equal(http.StatusBadRequest))
	})

	It("does not serve the API", func() {
		status, _ := get(serveOps(false), "/apps")
		Expect(status).To(Equal(http.StatusNotFound))
	})
})

type errorString string

func (e errorString) Error() string { return string(e) }
