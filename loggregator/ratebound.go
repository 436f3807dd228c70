package loggregator

import (
	"fmt"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"golang.org/x/time/rate"
)

// RateBound bounds each instance's log lines with a token bucket (lines per second, burst), so
// one noisy instance cannot starve the others on a node. Lines over the bound are dropped and
// counted; the instance's first line under the bound again is preceded by one notice line in
// its own stream saying how many were dropped. Safe for concurrent use.
type RateBound struct {
	limit rate.Limit
	burst int

	mu        sync.Mutex
	instances map[string]*instanceBucket
	dropped   uint64
}

type instanceBucket struct {
	limiter *rate.Limiter
	dropped uint64
}

// NewRateBound bounds every instance to linesPerSecond with bursts of burst lines.
func NewRateBound(linesPerSecond float64, burst int) (*RateBound, error) {
	if linesPerSecond <= 0 || burst < 1 {
		return nil, fmt.Errorf("log rate bound: lines per second (%g) must be above 0 and burst (%d) at least 1", linesPerSecond, burst)
	}
	return &RateBound{limit: rate.Limit(linesPerSecond), burst: burst, instances: map[string]*instanceBucket{}}, nil
}

// Admit says whether a line of instance key, read at now, may go out; if it may and lines of
// the instance were dropped before it, dropped is how many (send DropNotice first).
func (b *RateBound) Admit(key string, now time.Time) (ok bool, dropped uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	inst := b.instances[key]
	if inst == nil {
		inst = &instanceBucket{limiter: rate.NewLimiter(b.limit, b.burst)}
		b.instances[key] = inst
	}
	if !inst.limiter.AllowN(now, 1) {
		inst.dropped++
		b.dropped++
		return false, 0
	}
	dropped, inst.dropped = inst.dropped, 0
	return true, dropped
}

// Log applies the bound to one log envelope of id: it returns what to send, in order: nothing
// (dropped), the envelope, or a notice (ERR, stamped now) and the envelope.
func (b *RateBound) Log(id Identity, env *loggregator_v2.Envelope, now time.Time) []*loggregator_v2.Envelope {
	ok, dropped := b.Admit(id.SourceID+"/"+id.InstanceID, now)
	switch {
	case !ok:
		return nil
	case dropped > 0:
		notice := NewLog(id, now, loggregator_v2.Log_ERR, []byte(b.DropNotice(dropped)))
		return []*loggregator_v2.Envelope{notice, env}
	default:
		return []*loggregator_v2.Envelope{env}
	}
}

// DropNotice is the notice line for n dropped lines.
func (b *RateBound) DropNotice(n uint64) string {
	lines := "lines"
	if n == 1 {
		lines = "line"
	}
	return fmt.Sprintf("opi: %d log %s dropped: this instance wrote more than %g lines per second (bursts of %d)", n, lines, float64(b.limit), b.burst)
}

// Forget drops the state of instance key (it is gone); lines it dropped are not reported.
func (b *RateBound) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.instances, key)
}

// Dropped counts every line dropped so far, of all instances.
func (b *RateBound) Dropped() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}
