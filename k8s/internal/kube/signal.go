package kube

import (
	"context"
	"sync"
	"time"
)

// Signal tells waiters that something changed (an informer's cache, say), without polling:
// Fire wakes everyone waiting at that moment. The zero value is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// changed is closed by the next Fire.
func (s *Signal) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Fire wakes the current waiters. It costs nothing when none waits.
func (s *Signal) Fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// WaitFor checks cond now and after every Fire until it holds, timeout passes or ctx ends.
// It reports whether cond held (looking once more at the end). cond must only turn true
// through changes that are followed by a Fire.
func (s *Signal) WaitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		// Taken before cond is checked, so a change between the check and the wait still wakes.
		changed := s.changed()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return cond()
		case <-ctx.Done():
			return cond()
		}
	}
}
