package store_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/k8s/internal/backendtest"
)

func TestStore(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Store Suite")
}

// Some specs start a backend: its informers log through klog.
var _ = BeforeSuite(backendtest.KlogToGinkgo)

// apiTransport answers as the API server would: a WATCH with a body that stays open until it
// is closed, anything else with 200, or every request with err (the API server unreachable).
type apiTransport struct{ err error }

func (t apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.err != nil {
		return nil, t.err
	}
	if req.URL.Query().Get("watch") == "true" {
		r, w := io.Pipe()
		return &http.Response{StatusCode: http.StatusOK, Body: pipeBody{r, w}}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// pipeBody is a response body whose Close also ends the writer's side.
type pipeBody struct {
	*io.PipeReader
	w *io.PipeWriter
}

func (p pipeBody) Close() error {
	_ = p.w.Close()
	return p.PipeReader.Close()
}
