package agent

import (
	"context"
	"errors"
	"path/filepath"
	"sync"

	"code.cloudfoundry.org/lager/v3"
	"github.com/fsnotify/fsnotify"
)

// notifier wakes a follower when its container's log folder changes (a line written, a file
// created, renamed or removed), through inotify (fsnotify): one watch per followed folder, none
// per file. It only decides when a follower reads; what is read stays the Follower's. Where
// notification is unavailable (no watcher: e.g. the node's inotify instances used up; or a
// folder's watch not made: it does not exist yet, or the per-user watch limit is reached) the
// follower polls, every PollInterval, and tries to watch again; when the kernel's event queue
// overflows, every follower reads at once (a full poll), as events may be lost.
type notifier struct {
	logger lager.Logger
	w      *fsnotify.Watcher // nil: notification unavailable

	mu    sync.Mutex
	wakes map[string]chan struct{} // by folder watched
}

func newNotifier(logger lager.Logger, disabled bool) *notifier {
	n := &notifier{logger: logger, wakes: map[string]chan struct{}{}}
	if disabled {
		return n
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Error("notification-unavailable-polling", err)
		return n
	}
	n.w = w
	return n
}

// watch watches dir for wake; false if it cannot (the follower polls and calls watch again).
func (n *notifier) watch(dir string, wake chan struct{}) bool {
	if n.w == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.w.Add(dir); err != nil {
		return false
	}
	n.wakes[dir] = wake
	return true
}

// watching reports whether dir is watched still.
func (n *notifier) watching(dir string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.wakes[dir]
	return ok
}

// unwatch stops watching dir (its follower stopped).
func (n *notifier) unwatch(dir string) {
	if n.w == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.wakes[dir]; ok {
		delete(n.wakes, dir)
		_ = n.w.Remove(dir) // gone with the folder already, if it was removed
	}
}

// run hands the events to the followers until ctx ends, then closes the watcher.
func (n *notifier) run(ctx context.Context) {
	if n.w == nil {
		return
	}
	defer n.w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-n.w.Events:
			if !ok {
				return
			}
			n.event(ev)
		case err, ok := <-n.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				n.logger.Info("notification-overflow-reading-all")
				n.wakeAll()
				continue
			}
			n.logger.Error("notification-error", err)
		}
	}
}

// event wakes the follower of the folder ev is in, or of ev's folder itself (removed or renamed:
// its watch is gone, the follower polls again).
func (n *notifier) event(ev fsnotify.Event) {
	n.mu.Lock()
	wake, ok := n.wakes[filepath.Dir(ev.Name)]
	if !ok {
		if wake, ok = n.wakes[ev.Name]; ok && ev.Has(fsnotify.Remove|fsnotify.Rename) {
			delete(n.wakes, ev.Name)
		}
	}
	n.mu.Unlock()
	if ok {
		poke(wake)
	}
}

// wakeAll wakes every follower watched (events may have been lost).
func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, wake := range n.wakes {
		poke(wake)
	}
}

// poke wakes a follower (a wake-up already pending is enough).
func poke(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
