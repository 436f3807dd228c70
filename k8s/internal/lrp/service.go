// Package lrp is the LRP service: desire, update, stop (the LRP or one instance) and the reads
// (get, list, instances), served from the store and written through the workload kind, with the
// hooks reacting to each event. It takes what it uses as narrow interfaces declared here.
package lrp

import (
	"context"
	"errors"
	"strings"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate
//counterfeiter:generate . Cache

// Cache is what the service reads of the store (package k8s/internal/store's *Store).
type Cache interface {
	CheckSynced() error
	CheckWritable(ctx context.Context) error
	Workload(id opi.LRPIdentifier) *store.WorkloadRecord
	Workloads() []*store.WorkloadRecord
	WorkloadChanges() uint64
	FindWorkload(ctx context.Context, id opi.LRPIdentifier) (*store.WorkloadRecord, error)
	Instances(w *store.WorkloadRecord) []*store.PodRecord
	WaitForWorkload(ctx context.Context, logger lager.Logger, w metav1.Object, goneOK bool, live store.LiveCheck) error
	WaitForWorkloadGone(ctx context.Context, logger lager.Logger, name string, uid types.UID) error
	WaitForPodGone(ctx context.Context, logger lager.Logger, id opi.LRPIdentifier, uid types.UID) error
}

// Config are the service's settings.
type Config struct {
	// Namespace is where the LRPs run.
	Namespace string
	// Pods are the settings of every LRP's pod template (probes, pod security, ...).
	Pods objects.Workload
}

// Deps are what the service is handed.
type Deps struct {
	Client kubernetes.Interface
	// Kind is the workload kind that runs an LRP's pods.
	Kind workload.Kind
	// Cache serves the reads and the waits.
	Cache Cache
	// Hooks react to the LRP's events, in registration order.
	Hooks hooks.Set
	// Lists are the metadata-only LISTs (a stop's look for unowned Secrets and Services).
	Lists hooks.MetadataLists
}

// Service runs LRPs. It implements opi.LRPBackend and opi.LRPListVersioner once the store is
// synced (every call answers opi.ErrUnavailable until then).
type Service struct {
	client    kubernetes.Interface
	namespace string
	pods      objects.Workload
	kind      workload.Kind
	cache     Cache
	hooks     hooks.Set
	lists     hooks.MetadataLists
	logger    lager.Logger
}

var (
	_ opi.LRPBackend       = (*Service)(nil)
	_ opi.LRPListVersioner = (*Service)(nil)
)

// New makes the service; every dependency is needed.
func New(logger lager.Logger, cfg Config, deps Deps) (*Service, error) {
	if deps.Client == nil || deps.Kind == nil || deps.Cache == nil || deps.Lists == nil {
		return nil, errors.New("lrp service needs a client, a workload kind, a cache and metadata lists")
	}
	return &Service{
		client:    deps.Client,
		namespace: cfg.Namespace,
		pods:      cfg.Pods,
		kind:      deps.Kind,
		cache:     deps.Cache,
		hooks:     deps.Hooks,
		lists:     deps.Lists,
		logger:    logger,
	}, nil
}

// kindName is the workload kind in lower case, for messages and log data ("deployment").
func (s *Service) kindName() string { return strings.ToLower(s.kind.Name()) }

// controllerRef makes the workload obj the controller of a dependent.
func (s *Service) controllerRef(obj metav1.Object) metav1.OwnerReference {
	return s.kind.ControllerRef(obj)
}

// liveCheck tells, from the API server, whether d is still the live workload of its name.
func (s *Service) liveCheck(d metav1.Object) store.LiveCheck {
	return workload.LiveCheck(s.kind, d)
}
