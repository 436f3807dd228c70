// Package task is the task service of the Kubernetes backend (k8s/README.md, "Packages and the
// rules that make them last": layer 5): DesireTask runs a task as a Job (desire.go), CancelTask
// suspends it (cancel.go), GetTask and the lists read the Job cache (get.go), and Run, the
// leader's work, reports each task's end to CC and deletes its Job a retention later
// (reporter.go). It is built with its settings (Options) and, apart from them, what it is handed
// (Deps: the client, the Job cache, the tasks' network policies, the notifier), each a narrow
// interface declared here; it never sees the root package.
package task

import (
	"context"
	"errors"
	"time"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate

// Cache is what the service reads of the backend's read side (a *store.Store): the sync gate,
// the Job cache, its change counter and events, the wait for a write, and the app's egress rules.
//
//counterfeiter:generate . Cache
type Cache interface {
	CheckSynced() error
	CheckWritable(ctx context.Context) error
	Job(name string) (*store.JobRecord, bool)
	Jobs() []*store.JobRecord
	JobChanges() uint64
	WaitForJob(ctx context.Context, logger lager.Logger, name, rv string, goneOK bool, live store.LiveCheck) error
	AddJobHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RemoveJobHandler(r cache.ResourceEventHandlerRegistration) error
	AppEgressRules(appGUID string) (rules []opi.EgressRule, found bool)
}

// Policies keeps the tasks' egress policies (the network policy hook, *hooks.NetworkPolicyHook).
//
//counterfeiter:generate . Policies
type Policies interface {
	TaskPolicy(ctx context.Context, task *opi.Task, name string, appRules []opi.EgressRule, found bool, owner metav1.OwnerReference, live func(context.Context) (bool, error)) (string, error)
}

// Options are the task service's settings.
type Options struct {
	// Retention is how long a task's Job is kept after CC accepted its end (0: deleted at once).
	Retention time.Duration
}

// Deps are what the task service works with, apart from its settings.
type Deps struct {
	// Client writes the Secrets and Jobs (and lists a failed task's pods).
	Client kubernetes.Interface
	// Cache is the read side the reads, the waits and the reporter's events come from.
	Cache Cache
	// Policies makes a task's egress policy.
	Policies Policies
	// Notifier, when set, is told when a task ends (Run); nil: no task end is reported and no
	// task's Job is deleted (Reports is false).
	Notifier opi.TaskNotifier
}

// Service desires, cancels and reads tasks and, on the leader, reports their ends. Create it
// with New.
type Service struct {
	namespace string
	logger    lager.Logger
	pods      objects.Workload
	client    kubernetes.Interface
	cache     Cache
	policies  Policies
	notifier  opi.TaskNotifier
	retention time.Duration
}

var (
	_ opi.TaskBackend       = (*Service)(nil)
	_ opi.TaskListVersioner = (*Service)(nil)
)

// Config is what the task service is set up with.
type Config struct {
	// Namespace is where the tasks run.
	Namespace string
	// Pods are the settings of every task's pod (those LRP instances have too).
	Pods objects.Workload
	Options
}

// New makes the task service of cfg's namespace, logging through logger. It refuses a missing
// client, cache or policies. It makes no API calls.
func New(logger lager.Logger, cfg Config, deps Deps) (*Service, error) {
	switch {
	case deps.Client == nil:
		return nil, errors.New("tasks need a Kubernetes client")
	case deps.Cache == nil:
		return nil, errors.New("tasks need the Job cache")
	case deps.Policies == nil:
		return nil, errors.New("tasks need the network policies")
	}
	return &Service{
		namespace: cfg.Namespace,
		logger:    logger,
		pods:      cfg.Pods,
		client:    deps.Client,
		cache:     deps.Cache,
		policies:  deps.Policies,
		notifier:  deps.Notifier,
		retention: cfg.Retention,
	}, nil
}

// Reports says whether Run has work: only with a notifier. The root adds Run as the
// "task-reporter" leader work when it does.
func (s *Service) Reports() bool { return s.notifier != nil }
