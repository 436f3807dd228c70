// Package tlsfiles keeps what opi makes of TLS files (a server configuration, a client
// certificate) current while the files are rotated: certificates are replaced in place by
// cert-manager, a Secret volume's atomic symlink swap or BOSH, and opi picks the new ones up at
// the next handshake without a restart.
package tlsfiles

import (
	"fmt"
	"os"
	"sync"

	"code.cloudfoundry.org/lager/v3"
)

// Reloader holds what load made of files, and makes it again when one of the files changed.
//
// Get stats the files (no watch, no polling loop: a stat per new connection costs little next to
// a handshake) and calls load again when one differs from what was loaded: another file (a
// swapped symlink's target), a modification time or a size. A half-done rotation (a new
// certificate beside the old key) fails to load: the last value that loaded is kept, the error is
// logged, and the next Get tries again.
type Reloader[T any] struct {
	files  []string
	load   func() (T, error)
	logger lager.Logger

	mu      sync.Mutex
	current T
	seen    []os.FileInfo
}

// New loads the files once; a failure here is the caller's start-up error.
func New[T any](files []string, load func() (T, error), logger lager.Logger) (*Reloader[T], error) {
	r := &Reloader[T]{files: files, load: load, logger: logger}
	seen, err := r.stat()
	if err != nil {
		return nil, err
	}
	if r.current, err = load(); err != nil {
		return nil, err
	}
	r.seen = seen
	return r, nil
}

// Get is what load makes of the files as they are now, or the last value that loaded.
func (r *Reloader[T]) Get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, err := r.stat()
	if err != nil {
		r.logger.Error("tls-reload-failed", err)
		return r.current
	}
	if unchanged(seen, r.seen) {
		return r.current
	}
	loaded, err := r.load()
	if err != nil {
		r.logger.Error("tls-reload-failed", err)
		return r.current
	}
	r.current, r.seen = loaded, seen
	r.logger.Info("tls-reloaded", lager.Data{"files": r.files})
	return loaded
}

func (r *Reloader[T]) stat() ([]os.FileInfo, error) {
	infos := make([]os.FileInfo, 0, len(r.files))
	for _, f := range r.files {
		info, err := os.Stat(f) // follows symlinks: a Secret volume swaps the link's target
		if err != nil {
			return nil, fmt.Errorf("tls file: %w", err)
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func unchanged(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i], b[i]) || !a[i].ModTime().Equal(b[i].ModTime()) || a[i].Size() != b[i].Size() {
			return false
		}
	}
	return true
}
