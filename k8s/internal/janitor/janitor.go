// Package janitor cleans up after desires that never completed and that CC will not desire
// again: the leader's work "janitor" (k8s/README.md, "Packages and the rules that make them
// last": layer 5). Every period it sweeps (Sweep) opi's unowned Secrets and Services, the
// workloads whose Secrets are missing, and, through each hook's Missing, the hooks' objects a
// workload older than the grace lacks.
package janitor

import (
	"context"
	"errors"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate
//counterfeiter:generate . Cache

// DefaultPeriod is how often the janitor looks for leftovers when none is configured.
const DefaultPeriod = time.Minute

// DefaultGrace is how old a leftover must be before the janitor removes it: far longer than
// any desire takes, so it never races one in flight.
const DefaultGrace = 5 * time.Minute

// Options are the janitor's settings.
type Options struct {
	// Period is how often Run sweeps; 0 (or less) runs no janitor (Runs is false), while Sweep
	// works all the same.
	Period time.Duration
	// Grace is the age a leftover must reach before the janitor deletes it (default
	// DefaultGrace).
	Grace time.Duration
	// Routing is the routing mode the hooks run in (hooks.RoutingOptions.Mode; the backend
	// sets it): the objects of the other modes are what an operator's switch of an existing
	// foundation left, and each sweep deletes those of opi's LRPs (see sweepOtherModes).
	Routing string
}

// Cache is what the janitor reads of the read-side store (*store.Store is one): the sync gate,
// the cached workloads, and a workload of an LRP (the cache, then the API server).
type Cache interface {
	CheckWatching() error
	Workloads() []*store.WorkloadRecord
	FindWorkload(ctx context.Context, id opi.LRPIdentifier) (*store.WorkloadRecord, error)
}

// Deps is what the janitor is handed: the clientset it deletes and patches with, the workload
// kind, the cache, the hooks (those with a Missing complete workloads) and the metadata-only
// LISTs it reads its objects with. All but Hooks and Gateway are needed.
type Deps struct {
	Client kubernetes.Interface
	// Gateway deletes the HTTPRoutes another routing mode left; without it they are not
	// looked for.
	Gateway gateway.Interface
	Kind    workload.Kind
	Cache   Cache
	Hooks   hooks.Set
	Lists   hooks.MetadataLists
}

// Janitor sweeps the leftovers of desires that never completed.
type Janitor struct {
	namespace string
	logger    lager.Logger
	period    time.Duration
	grace     time.Duration
	routing   string
	client    kubernetes.Interface
	gateway   gateway.Interface
	kind      workload.Kind
	cache     Cache
	hooks     hooks.Set
	lists     hooks.MetadataLists
}

// Config is what the janitor is set up with: its namespace and the operator's options.
type Config struct {
	Namespace string
	Options
}

// New makes the janitor of cfg's namespace; it refuses deps with a needed one missing. It
// logs in logger's sessions janitor (Run) and sweep (Sweep).
func New(logger lager.Logger, cfg Config, deps Deps) (*Janitor, error) {
	opts := cfg.Options
	switch {
	case deps.Client == nil:
		return nil, errors.New("janitor needs a kubernetes client")
	case deps.Kind == nil:
		return nil, errors.New("janitor needs the workload kind")
	case deps.Cache == nil:
		return nil, errors.New("janitor needs the cache")
	case deps.Lists == nil:
		return nil, errors.New("janitor needs the metadata lists")
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	return &Janitor{
		namespace: cfg.Namespace,
		logger:    logger,
		period:    opts.Period,
		grace:     opts.Grace,
		routing:   opts.Routing,
		client:    deps.Client,
		gateway:   deps.Gateway,
		kind:      deps.Kind,
		cache:     deps.Cache,
		hooks:     deps.Hooks,
		lists:     deps.Lists,
	}, nil
}

// Runs says Run sweeps at all (a positive period): the root adds it as leader work only then.
func (j *Janitor) Runs() bool { return j.period > 0 }

// Run sweeps every period until ctx ends. The first sweep is one period after start.
func (j *Janitor) Run(ctx context.Context) {
	logger := j.logger.Session("janitor", lager.Data{"period": j.period.String(), "grace": j.grace.String()})
	logger.Info("started")
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(j.period):
		}
		j.Sweep(ctx)
	}, 0)
}

// Sweep cleans up what desires that never completed left behind. opi's Secrets and Services
// that no object controls, older than the grace period, whose LRP has no workload, are deleted:
// Secrets are owned by nothing from their creation (see lrp.DesireLRP), so one whose workload
// was deleted without a stop, or whose desire was killed after the Secret's create, goes here
// too. A workload older than the grace that lacks a hook's object (its Service, routing
// objects, egress policy: opi killed before the last step) gets it (each hook lists its objects
// once per sweep, see hooks.Janitor). A workload older than the grace whose Secret is missing
// (opi killed with the Secret's create in flight) is deleted, so that CC desires it again (see
// deleteIncomplete). Failures are logged; the next sweep tries again. Only object names are
// logged, never their content. Its LISTs ask for metadata only (Deps.Lists): the Secrets'
// values never reach opi.
func (j *Janitor) Sweep(ctx context.Context) {
	logger := j.logger.Session("sweep")
	// Not while a cache is stale: what it lacks would look like leftovers.
	if j.cache.CheckWatching() != nil {
		return
	}
	selector := metav1.ListOptions{LabelSelector: names.AppSelector}
	cutoff := time.Now().Add(-j.grace)

	// Metadata only (see hooks.MetadataLists), page by page: no Secret's value passes through
	// opi, and a sweep of thousands of apps holds one page of metadata at a time.
	secretNames := map[string]bool{}
	err := apiclient.ListPages(ctx, selector, j.lists(hooks.SecretsResource), func(page *metav1.PartialObjectMetadataList) error {
		for i := range page.Items {
			secretNames[page.Items[i].Name] = true
			j.sweepSecret(ctx, logger, &page.Items[i], cutoff)
		}
		return nil
	})
	if err != nil {
		logger.Error("list-secrets", err)
		secretNames = nil
	}

	services := j.client.CoreV1().Services(j.namespace)
	err = apiclient.ListPages(ctx, selector, j.lists(hooks.ServicesResource), func(page *metav1.PartialObjectMetadataList) error {
		for i := range page.Items {
			s := &page.Items[i]
			if !j.leftover(ctx, logger, s, cutoff) {
				continue
			}
			if deleteAsListed(ctx, logger, services.Delete, s, "delete-service") {
				logger.Info("deleted-leftover-service", lager.Data{"service": s.Name})
			}
		}
		return nil
	})
	if err != nil {
		logger.Error("list-services", err)
	}
	j.sweepOtherModes(ctx, logger)

	var old []*store.WorkloadRecord
	for _, d := range j.cache.Workloads() {
		if d.DeletionTimestamp == nil && d.CreationTimestamp.Time.Before(cutoff) && d.LRPKey() != "" {
			if secretNames != nil && j.deleteIncomplete(ctx, logger, d, secretNames) {
				continue
			}
			old = append(old, d)
		}
	}
	j.completeHooks(ctx, logger, old)
}

// kindName is the workload kind in lower case, as logs name it.
func (j *Janitor) kindName() string { return strings.ToLower(j.kind.Name()) }

// deleteIncomplete deletes a workload older than the grace whose env Secret (or image pull
// Secret, when it names one) is missing, and says whether it did: opi was killed between
// creating the workload and its Secrets (see DesireLRP), or someone deleted a Secret. Its pods
// cannot start, and only CC has the Secret's content: with the workload gone, CC's next sync
// sees the LRP missing and desires it again. The delete is conditional on the workload's uid;
// secrets lists the names of opi's Secrets as listed in this sweep, after the cache took d.
func (j *Janitor) deleteIncomplete(ctx context.Context, logger lager.Logger, d *store.WorkloadRecord, secrets map[string]bool) bool {
	missing := ""
	switch {
	case !secrets[names.EnvSecretName(d.Name)]:
		missing = names.EnvSecretName(d.Name)
	case d.PullsWithSecret && !secrets[names.RegistrySecretName(d.Name)]:
		missing = names.RegistrySecretName(d.Name)
	default:
		return false
	}
	opts := kube.InBackground(kube.PreconditionUID(d))
	data := lager.Data{j.kindName(): d.Name, "missing-secret": missing}
	if err := j.kind.Delete(ctx, d.Name, opts); err != nil {
		if !kube.GoneOrChanged(err) {
			logger.Error("delete-incomplete-workload", err, data)
		}
		return true
	}
	logger.Info("deleted-incomplete-workload", data)
	return true
}

// sweepSecret deletes a leftover Secret: one that nothing owns, older than the grace, whose
// LRP has no workload (a kubectl delete of the workload, a stop or a desire interrupted between
// its calls, a desire that lost a race with a stop). An unowned Secret of a live workload is
// how a desire leaves it (see lrp.DesireLRP) and stays. s is the Secret's metadata as listed.
func (j *Janitor) sweepSecret(ctx context.Context, logger lager.Logger, s *metav1.PartialObjectMetadata, cutoff time.Time) {
	if !j.leftover(ctx, logger, s, cutoff) {
		return
	}
	if deleteAsListed(ctx, logger, j.client.CoreV1().Secrets(j.namespace).Delete, s, "delete-secret") {
		logger.Info("deleted-leftover-secret", lager.Data{"secret": s.Name})
	}
}

// leftover reports whether an object of an LRP that no object controls is a leftover to
// delete: its LRP has no workload and it is older than cutoff. Controlled objects, objects of a
// live workload, and objects whose LRP cannot be checked are not.
func (j *Janitor) leftover(ctx context.Context, logger lager.Logger, obj metav1.Object, cutoff time.Time) bool {
	if metav1.GetControllerOf(obj) != nil || obj.GetDeletionTimestamp() != nil {
		return false
	}
	id := opi.LRPIdentifier{GUID: obj.GetLabels()[names.LabelGUID], Version: obj.GetLabels()[names.LabelVersion]}
	if id.GUID == "" || id.Version == "" {
		return false
	}
	// The cache first; an object the cache does not have is confirmed absent by the API, since
	// a desire in flight may have just created it.
	_, err := j.cache.FindWorkload(ctx, id)
	if err == nil {
		return false
	}
	if !errors.Is(err, opi.ErrNotFound) {
		logger.Error("find-deployment", err, lager.Data{"object": obj.GetName()})
		return false
	}
	return obj.GetCreationTimestamp().Time.Before(cutoff)
}

// completeHooks is the janitor's part for hooks: each hook names the workloads (older than
// cutoff) whose objects it misses, and creates them. Failures are logged.
func (j *Janitor) completeHooks(ctx context.Context, logger lager.Logger, old []*store.WorkloadRecord) {
	if len(old) == 0 {
		return
	}
	workloads := make([]hooks.Workload, len(old))
	for i, d := range old {
		workloads[i] = d
	}
	for _, h := range j.hooks.Janitors() {
		missing, err := h.Missing(ctx, workloads)
		if err != nil {
			logger.Error("find-missing", err, lager.Data{"hook": h.Name()})
			continue
		}
		for _, w := range missing {
			d := w.(*store.WorkloadRecord)
			if err := h.Desired(ctx, j.target(d)); err != nil {
				logger.Error("create-missing", err, lager.Data{"hook": h.Name(), "deployment": d.Name})
				continue
			}
			logger.Info("created-missing", lager.Data{"hook": h.Name(), "deployment": d.Name})
		}
	}
}

// otherMode is a kind of object, by its labels, that the janitor's routing mode does not make.
type otherMode struct {
	resource schema.GroupVersionResource
	del      func(context.Context, string, metav1.DeleteOptions) error
	selector string
}

// otherModes are the objects opi made that j's routing mode does not make:
//
//   - an LRP's own Ingresses and HTTPRoutes (AppSelector) in every mode: they are what opi made
//     before a route's objects were shared, and no mode makes them now;
//   - in nats mode, the LRPs' Services and the route objects of ingress and gateway modes
//     (RouteSelector: their Services, Ingresses and HTTPRoutes; the EndpointSlices go with
//     their Service);
//   - in ingress mode the route HTTPRoutes, in gateway mode the route Ingresses.
//
// HTTPRoutes only with a Gateway API client. None in mode none, which makes no routing objects
// and leaves what is there to whoever routes.
func (j *Janitor) otherModes() []otherMode {
	if j.routing != hooks.RoutingNATS && j.routing != hooks.RoutingIngress && j.routing != hooks.RoutingGateway {
		return nil
	}
	services := j.client.CoreV1().Services(j.namespace).Delete
	ingresses := j.client.NetworkingV1().Ingresses(j.namespace).Delete
	var out []otherMode
	if j.routing == hooks.RoutingNATS {
		out = append(out, otherMode{hooks.ServicesResource, services, names.AppSelector},
			otherMode{hooks.ServicesResource, services, names.RouteSelector})
	}
	out = append(out, otherMode{hooks.IngressesResource, ingresses, names.AppSelector})
	if j.routing != hooks.RoutingIngress {
		out = append(out, otherMode{hooks.IngressesResource, ingresses, names.RouteSelector})
	}
	if j.gateway != nil {
		routes := j.gateway.GatewayV1().HTTPRoutes(j.namespace).Delete
		out = append(out, otherMode{hooks.HTTPRoutesResource, routes, names.AppSelector})
		if j.routing != hooks.RoutingGateway {
			out = append(out, otherMode{hooks.HTTPRoutesResource, routes, names.RouteSelector})
		}
	}
	return out
}

// sweepOtherModes deletes the objects of opi's LRPs (listed by opi's labels, metadata only)
// that another routing mode made: an operator switched an existing foundation's mode, and the
// old mode's Services or routing objects, still controlled by the running workloads, would
// stay until each app is stopped. Each delete is conditional on the object being unchanged
// since the LIST. Failures are logged; the next sweep tries again.
func (j *Janitor) sweepOtherModes(ctx context.Context, logger lager.Logger) {
	for _, kind := range j.otherModes() {
		name := strings.TrimSuffix(kind.resource.Resource, "s")
		err := apiclient.ListPages(ctx, metav1.ListOptions{LabelSelector: kind.selector}, j.lists(kind.resource), func(page *metav1.PartialObjectMetadataList) error {
			for i := range page.Items {
				o := &page.Items[i]
				if o.DeletionTimestamp != nil {
					continue
				}
				if deleteAsListed(ctx, logger, kind.del, o, "delete-other-mode-"+name) {
					logger.Info("deleted-other-mode-"+name, lager.Data{"object": o.Name, "routing": j.routing})
				}
			}
			return nil
		})
		if err != nil {
			logger.Error("list-"+kind.resource.Resource, err)
		}
	}
}

// target is the hook target of a cached workload, the LRP as the workload records it.
func (j *Janitor) target(d *store.WorkloadRecord) hooks.Target {
	return hooks.Target{
		LRP:       d.LRP(),
		Name:      d.Name,
		Namespace: j.namespace,
		Owner:     j.kind.ControllerRef(d),
		Live:      workload.LiveCheck(j.kind, d),
	}
}

// deleteAsListed is kube.DeleteAsListed for a sweep, which goes on past a failure: the failure
// is logged as action, and the result says whether obj is gone.
func deleteAsListed(ctx context.Context, logger lager.Logger, del func(context.Context, string, metav1.DeleteOptions) error, obj metav1.Object, action string) bool {
	if err := kube.DeleteAsListed(ctx, del, obj); err != nil {
		logger.Error(action, err, lager.Data{"object": obj.GetName()})
		return false
	}
	return true
}
