package apiclient_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/k8s/apiclient"
)

// stubTransport answers every request with a body of its own (status 200 unless set), or
// with err.
type stubTransport struct {
	err    error
	status int
}

func (s stubTransport) RoundTrip(*http.Request) (*http.Response, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &http.Response{StatusCode: cmp.Or(s.status, http.StatusOK), Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

var _ = Describe("VerbResource", func() {
	DescribeTable("names Kubernetes API requests by verb and resource",
		func(method, url, verb, resource string) {
			req := httptest.NewRequest(method, url, nil)
			v, r := apiclient.VerbResource(req)
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

})

var _ = Describe("Watches", func() {
	const grace = time.Second
	var (
		w     *apiclient.Watches
		now   time.Time
		rt    http.RoundTripper
		kinds = []string{"deployments", "pods"}
	)

	BeforeEach(func() {
		now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		w = apiclient.NewWatches()
		w.SetClock(func() time.Time { return now })
		rt = w.Wrap(stubTransport{})
	})

	request := func(t http.RoundTripper, url string) (*http.Response, error) {
		return t.RoundTrip(httptest.NewRequest("GET", url, nil))
	}
	watch := func(resource string) *http.Response {
		resp, err := request(rt, "/apis/apps/v1/namespaces/cf/"+resource+"?watch=true")
		Expect(err).NotTo(HaveOccurred())
		return resp
	}

	It("counts a resource it has never seen a request of as unwatched", func() {
		Expect(w.Unwatched(kinds, grace)).To(Equal(kinds))
	})

	It("counts a resource watched while its WATCH is open, and unwatched a grace after it ended", func() {
		deployments, pods := watch("deployments"), watch("pods")
		now = now.Add(time.Hour)
		Expect(w.Unwatched(kinds, grace)).To(BeEmpty(), "open watches, however old")

		_, err := io.ReadAll(pods.Body) // the stream ends: the API server went away
		Expect(err).NotTo(HaveOccurred())
		Expect(w.Unwatched(kinds, grace)).To(BeEmpty(), "within the grace")
		now = now.Add(grace + time.Millisecond)
		Expect(w.Unwatched(kinds, grace)).To(Equal([]string{"pods"}))

		Expect(deployments.Body.Close()).To(Succeed())
		Expect(deployments.Body.Close()).To(Succeed())
		now = now.Add(grace + time.Millisecond)
		Expect(w.Unwatched(kinds, grace)).To(Equal(kinds), "a second close counts once")

		reopened := watch("pods")
		Expect(w.Unwatched(kinds, grace)).To(Equal([]string{"deployments"}))
		Expect(reopened.Body.Close()).To(Succeed())
	})

	It("counts a LIST in flight as watching (the reflector lists before it watches)", func() {
		list, err := request(rt, "/api/v1/namespaces/cf/pods?labelSelector=x")
		Expect(err).NotTo(HaveOccurred())
		now = now.Add(time.Minute)
		Expect(w.Unwatched([]string{"pods"}, grace)).To(BeEmpty())
		Expect(list.Body.Close()).To(Succeed())
		now = now.Add(2 * grace)
		Expect(w.Unwatched([]string{"pods"}, grace)).To(Equal([]string{"pods"}))
	})

	// The reflector backs off after each of these, up to a minute after an outage: no grace.
	It("counts a resource unwatched at once after a failed attempt", func() {
		failing := w.Wrap(stubTransport{err: errors.New("connect: connection refused")})
		_, err := request(failing, "/api/v1/namespaces/cf/pods?watch=1")
		Expect(err).To(MatchError(ContainSubstring("connection refused")))
		Expect(w.Unwatched([]string{"pods"}, grace)).To(Equal([]string{"pods"}))
	})

	It("counts a resource unwatched at once after a LIST answered with an error status", func() {
		refused := w.Wrap(stubTransport{status: http.StatusTooManyRequests})
		resp, err := request(refused, "/api/v1/namespaces/cf/pods")
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Body.Close()).To(Succeed())
		Expect(w.Unwatched([]string{"pods"}, grace)).To(Equal([]string{"pods"}))
	})

	It("counts a resource unwatched at once after a WATCH that lasted under a second (too old a resource version)", func() {
		pods := watch("pods")
		now = now.Add(999 * time.Millisecond)
		_, err := io.ReadAll(pods.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(w.Unwatched([]string{"pods"}, grace)).To(Equal([]string{"pods"}))

		again := watch("pods") // the reflector's next attempt
		Expect(w.Unwatched([]string{"pods"}, grace)).To(BeEmpty())
		now = now.Add(time.Second)
		Expect(again.Body.Close()).To(Succeed())
		Expect(w.Unwatched([]string{"pods"}, grace)).To(BeEmpty(), "a watch of a second ends as at its timeout")
	})

	It("ignores every other request", func() {
		for _, url := range []string{"/api/v1/namespaces/cf/pods/dora-0", "/readyz"} {
			resp, err := request(rt, url)
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Body.Close()).To(Succeed())
		}
		resp, err := rt.RoundTrip(httptest.NewRequest("POST", "/api/v1/namespaces/cf/pods", nil))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(w.Unwatched([]string{"pods", "/readyz"}, grace)).To(Equal([]string{"pods", "/readyz"}))
	})
})

var _ = Describe("Watches' contact with the API server", func() {
	const period = 5 * time.Second
	var (
		w   *apiclient.Watches
		now time.Time
	)

	BeforeEach(func() {
		now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		w = apiclient.NewWatches()
		w.SetClock(func() time.Time { return now })
	})

	send := func(t http.RoundTripper, method string) {
		resp, err := w.Wrap(t).RoundTrip(httptest.NewRequest(method, "/apis/apps/v1/namespaces/cf/deployments", nil))
		if err == nil {
			resp.Body.Close()
		}
	}
	refused := stubTransport{err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}

	It("knows nothing before any request", func() {
		Expect(w.Contact(period)).To(Equal(apiclient.ContactUnknown))
	})

	DescribeTable("is what the latest request that told anything told",
		func(transports []http.RoundTripper, want apiclient.Contact) {
			for _, t := range transports {
				send(t, "POST")
				now = now.Add(time.Second)
			}
			Expect(w.Contact(period)).To(Equal(want))
		},
		Entry("an answer", []http.RoundTripper{stubTransport{}}, apiclient.ContactAnswered),
		Entry("an error status is an answer", []http.RoundTripper{stubTransport{status: http.StatusConflict}}, apiclient.ContactAnswered),
		Entry("a refused connection", []http.RoundTripper{refused}, apiclient.ContactUnreachable),
		Entry("refused after an answer", []http.RoundTripper{stubTransport{}, refused}, apiclient.ContactUnreachable),
		Entry("an answer after a refusal", []http.RoundTripper{refused, stubTransport{}}, apiclient.ContactAnswered),
		Entry("a dial timeout", []http.RoundTripper{stubTransport{err: &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}}}, apiclient.ContactUnreachable),
		Entry("a lost connection tells nothing", []http.RoundTripper{stubTransport{}, stubTransport{err: io.ErrUnexpectedEOF}}, apiclient.ContactAnswered),
		Entry("a gateway's 503 tells nothing", []http.RoundTripper{refused, stubTransport{status: http.StatusServiceUnavailable}}, apiclient.ContactUnreachable),
	)

	It("forgets what is older than the period", func() {
		send(stubTransport{}, "GET")
		now = now.Add(period + time.Second)
		Expect(w.Contact(period)).To(Equal(apiclient.ContactUnknown))
		send(refused, "GET")
		now = now.Add(period + time.Second)
		Expect(w.Contact(period)).To(Equal(apiclient.ContactUnknown))
	})

	It("takes nothing from a request whose caller gave up", func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", "/apis/apps/v1/namespaces/cf/deployments", nil)
		_, err := w.Wrap(stubTransport{err: context.Canceled}).RoundTrip(req)
		Expect(err).To(HaveOccurred())
		Expect(w.Contact(period)).To(Equal(apiclient.ContactUnknown))
	})
})
