package handler

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/opi-bridge/opi/models"
)

// VersionedLRPLister is optional for an LRPBifrost (bifrost.LRP has it when its backend keeps
// a list version, opi.LRPListVersioner): GET /apps then encodes the list once per version and
// serves those bytes to every call of that version. Without it, every call encodes its own.
//
//counterfeiter:generate -o ../fakes/versioned_lrp_lister.go . VersionedLRPLister
type VersionedLRPLister interface {
	// ListVersion is the version of the list List would return now; ok is false when there
	// is none (every call then encodes its own body).
	ListVersion(ctx context.Context) (version uint64, ok bool, err error)
	// ListVersioned is List and the version of exactly that list.
	ListVersioned(ctx context.Context) ([]models.DesiredLRPSchedulingInfo, uint64, error)
}

// VersionedTaskLister is VersionedLRPLister for a TaskBifrost and GET /tasks.
//
//counterfeiter:generate -o ../fakes/versioned_task_lister.go . VersionedTaskLister
type VersionedTaskLister interface {
	ListVersion(ctx context.Context) (version uint64, ok bool, err error)
	ListVersioned(ctx context.Context) ([]models.TaskResponse, uint64, error)
}

// listBody is a list's response body, encoded once per version of the list (see
// opi.LRPListVersioner: a version grows with every change of the list). It holds at most one
// body (the latest one encoded) plus the one being encoded, and drops a body as soon as a call
// sees a newer version: at 10,000 apps a body is megabytes.
//
// Bodies are shared and never changed: a call writes the bytes it was given even if a newer
// body replaces them meanwhile.
type listBody struct {
	mu      sync.Mutex
	version uint64 // what body reflects at least
	body    []byte // nil: none held
	pending *bodyEncoding
	// size is the length of the last body encoded: the next is allocated at about that size
	// at once instead of grown by doubling.
	size int
}

// bodyEncoding is an encode in flight, which calls that read the same version wait for.
type bodyEncoding struct {
	version uint64 // the version read by the call that started it
	done    chan struct{}
	body    []byte
	got     uint64 // what body reflects at least (>= version)
	err     error
}

// encodeFunc encodes the list as it is now into a buffer of about size bytes, and returns the
// body with a version the list it encoded is at least as new as.
type encodeFunc func(ctx context.Context, size int) ([]byte, uint64, error)

// get returns a body of the list at version or newer, where version was read after the call's
// request began; hence the body reflects every write answered before that. It encodes the list
// (once for every concurrent caller of that version) unless the body held is that new.
func (c *listBody) get(ctx context.Context, version uint64, encode encodeFunc) ([]byte, error) {
	c.mu.Lock()
	if c.body != nil && c.version >= version {
		body := c.body
		c.mu.Unlock()
		return body, nil
	}
	if e := c.pending; e != nil && e.version >= version {
		c.mu.Unlock()
		select {
		case <-e.done:
			return e.body, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e := &bodyEncoding{version: version, done: make(chan struct{})}
	c.pending, c.body = e, nil
	size := c.size
	c.mu.Unlock()

	// Waiters depend on this encode: it does not end with this caller's request.
	e.body, e.got, e.err = encode(context.WithoutCancel(ctx), size)

	c.mu.Lock()
	if c.pending == e {
		// No call has seen a newer version meanwhile: keep this body.
		c.pending = nil
		if e.err == nil {
			c.body, c.version, c.size = e.body, e.got, len(e.body)
		}
	}
	c.mu.Unlock()
	close(e.done)
	return e.body, e.err
}

// bufferFor is a buffer for a body of about size bytes (an eighth more, for growth).
func bufferFor(size int) *bytes.Buffer {
	return bytes.NewBuffer(make([]byte, 0, size+size/8+512))
}

// writeBody writes an encoded JSON body in one piece, with its length.
func writeBody(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
