package gorouter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/nats-io/nats.go"
)

// Metrics is what the Emitter reports; metrics.Metrics has these methods.
type Metrics interface {
	// SetRouteRegistrations is the number of registrations kept registered (0 while not running).
	SetRouteRegistrations(n int)
	// CountNATSMessage counts one message handed to NATS, by subject.
	CountNATSMessage(subject string)
	// SetNATSConnected is the connection's state.
	SetNATSConnected(connected bool)
	// CountNATSError counts one disconnect ("disconnect"), one failed attempt to connect
	// ("connect"), one message that could not be sent ("publish") or one error NATS reported
	// asynchronously ("async").
	CountNATSError(kind string)
	// ObserveRouteRegistrationDelay is the time from an instance's readiness to its first
	// registration being handed to NATS.
	ObserveRouteRegistrationDelay(d time.Duration)
}

// Emitter keeps a table of registrations and, while Run runs, keeps gorouter in step with it.
// Set, Delete and Replace change the table at any time; they send only while Run runs (while
// this opi is the leader), so a replica that is not the leader keeps a table ready to send the
// moment it becomes one. An unregister that cannot be sent while Run runs is kept and sent first
// when the connection is (back), and Unregister keeps one even before Run: the new leader's
// unregisters of what earlier terms registered. It is safe for concurrent use.
//
// Messages are handed to NATS under the table's lock: gorouter sees them in the order of the
// calls, and a re-send of the table never overtakes an unregister.
type Emitter struct {
	logger   lager.Logger
	metrics  Metrics
	conn     connection
	fallback time.Duration
	urls     []string

	mu    sync.Mutex
	table map[string]*entry
	// unsent are unregister bodies NATS did not take (disconnected): sent first when the
	// connection is back, before the table. They are few: one per endpoint removed during an
	// outage, and gorouter may keep such endpoints past its prune threshold when it suspends
	// pruning while NATS is unavailable, so none is dropped.
	unsent [][]byte
	// running is true while Run runs; nc is its connection.
	running bool
	nc      *nats.Conn
	// heard is the smallest interval a gorouter announced in this Run, 0 while none did.
	heard time.Duration
}

type entry struct {
	reg        Registration
	body       []byte
	readySince time.Time
	// published is true once a register of this entry was handed to NATS.
	published bool
}

// NewEmitter validates cfg and reads its files. metrics may be nil.
func NewEmitter(cfg Config, logger lager.Logger, metrics Metrics) (*Emitter, error) {
	conn, err := cfg.connection(logger)
	if err != nil {
		return nil, err
	}
	if metrics == nil {
		metrics = nopMetrics{}
	}
	return &Emitter{
		logger: logger, metrics: metrics, conn: conn, fallback: cfg.registerInterval(),
		urls: cfg.RedactedURLs(), table: map[string]*entry{},
	}, nil
}

// Set makes r the registration of key: sent at once when it is new or changed. A change that
// moves the endpoint (host or port) first unregisters the old one; one that drops URIs first
// unregisters the endpoint from those. readySince is when the instance became ready, for the
// registration delay metric; zero when unknown.
func (e *Emitter) Set(key string, r Registration, readySince time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setLocked(key, r, readySince)
	e.countLocked()
}

// Delete unregisters key's registration at once and removes it from the table.
func (e *Emitter) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.table[key]; ok {
		delete(e.table, key)
		e.unregisterLocked(old.body)
	}
	e.countLocked()
}

// Replace makes regs the whole table (a resync): what is not in it any more is unregistered,
// what is new or changed is registered as by Set (with no readiness time).
func (e *Emitter) Replace(regs map[string]Registration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for key, old := range e.table {
		if _, ok := regs[key]; !ok {
			delete(e.table, key)
			e.unregisterLocked(old.body)
		}
	}
	for key, r := range regs {
		e.setLocked(key, r, time.Time{})
	}
	e.countLocked()
}

// Len is the number of registrations in the table.
func (e *Emitter) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.table)
}

func (e *Emitter) setLocked(key string, r Registration, readySince time.Time) {
	next := &entry{reg: r, readySince: readySince}
	if old, ok := e.table[key]; ok {
		if old.reg.equal(r) {
			return
		}
		// The same instance: its readiness and whether it was registered stay.
		next.readySince, next.published = old.readySince, old.published
		if gone, must := r.replaced(old.reg); must {
			e.unregisterLocked(gone.Encode())
		}
	}
	// The caller's slices and maps stay the caller's.
	next.reg.URIs, next.reg.Tags = slices.Clone(r.URIs), maps.Clone(r.Tags)
	next.body = next.reg.Encode()
	e.table[key] = next
	e.registerLocked(next)
}

func (e *Emitter) registerLocked(ent *entry) bool {
	if !e.publishLocked(SubjectRegister, "", ent.body) {
		return false
	}
	if !ent.published {
		ent.published = true
		if !ent.readySince.IsZero() {
			e.metrics.ObserveRouteRegistrationDelay(time.Since(ent.readySince))
		}
	}
	return true
}

// Unregister unregisters r's endpoint from r's URIs, whatever the table holds: at once while
// connected, else first thing in the next full send (even when Run does not run yet). The
// leader hands it what an earlier term registered and no entry has any more.
func (e *Emitter) Unregister(r Registration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	body := r.Encode()
	if !e.publishLocked(SubjectUnregister, "", body) {
		e.unsent = append(e.unsent, body)
	}
}

// Flushed tells whether every unregister made so far was handed to NATS: Run runs, it is
// connected, and nothing is kept for the connection's return.
func (e *Emitter) Flushed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running && e.nc != nil && e.nc.IsConnected() && len(e.unsent) == 0
}

// unregisterLocked sends body as an unregister, or keeps it for the connection's return (Run
// runs but is not connected yet, or between sessions). Not running, it sends nothing: the
// leader, when there is one, is in charge, and a new leader unregisters from its records what
// earlier terms registered and its table no longer has.
func (e *Emitter) unregisterLocked(body []byte) {
	if !e.running {
		return
	}
	if !e.publishLocked(SubjectUnregister, "", body) {
		e.unsent = append(e.unsent, body)
	}
}

// publishLocked hands one message to NATS; false when there is no connection or NATS refused.
func (e *Emitter) publishLocked(subject, reply string, body []byte) bool {
	if e.nc == nil {
		return false
	}
	var err error
	if reply == "" {
		err = e.nc.Publish(subject, body)
	} else {
		err = e.nc.PublishRequest(subject, reply, body)
	}
	if err != nil {
		e.metrics.CountNATSError("publish")
		// Disconnected, every message fails: the disconnect was logged once, and the table is
		// sent again on reconnect.
		if e.nc.IsConnected() {
			e.logger.Error("nats-publish-failed", err, lager.Data{"subject": subject})
		} else {
			e.logger.Debug("nats-publish-failed", lager.Data{"subject": subject, "error": err.Error()})
		}
		return false
	}
	e.metrics.CountNATSMessage(subject)
	return true
}

// sendAllLocked sends the unregisters kept, then the whole table; it stops at the first message
// NATS refuses (the connection is down: reconnecting sends everything again).
func (e *Emitter) sendAllLocked(logger lager.Logger, reason string) {
	for len(e.unsent) > 0 {
		if !e.publishLocked(SubjectUnregister, "", e.unsent[0]) {
			return
		}
		e.unsent = e.unsent[1:]
	}
	e.unsent = nil
	for _, ent := range e.table {
		if !e.registerLocked(ent) {
			return
		}
	}
	logger.Debug("sent-all", lager.Data{"reason": reason, "registrations": len(e.table)})
}

func (e *Emitter) countLocked() {
	if e.running {
		e.metrics.SetRouteRegistrations(len(e.table))
	}
}

// errClosed is a connection that closed while Run still needed it.
var errClosed = errors.New("nats connection closed")

// Run connects to NATS and keeps gorouter in step with the table until ctx ends: everything at
// once on every (re)connect and on a router.start (at most once per startWindow: the starts
// inside a window share one re-send at its end), everything again at the smallest interval a
// gorouter announced (the default until one does; never below MinRegisterInterval), every Set,
// Delete and Replace at once. NATS being down is logged and counted, not returned: Run returns
// nil when ctx ends, and an error only when the connection cannot be made at all (a
// configuration nats.go refuses).
// Only one Run runs at a time; when it returns, no goroutine of its connection is left but
// nats.go's reader and flusher, which end as soon as their socket is closed.
func (e *Emitter) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("gorouter emitter is already running")
	}
	e.running, e.heard = true, 0
	e.countLocked()
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
		e.metrics.SetRouteRegistrations(0)
		e.metrics.SetNATSConnected(false)
	}()
	logger := e.logger.Session("gorouter-emitter", lager.Data{"nats": e.urls})
	logger.Info("starting")
	defer logger.Info("stopped")
	for attempt := 1; ; attempt++ {
		err := e.session(ctx, logger)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, errClosed) {
			logger.Error("nats-connect-failed", err)
			return err
		}
		// nats.go gave up (it should not, reconnecting forever): a new connection, after a while.
		logger.Error("nats-connection-closed", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(reconnectDelay(attempt)):
		}
	}
}

// session is one connection, until ctx ends or nats.go closes it.
func (e *Emitter) session(ctx context.Context, logger lager.Logger) error {
	connected := make(chan struct{}, 1)
	closed := make(chan struct{})
	// router.start and the greet's replies; a gorouter announces itself rarely.
	announcements := make(chan *nats.Msg, 64)
	onConnect := func(what string) nats.ConnHandler {
		return func(nc *nats.Conn) {
			e.metrics.SetNATSConnected(true)
			logger.Info(what, lager.Data{"server": nc.ConnectedAddr()})
			select {
			case connected <- struct{}{}:
			default:
			}
		}
	}
	options := append(slices.Clone(e.conn.options),
		nats.ConnectHandler(onConnect("nats-connected")),
		nats.ReconnectHandler(onConnect("nats-reconnected")),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			e.metrics.SetNATSConnected(false)
			if nc.IsClosed() {
				return // Run's own Close
			}
			e.metrics.CountNATSError("disconnect")
			logger.Error("nats-disconnected", err)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			e.metrics.CountNATSError("connect")
			logger.Error("nats-connect-attempt-failed", err)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			e.metrics.CountNATSError("async")
			logger.Error("nats-error", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
	)
	nc, err := nats.Connect(e.conn.servers, options...)
	if err != nil {
		return fmt.Errorf("connect to nats: %w", err)
	}
	inbox := nc.NewInbox()
	for _, subject := range []string{SubjectStart, inbox} {
		if _, err := nc.ChanSubscribe(subject, announcements); err != nil {
			nc.Close()
			<-closed
			return fmt.Errorf("subscribe to %s: %w", subject, err)
		}
	}
	defer func() {
		e.mu.Lock()
		e.nc = nil
		e.mu.Unlock()
		nc.Close()
		// The closed handler is the last callback: none runs after Run returned.
		<-closed
	}()

	timer := time.NewTimer(e.interval())
	defer timer.Stop()
	sendAll := func(reason string) {
		e.mu.Lock()
		e.sendAllLocked(logger, reason)
		interval := e.intervalLocked()
		e.mu.Unlock()
		timer.Reset(interval)
	}
	// router.start re-sends: at most one per startWindow; the starts inside a window share one
	// re-send at its end. Anyone who may publish on NATS can send router.start.
	var lastStart time.Time
	startTimer := time.NewTimer(time.Hour)
	startTimer.Stop()
	defer startTimer.Stop()
	startPending := false
	sendForStart := func() {
		sendAll(SubjectStart)
		lastStart = time.Now()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-closed:
			return errClosed
		case <-connected:
			// One hold of the lock: a Set after the greet comes after the table's re-send. The
			// connection is the Emitter's from here on, so that nothing a Set, Delete or
			// Unregister sends overtakes the first full send and its kept unregisters.
			e.mu.Lock()
			e.nc = nc
			e.publishLocked(SubjectGreet, inbox, nil)
			e.sendAllLocked(logger, "connected")
			interval := e.intervalLocked()
			e.mu.Unlock()
			timer.Reset(interval)
		case msg := <-announcements:
			smaller := e.hear(logger, msg)
			switch {
			case msg.Subject == SubjectStart && startPending:
				// The window's re-send comes after this start: it serves this gorouter too.
			case msg.Subject == SubjectStart:
				// A gorouter that (re)started has an empty table.
				if wait := time.Until(lastStart.Add(startWindow(e.interval()))); wait > 0 {
					startPending = true
					startTimer.Reset(wait)
					logger.Debug("router-start-resend-deferred", lager.Data{"wait": wait.String()})
					break
				}
				sendForStart()
			case smaller:
				// A greet's reply, just after everything was sent: the next round comes sooner.
				timer.Reset(e.interval())
			}
		case <-startTimer.C:
			startPending = false
			sendForStart()
		case <-timer.C:
			sendAll("interval")
		}
	}
}

// maxStartWindow bounds startWindow: a gorouter that starts inside a window waits at most this
// long for its routes.
const maxStartWindow = 5 * time.Second

// startWindow is how long after a re-send for router.start the next one waits: a quarter of
// the register interval (at least MinRegisterInterval, at most maxStartWindow), so that a
// gorouter starting inside a window gets its routes well before the next regular re-send
// would bring them, and a flood of router.start costs at most one table per window.
func startWindow(interval time.Duration) time.Duration {
	return min(max(interval/4, MinRegisterInterval), maxStartWindow)
}

// announcement is the body of router.start and of a reply to router.greet.
type announcement struct {
	ID                               string   `json:"id"`
	Hosts                            []string `json:"hosts"`
	MinimumRegisterIntervalInSeconds int      `json:"minimumRegisterIntervalInSeconds"`
	PruneThresholdInSeconds          int      `json:"pruneThresholdInSeconds"`
}

// hear takes a gorouter's interval; true when it is now the smallest heard.
func (e *Emitter) hear(logger lager.Logger, msg *nats.Msg) bool {
	var a announcement
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		logger.Info("gorouter-announcement-unreadable", lager.Data{"subject": msg.Subject, "error": err.Error()})
		return false
	}
	logger.Info("gorouter-announced", lager.Data{"subject": msg.Subject, "id": a.ID,
		"interval-seconds": a.MinimumRegisterIntervalInSeconds, "prune-threshold-seconds": a.PruneThresholdInSeconds})
	if a.MinimumRegisterIntervalInSeconds <= 0 {
		return false
	}
	interval := max(time.Duration(a.MinimumRegisterIntervalInSeconds)*time.Second, MinRegisterInterval)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.heard != 0 && e.heard <= interval {
		return false
	}
	e.heard = interval
	return true
}

func (e *Emitter) interval() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.intervalLocked()
}

func (e *Emitter) intervalLocked() time.Duration {
	if e.heard != 0 {
		return e.heard
	}
	return e.fallback
}

type nopMetrics struct{}

func (nopMetrics) SetRouteRegistrations(int)                   {}
func (nopMetrics) CountNATSMessage(string)                     {}
func (nopMetrics) SetNATSConnected(bool)                       {}
func (nopMetrics) CountNATSError(string)                       {}
func (nopMetrics) ObserveRouteRegistrationDelay(time.Duration) {}
