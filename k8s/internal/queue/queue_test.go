package queue_test

import (
	"context"
	"errors"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/workqueue"

	"github.com/opi-bridge/opi/k8s/internal/queue"
)

// recorder keeps the keys a loop processed, in order.
type recorder struct {
	mu   sync.Mutex
	keys []string
}

func (r *recorder) add(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
}

func (r *recorder) processed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

var _ = Describe("Queue", func() {
	var (
		ctx    context.Context
		cancel context.CancelFunc
		done   chan struct{}
		rec    *recorder
	)

	fastRetries := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond)
	}

	run := func(q *queue.Queue[string], process queue.Process[string]) {
		done = make(chan struct{})
		go func() {
			defer close(done)
			q.Run(ctx, process)
		}()
	}

	BeforeEach(func() {
		ctx, cancel = context.WithCancel(context.Background())
		rec = &recorder{}
		done = nil
	})

	AfterEach(func() {
		cancel()
		if done != nil {
			Eventually(done).Should(BeClosed())
		}
	})

	It("processes a key added before and after it runs", func() {
		q := queue.New(queue.Config[string]{Name: "test", Workers: 2, RateLimiter: fastRetries()})
		q.Add("before")
		run(q, func(_ context.Context, key string) (time.Duration, error) {
			rec.add(key)
			return 0, nil
		})
		q.Add("after")
		Eventually(rec.processed).Should(ConsistOf("before", "after"))
		Consistently(rec.processed, "50ms").Should(HaveLen(2))
	})

	It("retries a key whose processing failed, telling OnError, until it succeeds", func() {
		var mu sync.Mutex
		var errs []string
		q := queue.New(queue.Config[string]{Name: "test", Workers: 1, RateLimiter: fastRetries(),
			OnError: func(_ context.Context, key string, err error) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, key+": "+err.Error())
			}})
		failures := 2
		run(q, func(_ context.Context, key string) (time.Duration, error) {
			rec.add(key)
			if failures > 0 {
				failures--
				return 0, errors.New("not yet")
			}
			return 0, nil
		})
		q.Add("k")
		Eventually(rec.processed).Should(Equal([]string{"k", "k", "k"}))
		Consistently(rec.processed, "50ms").Should(HaveLen(3))
		mu.Lock()
		defer mu.Unlock()
		Expect(errs).To(Equal([]string{"k: not yet", "k: not yet"}))
	})

	It("brings a key back once the time its processing asked for has passed", func() {
		q := queue.New(queue.Config[string]{Name: "test", Workers: 1, RateLimiter: fastRetries()})
		turns := 0
		run(q, func(_ context.Context, key string) (time.Duration, error) {
			rec.add(key)
			turns++
			if turns == 1 {
				return time.Millisecond, nil
			}
			return 0, nil
		})
		q.Add("k")
		Eventually(rec.processed).Should(Equal([]string{"k", "k"}))
		Consistently(rec.processed, "50ms").Should(HaveLen(2))
	})

	It("stops its workers when ctx ends and hands them no key queued after it", func() {
		q := queue.New(queue.Config[string]{Name: "test", Workers: 1, RateLimiter: fastRetries()})
		started := make(chan struct{})
		run(q, func(ctx context.Context, key string) (time.Duration, error) {
			rec.add(key)
			if key == "first" {
				close(started)
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return 0, nil
		})
		q.Add("first")
		Eventually(started).Should(BeClosed())
		q.Add("second") // queued while the only worker is busy: the shut-down queue still holds it
		cancel()
		Eventually(done).Should(BeClosed())
		Expect(rec.processed()).To(Equal([]string{"first"}))
	})

	It("shuts down without running", func() {
		q := queue.New(queue.Config[string]{Name: "test"})
		q.Add("k")
		q.ShutDown()
		cancel()
		run(q, func(_ context.Context, key string) (time.Duration, error) {
			rec.add(key)
			return 0, nil
		})
		Eventually(done).Should(BeClosed())
		Expect(rec.processed()).To(BeEmpty())
	})
})
