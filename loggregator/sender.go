package loggregator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/tlsconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Defaults of SenderConfig.
const (
	DefaultServerName           = "metron"
	DefaultMaxBufferedEnvelopes = 10000
	DefaultMaxBufferedBytes     = 16 << 20
	DefaultMaxBatchEnvelopes    = 500
	DefaultMaxBatchBytes        = 1 << 20 // well below gRPC's default 4 MiB message limit
	DefaultSendTimeout          = 10 * time.Second
	DefaultMinBackoff           = 100 * time.Millisecond
	DefaultMaxBackoff           = 10 * time.Second
	DefaultDrainTimeout         = 10 * time.Second
	// DefaultQuantum is how many bytes each source's queue may put in a batch per round: a
	// line of a quiet source waits behind at most this much (plus one envelope) of each other.
	DefaultQuantum = 16 << 10
)

// SenderConfig configures a Sender; zero fields take the defaults above.
type SenderConfig struct {
	// Addr is the v2 ingress, host:port (a Loggregator agent's or a Doppler's).
	Addr string
	// CAFile, CertFile and KeyFile are PEM files: the CA the ingress's certificate is checked
	// against, and the client certificate and key presented to it.
	CAFile, CertFile, KeyFile string
	// ServerName is the name the ingress's certificate must hold ("metron" for an agent,
	// "doppler" for a Doppler).
	ServerName string
	// MaxBufferedEnvelopes and MaxBufferedBytes bound what waits for delivery (in flight
	// included); an envelope past either bound is dropped and counted.
	MaxBufferedEnvelopes int
	MaxBufferedBytes     int
	// MaxBatchEnvelopes and MaxBatchBytes bound one Send.
	MaxBatchEnvelopes int
	MaxBatchBytes     int
	// SendTimeout bounds one Send.
	SendTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed Send and between connection
	// attempts (doubling from the first to the second).
	MinBackoff, MaxBackoff time.Duration
	// DrainTimeout bounds how long Run goes on sending what is buffered once its context ends
	// (DefaultDrainTimeout; negative: not at all).
	DrainTimeout time.Duration
	// Quantum is the bytes each source's queue may put in a batch per round (DefaultQuantum).
	Quantum int
}

func (c *SenderConfig) defaults() {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.ServerName == "" {
		c.ServerName = DefaultServerName
	}
	set(&c.MaxBufferedEnvelopes, DefaultMaxBufferedEnvelopes)
	set(&c.MaxBufferedBytes, DefaultMaxBufferedBytes)
	set(&c.MaxBatchEnvelopes, DefaultMaxBatchEnvelopes)
	set(&c.MaxBatchBytes, DefaultMaxBatchBytes)
	setD(&c.SendTimeout, DefaultSendTimeout)
	setD(&c.MinBackoff, DefaultMinBackoff)
	setD(&c.MaxBackoff, DefaultMaxBackoff)
	set(&c.Quantum, DefaultQuantum)
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
}

// SenderStats are a Sender's counters.
type SenderStats struct {
	// Buffered and BufferedBytes wait for delivery now (in flight included); PeakBuffered and
	// PeakBufferedBytes are the most they ever were.
	Buffered, BufferedBytes         int
	PeakBuffered, PeakBufferedBytes int
	// Delivered counts envelopes a Send returned for; Dropped those Emit refused because the
	// buffer was full; FailedSends the Send calls that failed (and were retried); Waits the
	// EmitWait calls that found the buffer full and waited for room.
	Delivered, Dropped, FailedSends, Waits uint64
}

// Sender sends envelopes to a Loggregator v2 ingress in batches, each batch retried until it is
// delivered. Each envelope goes in a queue of its own source (EmitWait's key: the agent's
// followed container); batches take from the queues in turn, a quantum of bytes each (deficit
// round robin), so a source that fills the buffer delays another's envelopes by at most its
// share. Each source's envelopes go out, and are acknowledged, in the order they came. Emit
// never blocks: it buffers, or drops when the buffer is full (for a caller that must not wait,
// like a leader's lifecycle lines). EmitWait waits for room instead (back pressure: a log reader
// stops reading while Loggregator is unreachable). Run does the sending. Safe for concurrent use.
type Sender struct {
	cfg    SenderConfig
	logger lager.Logger
	conn   *grpc.ClientConn
	// batch is the wire form of the batch being sent (reused: one Send at a time).
	batch []byte

	wake chan struct{}
	// room is closed (and replaced) each time delivered envelopes leave the buffer: EmitWait's
	// callers wait on it.
	room chan struct{}

	mu       sync.Mutex
	queues   map[string]*queue
	turns    []*queue // the queues with envelopes not in a batch yet, in round robin order
	inflight []entry  // the batch being sent, kept until it is delivered
	count    int      // envelopes buffered, in flight included
	bytes    int
	stats    SenderStats
	dropping uint64 // dropped since the buffer last had room
}

// queue is one source's envelopes not yet in a batch, in order.
type queue struct {
	key     string
	entries []entry
	// deficit is what the queue may still put in batches this round; granted says whether
	// this round's quantum was added.
	deficit int
	granted bool
}

// entry is one envelope in protobuf's wire format (encoded once, when it is buffered: its
// size is its length, and a batch holds its bytes as they are).
type entry struct {
	raw []byte
	ack func()
}

// NewSender checks cfg, loads the TLS files and prepares the connection (made lazily; a
// Loggregator that is down is no error here).
func NewSender(cfg SenderConfig, logger lager.Logger) (*Sender, error) {
	cfg.defaults()
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("loggregator address %q is not host:port: %w", cfg.Addr, err)
	}
	if cfg.CAFile == "" || cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("loggregator needs mutual TLS: a CA, a certificate and a key file")
	}
	tlsCfg, err := tlsconfig.Build(
		tlsconfig.WithInternalServiceDefaults(),
		tlsconfig.WithIdentityFromFile(cfg.CertFile, cfg.KeyFile),
	).Client(
		tlsconfig.WithAuthorityFromFile(cfg.CAFile),
		tlsconfig.WithServerName(cfg.ServerName),
	)
	if err != nil {
		return nil, fmt.Errorf("load loggregator TLS files: %w", err)
	}
	conn, err := grpc.NewClient(cfg.Addr,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: cfg.MinBackoff, Multiplier: 2, Jitter: 0.2, MaxDelay: cfg.MaxBackoff,
			},
			MinConnectTimeout: cfg.SendTimeout,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("loggregator client: %w", err)
	}
	return &Sender{
		cfg:    cfg,
		logger: logger.Session("loggregator-sender", lager.Data{"addr": cfg.Addr}),
		conn:   conn,
		wake:   make(chan struct{}, 1),
		room:   make(chan struct{}),
		queues: map[string]*queue{},
	}, nil
}

// Emit buffers env for delivery in the queue of source "" (shared by every Emit); ack, if not
// nil, is called once it is delivered (in order). It reports false, and counts a drop, if the
// buffer is full.
func (s *Sender) Emit(env *loggregator_v2.Envelope, ack func()) bool {
	raw, err := proto.Marshal(env)
	if err != nil {
		s.logger.Error("envelope-not-encoded", err)
		return false
	}
	size := len(raw)
	s.mu.Lock()
	if s.count+1 > s.cfg.MaxBufferedEnvelopes || s.bytes+size > s.cfg.MaxBufferedBytes {
		s.stats.Dropped++
		s.dropping++
		first := s.dropping == 1
		buffered, bytes := s.count, s.bytes
		s.mu.Unlock()
		if first {
			s.logger.Error("buffer-full-dropping", errors.New("loggregator buffer full"), lager.Data{
				"buffered": buffered, "buffered-bytes": bytes,
				"max-envelopes": s.cfg.MaxBufferedEnvelopes, "max-bytes": s.cfg.MaxBufferedBytes,
			})
		}
		return false
	}
	s.push("", raw, ack)
	dropped := s.dropping
	s.dropping = 0
	s.mu.Unlock()
	if dropped > 0 {
		s.logger.Info("buffer-has-room-again", lager.Data{"dropped": dropped})
	}
	s.wakeUp()
	return true
}

// EmitWait buffers env for delivery in the queue of source key, like Emit, but while the buffer
// is full it waits for room instead of dropping (an envelope larger than the byte bound goes in
// once the buffer is empty). It returns ctx's error if ctx ends first: env is then not
// buffered. Waiters are admitted as room frees up, in no set order.
func (s *Sender) EmitWait(ctx context.Context, key string, env *loggregator_v2.Envelope, ack func()) error {
	raw, err := proto.Marshal(env)
	if err != nil {
		return fmt.Errorf("encode envelope: %w", err)
	}
	return s.EmitEncoded(ctx, key, raw, ack)
}

// EmitEncoded is EmitWait for an envelope already in protobuf's wire format (a LogEncoder's):
// raw is the Sender's from then on (not to be changed).
func (s *Sender) EmitEncoded(ctx context.Context, key string, raw []byte, ack func()) error {
	size := len(raw)
	waited := false
	for {
		s.mu.Lock()
		if s.count == 0 || (s.count+1 <= s.cfg.MaxBufferedEnvelopes && s.bytes+size <= s.cfg.MaxBufferedBytes) {
			s.push(key, raw, ack)
			s.mu.Unlock()
			s.wakeUp()
			return nil
		}
		if !waited {
			waited = true
			s.stats.Waits++
		}
		room := s.room
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-room:
		}
	}
}

// push appends to key's queue; s.mu is held.
func (s *Sender) push(key string, raw []byte, ack func()) {
	q := s.queues[key]
	if q == nil {
		q = &queue{key: key}
		s.queues[key] = q
		s.turns = append(s.turns, q)
	}
	q.entries = append(q.entries, entry{raw: raw, ack: ack})
	s.count++
	s.bytes += len(raw)
	s.stats.PeakBuffered = max(s.stats.PeakBuffered, s.count)
	s.stats.PeakBufferedBytes = max(s.stats.PeakBufferedBytes, s.bytes)
}

func (s *Sender) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats are the counters now.
func (s *Sender) Stats() SenderStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Buffered, st.BufferedBytes = s.count, s.bytes
	return st
}

// Run sends until ctx is done, then goes on sending what is buffered for at most the
// DrainTimeout (a stop loses nothing Loggregator can take meanwhile), and returns ctx's error.
// A Send in flight when ctx ends is not cut short (SendTimeout bounds it). What is still
// buffered then stays so, unacknowledged: a caller that saves positions only on
// acknowledgement reads it again after a restart. Call it once.
func (s *Sender) Run(ctx context.Context) error {
	// Sends and back-off waits run under drainCtx: never done until ctx is, then done
	// DrainTimeout later.
	bg := context.WithoutCancel(ctx)
	drainCtx, cancelDrain := bg, context.CancelFunc(func() {})
	defer func() { cancelDrain() }()
	stopping := func() bool {
		if ctx.Err() == nil {
			return false
		}
		if drainCtx == bg {
			drainCtx, cancelDrain = context.WithTimeout(bg, max(s.cfg.DrainTimeout, 0))
		}
		return true
	}
	wait := s.cfg.MinBackoff
	failing := false
	for {
		batch, n := s.next()
		if n == 0 {
			if stopping() {
				break
			}
			select {
			case <-ctx.Done():
			case <-s.wake:
			}
			continue
		}
		if stopping() && drainCtx.Err() != nil {
			break
		}
		sendCtx, cancel := context.WithTimeout(drainCtx, s.cfg.SendTimeout)
		err := s.conn.Invoke(sendCtx, loggregator_v2.Ingress_Send_FullMethodName, encodedBatch(batch), new(loggregator_v2.SendResponse), grpc.ForceCodecV2(batchCodec{}))
		cancel()
		if err != nil {
			s.mu.Lock()
			s.stats.FailedSends++
			s.mu.Unlock()
			if !failing {
				s.logger.Error("send-failed-retrying", err, lager.Data{"envelopes": n})
				failing = true
			}
			var stop <-chan struct{} // a stop ends the wait at once; a drain waits it out
			if !stopping() {
				stop = ctx.Done()
			} else if drainCtx.Err() != nil {
				break
			}
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-stop:
			case <-drainCtx.Done():
			}
			timer.Stop()
			wait = min(2*wait, s.cfg.MaxBackoff)
			continue
		}
		if failing {
			s.logger.Info("send-succeeded-again")
			failing = false
		}
		wait = s.cfg.MinBackoff
		s.delivered()
	}
	if st := s.Stats(); st.Buffered > 0 {
		s.logger.Info("stopped-with-undelivered", lager.Data{"envelopes": st.Buffered, "bytes": st.BufferedBytes})
	}
	return ctx.Err()
}

// next is the batch in flight, or a new one taken from the queues in turn: each queue, on its
// turn, gets a quantum of bytes more and puts in its envelopes while they fit in what it has
// (deficit round robin). A batch that fills up mid-turn leaves that queue's turn open for the
// next batch. It is the EnvelopeBatch in protobuf's wire format (each envelope as its field
// batch), and n its envelopes.
func (s *Sender) next() (batch []byte, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.inflight) == 0 {
		s.fill()
	}
	b := s.batch[:0]
	for _, e := range s.inflight {
		b = protowire.AppendTag(b, batchField, protowire.BytesType)
		b = protowire.AppendBytes(b, e.raw)
	}
	s.batch = b
	return b, len(s.inflight)
}

// batchField is EnvelopeBatch's field batch (repeated Envelope).
const batchField protowire.Number = 1

// encodedBatch is an EnvelopeBatch already in protobuf's wire format.
type encodedBatch []byte

// batchCodec sends an encodedBatch as it is and decodes the reply with gRPC's protobuf codec.
type batchCodec struct{}

func (batchCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(encodedBatch); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return encoding.GetCodecV2(grpcproto.Name).Marshal(v)
}

func (batchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(grpcproto.Name).Unmarshal(data, v)
}

func (batchCodec) Name() string { return grpcproto.Name }

// fill takes a batch from the queues into s.inflight; s.mu is held.
func (s *Sender) fill() {
	bytes := 0
	for len(s.turns) > 0 {
		q := s.turns[0]
		if !q.granted {
			q.deficit += s.cfg.Quantum
			q.granted = true
		}
		for len(q.entries) > 0 && len(q.entries[0].raw) <= q.deficit {
			e := q.entries[0]
			size := len(e.raw)
			if len(s.inflight) == s.cfg.MaxBatchEnvelopes || (len(s.inflight) > 0 && bytes+size > s.cfg.MaxBatchBytes) {
				return
			}
			s.inflight = append(s.inflight, e)
			bytes += size
			q.deficit -= size
			q.entries[0] = entry{} // the envelope is not kept alive by the queue's array
			q.entries = q.entries[1:]
		}
		q.granted = false
		s.turns[0] = nil
		s.turns = s.turns[1:]
		if len(q.entries) > 0 {
			s.turns = append(s.turns, q)
		} else {
			// An empty queue keeps no credit (it would let it burst later) and no memory.
			delete(s.queues, q.key)
		}
	}
}

func (s *Sender) delivered() {
	s.mu.Lock()
	n := len(s.inflight)
	acks := make([]func(), 0, n)
	for i, e := range s.inflight {
		s.bytes -= len(e.raw)
		if e.ack != nil {
			acks = append(acks, e.ack)
		}
		s.inflight[i] = entry{}
	}
	s.inflight = s.inflight[:0]
	s.count -= n
	s.stats.Delivered += uint64(n)
	close(s.room)
	s.room = make(chan struct{})
	s.mu.Unlock()
	for _, ack := range acks {
		ack()
	}
}

// Close closes the connection.
func (s *Sender) Close() error { return s.conn.Close() }
