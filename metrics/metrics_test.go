package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/metrics"
)

var _ = Describe("Metrics", func() {
	DescribeTable("names Kubernetes API requests by verb and resource",
		func(method, url, verb, resource string) {
			req := httptest.NewRequest(method, url, nil)
			v, r := metrics.KubeVerbResource(req)
			Expect(v).To(Equal(verb))
			Expect(r).To(Equal(resource))
		},
		Entry("list deployments", "GET", "/apis/apps/v1/namespaces/cf/deployments?labelSelector=x", "list", "deployments"),
		Entry("watch pods", "GET", "/api/v1/namespaces/cf/pods?watch=true&resourceVersion=1", "watch", "pods"),
		Entry("get a deployment", "GET", "/apis/apps/v1/namespaces/cf/deployments/dora", "get", "deployments"),
		Entry("create a secret", "POST", "/api/v1/namespaces/cf/secrets", "create", "secrets"),
		Entry("update a deployment", "PUT", "/apis/apps/v1/namespaces/cf/deployments/dora", "update", "deployments"),
		Entry("patch a secret", "PATCH", "/api/v1/namespaces/cf/secrets/dora-env", "patch", "secrets"),
		Entry("delete a pod", "DELETE", "/api/v1/namespaces/cf/pods/dora-1", "delete", "pods"),
		Entry("a subresource", "PUT", "/apis/apps/v1/namespaces/cf/deployments/dora/scale", "update", "deployments/scale"),
		Entry("a namespace", "GET", "/api/v1/namespaces/cf", "get", "namespaces"),
		Entry("cluster-scoped list", "GET", "/api/v1/nodes", "list", "nodes"),
		Entry("non-resource", "GET", "/readyz", "get", "/readyz"),
	)

	It("counts requests through the wrapped transport and serves them", func() {
		m := metrics.New()
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		defer upstream.Close()
		client := &http.Client{Transport: m.WrapKubeTransport(http.DefaultTransport)}
		for range 3 {
			resp, err := client.Post(upstream.URL+"/api/v1/namespaces/cf/secrets", "application/json", nil)
			Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
		}
		m.ObserveHTTP("GET /apps", 200, 3*time.Millisecond)

		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		Expect(string(body)).To(ContainSubstring(`opi_kube_api_requests_total{resource="secrets",verb="create"} 3`))
		Expect(string(body)).To(ContainSubstring(`opi_http_requests_total{code="200",route="GET /apps"} 1`))
	})
})
