package kube

import (
	"context"
	"errors"
	"fmt"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/opi-bridge/opi/opi"
)

// Kind is the class of an error returned by the Kubernetes API or by the way to it.
type Kind int

// Error kinds, from the point of view of a caller deciding what to tell its own client.
const (
	// KindOther is anything not classified below.
	KindOther Kind = iota
	// KindNotFound: the object does not exist.
	KindNotFound
	// KindAlreadyExists: an object of that name exists.
	KindAlreadyExists
	// KindConflict: the object changed since it was read.
	KindConflict
	// KindInvalid: the API server rejected the input (422, 400, 413).
	KindInvalid
	// KindForbidden: the caller is not allowed to do this.
	KindForbidden
	// KindUnavailable: the API server could not be reached or asked to come back later.
	KindUnavailable
)

// String names the kind for logs.
func (k Kind) String() string {
	switch k {
	case KindNotFound:
		return "not-found"
	case KindAlreadyExists:
		return "already-exists"
	case KindConflict:
		return "conflict"
	case KindInvalid:
		return "invalid"
	case KindForbidden:
		return "forbidden"
	case KindUnavailable:
		return "unavailable"
	default:
		return "other"
	}
}

// Classify tells what kind of error err is. A nil error is KindOther.
func Classify(err error) Kind {
	switch {
	case err == nil:
		return KindOther
	case apierrors.IsNotFound(err):
		return KindNotFound
	case apierrors.IsAlreadyExists(err):
		return KindAlreadyExists
	case apierrors.IsConflict(err):
		return KindConflict
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		return KindInvalid
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return KindForbidden
	case IsUnavailable(err):
		return KindUnavailable
	default:
		return KindOther
	}
}

// IsUnavailable reports whether err says the API server cannot serve now: it is unreachable,
// timed out, overloaded or the caller's deadline passed. Retrying later may succeed.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) {
		return true
	}
	// Dial failures (no route, unknown host) and network timeouts.
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// APIError wraps an error of a Kubernetes call with what was being done and, where it has one,
// the opi sentinel a caller tells it by: NotFound → ErrNotFound; Invalid, BadRequest and
// too large → ErrInvalid (the API server did not accept our input); unreachable, timeouts,
// 503, 429 and deadlines → ErrUnavailable. The API error stays in the chain as well.
func APIError(err error, doing string) error {
	switch Classify(err) {
	case KindNotFound:
		return fmt.Errorf("%s: %w: %w", doing, opi.ErrNotFound, err)
	case KindInvalid:
		return fmt.Errorf("%s: %w: %w", doing, opi.ErrInvalid, err)
	case KindUnavailable:
		return fmt.Errorf("%s: %w: %w", doing, opi.ErrUnavailable, err)
	default:
		return fmt.Errorf("%s: %w", doing, err)
	}
}
