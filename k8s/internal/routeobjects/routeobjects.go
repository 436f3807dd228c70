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
package routeobjects

import (
	"context"
	"errors"
	"fmt"
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

	// queue and objects are the running term's (set by Run before it processes a key).
	queue   *queue.Queue[string]
	objects *informed

	mu sync.Mutex
	// groups are the routes' (space, hostname) groups by route key, and the LRPs carrying
	// each; keysOf the route keys each LRP (by its lrp key) carries, as last indexed.
	groups map[string]*group
	keysOf map[string][]string
}

// group is one (space, hostname) and the LRPs that carry a route of it.
type group struct {
	space, host string
	lrps        map[string]struct{}
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
		groups: map[string]*group{}, keysOf: map[string][]string{}}, nil
}

// Queue keys: an LRP to index again ("lrp:<lrp key>") or a route key to sync ("route:<key>").
const (
	lrpPrefix   = "lrp:"
	routePrefix = "route:"
)

// Run is the leader work: it starts informers on the route objects, indexes every cached
// workload's routes before it looks at any route (a route key whose carriers are not indexed
// yet would look carried by none, and its objects would be deleted), then syncs every route
// key the workloads carry or the objects name, and follows every change of the workloads, the
// pods and the route objects until ctx ends. The store must be synced.
func (c *Controller) Run(ctx context.Context) {
	q := queue.New(queue.Config[string]{
		Name:        "route-objects",
		Workers:     2,
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
	objects, err := c.informers(ctx, func(key string) { q.Add(routePrefix + key) })
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
		for _, key := range c.index(w.LRPKey()) {
			q.Add(routePrefix + key)
		}
	}
	for _, key := range objects.keys() {
		q.Add(routePrefix + key)
	}
	c.queue, c.objects = q, objects
	c.logger.Info("started")
	q.Run(ctx, c.process)
	c.logger.Info("stopped")
}

func (c *Controller) process(ctx context.Context, key string) (time.Duration, error) {
	if lrpKey, ok := strings.CutPrefix(key, lrpPrefix); ok {
		for _, k := range c.index(lrpKey) {
			c.queue.Add(routePrefix + k)
		}
		return 0, nil
	}
	return 0, c.sync(ctx, strings.TrimPrefix(key, routePrefix))
}

// index brings lrpKey's route keys in the groups in line with its cached workload, and returns
// every key it carried or carries: the routes whose objects may change.
func (c *Controller) index(lrpKey string) []string {
	if lrpKey == "" {
		return nil
	}
	now := map[string]string{} // route key -> hostname
	var space string
	if w := c.cache.Workload(store.LRPFromKey(lrpKey)); w != nil && w.DeletionTimestamp == nil {
		space = w.SpaceGUID
		for _, r := range w.Routes() {
			host, _ := hooks.SplitRoute(r)
			now[names.RouteKey(space, host)] = host
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	had := c.keysOf[lrpKey]
	for _, key := range had {
		if _, ok := now[key]; ok {
			continue
		}
		if g := c.groups[key]; g != nil {
			delete(g.lrps, lrpKey)
			if len(g.lrps) == 0 {
				delete(c.groups, key)
			}
		}
	}
	keys := make([]string, 0, len(now))
	for key, host := range now {
		g := c.groups[key]
		if g == nil {
			g = &group{space: space, host: host, lrps: map[string]struct{}{}}
			c.groups[key] = g
		}
		g.lrps[lrpKey] = struct{}{}
		keys = append(keys, key)
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		delete(c.keysOf, lrpKey)
	} else {
		c.keysOf[lrpKey] = keys
	}
	return append(keys, had...)
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
