package store

import (
	"context"
	"errors"
	"fmt"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/opi"
)

// The waits below make a write visible to reads of this backend before it returns. A write
// waits Options.ReadWaitTimeout, then on, up to its own deadline, while the API server answers:
// a cache whose watch is being re-established (client-go's reflector may pause up to a minute
// between attempts) catches up once it is back, and a watch that is open but behind (an API
// server under a burst sends its events late) delivers the write's event in the end. A wait
// that runs out, or stops because the API server no longer answers, means the cache is behind:
// the write was made, but a read right after it could miss it, so the call answers
// opi.ErrUnavailable (503): CC retries, and a desire, update or stop repeated completes what
// exists. One case is told apart with a GET (a LiveCheck): a write whose object a later write
// deleted or replaced meanwhile (a stop racing a desire) took effect and was overtaken, which is
// success; its event never comes.

// LiveCheck tells, from the API server, whether the object a write made is still the live one
// of its name.
type LiveCheck func(context.Context) (bool, error)

// WaitEnd is how a wait for the caches ended.
type WaitEnd int

const (
	// Seen: the caches hold what the wait was for.
	Seen WaitEnd = iota
	// Overtaken: the object written is no longer the live one (its LiveCheck said so).
	Overtaken
	// TimedOut: neither, within the wait (see WaitFor).
	TimedOut
)

// WaitFor waits until cond holds of the caches, looking again on each of their changes: the
// read wait timeout, then on while the API server answers, until a recheck interval before
// ctx's deadline (so that an answer still has time). Without a deadline, or without
// Config.Watches to tell whether the API server answers, it waits the read wait timeout alone.
// Past the read wait, while every watch is open, live (when not nil) is asked after one
// recheck interval, then after twice as long each time up to maxLiveCheckGap: an open watch
// that is behind shows the write late, an overtaken write never.
func (s *Store) WaitFor(ctx context.Context, cond func() bool, live LiveCheck) WaitEnd {
	end := s.wait(ctx, cond, live)
	if end != TimedOut {
		return end
	}
	if cond() { // an event that came during the last recheck's GET
		return Seen
	}
	// A wait that ran out asks the API server once more: the caches cannot tell an overtaken
	// write while a watch is being re-established, nor at all without Config.Watches.
	if live != nil && ctx.Err() == nil && overtaken(ctx, live) {
		return Overtaken
	}
	if cond() {
		return Seen
	}
	return TimedOut
}

// maxLiveCheckGap is the most recheck intervals a wait past its read wait goes between two
// LiveChecks: a burst of writes behind a late watch asks the API server about each some 12 times
// in a write timeout of 50 s, not 45.
const maxLiveCheckGap = 4

func (s *Store) wait(ctx context.Context, cond func() bool, live LiveCheck) WaitEnd {
	if s.changed.WaitFor(ctx, s.cfg.ReadWaitTimeout, cond) {
		return Seen
	}
	deadline, ok := ctx.Deadline()
	if !ok || s.cfg.Watches == nil {
		return TimedOut
	}
	waitCtx, cancel := context.WithDeadline(ctx, deadline.Add(-recheckInterval))
	defer cancel()
	gap, next := 1, 1 // in rechecks
	for recheck := 1; waitCtx.Err() == nil && s.apiServerAnswers(waitCtx) == nil; recheck++ {
		reconnecting := len(s.unwatched()) > 0
		if s.changed.WaitFor(waitCtx, recheckInterval, cond) {
			return Seen
		}
		// While a watch is being re-established the caches show nothing new: a GET would tell
		// nothing its return will not.
		if reconnecting || live == nil || waitCtx.Err() != nil || recheck < next {
			continue
		}
		// A GET the API server is slow to answer must not hold the wait past the next recheck
		// (the cache may catch up meanwhile).
		getCtx, cancelGet := context.WithTimeout(waitCtx, recheckInterval)
		gone := overtaken(getCtx, live)
		cancelGet()
		if gone {
			return Overtaken
		}
		gap = min(2*gap, maxLiveCheckGap)
		next = recheck + gap
	}
	return TimedOut
}

// overtaken says whether live tells, from the API server, that the object written is no longer
// the live one (an error tells nothing).
func overtaken(ctx context.Context, live LiveCheck) bool {
	isLive, err := live(ctx)
	return err == nil && !isLive
}

// settle answers a write whose wait for the caches ended as end: nil when seen or overtaken,
// else opi.ErrUnavailable (the caller's ctx canceled: its error, nothing to settle).
func settle(ctx context.Context, logger lager.Logger, end WaitEnd, what string, data lager.Data) error {
	switch {
	case end == Seen:
		return nil
	case end == Overtaken:
		logger.Info("overtaken-while-waiting-for-cache", data)
		return nil
	case errors.Is(ctx.Err(), context.Canceled):
		return ctx.Err() // the waiter gave up (a desire refused meanwhile)
	}
	logger.Info("cache-wait-timed-out", data)
	return fmt.Errorf("%w: %s, but opi's cache has not seen it in time (its watch of the api server may be reconnecting or behind): the write is kept, retry to complete it",
		opi.ErrUnavailable, what)
}

// WaitForWorkload waits until the cache holds workload w at its resource version or newer;
// with goneOK, also until it is gone (deleted meanwhile). live tells an overtaken write.
func (s *Store) WaitForWorkload(ctx context.Context, logger lager.Logger, w metav1.Object, goneOK bool, live LiveCheck) error {
	name, rv := w.GetName(), w.GetResourceVersion()
	kind := s.cfg.KindName
	return waitWritten(ctx, logger, s, func() (*WorkloadRecord, bool) { return s.WorkloadByName(name) }, rv, goneOK, live,
		kind+" "+name+" written", lager.Data{kind: name, "resource-version": rv})
}

// WaitForWorkloadGone waits until the cache no longer holds workload name of uid as live: a
// namesake desired since does not hold the wait.
func (s *Store) WaitForWorkloadGone(ctx context.Context, logger lager.Logger, name string, uid types.UID) error {
	end := s.WaitFor(ctx, func() bool {
		cached, exists := s.WorkloadByName(name)
		return !exists || cached.UID != uid || cached.DeletionTimestamp != nil
	}, nil)
	kind := s.cfg.KindName
	return settle(ctx, logger, end, kind+" "+name+" deleted", lager.Data{"waiting-for": kind + "-gone", kind: name})
}

// WaitForPodGone waits until the cache no longer reports pod uid as live.
func (s *Store) WaitForPodGone(ctx context.Context, logger lager.Logger, id opi.LRPIdentifier, uid types.UID) error {
	end := s.WaitFor(ctx, func() bool {
		for _, p := range s.Pods(id) {
			if p.UID == uid && p.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	}, nil)
	return settle(ctx, logger, end, "pod deleted", lager.Data{"waiting-for": "pod-gone", "pod-uid": uid})
}

// WaitForJob waits until the cache holds Job name at resourceVersion rv or newer (or, with
// goneOK, no longer holds it). live, when not nil, tells an overtaken write (see WaitFor).
func (s *Store) WaitForJob(ctx context.Context, logger lager.Logger, name, rv string, goneOK bool, live LiveCheck) error {
	return waitWritten(ctx, logger, s, func() (*JobRecord, bool) { return s.Job(name) }, rv, goneOK, live,
		"job "+name+" written", lager.Data{"job": name, "resource-version": rv})
}

// waitWritten waits until lookup finds its object at resource version rv or newer (with goneOK,
// or finds it gone); else it settles (see settle) what, logged with data.
func waitWritten[R interface{ GetResourceVersion() string }](ctx context.Context, logger lager.Logger, s *Store,
	lookup func() (R, bool), rv string, goneOK bool, live LiveCheck, what string, data lager.Data) error {
	end := s.WaitFor(ctx, func() bool {
		r, exists := lookup()
		if !exists {
			return goneOK
		}
		return kube.Observed(r.GetResourceVersion(), rv)
	}, live)
	return settle(ctx, logger, end, what, data)
}
