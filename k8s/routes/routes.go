// Package routes registers the LRPs' Ready instances with a classic Cloud Foundry's gorouters
// (routing mode nats), as Diego's route emitter does: for every Ready pod with an IP and every
// cf-router route port of its LRP, one registration, kept in the gorouter emitter's table
// (package gorouter) and updated as the shared informers see the pods and workloads change. It
// is leader work: only the leader's table is sent.
package routes

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/client-go/util/workqueue"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s/queue"
	"github.com/opi-bridge/opi/k8s/store"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate
//counterfeiter:generate . Cache
//counterfeiter:generate . Table

// Cache is what the registrar reads of the store (package k8s/store's *Store).
type Cache interface {
	Workload(id opi.LRPIdentifier) *store.WorkloadRecord
	Workloads() []*store.WorkloadRecord
	Pods(id opi.LRPIdentifier) []*store.PodRecord
	InstanceIndexer(pods []*store.PodRecord, w *store.WorkloadRecord) func(pod *store.PodRecord) int32
	store.LRPEvents
}

// Table is the table of registrations gorouter is kept told of (package gorouter's *Emitter):
// it sends what changes at once, and everything at its interval, while Run runs.
type Table interface {
	Set(key string, r gorouter.Registration, readySince time.Time)
	Delete(key string)
	Replace(regs map[string]gorouter.Registration)
	Run(ctx context.Context) error
}

// Deps are what the registrar is handed.
type Deps struct {
	Cache Cache
	Table Table
	// Zone is the availability zone of a node ("" when unknown); nil: registrations carry none
	// (opi is not granted reading nodes).
	Zone func(node string) string
}

// component is the tag gorouter's access logs and metrics show as the registering component.
const component = "opi"

// Registrar keeps the table in step with the caches.
type Registrar struct {
	cache  Cache
	table  Table
	zone   func(string) string
	logger lager.Logger

	// keys are the table's keys of each LRP (by its lrp index key), as last synced.
	mu   sync.Mutex
	keys map[string][]string
}

// New makes the registrar; a cache and a table are needed.
func New(logger lager.Logger, deps Deps) (*Registrar, error) {
	if deps.Cache == nil || deps.Table == nil {
		return nil, errors.New("route registration needs a cache and a table")
	}
	zone := deps.Zone
	if zone == nil {
		zone = func(string) string { return "" }
	}
	return &Registrar{cache: deps.Cache, table: deps.Table, zone: zone, logger: logger.Session("routes"), keys: map[string][]string{}}, nil
}

// Run is the leader work: it fills the table from the caches (a new leader's table replaces
// whatever an earlier term left in it), runs the table's sending, and follows every change of
// the workloads and pods until ctx ends. The caches must be synced (the backend has started).
func (r *Registrar) Run(ctx context.Context) {
	q := queue.New(queue.Config[string]{
		Name:        "routes",
		Workers:     2,
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string](),
	})
	r.replaceAll()
	stop, err := store.FollowLRPs(r.cache, q.Add)
	if err != nil {
		r.logger.Error("add-event-handler", err)
		q.ShutDown()
		return
	}
	defer stop()

	var sending sync.WaitGroup
	sending.Go(func() {
		if err := r.table.Run(ctx); err != nil && ctx.Err() == nil {
			r.logger.Error("table-stopped", err)
		}
	})
	r.logger.Info("started")
	q.Run(ctx, func(_ context.Context, key string) (time.Duration, error) {
		r.sync(key)
		return 0, nil
	})
	sending.Wait()
	r.logger.Info("stopped")
}

// replaceAll makes the table what the caches say, all at once.
func (r *Registrar) replaceAll() {
	all := map[string]gorouter.Registration{}
	keys := map[string][]string{}
	for _, w := range r.cache.Workloads() {
		if w.DeletionTimestamp != nil || w.LRPKey() == "" {
			continue
		}
		for key, e := range r.registrations(w) {
			all[key] = e.reg
			keys[w.LRPKey()] = append(keys[w.LRPKey()], key)
		}
	}
	r.mu.Lock()
	r.keys = keys
	r.mu.Unlock()
	r.table.Replace(all)
}

// sync brings the table's registrations of one LRP in line with the caches.
func (r *Registrar) sync(lrpKey string) {
	guid, version, _ := strings.Cut(lrpKey, "/")
	var want map[string]endpoint
	if w := r.cache.Workload(opi.LRPIdentifier{GUID: guid, Version: version}); w != nil {
		want = r.registrations(w)
	}
	r.mu.Lock()
	had := r.keys[lrpKey]
	keys := make([]string, 0, len(want))
	for key := range want {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		delete(r.keys, lrpKey)
	} else {
		r.keys[lrpKey] = keys
	}
	r.mu.Unlock()
	for _, key := range had {
		if _, ok := want[key]; !ok {
			r.table.Delete(key)
		}
	}
	for _, key := range keys {
		e := want[key]
		r.table.Set(key, e.reg, e.readySince)
	}
}

// endpoint is one registration and since when its instance is Ready.
type endpoint struct {
	reg        gorouter.Registration
	readySince time.Time
}

// registrations are the table's entries for workload w: one per Ready pod with an IP and
// route port, keyed "<pod uid>/<port>".
func (r *Registrar) registrations(w *store.WorkloadRecord) map[string]endpoint {
	ports := routePorts(w.Routes())
	if len(ports) == 0 {
		return nil
	}
	out := map[string]endpoint{}
	pods := r.cache.Pods(w.ID())
	indexOf := r.cache.InstanceIndexer(pods, w)
	for _, pod := range pods {
		if pod.ReadySince == 0 || pod.IP == "" || pod.DeletionTimestamp != nil || pod.Terminal {
			continue
		}
		index := strconv.Itoa(int(indexOf(pod)))
		tags := Tags(w, pod, index)
		zone := r.zone(pod.Node)
		for _, p := range ports {
			out[string(pod.UID)+"/"+strconv.Itoa(int(p.port))] = endpoint{
				reg: gorouter.Registration{
					Host:                 pod.IP,
					Port:                 p.port,
					URIs:                 p.uris,
					App:                  w.AppGUID,
					PrivateInstanceID:    string(pod.UID),
					PrivateInstanceIndex: index,
					Tags:                 tags,
					AvailabilityZone:     zone,
				},
				readySince: time.Unix(0, pod.ReadySince),
			}
		}
	}
	return out
}

// Tags are the CF identity Diego's route emitter puts on a registration (CC's metric tags and
// the component), which gorouter copies into its access logs and metrics.
func Tags(w *store.WorkloadRecord, pod *store.PodRecord, index string) map[string]string {
	return map[string]string{
		"app_id":              w.AppGUID,
		"app_name":            w.AppName,
		"space_id":            w.SpaceGUID,
		"space_name":          w.SpaceName,
		"organization_id":     w.OrgGUID,
		"organization_name":   w.OrgName,
		"process_id":          w.GUID,
		"process_type":        cmp.Or(w.ProcessType, "web"),
		"process_instance_id": string(pod.UID),
		"instance_id":         index,
		"source_id":           w.AppGUID,
		"component":           component,
	}
}

// routePort is one port of an LRP's routes and the URIs routed to it.
type routePort struct {
	port uint16
	uris []string
}

// routePorts groups the routes by port, in the order the ports first appear, each port's URIs
// in the order given (deduplicated). A port gorouter cannot carry (outside 1..65535) or an empty
// hostname is left out: bifrost refuses both, so only a hand-edited annotation has them.
func routePorts(routes []opi.Route) []routePort {
	var out []routePort
	for _, rt := range routes {
		if rt.Port < 1 || rt.Port > 65535 || rt.Hostname == "" {
			continue
		}
		i := slices.IndexFunc(out, func(p routePort) bool { return p.port == uint16(rt.Port) })
		if i < 0 {
			out = append(out, routePort{port: uint16(rt.Port)})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].uris, rt.Hostname) {
			out[i].uris = append(out[i].uris, rt.Hostname)
		}
	}
	return out
}
