package k8s

import (
	"context"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/internal/cluster"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/routes"
	"github.com/opi-bridge/opi/k8s/internal/staging"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/task"
	"github.com/opi-bridge/opi/k8s/internal/workload"
)

//go:generate go tool counterfeiter -generate
//counterfeiter:generate . RoutesTable

// What a command configures the backend with: the settings of the backend's packages, named
// from here so that the packages themselves stay internal (the backend's Options holds one
// struct per package).
type (
	// StoreOptions: how long a write waits for the caches to show it.
	StoreOptions = store.Options
	// PodOptions: the settings of every app pod (probes, rollouts, Pod Security).
	PodOptions = objects.PodOptions
	// HooksOptions: routing, network policies, placement and Services.
	HooksOptions = hooks.Options
	// RoutingOptions: how routes reach apps (HooksOptions.Routing).
	RoutingOptions = hooks.RoutingOptions
	// NetworkPolicyOptions: the apps' network policies (HooksOptions.NetworkPolicy).
	NetworkPolicyOptions = hooks.NetworkPolicyOptions
	// PolicyPeer is a peer a network policy admits (the routers, a monitoring namespace).
	PolicyPeer = hooks.PolicyPeer
	// PlacementOptions: the isolation segments' node label and taint (HooksOptions.Placement).
	PlacementOptions = hooks.PlacementOptions
	// JanitorOptions: how often the janitor sweeps and the age of a leftover.
	JanitorOptions = janitor.Options
	// TaskOptions: how long an ended task's Job is kept.
	TaskOptions = task.Options
	// StagingOptions: the staging workers and their bounds.
	StagingOptions = staging.Options
	// RoutesTable is gorouter's registration table the leader fills in routing mode nats
	// (Clients.Routes: the gorouter package's emitter).
	RoutesTable = routes.Table
	// NamespaceOptions say whether EnsureNamespace may create the namespace and its Pod
	// Security level.
	NamespaceOptions = cluster.NamespaceOptions
	// ClusterRules are what Discover learnt of the cluster.
	ClusterRules = cluster.Rules
)

// The values of Options.Workload.
const (
	Deployments  = workload.Deployments
	StatefulSets = workload.StatefulSets
)

// The routing modes (RoutingOptions.Mode).
const (
	RoutingIngress = hooks.RoutingIngress
	RoutingGateway = hooks.RoutingGateway
	RoutingNATS    = hooks.RoutingNATS
	RoutingNone    = hooks.RoutingNone
)

// The Pod Security levels (PodOptions.PodSecurity).
const (
	PodSecurityBaseline   = objects.PodSecurityBaseline
	PodSecurityRestricted = objects.PodSecurityRestricted
)

// Defaults of the packages' settings.
const (
	DefaultReadWaitTimeout    = store.DefaultReadWaitTimeout
	DefaultJanitorPeriod      = janitor.DefaultPeriod
	DefaultJanitorGrace       = janitor.DefaultGrace
	DefaultProbeTimeout       = objects.DefaultProbeTimeout
	DefaultMinReady           = objects.DefaultMinReady
	DefaultPlacementKey       = hooks.DefaultPlacementKey
	DefaultStagingMaxAttempts = staging.DefaultMaxAttempts
	DefaultStagingMaxAge      = staging.DefaultMaxAge
)

// HTTPRoutesResource is the Gateway API's HTTPRoute resource (for the metadata client a
// command builds in routing mode gateway).
var HTTPRoutesResource = hooks.HTTPRoutesResource

// EnsureNamespace makes sure the apps' namespace exists with its Pod Security labels (or,
// without Create, that it exists), before the backend is made.
func EnsureNamespace(ctx context.Context, client kubernetes.Interface, name string, opts NamespaceOptions, logger lager.Logger) error {
	return cluster.EnsureNamespace(ctx, client, name, opts, logger)
}

// Discover learns what the cluster serves and enforces (its env-name rule, the API groups it
// serves), before the backend is made.
func Discover(ctx context.Context, client kubernetes.Interface, namespace string, logger lager.Logger) ClusterRules {
	return cluster.Discover(ctx, client, namespace, logger)
}
