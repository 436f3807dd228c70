package imageconfig

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Deadlines of every registry exchange; the whole read is bounded by Reader.Timeout as well.
const (
	dialTimeout           = 10 * time.Second
	tlsHandshakeTimeout   = 10 * time.Second
	responseHeaderTimeout = 15 * time.Second
	idleConnTimeout       = 30 * time.Second
	maxResponseHeaderSize = 64 << 10
	// maxOtherBytes bounds a response that is neither a manifest nor a blob (the /v2/ ping, a
	// token, an error's body).
	maxOtherBytes = 1 << 20
)

// errTooLarge is what reading past a limit fails with.
var errTooLarge = errors.New("registry response exceeds its size limit")

// readState is what one read's transport saw, whatever go-containerregistry makes of the
// errors it returns: reasons are decided from it.
type readState struct {
	refused  atomic.Bool
	tooLarge atomic.Bool
}

// newTransport is one read's transport to registries: every address it dials is checked by
// policy, every exchange has deadlines, and every response body is read through a limit
// (manifests maxManifest, blobs maxConfig: only the config blob is ever fetched).
func newTransport(policy *AddressPolicy, maxManifest, maxConfig int64, state *readState) *limitedTransport {
	dialer := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			if err := policy.check(address); err != nil {
				state.refused.Store(true)
				return err
			}
			return nil
		},
	}
	return &limitedTransport{
		next: &http.Transport{
			// Never a proxy from the environment (HTTPS_PROXY and so on): the proxy would dial
			// the registry for opi, and the policy above would only ever see the proxy's address.
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    tlsHandshakeTimeout,
			ResponseHeaderTimeout:  responseHeaderTimeout,
			ExpectContinueTimeout:  time.Second,
			IdleConnTimeout:        idleConnTimeout,
			MaxIdleConnsPerHost:    2,
			MaxResponseHeaderBytes: maxResponseHeaderSize,
		},
		maxManifest: maxManifest,
		maxConfig:   maxConfig,
		state:       state,
	}
}

// limitedTransport reads every response body through a limit chosen by what was asked for.
type limitedTransport struct {
	next                   *http.Transport
	maxManifest, maxConfig int64
	state                  *readState
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{body: resp.Body, left: t.limitFor(req), state: t.state}
	return resp, nil
}

// limitFor is the limit of req's answer. A redirect (a blob served from another host) keeps
// the limit of the request it answers.
func (t *limitedTransport) limitFor(req *http.Request) int64 {
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	switch path := first.URL.Path; {
	case strings.Contains(path, "/manifests/"):
		return t.maxManifest
	case strings.Contains(path, "/blobs/"):
		return t.maxConfig
	default:
		return maxOtherBytes
	}
}

// close drops the connections this read kept.
func (t *limitedTransport) close() { t.next.CloseIdleConnections() }

// limitedBody fails a read past left bytes, whatever Content-Length said.
type limitedBody struct {
	body  io.ReadCloser
	left  int64
	state *readState
	err   error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	if int64(n) <= b.left {
		b.left -= int64(n)
		return n, err
	}
	n = int(b.left)
	b.left = 0
	b.state.tooLarge.Store(true)
	b.err = fmt.Errorf("%w", errTooLarge)
	return n, b.err
}

func (b *limitedBody) Close() error { return b.body.Close() }
