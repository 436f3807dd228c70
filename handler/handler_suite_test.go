package handler_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/handler"
)

func TestHandler(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Handler Suite")
}

// roundTrip sends req and reads the whole answer (its body closed).
func roundTrip(req *http.Request) (*http.Response, string) {
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp, string(b)
}

// send makes one request to server, with no Content-Type, and reads the whole answer.
func send(server *httptest.Server, method, path, body string) (*http.Response, string) {
	req, err := http.NewRequest(method, server.URL+path, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	return roundTrip(req)
}

// call is send's status code and body.
func call(server *httptest.Server, method, path, body string) (int, string) {
	resp, b := send(server, method, path, body)
	return resp.StatusCode, b
}

// callAsCC makes one request to server as CC does (no JSON Content-Type), checks that the answer
// is JSON and returns its status code and body.
func callAsCC(server *httptest.Server, method, path, body string) (int, string) {
	req, err := http.NewRequest(method, server.URL+path, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, b := roundTrip(req)
	Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	return resp.StatusCode, b
}

// serve starts the handler cfg makes on a test server, closed after the spec.
func serve(cfg handler.Config) *httptest.Server {
	server := httptest.NewServer(handler.New(cfg))
	DeferCleanup(server.Close)
	return server
}
