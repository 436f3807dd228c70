package kube

import (
	"net/http"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// lostConnectionAttempts bounds the attempts of a write whose connection is lost under it.
const lostConnectionAttempts = 3

// RetryLostConnection is a transport wrapper (rest.Config.Wrap) that sends a write again when
// the connection under it is lost before its response (reset, closed, an HTTP/2 connection
// gone): the API server closes connections while it answers, and a proxy between may cut them,
// and client-go repeats only its GETs then. Every request shares one HTTP/2 connection, so one
// cut fails every write in flight.
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

// lostConnection says err is a connection lost under a request that had reached the server.
func lostConnection(err error) bool {
	return utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)
}
