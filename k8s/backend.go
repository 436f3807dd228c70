// Package k8s is the Kubernetes backend of opi: it runs each LRP as a Deployment or, with
// Options.Workload, a StatefulSet (with its env in a Secret, an optional image pull Secret and
// the hooks' objects) in one namespace and answers reads from informer caches. It implements
// opi.LRPBackend; see k8s/README.md for what it creates.
package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/crash"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/informer"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/lifecycle"
	"github.com/opi-bridge/opi/k8s/internal/lrp"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/routeobjects"
	"github.com/opi-bridge/opi/k8s/internal/routes"
	"github.com/opi-bridge/opi/k8s/internal/staging"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/task"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Options configure the backend: the root's own settings, each package's settings in its own
// struct, and, apart from the settings, the clients and notifiers it is handed.
type Options struct {
	// Namespace is where apps run.
	Namespace string
	// Workload is workload.Deployments (default) or workload.StatefulSets: the kind of object
	// that runs each LRP's pods (docs/adr/0007 says which to choose when).
	Workload string
	// CacheSyncTimeout is how long Start waits for its caches before it checks that opi may
	// list what it caches and logs cache-sync-slow (default DefaultCacheSyncTimeout). It is
	// not a deadline: Start keeps waiting, see start.go.
	CacheSyncTimeout time.Duration

	// Store: how long a write waits for the caches to show it (package k8s/internal/store).
	Store store.Options
	// Pods: the settings of every app pod (probes, rollouts, Pod Security; package k8s/internal/objects).
	Pods objects.PodOptions
	// Hooks: routing, network policies, placement, Services (package k8s/internal/hooks).
	Hooks hooks.Options
	// Janitor: how often it sweeps and the age of a leftover (package k8s/internal/janitor; a zero
	// period runs no janitor).
	Janitor janitor.Options
	// Tasks: how long an ended task's Job is kept (package k8s/internal/task).
	Tasks task.Options
	// Staging: the staging workers and their bounds (package k8s/internal/staging).
	Staging staging.Options

	// Clients are the API clients beside the clientset NewBackend is given.
	Clients Clients
	// Notifiers are told what happened; each switches a piece of leader work on.
	Notifiers Notifiers
}

// Clients are the backend's clients beside its clientset; each may be nil.
type Clients struct {
	// Gateway is the Gateway API client; needed for hooks.RoutingGateway only.
	Gateway gateway.Interface
	// Metadata is the client the janitor and the hooks list their objects with
	// (metadata.NewForConfig on the clientset's config): it asks the API server for their
	// metadata only, so that the Secrets' values never pass through opi (hooks.MetadataLists).
	// Nil: whole objects are listed with the clientset and their metadata kept, which works as
	// well and saves nothing.
	Metadata metadata.Interface
	// Watches, when set, follows the client's LISTs and WATCHes (its Wrap must be in the
	// client's transport): while a cache is not watching the API server (client-go reconnects
	// on its own, with a backoff of up to a minute after an outage), writes answer
	// ErrUnavailable and Ready fails, so that no write is answered that a read then misses.
	// Nil: the caches are taken to be watching once synced.
	Watches *apiclient.Watches
	// Routes is the table of gorouter registrations (package gorouter's *Emitter): needed in
	// routing mode hooks.RoutingNATS, and refused in the others. The leader work "routes"
	// (package k8s/internal/routes) fills it and runs its sending.
	Routes routes.Table
	// Zone gives a node's availability zone ("" when unknown), for the registrations'
	// availability_zone (routing mode nats); nil leaves the field out.
	Zone func(node string) string
	// Lifecycle takes the leader's CELL lines and the stagings' STG lines (package
	// loggregator's Sender); nil: no lines (the leader work "lifecycle", package k8s/internal/lifecycle,
	// runs only with it).
	Lifecycle lifecycle.Emitter
}

// Notifiers tell Cloud Controller what happened. Each that is set switches on its leader work.
type Notifiers struct {
	// Crash is told about every crash of an LRP instance, once (package k8s/internal/crash); nil
	// reports no crashes.
	Crash opi.CrashNotifier
	// Task is told when a task ends (package k8s/internal/task's reporter); without it no task end is
	// reported and no task's Job is deleted.
	Task opi.TaskNotifier
	// ImageReader and Staging, both set, make the leader work off staging records (package
	// k8s/internal/staging); one without the other is refused.
	ImageReader opi.ImageReader
	Staging     opi.StagingNotifier
}

// Validate reports an option the backend cannot work with, and a feature half configured
// (it would accept work and never finish it: an image reader without a staging notifier
// records stagings nobody is told of).
func (o Options) Validate() error {
	switch o.Workload {
	case "", workload.Deployments, workload.StatefulSets:
	default:
		return fmt.Errorf("backend %q is not one of %s, %s", o.Workload, workload.Deployments, workload.StatefulSets)
	}
	if err := o.Pods.Validate(); err != nil {
		return err
	}
	if err := o.Hooks.Validate(); err != nil {
		return err
	}
	return staging.Deps{ImageReader: o.Notifiers.ImageReader, Notifier: o.Notifiers.Staging}.Check()
}

// Backend runs LRPs on Kubernetes: the services of k8s/'s packages behind the opi/ contract.
// Create it with NewBackend and Start it before use.
type Backend struct {
	// The LRP verbs are the lrp service's; tasks, stagings and the janitor's sweep are
	// forwarded to theirs (facade.go).
	*lrp.Service
	tasks   *task.Service
	staging *staging.Service
	janitor *janitor.Janitor

	client    kubernetes.Interface
	logger    lager.Logger
	namespace string
	cacheSync syncPatience
	// kind is the object that runs an LRP's pods (Deployment or StatefulSet).
	kind workload.Kind

	// factory is the one informer factory; its informers are handed to the store.
	factory   informers.SharedInformerFactory
	workloads cache.SharedIndexInformer
	pods      cache.SharedIndexInformer
	jobs      cache.SharedIndexInformer
	// store serves every read from the informers' caches (package k8s/internal/store).
	store *store.Store
	// cached are the resources of the caches above, as apiclient.Watches names them.
	cached [3]string

	started atomic.Bool

	// hooks are the concerns that react to an LRP's events (package k8s/internal/hooks, registered in
	// hooks.go); policies is the network policy hook, which keeps the tasks' policies too.
	hooks    hooks.Set
	policies *hooks.NetworkPolicyHook

	// leaderWork is what one replica of opi does for all of them; see RunLeaderWork.
	leaderWork []leaderTask
}

var (
	_ opi.LRPBackend        = (*Backend)(nil)
	_ opi.TaskBackend       = (*Backend)(nil)
	_ opi.Stager            = (*Backend)(nil)
	_ opi.LRPListVersioner  = (*Backend)(nil)
	_ opi.TaskListVersioner = (*Backend)(nil)
)

// NewBackend makes a backend for the namespace in opts, or says why it cannot (Validate, or a
// service refusing what it is handed). It makes no API calls: Start does.
func NewBackend(client kubernetes.Interface, logger lager.Logger, opts Options) (*Backend, error) {
	if client == nil {
		return nil, errors.New("backend needs a kubernetes client")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// The gorouter table goes with routing nats (Validate checks settings alone: cmd/opi calls
	// it before it has made the table).
	switch nats := opts.Hooks.Routing.Mode == hooks.RoutingNATS; {
	case nats && opts.Clients.Routes == nil:
		return nil, errors.New("routing nats needs the gorouter table (Clients.Routes)")
	case !nats && opts.Clients.Routes != nil:
		return nil, fmt.Errorf("a gorouter table (Clients.Routes) is for routing nats only, not %q", opts.Hooks.Routing.Mode)
	}
	cacheSync := opts.CacheSyncTimeout
	if cacheSync <= 0 {
		cacheSync = DefaultCacheSyncTimeout
	}
	b := &Backend{
		client:    client,
		logger:    logger.Session("k8s-backend", lager.Data{"namespace": opts.Namespace}),
		namespace: opts.Namespace,
		cacheSync: syncPatience{timeout: cacheSync, recheck: cacheSyncRecheck, hookRetry: hookRetryInterval},
	}
	pods := opts.Pods.Workload(opts.Workload == workload.StatefulSets)
	lists := hooks.NewMetadataLists(opts.Clients.Metadata, client, opts.Clients.Gateway, opts.Namespace)

	// The read side: the kind, the one factory's informers, the store over them (its indexers,
	// the change counter among them, are added here, before anything starts).
	b.kind = workload.New(opts.Workload, workload.Config{
		Apps:      client.AppsV1(),
		Namespace: opts.Namespace,
		Cached: func(name string) (metav1.ObjectMeta, int32, bool) {
			r, ok := b.store.WorkloadByName(name)
			if !ok {
				return metav1.ObjectMeta{}, 0, false
			}
			return r.Meta(), r.ReplicaCount, true
		},
	})
	b.newInformers()
	kindName := strings.ToLower(b.kind.Name())
	b.cached = [3]string{kindName + "s", "pods", "jobs"}
	b.store = store.New(store.Config{
		Options:       opts.Store,
		Namespace:     opts.Namespace,
		Workloads:     b.workloads,
		Pods:          b.pods,
		Jobs:          b.jobs,
		Resources:     b.cached,
		KindName:      kindName,
		ByOrdinal:     b.kind.IndexedByOrdinal(),
		ListWorkloads: b.listWorkloads,
		Watches:       opts.Clients.Watches,
		Probe:         b.probeAPIServer,
		Logger:        b.logger,
	})
	b.registerHooks(opts.Hooks, opts.Clients.Gateway, lists)

	// The services, and their leader work in this order.
	var err error
	if b.Service, err = lrp.New(b.logger, lrp.Config{Namespace: opts.Namespace, Pods: pods},
		lrp.Deps{Client: client, Kind: b.kind, Cache: b.store, Hooks: b.hooks, Lists: lists}); err != nil {
		return nil, err
	}
	if b.tasks, err = task.New(b.logger, task.Config{Namespace: opts.Namespace, Pods: pods, Options: opts.Tasks},
		task.Deps{Client: client, Cache: b.store, Policies: b.policies, Notifier: opts.Notifiers.Task}); err != nil {
		return nil, err
	}
	if b.tasks.Reports() {
		b.addLeaderWork("task-reporter", b.tasks.Run)
	}
	janitorOpts := opts.Janitor
	janitorOpts.Routing = opts.Hooks.Routing.Mode
	if b.janitor, err = janitor.New(b.logger, janitor.Config{Namespace: opts.Namespace, Options: janitorOpts},
		janitor.Deps{Client: client, Gateway: opts.Clients.Gateway, Kind: b.kind, Cache: b.store, Hooks: b.hooks, Lists: lists}); err != nil {
		return nil, err
	}
	if b.janitor.Runs() {
		b.addLeaderWork("janitor", b.janitor.Run)
	}
	if opts.Notifiers.Crash != nil {
		crashes, err := crash.New(b.logger, crash.Deps{Client: client, Pods: b.store, Notifier: opts.Notifiers.Crash})
		if err != nil {
			return nil, err
		}
		b.addLeaderWork("crash-reporter", crashes.Run)
	}
	if opts.Clients.Routes != nil {
		registrar, err := routes.New(b.logger, routes.Deps{Cache: b.store, Table: opts.Clients.Routes, Zone: opts.Clients.Zone,
			Records: routes.ConfigMapRecords{Client: client, Namespace: opts.Namespace}, RouterPorts: b.policies.SetRouterPorts})
		if err != nil {
			return nil, err
		}
		b.addLeaderWork("routes", registrar.Run)
	}
	if routeobjects.Makes(opts.Hooks.Routing.Mode) {
		objects, err := routeobjects.New(b.logger, routeobjects.Config{Namespace: opts.Namespace, Routing: opts.Hooks.Routing,
			HeadlessServices: opts.Hooks.HeadlessServices},
			routeobjects.Deps{Client: client, Gateway: opts.Clients.Gateway, Cache: b.store})
		if err != nil {
			return nil, err
		}
		b.addLeaderWork("route-objects", objects.Run)
	}
	if opts.Clients.Lifecycle != nil {
		lines, err := lifecycle.New(b.logger, lifecycle.Deps{Cache: b.store, Emitter: opts.Clients.Lifecycle,
			ByOrdinal: opts.Workload == workload.StatefulSets})
		if err != nil {
			return nil, err
		}
		b.addLeaderWork("lifecycle", lines.Run)
	}
	if b.staging, err = staging.New(b.logger, staging.Config{Namespace: opts.Namespace, Options: opts.Staging},
		staging.Deps{Client: client, ImageReader: opts.Notifiers.ImageReader, Notifier: opts.Notifiers.Staging,
			Lines: opts.Clients.Lifecycle}); err != nil {
		return nil, err
	}
	if b.staging.Enabled() {
		b.addLeaderWork("staging", b.staging.Run)
	}
	return b, nil
}

// newInformers sets up (without starting) the one informer factory and the namespace-scoped
// informers the store is handed: the workloads and pods with opi's APP source label, the Jobs
// with the TASK one.
func (b *Backend) newInformers() {
	b.factory = informers.NewSharedInformerFactoryWithOptions(b.client, 0,
		informers.WithNamespace(b.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = names.AppSelector
		}),
	)
	b.workloads = b.kind.Informer(b.factory)
	b.pods = informer.Unindexed(b.factory, &corev1.Pod{}, b.namespace, names.AppSelector, coreinformers.NewFilteredPodInformer)
	b.jobs = informer.Unindexed(b.factory, &batchv1.Job{}, b.namespace, names.TaskSelector, batchinformers.NewFilteredJobInformer)
}

// leaderTask is one piece of background work, run until its context ends.
type leaderTask struct {
	name string
	run  func(ctx context.Context)
}

// addLeaderWork registers background work for RunLeaderWork (called while the backend is made).
func (b *Backend) addLeaderWork(name string, run func(ctx context.Context)) {
	b.leaderWork = append(b.leaderWork, leaderTask{name: name, run: run})
}

// RunLeaderWork runs, until ctx ends, the work that one replica of opi does for all of them:
// the janitor, and the reporters that tell Cloud Controller what happened (task completions,
// crashes). Every piece keeps what it still owes in Kubernetes, so a new leader (or a restarted
// opi) carries on where the last one stopped. cmd/opi runs it while this replica holds the
// leader lease (or always, without leader election). It returns once every piece has returned.
// Call it after Start.
func (b *Backend) RunLeaderWork(ctx context.Context) {
	logger := b.logger.Session("leader-work")
	var wg sync.WaitGroup
	for _, task := range b.leaderWork {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logger.Info("starting", lager.Data{"work": task.name})
			task.run(ctx)
		}()
	}
	wg.Wait()
	logger.Info("stopped")
}

// Ready returns nil when the caches are synced and the API server answers, bounded by ctx. A
// cache whose watch is being re-established meanwhile does not make opi unready: the API server
// ends watches routinely, and writes wait for the cache (store.Store.CheckWritable).
func (b *Backend) Ready(ctx context.Context) error {
	if err := b.store.CheckSynced(); err != nil {
		return err
	}
	if err := b.probeAPIServer(ctx); err != nil {
		return kube.APIError(err, "check api server")
	}
	return nil
}

// probeAPIServer asks the API server whether it is ready (GET /readyz), bounded by ctx.
func (b *Backend) probeAPIServer(ctx context.Context) error {
	if rc := b.client.Discovery().RESTClient(); rc != nil {
		return rc.Get().AbsPath("/readyz").Do(ctx).Error()
	}
	// Clients without a REST client (fakes) still answer the version call.
	_, err := b.client.Discovery().ServerVersionWithContext(ctx)
	return err
}
