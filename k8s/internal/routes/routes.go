// Package routes registers the LRPs' Ready instances with a classic Cloud Foundry's gorouters
// (routing mode nats), as Diego's route emitter does: for every Ready pod with an IP and every
// cf-router route port of its LRP, one registration, kept in the gorouter emitter's table
// (package gorouter) and updated as the shared informers see the pods and workloads change. It
// is leader work: only the leader's table is sent. Every endpoint is written to the LRP's record
// (Records) before it is registered, so that a new leader unregisters what earlier terms
// registered and is gone, first thing in its first full send (ADR 0009).
package routes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s/internal/queue"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate
//counterfeiter:generate . Cache
//counterfeiter:generate . Table
//counterfeiter:generate . Records

// Cache is what the registrar reads of the store (package k8s/internal/store's *Store).
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
	// Unregister unregisters r whatever the table holds: at once while connected, else first
	// in the next full send, even one of a Run that has not started yet.
	Unregister(r gorouter.Registration)
	// Flushed tells whether every unregister made so far was handed to NATS.
	Flushed() bool
	Run(ctx context.Context) error
}

// Deps are what the registrar is handed.
type Deps struct {
	Cache Cache
	Table Table
	// Records keep what was registered beyond the pods' and the LRP's lives (ConfigMapRecords).
	Records Records
	// RouterPorts admits the routers on the union of the LRPs' route ports, sorted (the routers'
	// NetworkPolicy); nil: nothing to admit them on.
	RouterPorts func(ctx context.Context, ports []int32) error
	// Zone is the availability zone of a node ("" when unknown); nil: registrations carry none
	// (opi is not granted reading nodes).
	Zone func(node string) string
}

// component is the tag gorouter's access logs and metrics show as the registering component.
const component = "opi"

// Registrar keeps the table in step with the caches.
type Registrar struct {
	cache   Cache
	table   Table
	records Records
	zone    func(string) string
	logger  lager.Logger
	admit   func(ctx context.Context, ports []int32) error

	mu sync.Mutex
	// keys are the table's keys of each LRP (by its lrp index key), as last synced.
	keys map[string][]string
	// recorded is each LRP's record as this term last loaded or saved it.
	recorded map[string]pairs
	// ports are each LRP's route ports; admitted the union last handed to admit (admittedOK
	// false before the first success of the term).
	admitMu    sync.Mutex
	ports      map[string][]int32
	admitted   []int32
	admittedOK bool
}

// New makes the registrar; a cache, a table and records are needed.
func New(logger lager.Logger, deps Deps) (*Registrar, error) {
	if deps.Cache == nil || deps.Table == nil || deps.Records == nil {
		return nil, errors.New("route registration needs a cache, a table and records")
	}
	zone := deps.Zone
	if zone == nil {
		zone = func(string) string { return "" }
	}
	admit := deps.RouterPorts
	if admit == nil {
		admit = func(context.Context, []int32) error { return nil }
	}
	return &Registrar{cache: deps.Cache, table: deps.Table, records: deps.Records, zone: zone, admit: admit,
		logger: logger.Session("routes"), keys: map[string][]string{}, recorded: map[string]pairs{}, ports: map[string][]int32{}}, nil
}

// syncWorkers is how many LRPs the leader syncs at once. A sync that registers a new endpoint
// waits for its record's write first, a round trip that takes the API server's queue under a
// burst of desires: with 2 at once, a thousand new apps' first registrations came seconds after
// their instances were Ready (docs/benchmarks/findings.md). Each LRP's record is an object of
// its own, and the table and the admitted ports have locks of their own.
const syncWorkers = 16

// recordRetry is how often a record whose endpoints may not all be unregistered yet (NATS
// down, or not connected yet) is looked at again, to prune it once they are.
const recordRetry = 10 * time.Second

// Run is the leader work: it loads the records, fills the table from the caches (a new
// leader's table replaces whatever an earlier term left in it) after recording it, hands the
// table an unregister for every recorded endpoint the table no longer has, runs the table's
// sending, and follows every change of the workloads and pods until ctx ends. The caches must
// be synced (the backend has started).
func (r *Registrar) Run(ctx context.Context) {
	q := queue.New(queue.Config[string]{
		Name:        "routes",
		Workers:     syncWorkers,
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[string](),
	})
	recorded, err := r.load(ctx)
	if err != nil {
		q.ShutDown()
		return // ctx ended
	}
	// LRPs gone from the caches still have records to prune once their unregisters went out;
	// the others' syncs come from the informers.
	var gone []string
	for lrpKey := range recorded {
		if r.cache.Workload(store.LRPFromKey(lrpKey)) == nil {
			gone = append(gone, lrpKey)
		}
	}
	unsaved := r.startTerm(ctx, recorded)
	stop, err := store.FollowLRPs(r.cache, q.Add)
	if err != nil {
		r.logger.Error("add-event-handler", err)
		q.ShutDown()
		return
	}
	defer stop()
	for _, lrpKey := range slices.Concat(gone, unsaved) {
		q.Add(lrpKey)
	}

	var sending sync.WaitGroup
	sending.Go(func() {
		if err := r.table.Run(ctx); err != nil && ctx.Err() == nil {
			r.logger.Error("table-stopped", err)
		}
	})
	r.logger.Info("started")
	q.Run(ctx, r.sync)
	sending.Wait()
	r.logger.Info("stopped")
}

// load reads the records, trying again until it can or ctx ends: a term that cannot know what
// earlier terms registered must not send.
func (r *Registrar) load(ctx context.Context) (map[string]pairs, error) {
	var loaded map[string][]gorouter.Registration
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 30 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		var err error
		if loaded, err = r.records.Load(ctx); err != nil {
			r.logger.Error("load-records", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("load route records: %w", err)
	}
	out := make(map[string]pairs, len(loaded))
	for lrpKey, regs := range loaded {
		out[lrpKey] = pairsOf(regs...)
	}
	return out, nil
}

// startTerm records what the caches say must be registered, makes it the table, and hands the
// table an unregister for every recorded endpoint and URI the table does not have, all before
// the table's Run sends anything: its first full send begins with those unregisters. An LRP
// whose record cannot be saved is left out of the table until its sync saves it: unsaved are
// their keys.
func (r *Registrar) startTerm(ctx context.Context, recorded map[string]pairs) (unsaved []string) {
	all := map[string]gorouter.Registration{}
	keys := map[string][]string{}
	current := pairs{}
	r.admitMu.Lock()
	r.ports, r.admittedOK = map[string][]int32{}, false
	for _, w := range r.cache.Workloads() {
		if w.DeletionTimestamp == nil && w.LRPKey() != "" {
			if ports := portsOf(w); len(ports) > 0 {
				r.ports[w.LRPKey()] = ports
			}
		}
	}
	r.admitMu.Unlock()
	if err := r.admitPorts(ctx, "", nil); err != nil {
		// The next sync that changes the ports, or any sync of this term, tries again.
		r.logger.Error("admit-routers", err)
	}
	for _, w := range r.cache.Workloads() {
		if w.DeletionTimestamp != nil || w.LRPKey() == "" {
			continue
		}
		want := r.registrations(w)
		if len(want) == 0 {
			continue
		}
		lrpKey := w.LRPKey()
		rec, err := r.writeAhead(ctx, lrpKey, recorded[lrpKey], want)
		if err != nil {
			r.logger.Error("save-record", err, lager.Data{"lrp": lrpKey})
			unsaved = append(unsaved, lrpKey)
			continue
		}
		recorded[lrpKey] = rec
		for key, e := range want {
			all[key] = e.reg
			keys[lrpKey] = append(keys[lrpKey], key)
			current.add(e.reg)
		}
	}
	stale := pairs{}
	for _, rec := range recorded {
		for k, reg := range rec {
			if _, ok := current[k]; !ok {
				stale[k] = reg
			}
		}
	}
	r.mu.Lock()
	r.keys, r.recorded = keys, recorded
	r.mu.Unlock()
	r.table.Replace(all)
	for _, reg := range stale.registrations() {
		r.table.Unregister(reg)
	}
	if len(stale) > 0 {
		r.logger.Info("unregistering-earlier-terms", lager.Data{"endpoints": len(stale)})
	}
	return unsaved
}

// writeAhead saves rec with want's pairs added, unless it has them all; it returns the record
// as saved.
func (r *Registrar) writeAhead(ctx context.Context, lrpKey string, rec pairs, want map[string]endpoint) (pairs, error) {
	next := pairs{}
	maps.Copy(next, rec)
	for _, e := range want {
		next.add(e.reg)
	}
	if len(next) == len(rec) {
		return rec, nil
	}
	if err := r.records.Save(ctx, lrpKey, next.registrations(), len(rec) > 0); err != nil {
		return rec, err
	}
	return next, nil
}

// sync brings the table's registrations of one LRP, and its record, in line with the caches:
// unregisters first, then one write of the record (what is registered, and what may not be
// unregistered yet), then the registers. A record whose pairs may not all be unregistered yet
// is looked at again after recordRetry.
func (r *Registrar) sync(ctx context.Context, lrpKey string) (time.Duration, error) {
	guid, version, _ := strings.Cut(lrpKey, "/")
	var want map[string]endpoint
	var ports []int32
	if w := r.cache.Workload(opi.LRPIdentifier{GUID: guid, Version: version}); w != nil {
		want = r.registrations(w)
		if w.DeletionTimestamp == nil {
			ports = portsOf(w)
		}
	}
	r.mu.Lock()
	had := r.keys[lrpKey]
	rec := r.recorded[lrpKey]
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

	wanted := pairs{}
	for _, e := range want {
		wanted.add(e.reg)
	}
	next := wanted
	// Every unregister handed to NATS: the record can be what is registered. Else it keeps what
	// may still be registered with gorouter, for this term's next look or the next term.
	flushed := r.table.Flushed()
	if !flushed {
		next = pairs{}
		maps.Copy(next, rec)
		maps.Copy(next, wanted)
	}
	if !maps.EqualFunc(next, rec, func(a, b gorouter.Registration) bool { return a.PrivateInstanceID == b.PrivateInstanceID }) {
		if err := r.records.Save(ctx, lrpKey, next.registrations(), len(rec) > 0); err != nil {
			// The registers wait for the record: the table keeps what it had.
			return 0, err
		}
		r.mu.Lock()
		if len(next) == 0 {
			delete(r.recorded, lrpKey)
		} else {
			r.recorded[lrpKey] = next
		}
		r.mu.Unlock()
	}
	// The routers are admitted on a new port before an endpoint on it is registered.
	if err := r.admitPorts(ctx, lrpKey, ports); err != nil {
		return 0, err
	}
	for _, key := range keys {
		e := want[key]
		r.table.Set(key, e.reg, e.readySince)
	}
	if !flushed && len(next) > len(wanted) {
		return recordRetry, nil
	}
	return 0, nil
}

// admitPorts makes ports lrpKey's route ports (lrpKey "": none changes) and hands admit the
// union of all LRPs' when it differs from what was admitted last this term.
func (r *Registrar) admitPorts(ctx context.Context, lrpKey string, ports []int32) error {
	r.admitMu.Lock()
	defer r.admitMu.Unlock()
	if lrpKey != "" {
		if len(ports) == 0 {
			delete(r.ports, lrpKey)
		} else {
			r.ports[lrpKey] = ports
		}
	}
	union := []int32{}
	for _, ps := range r.ports {
		union = append(union, ps...)
	}
	slices.Sort(union)
	union = slices.Compact(union)
	if r.admittedOK && slices.Equal(union, r.admitted) {
		return nil
	}
	if err := r.admit(ctx, union); err != nil {
		return fmt.Errorf("admit the routers on the route ports: %w", err)
	}
	r.admitted, r.admittedOK = union, true
	return nil
}

// portsOf are w's route ports, sorted.
func portsOf(w *store.WorkloadRecord) []int32 {
	var out []int32
	for _, p := range routePorts(w.Routes()) {
		out = append(out, int32(p.port))
	}
	slices.Sort(out)
	return out
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
		if !pod.Routable() {
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
