// Package routeobjects keeps the route objects of routing modes ingress and gateway (the
// leader's work "route-objects"). A route is shared: every LRP of a space that carries a
// hostname and path (the old and the new web process of a rolling deploy, two apps of a
// blue-green switch) is served by the same objects, so that requests spread over every Ready
// instance of all of them:
//
//   - per (space, hostname), one Ingress (ingress mode) or one HTTPRoute (gateway mode), named
//     after the route key (names.RouteKey), with one rule per path;
//   - per (space, hostname, path), one Service without a selector: the rule's one backend;
//   - per LRP carrying that path, EndpointSlices of that Service listing the LRP's Ready
//     instances, on the LRP's own port for the route.
//
// No pod carries a route label (a route update must not restart instances): the endpoints are
// opi's, kept from the store's pods as the control plane keeps a selector's. The objects
// belong to no LRP: a route's objects stay while one LRP of the space carries it (with no
// endpoints while none is Ready) and go with the last. Objects are compared with informers of
// their own (route objects only) and written only where they differ, so an object deleted or
// edited behind opi's back is put back, and a new leader takes over what the last one left.
// What the term wrote stands in for the cache's look until the informer's event of it arrives
// (recent.go): under a burst the caches run a moment behind, and a sync in that moment would
// otherwise send the same write again, to be refused.
package routeobjects

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/queue"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Cache is what the controller reads of the store (package k8s/internal/store's *Store).
type Cache interface {
	Workload(id opi.LRPIdentifier) *store.WorkloadRecord
	Workloads() []*store.WorkloadRecord
	Pods(id opi.LRPIdentifier) []*store.PodRecord
	store.LRPEvents
}

// Config is the controller's namespace and the routing settings (mode ingress or gateway).
type Config struct {
	Namespace string
	Routing   hooks.RoutingOptions
	// HeadlessServices gives the route Services no cluster IP, as the LRPs' own (the routers
	// reach the endpoints; see hooks.Options.HeadlessServices).
	HeadlessServices bool
}

// Deps are what the controller is handed; Gateway is needed in gateway mode only.
type Deps struct {
	Client  kubernetes.Interface
	Gateway gateway.Interface
	Cache   Cache
}

// Controller keeps the route objects in step with the store's workloads and pods.
type Controller struct {
	cfg     Config
	client  kubernetes.Interface
	gateway gateway.Interface
	cache   Cache
	logger  lager.Logger

	// enqueue (its queue's Add) and objects are the running term's (set by Run before it
	// processes a key).
	enqueue func(key string)
	objects *informed
	// refused spaces the retries of queue keys whose writes were refused as if the cache were
	// behind (see process); a term starts afresh.
	refused workqueue.TypedRateLimiter[string]

	mu sync.Mutex
	// groups are the routes' (space, hostname) groups by route key, and the LRPs carrying
	// each; keysOf the route keys each LRP (by its lrp key) carries, as last indexed.
	groups map[string]*group
	keysOf map[string][]string

	// keyLocks keep a route key's whole sync apart from the syncs of its LRPs' slices (which
	// run on queue keys of their own, and touch only their own LRP's slices, so they run side
	// by side), striped by route key.
	keyLocks [16]sync.RWMutex
}

// group is one (space, hostname), the LRPs that carry a route of it with the paths each
// carries, and how many of them carry each path: what the route's Services and its Ingress or
// HTTPRoute follow (an LRP's port and instances are in its own EndpointSlices only).
type group struct {
	space, host string
	lrps        map[string][]string
	paths       map[string]int
}

// Makes says whether routing mode mode has route objects (the controller runs only then).
func Makes(mode string) bool { return mode == hooks.RoutingIngress || mode == hooks.RoutingGateway }

// New makes the controller of cfg's routing mode, which must be ingress or gateway.
func New(logger lager.Logger, cfg Config, deps Deps) (*Controller, error) {
	switch {
	case !Makes(cfg.Routing.Mode):
		return nil, fmt.Errorf("route objects are for routing modes ingress and gateway, not %q", cfg.Routing.Mode)
	case deps.Client == nil || deps.Cache == nil:
		return nil, errors.New("route objects need a kubernetes client and the cache")
	case cfg.Routing.Mode == hooks.RoutingGateway && deps.Gateway == nil:
		return nil, errors.New("route objects of gateway mode need a Gateway API client")
	}
	if cfg.Routing.GatewayNamespace == "" {
		cfg.Routing.GatewayNamespace = cfg.Namespace
	}
	return &Controller{cfg: cfg, client: deps.Client, gateway: deps.Gateway, cache: deps.Cache,
		logger: logger.Session("route-objects", lager.Data{"routing": cfg.Routing.Mode}),
		groups: map[string]*group{}, keysOf: map[string][]string{}, refused: newRefusedDelays()}, nil
}

// syncWorkers is how many queue keys the controller syncs at once.
const syncWorkers = 16

// Queue keys: an LRP to index again ("lrp:<lrp key>"), a route key to sync whole
// ("route:<key>"), or one LRP's EndpointSlices of a route key ("slices:<key>/<lrp key>"; a route
// key has no "/"). A change that leaves a route's set of paths as it was (an instance Ready or
// not, a port, one more or one less carrier of the same paths) touches that LRP's slices only,
// so that its cost does not grow with the route's carriers.
const (
	lrpPrefix    = "lrp:"
	routePrefix  = "route:"
	slicesPrefix = "slices:"
)

// slicesQueueKey is the queue key syncing lrpKey's EndpointSlices of route key.
func slicesQueueKey(key, lrpKey string) string { return slicesPrefix + key + "/" + lrpKey }

// Run is the leader work: it starts informers on the route objects, indexes every cached
// workload's routes before it looks at any route (a route key whose carriers are not indexed
// yet would look carried by none, and its objects would be deleted), then syncs every route
// key the workloads carry or the objects name, and follows every change of the workloads, the
// pods and the route objects until ctx ends. The store must be synced.
func (c *Controller) Run(ctx context.Context) {
	q := queue.New(queue.Config[string]{
		Name: "route-objects",
		// Most syncs are one LRP's slices, a write or two each: during a burst of desires
		// and instances going Ready, many run side by side (as the routes leader's).
		Workers:     syncWorkers,
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string](),
		OnError: func(ctx context.Context, key string, err error) {
			if ctx.Err() == nil {
				c.logger.Error("sync", err, lager.Data{"key": key})
			}
		},
	})
	// A term indexes afresh: what a past term indexed may have changed since.
	c.mu.Lock()
	c.groups, c.keysOf = map[string]*group{}, map[string][]string{}
	c.mu.Unlock()
	objects, err := c.informers(ctx, q.Add)
	if err != nil {
		c.logger.Error("start-informers", err)
		q.ShutDown()
		return
	}
	stop, err := store.FollowLRPs(c.cache, func(lrpKey string) { q.Add(lrpPrefix + lrpKey) })
	if err != nil {
		c.logger.Error("add-event-handler", err)
		q.ShutDown()
		return
	}
	defer stop()
	for _, w := range c.cache.Workloads() {
		whole, _ := c.index(w.LRPKey())
		for _, key := range whole {
			q.Add(routePrefix + key)
		}
	}
	for _, key := range objects.keys() {
		q.Add(routePrefix + key)
	}
	c.enqueue, c.objects, c.refused = q.Add, objects, newRefusedDelays()
	c.logger.Info("started")
	q.Run(ctx, c.process)
	c.logger.Info("stopped")
}

// process syncs queue key key. A write refused as if the cache were behind (refusedAsBehind)
// is no error: the key comes back after a second, then after twice as long each time it is
// refused again (up to refusedMaxDelay), logged at debug the first time (the cache may be a
// moment behind another's write; this term's own writes stand in for the cache until their
// events, see recent) and at info while it persists, naming the object; a sync that goes
// through resets the delay.
func (c *Controller) process(ctx context.Context, key string) (time.Duration, error) {
	err := c.processKey(ctx, key)
	if err == nil || !refusedAsBehind(err) {
		c.refused.Forget(key)
		return 0, err
	}
	retries := c.refused.NumRequeues(key)
	after := c.refused.When(key)
	log := c.logger.Debug
	if retries > 0 {
		log = c.logger.Info
	}
	log("write-refused-retrying", lager.Data{"key": key, "error": err.Error(), "retries": retries, "retry-in": after.String()})
	return after, nil
}

// The delays of a queue key whose writes are refused as if the cache were behind.
const (
	refusedFirstDelay = time.Second
	refusedMaxDelay   = 5 * time.Minute
)

func newRefusedDelays() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](refusedFirstDelay, refusedMaxDelay)
}

func (c *Controller) processKey(ctx context.Context, key string) error {
	if lrpKey, ok := strings.CutPrefix(key, lrpPrefix); ok {
		whole, own := c.index(lrpKey)
		for _, k := range whole {
			c.enqueue(routePrefix + k)
		}
		for _, k := range own {
			c.enqueue(slicesQueueKey(k, lrpKey))
		}
		return nil
	}
	if rest, ok := strings.CutPrefix(key, slicesPrefix); ok {
		routeKey, lrpKey, _ := strings.Cut(rest, "/")
		return c.syncSlices(ctx, routeKey, lrpKey)
	}
	return c.sync(ctx, strings.TrimPrefix(key, routePrefix))
}

// lockKey holds route key's lock, for the whole route alone (whole) or for one LRP's slices;
// the func it returns lets it go.
func (c *Controller) lockKey(key string, whole bool) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	m := &c.keyLocks[h.Sum32()%uint32(len(c.keyLocks))]
	if whole {
		m.Lock()
		return m.Unlock
	}
	m.RLock()
	return m.RUnlock
}

// index brings lrpKey's route keys in the groups in line with its cached workload. It returns
// the route keys it carried or carries in two lists: whole, those whose set of paths changed
// (the group came or went, a path gained its first or lost its last carrier), which need their
// Services and Ingress or HTTPRoute synced; own, the others, where only the LRP's own
// EndpointSlices may change.
func (c *Controller) index(lrpKey string) (whole, own []string) {
	if lrpKey == "" {
		return nil, nil
	}
	now := map[string][]string{} // route key -> the paths carried
	hosts := map[string]string{} // route key -> hostname
	var space string
	if w := c.cache.Workload(store.LRPFromKey(lrpKey)); w != nil && w.DeletionTimestamp == nil {
		space = w.SpaceGUID
		for _, r := range w.Routes() {
			host, path := hooks.SplitRoute(r)
			key := names.RouteKey(space, host)
			hosts[key] = host
			if !slices.Contains(now[key], path) {
				now[key] = append(now[key], path)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	had := c.keysOf[lrpKey]
	keys := make([]string, 0, len(now))
	for key := range now {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	touched := append(slices.Clone(had), keys...)
	slices.Sort(touched)
	for _, key := range slices.Compact(touched) {
		g := c.groups[key]
		paths, carries := now[key]
		if g == nil {
			if !carries {
				continue
			}
			g = &group{space: space, host: hosts[key], lrps: map[string][]string{}, paths: map[string]int{}}
			c.groups[key] = g
		}
		// The new paths are counted before the old are let go, so that a path carried before
		// and after never looks gone.
		changed := false
		slices.Sort(paths)
		for _, p := range paths {
			if g.paths[p]++; g.paths[p] == 1 {
				changed = true
			}
		}
		for _, p := range g.lrps[lrpKey] {
			if g.paths[p]--; g.paths[p] == 0 {
				delete(g.paths, p)
				changed = true
			}
		}
		if carries {
			g.lrps[lrpKey] = paths
		} else {
			delete(g.lrps, lrpKey)
		}
		if len(g.lrps) == 0 {
			delete(c.groups, key)
			changed = true
		}
		if changed {
			whole = append(whole, key)
		} else {
			own = append(own, key)
		}
	}
	if len(keys) == 0 {
		delete(c.keysOf, lrpKey)
	} else {
		c.keysOf[lrpKey] = keys
	}
	return whole, own
}

// carriers is the space, hostname and carrying LRPs (sorted) of route key, as indexed.
func (c *Controller) carriers(key string) (space, host string, lrps []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[key]
	if g == nil {
		return "", "", nil
	}
	for lrpKey := range g.lrps {
		lrps = append(lrps, lrpKey)
	}
	slices.Sort(lrps)
	return g.space, g.host, lrps
}

// carrierOf is the space and hostname of route key, as indexed, and whether lrpKey carries it.
func (c *Controller) carrierOf(key, lrpKey string) (space, host string, carries bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[key]
	if g == nil {
		return "", "", false
	}
	_, carries = g.lrps[lrpKey]
	return g.space, g.host, carries
}
