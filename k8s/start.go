package k8s

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// DefaultCacheSyncTimeout is how long Start waits for its caches before it says the sync is
// slow. Syncing thousands of apps takes seconds (docs/benchmarks.md), so a minute means the API
// server is struggling or opi may not list; it is also Cloud Controller's own client timeout,
// so by then CC has seen its first requests answered 503.
const DefaultCacheSyncTimeout = time.Minute

// cacheSyncRecheck is how often, once past the timeout, Start checks again and logs.
const cacheSyncRecheck = 30 * time.Second

// hookRetryInterval is how long Start waits before it retries a hook's namespace-wide objects
// when the API server was unavailable.
const hookRetryInterval = 2 * time.Second

// startCallTimeout bounds each API call Start makes itself (a list check, a hook's try): a hung
// API server must not hold start-up past the next check.
const startCallTimeout = 30 * time.Second

// syncPatience is how Start waits for its caches: first check after timeout, then every
// recheck; a hook's start-up objects are retried every hookRetry.
type syncPatience struct {
	timeout, recheck, hookRetry time.Duration
}

// Start runs the namespace's workload (Deployment or StatefulSet), Pod and Job informers (only
// objects with opi's source labels) until ctx ends, waits until their caches are synced, and
// lets every hook make its namespace-wide objects (the baseline network policy). Reads are
// served from these caches only; until Start has finished every call answers ErrUnavailable.
//
// A slow sync is not an error: at Options.CacheSyncTimeout, and every cacheSyncRecheck after,
// Start logs cache-sync-slow and goes on waiting (a LIST of 10,000 workloads on a loaded API
// server can take minutes, and giving up would restart it from nothing). It returns an error
// only when ctx ends or for what waiting cannot mend: opi may not list what it caches (RBAC), or
// a hook's start-up failed for a reason other than an unavailable API server.
// Background work (the janitor, the reporters) is not started here: see RunLeaderWork.
func (b *Backend) Start(ctx context.Context) error {
	if b.started.Swap(true) {
		return errors.New("backend already started")
	}
	logger := b.logger.Session("start")
	began := time.Now()
	b.factory.StartWithContext(ctx)
	if err := b.waitForCaches(ctx, logger, began); err != nil {
		return err
	}
	if err := b.startHooks(ctx, logger); err != nil {
		return err
	}
	b.store.SetSynced()
	logger.Info("caches-synced", lager.Data{"took": time.Since(began).Round(time.Millisecond).String()})
	return nil
}

// waitForCaches waits until every informer has synced or ctx ends, checking at each deadline
// that opi may list what is still unsynced.
func (b *Backend) waitForCaches(ctx context.Context, logger lager.Logger, began time.Time) error {
	patience := b.cacheSync.timeout
	for {
		waitCtx, cancel := context.WithTimeout(ctx, patience)
		err := b.factory.WaitForCacheSyncWithContext(waitCtx).AsError()
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("sync informer caches: %w: %w", opi.ErrUnavailable, err)
		}
		checks, refused := b.checkLists(ctx)
		if refused != nil {
			return refused
		}
		logger.Error("cache-sync-slow", err, lager.Data{
			"waited":     time.Since(began).Round(time.Second).String(),
			"list-check": checks,
			"meanwhile":  "opi keeps waiting: calls answer 503 and /readyz is not ready until the caches are synced",
			"next-check": b.cacheSync.recheck.String(),
		})
		patience = b.cacheSync.recheck
	}
}

// cachedKind is one informer's resource and a cheap LIST of it (one object at most).
type cachedKind struct {
	resource string
	informer cache.SharedIndexInformer
	list     func(ctx context.Context) error
}

func (b *Backend) cachedKinds() []cachedKind {
	apps := metav1.ListOptions{LabelSelector: names.AppSelector, Limit: 1}
	tasks := metav1.ListOptions{LabelSelector: names.TaskSelector, Limit: 1}
	return []cachedKind{
		{b.cached[0], b.workloads, func(ctx context.Context) error {
			_, err := b.listWorkloads(ctx, apps)
			return err
		}},
		{b.cached[1], b.pods, func(ctx context.Context) error {
			_, err := b.client.CoreV1().Pods(b.namespace).List(ctx, apps)
			return err
		}},
		{b.cached[2], b.jobs, func(ctx context.Context) error {
			_, err := b.client.BatchV1().Jobs(b.namespace).List(ctx, tasks)
			return err
		}},
	}
}

// checkLists lists (one object) each resource whose cache has not synced yet, to tell a LIST that
// is slow from one that is refused. It returns what each check found and, when a LIST is
// forbidden, the error to stop on: RBAC does not change by waiting.
func (b *Backend) checkLists(ctx context.Context) (map[string]string, error) {
	checks := map[string]string{}
	for _, k := range b.cachedKinds() {
		if k.informer.HasSynced() {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, startCallTimeout)
		err := k.list(callCtx)
		cancel()
		switch {
		case err == nil:
			checks[k.resource] = "listable: the cache is still loading"
		case kube.Classify(err) == kube.KindForbidden:
			return nil, fmt.Errorf("list %s in namespace %q: not allowed; grant opi's service account list and watch on %s there (deploy/rbac.yaml): %w",
				k.resource, b.namespace, k.resource, err)
		default:
			checks[k.resource] = err.Error()
		}
	}
	return checks, nil
}

// startHooks lets every hook make its namespace-wide objects, retrying while the API server is
// unavailable: an outage at start-up is waited out, as the caches are.
func (b *Backend) startHooks(ctx context.Context, logger lager.Logger) error {
	for _, h := range b.hooks.Starters() {
		var last error
		err := wait.PollUntilContextCancel(ctx, b.cacheSync.hookRetry, true, func(ctx context.Context) (bool, error) {
			callCtx, cancel := context.WithTimeout(ctx, startCallTimeout)
			defer cancel()
			last = h.Start(callCtx)
			if last != nil && kube.IsUnavailable(last) && ctx.Err() == nil {
				logger.Info("hook-start-retrying", lager.Data{"hook": h.Name(), "reason": last.Error()})
				return false, nil
			}
			return true, last
		})
		if err != nil {
			return kube.APIError(cmp.Or(last, err), "start "+h.Name())
		}
	}
	return nil
}
