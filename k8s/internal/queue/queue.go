// Package queue is the work-queue loop the task reporter, the staging worker and the crash
// reporter share: a typed rate-limited workqueue that an informer's handlers feed (Add), worked
// off by a number of workers until the context ends (k8s/README.md, "Packages and the rules
// that make them last": layer 1). Each loop keeps its own rate limiter, worker count, handlers
// and logs; the helper knows nothing of opi's types.
package queue

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
)

// Process handles one key. An error puts the key back, rate-limited; otherwise the key's
// failures are forgotten, and a positive after brings the key back once that long has passed.
type Process[K comparable] func(ctx context.Context, key K) (after time.Duration, err error)

// Config is one loop's settings.
type Config[K comparable] struct {
	// Name names the queue (its metrics).
	Name string
	// Workers is how many keys are processed at once (at least one).
	Workers int
	// RateLimiter spaces the retries of a key whose processing failed.
	RateLimiter workqueue.TypedRateLimiter[K]
	// OnError, when set, is told of every failed processing before its key is put back (ctx
	// is the loop's, so that it can tell an error of the ending leadership from others).
	OnError func(ctx context.Context, key K, err error)
}

// Queue is one loop's queue of keys.
type Queue[K comparable] struct {
	cfg   Config[K]
	queue workqueue.TypedRateLimitingInterface[K]
}

// New makes the loop's queue; its handlers may Add to it at once, Run works it off.
func New[K comparable](cfg Config[K]) *Queue[K] {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[K]()
	}
	return &Queue[K]{
		cfg: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(cfg.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[K]{Name: cfg.Name}),
	}
}

// Add queues key (once: a key queued already, or being processed, is not queued twice).
func (q *Queue[K]) Add(key K) {
	q.queue.Add(key)
}

// ShutDown stops the queue without running it (a loop that gives up before Run); Run shuts it
// down itself.
func (q *Queue[K]) ShutDown() {
	q.queue.ShutDown()
}

// Run processes keys with the configured number of workers until ctx ends, then shuts the
// queue down and returns once every worker has finished its key. A key handed out after ctx
// ended (a shut-down queue still hands out what it holds) is not processed: it is the next
// leader's.
func (q *Queue[K]) Run(ctx context.Context, process Process[K]) {
	var wg sync.WaitGroup
	for range q.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for q.processNext(ctx, process) {
				}
			}, time.Second)
		}()
	}
	<-ctx.Done()
	q.queue.ShutDown()
	wg.Wait()
}

// processNext handles one queued key; false once the queue is shut down and empty.
func (q *Queue[K]) processNext(ctx context.Context, process Process[K]) bool {
	key, shutdown := q.queue.Get()
	if shutdown {
		return false
	}
	defer q.queue.Done(key)
	if ctx.Err() != nil {
		return true
	}
	after, err := process(ctx, key)
	switch {
	case err != nil:
		if q.cfg.OnError != nil {
			q.cfg.OnError(ctx, key, err)
		}
		q.queue.AddRateLimited(key)
	case after > 0:
		q.queue.Forget(key)
		q.queue.AddAfter(key, after)
	default:
		q.queue.Forget(key)
	}
	return true
}
