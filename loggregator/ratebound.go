package loggregator

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// NoticeInterval is the least time between two notices of one container: Diego's log streamer
// reports an instance over its bound at most once a second.
const NoticeInterval = time.Second

// RateBoundConfig is the bound every followed container gets: bytes of log text and lines per
// second, each with its burst (the most a container may send at once after a quiet spell).
type RateBoundConfig struct {
	BytesPerSecond int64
	ByteBurst      int64
	LinesPerSecond float64
	LineBurst      int
}

func (c RateBoundConfig) validate() error {
	var errs []error
	if c.BytesPerSecond <= 0 || c.ByteBurst < 1 {
		errs = append(errs, fmt.Errorf("bytes per second (%d) must be above 0 and the byte burst (%d) at least 1", c.BytesPerSecond, c.ByteBurst))
	}
	if c.LinesPerSecond <= 0 || c.LineBurst < 1 {
		errs = append(errs, fmt.Errorf("lines per second (%g) must be above 0 and the line burst (%d) at least 1", c.LinesPerSecond, c.LineBurst))
	}
	return errors.Join(errs...)
}

// RateBound bounds each followed container's log lines with two token buckets, bytes of text
// and lines per second, as Diego bounds an instance (CC's log_rate_limit_in_bytes_per_second),
// so that one noisy container cannot crowd the others out of the node's send buffer. Admit is
// called before anything is built for a line, so a refused line costs a map lookup. A container
// is known by its pod uid and container name: tasks and instances never share a bucket, and a
// container that goes (Forget) leaves every other's untouched. Safe for concurrent use.
type RateBound struct {
	cfg RateBoundConfig

	mu         sync.Mutex
	containers map[string]*bucket
	dropped    uint64
}

type bucket struct {
	bytes, lines *rate.Limiter
	noticed      time.Time // when the last notice was handed out
}

// NewRateBound bounds every container as cfg says.
func NewRateBound(cfg RateBoundConfig) (*RateBound, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("log rate bound: %w", err)
	}
	return &RateBound{cfg: cfg, containers: map[string]*bucket{}}, nil
}

// ContainerKey is the key of a container's bucket: its pod's uid and its name.
func ContainerKey(podUID, container string) string { return podUID + "/" + container }

// Admit says whether a line of size bytes of container key, read at now, may go out. A refused
// line is counted; notice is then the line to put in the container's own stream, Diego's
// words, or "" when a notice went out less than NoticeInterval ago. A line larger than the byte
// burst passes when the bucket is full (it takes all of it), so no line is refused forever.
func (b *RateBound) Admit(key string, size int, now time.Time) (ok bool, notice string) {
	cost := min(int64(size), b.cfg.ByteBurst)
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.containers[key]
	if c == nil {
		c = &bucket{
			bytes: rate.NewLimiter(rate.Limit(b.cfg.BytesPerSecond), int(b.cfg.ByteBurst)),
			lines: rate.NewLimiter(rate.Limit(b.cfg.LinesPerSecond), b.cfg.LineBurst),
		}
		b.containers[key] = c
	}
	// Both buckets are checked before either is charged: a refused line costs no tokens.
	bytesOK := c.bytes.TokensAt(now) >= float64(cost)
	linesOK := c.lines.TokensAt(now) >= 1
	if bytesOK && linesOK {
		c.bytes.AllowN(now, int(cost))
		c.lines.AllowN(now, 1)
		return true, ""
	}
	b.dropped++
	if !c.noticed.IsZero() && now.Sub(c.noticed) < NoticeInterval {
		return false, ""
	}
	c.noticed = now
	if !bytesOK {
		return false, fmt.Sprintf("app instance exceeded log rate limit (%d bytes/sec)", b.cfg.BytesPerSecond)
	}
	return false, fmt.Sprintf("app instance exceeded log rate limit (%g log-lines/sec) set by platform operator", b.cfg.LinesPerSecond)
}

// Forget drops the bucket of container key (it is gone).
func (b *RateBound) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.containers, key)
}

// Dropped counts every line refused so far, of all containers.
func (b *RateBound) Dropped() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}
