package apiclient

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// lostConnectionAttempts bounds the attempts of a write whose connection is lost under it.
const lostConnectionAttempts = 3

// maxBufferedResponse bounds the response body of a write that RetryLostConnection reads before
// handing it on (the object written: a few KiB); a larger one is handed on as it streams.
const maxBufferedResponse = 8 << 20

// RetryLostConnection is a transport wrapper (rest.Config.Wrap) that sends a write again when
// the connection under it is lost before its whole response arrived (reset, broken pipe,
// closed, an HTTP/2 connection gone or force-closed): the API server closes connections while
// it answers, and a proxy between may cut them, and client-go repeats only its GETs then. Every
// request shares one HTTP/2 connection, so one cut fails every write in flight, whether in its
// request, its headers or its body: the response body is therefore read here, so that a cut in
// it is a lost connection too.
//
// A write sent again may have been carried out the first time. opi's writes are all safe to
// repeat: creates take an existing namesake as theirs to check (CreateIfAbsent, CreateOrGet),
// patches carry no resourceVersion, updates carry one (a repeat conflicts and is retried from a
// fresh read), and deletes name their object's uid or version (a repeat finds it gone).
func RetryLostConnection(rt http.RoundTripper) http.RoundTripper {
	return retryLostTransport{next: rt}
}

type retryLostTransport struct {
	next http.RoundTripper
}

func (t retryLostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return t.next.RoundTrip(req)
	}
	for attempt := 1; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		if err == nil {
			resp, err = buffered(resp)
		}
		if err == nil || attempt == lostConnectionAttempts || req.Context().Err() != nil || !lostConnection(err) {
			return resp, err
		}
		if req.GetBody != nil {
			body, bodyErr := req.GetBody()
			if bodyErr != nil {
				return resp, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// buffered reads resp's body (up to maxBufferedResponse) so that a connection lost while it
// streams is seen here; what is past the bound is handed on unread.
func buffered(resp *http.Response) (*http.Response, error) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return resp, nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxBufferedResponse))
	if err != nil {
		_ = resp.Body.Close()
		return nil, err
	}
	if len(head) < maxBufferedResponse {
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(head))
		return resp, nil
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return resp, nil
}

// lostConnection says err is a connection lost under a request that had reached the server
// (or may have), or closed by the cut just before the request was sent on it (the HTTP/2
// client's "client conn is closed": a write in flight when the connection went could pick it
// still; "client conn could not be established": a new connection, dialled for the write,
// cut before its first request, which net/http does not retry itself): not a connection
// refused, which never reached it.
func lostConnection(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// net/http's HTTP/2 client says so in words only.
	msg := err.Error()
	return strings.Contains(msg, "client connection force closed") || strings.Contains(msg, "http2: server sent GOAWAY") ||
		strings.Contains(msg, "http2: client conn is closed") || strings.Contains(msg, "http2: client conn could not be established")
}
