package handler

import (
	"context"
	"sync"
	"time"
)

// ReadinessPeriod is how long a readiness check's result answers /readyz: however many probes
// arrive (the ops port is unauthenticated), the API server sees at most one readiness request a
// second from each opi, through the same client rate limiter as CC's writes.
const ReadinessPeriod = time.Second

// CachedReadiness answers Ready from the last check of Checker while it is younger than
// Period, and checks again (one caller checks, the others wait for its result) once it is
// older. One CachedReadiness serves both the API's and the ops port's /readyz.
type CachedReadiness struct {
	Checker ReadinessChecker
	// Period is how long a result is reused; ReadinessPeriod when 0.
	Period time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu      sync.Mutex
	checked time.Time // when err was found; zero: never
	err     error
}

// NewCachedReadiness caches checker's answers for ReadinessPeriod.
func NewCachedReadiness(checker ReadinessChecker) *CachedReadiness {
	return &CachedReadiness{Checker: checker}
}

// cachedReadiness is checker itself when it caches already, else checker cached.
func cachedReadiness(checker ReadinessChecker) ReadinessChecker {
	if checker == nil {
		return nil
	}
	if c, ok := checker.(*CachedReadiness); ok {
		return c
	}
	return NewCachedReadiness(checker)
}

// Ready is the last result when it is recent enough, else a new check's. The check does not end
// with the probe that started it (a probe that gave up would make every waiting one fail), only
// at readyTimeout.
func (c *CachedReadiness) Ready(ctx context.Context) error {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	period := c.Period
	if period <= 0 {
		period = ReadinessPeriod
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checked.IsZero() && now().Sub(c.checked) < period {
		return c.err
	}
	checkCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	defer cancel()
	c.err = c.Checker.Ready(checkCtx)
	c.checked = now()
	return c.err
}
