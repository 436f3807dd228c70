package apiclient_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/k8s/apiclient"
)

// flakyTransport fails the first failures requests with err, then answers 201; it records
// the bodies it was sent.
type flakyTransport struct {
	err      error
	failures int
	bodies   []string
}

func (t *flakyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body := ""
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		Expect(err).NotTo(HaveOccurred())
		body = string(b)
	}
	t.bodies = append(t.bodies, body)
	if len(t.bodies) <= t.failures {
		return nil, t.err
	}
	return &http.Response{StatusCode: http.StatusCreated, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// cutBodyTransport answers 201 whose body breaks off with a lost HTTP/2 connection for the
// first cuts requests, then answers whole.
type cutBodyTransport struct {
	cuts, attempts int
}

func (t *cutBodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.attempts++
	whole := `{"kind":"Secret","metadata":{"name":"s"}}`
	var body io.Reader = strings.NewReader(whole)
	if t.attempts <= t.cuts {
		body = io.MultiReader(strings.NewReader(whole[:10]), errReader{errors.New("http2: client connection force closed via ClientConn.Close")})
	}
	return &http.Response{StatusCode: http.StatusCreated, Body: io.NopCloser(body)}, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

var _ = Describe("RetryLostConnection", func() {
	lost := errors.New("http2: client connection lost")
	reset := syscall.ECONNRESET

	// send makes the request as client-go does: http.NewRequest, which can give the body again.
	send := func(t http.RoundTripper, method string) (*http.Response, error) {
		req, err := http.NewRequest(method, "https://127.0.0.1:6443/api/v1/namespaces/cf/secrets", strings.NewReader(`{"kind":"Secret"}`))
		Expect(err).NotTo(HaveOccurred())
		return apiclient.RetryLostConnection(t).RoundTrip(req)
	}

	DescribeTable("sends a write again, body and all, when its connection is lost under it",
		func(err error) {
			t := &flakyTransport{err: err, failures: 2}
			resp, rtErr := send(t, "POST")
			Expect(rtErr).NotTo(HaveOccurred())
			Expect(resp.StatusCode).To(Equal(http.StatusCreated))
			Expect(t.bodies).To(Equal([]string{`{"kind":"Secret"}`, `{"kind":"Secret"}`, `{"kind":"Secret"}`}))
		},
		Entry("an HTTP/2 connection lost", lost),
		Entry("a connection reset", reset),
		Entry("an unexpected EOF", io.ErrUnexpectedEOF),
		Entry("a broken pipe", syscall.EPIPE),
		Entry("an HTTP/2 connection force-closed", errors.New("http2: client connection force closed via ClientConn.Close")),
		Entry("an HTTP/2 connection closed before the write was sent on it", errors.New("http2: client conn is closed")),
		Entry("a new HTTP/2 connection cut before the write, its first request, was sent on it", errors.New("http2: client conn could not be established")),
	)

	It("sends a write again when its connection is lost while the response body streams", func() {
		t := &cutBodyTransport{cuts: 1}
		resp, err := send(t, "POST")
		Expect(err).NotTo(HaveOccurred())
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(body)).To(Equal(`{"kind":"Secret","metadata":{"name":"s"}}`))
		Expect(t.attempts).To(Equal(2))
	})

	It("gives up after three attempts", func() {
		t := &flakyTransport{err: lost, failures: 5}
		_, err := send(t, "PATCH")
		Expect(err).To(MatchError(lost))
		Expect(t.bodies).To(HaveLen(3))
	})

	It("does not send again what failed otherwise", func() {
		t := &flakyTransport{err: syscall.ECONNREFUSED, failures: 1}
		_, err := send(t, "DELETE")
		Expect(err).To(MatchError(syscall.ECONNREFUSED))
		Expect(t.bodies).To(HaveLen(1))
	})

	It("leaves GETs to client-go, which repeats them itself", func() {
		t := &flakyTransport{err: lost, failures: 1}
		_, err := send(t, "GET")
		Expect(err).To(MatchError(lost))
		Expect(t.bodies).To(HaveLen(1))
	})
})
