// Package k8s is the Kubernetes backend of opi: it runs each LRP as a Deployment or, with
// Options.Workload, a StatefulSet (with its env in a Secret, an optional image pull Secret and
// the hooks' objects) in one namespace and answers reads from informer caches. It implements
// opi.LRPBackend; see k8s/README.md for what it creates.
package k8s

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/opi-bridge/opi/k8s/hooks"
	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/lrp"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/k8s/staging"
	"github.com/opi-bridge/opi/k8s/store"
	"github.com/opi-bridge/opi/k8s/task"
	"github.com/opi-bridge/opi/k8s/workload"
	"github.com/opi-bridge/opi/opi"
)

// DefaultReadWaitTimeout bounds how long a write waits for the caches to observe it.
const DefaultReadWaitTimeout = store.DefaultReadWaitTimeout

// Options configure the backend.
type Options struct {
	// Namespace is where apps run.
	Namespace string
	// ReadWaitTimeout bounds how long a write waits for the informer cache to observe it
	// (default 5s). A write whose wait times out answers opi.ErrUnavailable (503): what it wrote
	// is kept, and repeating it completes it.
	ReadWaitTimeout time.Duration
	// JanitorPeriod is how often Start's janitor sweeps leftovers of desires that never
	// completed (see Sweep); 0 runs no janitor.
	JanitorPeriod time.Duration
	// JanitorGrace is the age a leftover must reach before the janitor deletes it
	// (default DefaultJanitorGrace).
	JanitorGrace time.Duration
	// CacheSyncTimeout is how long Start waits for its caches before it checks that opi may
	// list what it caches and logs cache-sync-slow (default DefaultCacheSyncTimeout). It is
	// not a deadline: Start keeps waiting, see start.go.
	CacheSyncTimeout time.Duration
	// Watches, when set, follows the client's LISTs and WATCHes (its Wrap must be in the
	// client's transport): while a cache is not watching the API server (client-go reconnects
	// on its own, with a backoff of up to a minute after an outage), writes answer
	// ErrUnavailable and Ready fails, so that no write is answered that a read then misses.
	// Nil: the caches are taken to be watching once synced.
	Watches *kube.Watches

	// Routing says how routes reach apps (Ingress, Gateway API HTTPRoutes, or nothing).
	Routing RoutingOptions
	// Gateway is the Gateway API client; needed for RoutingGateway only.
	Gateway gateway.Interface
	// Metadata is the client the janitor lists its objects with (metadata.NewForConfig on the
	// clientset's config): it asks the API server for their metadata only, so that the
	// Secrets' values never pass through opi (see hooks.MetadataLists). Nil: the janitor lists
	// whole objects with the clientset and keeps their metadata, which works as well and
	// saves nothing.
	Metadata metadata.Interface
	// NetworkPolicy configures container-to-container isolation.
	NetworkPolicy NetworkPolicyOptions
	// Placement configures isolation segments (placement tags).
	Placement PlacementOptions
	// HeadlessServices gives LRP Services no cluster IP (see docs/adr).
	HeadlessServices bool
	// CrashNotifier, when set, is told about every crash of an LRP instance, once (leader
	// work, see crash.go); nil reports no crashes.
	CrashNotifier opi.CrashNotifier
	// TaskNotifier, when set, is told when a task ends (RunLeaderWork's task reporter); without
	// it no task end is reported and no task's Job is deleted.
	TaskNotifier opi.TaskNotifier
	// TaskRetention is how long a task's Job is kept after CC accepted its end (0: deleted at
	// once).
	TaskRetention time.Duration

	// ProbeTimeout bounds each health check of an instance (default DefaultProbeTimeout,
	// Diego's per-check timeout; rounded up to whole seconds). CC's health_check_timeout_ms is
	// the start timeout, not this.
	ProbeTimeout time.Duration
	// MinReady is how long a new instance must stay Ready before a rollout counts
	// it as available (default DefaultMinReady; rounded up to whole seconds; negative: 0).
	MinReady time.Duration
	// PodSecurity is spec.PodSecurityBaseline (default) or spec.PodSecurityRestricted, for namespaces
	// that enforce the restricted Pod Security Standard.
	PodSecurity string
	// Workload is WorkloadDeployments (default) or WorkloadStatefulSets: the kind of object
	// that runs each LRP's pods (docs/adr/0007 says which to choose when).
	Workload string
	// ImageReader and StagingNotifier, both set, make the leader work off staging records
	// (see Stage); StagingWorkers of them at once (default staging.DefaultWorkers).
	ImageReader     opi.ImageReader
	StagingNotifier opi.StagingNotifier
	StagingWorkers  int
	// StagingMaxAttempts and StagingMaxAge bound a staging: a record read that many times
	// (each attempt counted on the record before its read starts), or older than that, is
	// settled as a failure without reading (defaults staging.DefaultMaxAttempts,
	// staging.DefaultMaxAge). No record can crash-loop opi.
	StagingMaxAttempts int
	StagingMaxAge      time.Duration
}

// Defaults of Options.
const (
	DefaultProbeTimeout = time.Second
	DefaultMinReady     = 10 * time.Second
)

// Validate reports an option the backend cannot work with.
func (o Options) Validate() error {
	switch o.PodSecurity {
	case "", spec.PodSecurityBaseline, spec.PodSecurityRestricted:
	default:
		return fmt.Errorf("pod security %q is not one of %s, %s", o.PodSecurity, spec.PodSecurityBaseline, spec.PodSecurityRestricted)
	}
	switch o.Workload {
	case "", WorkloadDeployments, WorkloadStatefulSets:
	default:
		return fmt.Errorf("backend %q is not one of %s, %s", o.Workload, WorkloadDeployments, WorkloadStatefulSets)
	}
	if o.ProbeTimeout < 0 {
		return errors.New("probe timeout must not be negative")
	}
	// A feature whose dependencies are half given would accept work and never finish it (an
	// image reader without a staging notifier records stagings nobody is told of).
	if err := (staging.Deps{ImageReader: o.ImageReader, Notifier: o.StagingNotifier}).Check(); err != nil {
		return err
	}
	switch o.Routing.Mode {
	case "", RoutingNone, RoutingIngress:
	case RoutingGateway:
		if o.Routing.GatewayName == "" {
			return errors.New("routing gateway needs the gateway's name")
		}
	default:
		return fmt.Errorf("routing %q is not one of %s, %s, %s", o.Routing.Mode, RoutingIngress, RoutingGateway, RoutingNone)
	}
	return nil
}

// Backend runs LRPs on Kubernetes. Create it with NewBackend and Start it before use.
type Backend struct {
	// The services behind the opi/ contract, each a package of its own.
	*lrp.Service

	client        kubernetes.Interface
	gateway       gateway.Interface
	listMetadata  hooks.MetadataLists
	logger        lager.Logger
	namespace     string
	janitorPeriod time.Duration
	janitorGrace  time.Duration
	cacheSync     syncPatience
	workload      spec.Workload
	// kind is the object that runs an LRP's pods (Deployment or StatefulSet).
	kind workload.Kind

	// factory is the one informer factory; its informers are handed to the store.
	factory   informers.SharedInformerFactory
	workloads cache.SharedIndexInformer
	pods      cache.SharedIndexInformer
	jobs      cache.SharedIndexInformer
	// store serves every read from the informers' caches (package k8s/store).
	store *store.Store
	// cached are the resources of the caches above, as kube.Watches names them.
	cached [3]string

	// tasks desires, cancels and reads tasks and reports their ends (package k8s/task).
	tasks *task.Service

	started atomic.Bool

	// hooks are the concerns that react to an LRP's events (package k8s/hooks, registered in hooks.go).
	hooks hooks.Set
	// policies is the network policy hook, which keeps the tasks' policies too.
	policies *hooks.NetworkPolicyHook
	// staging records stagings and works them off (package k8s/staging).
	staging *staging.Service

	// leaderWork is what one replica of opi does for all of them; see RunLeaderWork.
	leaderWork []leaderTask
}

var (
	_ opi.LRPBackend  = (*Backend)(nil)
	_ opi.TaskBackend = (*Backend)(nil)
)

// NewBackend makes a backend for the namespace in opts. It makes no API calls: Start does.
func NewBackend(client kubernetes.Interface, logger lager.Logger, opts Options) *Backend {
	if opts.JanitorGrace <= 0 {
		opts.JanitorGrace = DefaultJanitorGrace
	}
	if opts.CacheSyncTimeout <= 0 {
		opts.CacheSyncTimeout = DefaultCacheSyncTimeout
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.MinReady == 0 {
		opts.MinReady = DefaultMinReady
	}
	b := &Backend{
		client:        client,
		gateway:       opts.Gateway,
		listMetadata:  hooks.NewMetadataLists(opts.Metadata, client, opts.Gateway, opts.Namespace),
		logger:        logger.Session("k8s-backend", lager.Data{"namespace": opts.Namespace}),
		namespace:     opts.Namespace,
		janitorPeriod: opts.JanitorPeriod,
		janitorGrace:  opts.JanitorGrace,
		cacheSync:     syncPatience{timeout: opts.CacheSyncTimeout, recheck: cacheSyncRecheck, hookRetry: hookRetryInterval},
		workload: spec.Workload{
			ProbeTimeoutSeconds: wholeSeconds(opts.ProbeTimeout),
			MinReadySeconds:     wholeSeconds(opts.MinReady),
			PodSecurity:         cmp.Or(opts.PodSecurity, spec.PodSecurityBaseline),
			InstanceIndexEnv:    opts.Workload == WorkloadStatefulSets,
		},
	}
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
	b.cached = [3]string{b.kindName() + "s", "pods", "jobs"}
	b.store = store.New(store.Config{
		Options:       store.Options{ReadWaitTimeout: opts.ReadWaitTimeout},
		Namespace:     opts.Namespace,
		Workloads:     b.workloads,
		Pods:          b.pods,
		Jobs:          b.jobs,
		Resources:     b.cached,
		KindName:      b.kindName(),
		ByOrdinal:     b.kind.IndexedByOrdinal(),
		ListWorkloads: b.listWorkloads,
		Watches:       opts.Watches,
		Logger:        b.logger,
	})
	b.registerHooks(opts)
	lrps, err := lrp.New(b.logger, lrp.Config{Namespace: opts.Namespace, Pods: b.workload},
		lrp.Deps{Client: client, Kind: b.kind, Cache: b.store, Hooks: b.hooks, Lists: b.listMetadata})
	if err != nil {
		panic(err) // every dependency is given above
	}
	b.Service = lrps
	b.tasks = b.newTasks(opts)
	if b.tasks.Reports() {
		b.addLeaderWork("task-reporter", b.tasks.Run)
	}
	if b.janitorPeriod > 0 {
		b.addLeaderWork("janitor", b.runJanitor)
	}
	if opts.CrashNotifier != nil {
		b.addLeaderWork("crash-reporter", newCrashReporter(b, opts.CrashNotifier).run)
	}
	b.staging = b.newStaging(opts)
	if b.staging.Enabled() {
		b.addLeaderWork("staging", b.staging.Run)
	}
	return b
}

// newInformers sets up (without starting) the one informer factory and the namespace-scoped
// informers the store is handed: the workloads and pods with opi's APP source label, the Jobs
// with the TASK one.
func (b *Backend) newInformers() {
	b.factory = informers.NewSharedInformerFactoryWithOptions(b.client, 0,
		informers.WithNamespace(b.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = spec.LabelSourceType + "=" + spec.SourceTypeApp
		}),
	)
	b.workloads = b.kind.Informer(b.factory)
	b.pods = b.factory.Core().V1().Pods().Informer()
	b.jobs = b.factory.InformerFor(&batchv1.Job{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return batchinformers.NewFilteredJobInformer(client, b.namespace, resync, cache.Indexers{},
			func(o *metav1.ListOptions) { o.LabelSelector = spec.LabelSourceType + "=" + spec.SourceTypeTask })
	})
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

// Ready returns nil when the caches are synced and watching, and the API server answers,
// bounded by ctx.
func (b *Backend) Ready(ctx context.Context) error {
	if err := b.store.CheckWritable(); err != nil {
		return err
	}
	var err error
	if rc := b.client.Discovery().RESTClient(); rc != nil {
		err = rc.Get().AbsPath("/readyz").Do(ctx).Error()
	} else {
		// Clients without a REST client (fakes) still answer the version call.
		_, err = b.client.Discovery().ServerVersionWithContext(ctx)
	}
	if err != nil {
		return apiError(err, "check api server")
	}
	return nil
}

// wholeSeconds is d rounded up to whole seconds, 0 for d ≤ 0, at most MaxInt32.
func wholeSeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(min((d+time.Second-1)/time.Second, math.MaxInt32))
}
