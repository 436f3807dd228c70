package bifrost

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"

	"github.com/opi-bridge/opi/opi"
)

// Bounds of the OPI contract. Values outside them are rejected before anything is written.
const (
	MaxGUIDLength   = 63
	MaxInstances    = 32767
	MaxMemoryMB     = 1048576
	MaxDiskMB       = 1048576
	MaxCPUWeight    = 100
	MaxPort         = 65535
	defaultHCType   = opi.HealthCheckPort
	cfAppsDomain    = "cf-apps"
	dockerHubServer = "https://index.docker.io/v1/"
)

// Count bounds of a request's lists, checked before anything is converted further or written:
// each is far above what a real CF app sends, and keeps what one request can make opi build
// (and the API server store) small. A request beyond one gets a 400 naming the field and the
// bound.
const (
	// MaxRoutes bounds an LRP's cf-router hostnames (each "hostname" or "hostnames" entry counts
	// once). CC sends one per route mapped to the process; 1,000 routes are far beyond real apps
	// and become at most 1,000 Ingress rules or HTTPRoutes.
	MaxRoutes = 1000
	// MaxPorts bounds an LRP's ports: CF lets an app declare a handful (Diego allows 10).
	MaxPorts = 10
	// MaxEnvEntries bounds an environment's entries (an LRP's map, a task's or a staging's list).
	// Its size is bounded by MaxEnvBytes too; 1,000 names is far beyond the few dozen CC sends
	// (VCAP_*, CF_*, the app's own).
	MaxEnvEntries = 1000
	// MaxEgressRules bounds an LRP's security group rules (CC sends the rules of every ASG bound
	// to the app's space and the platform's). Large platforms have a few hundred; each becomes a
	// rule of the app's NetworkPolicy, which must stay within an object's size.
	MaxEgressRules = 1000
	// MaxVolumeMounts bounds an LRP's volume service mounts (one per bound volume service).
	MaxVolumeMounts = 32
)

// MaxEnvBytes bounds an environment: it is stored in one Secret, whose values may hold at
// most 1 MiB (corev1.MaxSecretSize). Names are counted as well, since the Secret's keys and the
// workload's env entries carry them: an environment that fits is always storable.
const MaxEnvBytes = corev1.MaxSecretSize

// Rules are the rules requests are checked against that depend on the cluster, learned at
// start-up (see cluster.Discover in k8s/cluster), or on the operator. The zero value is a current
// cluster's with the default allow-list of user annotations.
type Rules struct {
	// StrictEnvNames: the cluster accepts only C-identifier-like env names
	// ([-._a-zA-Z][-._a-zA-Z0-9]*), as Kubernetes does before 1.32 or with the
	// RelaxedEnvironmentVariableValidation feature off. Otherwise any printable ASCII but '='.
	StrictEnvNames bool
	// UserAnnotationPrefixes are the prefixes a user_defined_annotations key must start with
	// (nil: DefaultUserAnnotationPrefixes; empty: no user annotation at all). The keys become
	// pod annotations, and pod annotations steer opi (opi-bridge.io/crashes-reported), the
	// kubelet (AppArmor) and network plugins: a tenant may set only those the operator allows.
	UserAnnotationPrefixes []string
}

// DefaultUserAnnotationPrefixes are the only user annotations CC passes (its metrics
// annotations for Prometheus).
var DefaultUserAnnotationPrefixes = []string{"prometheus.io/"}

var guidPattern = regexp.MustCompile(`^[a-z0-9-]+$`)

// ValidationError says which field of a request is wrong and how. It is an opi.ErrInvalid.
type ValidationError struct {
	Field   string
	Problem string
}

func (e *ValidationError) Error() string { return e.Field + " " + e.Problem }

// Unwrap makes errors.Is(err, opi.ErrInvalid) hold.
func (e *ValidationError) Unwrap() error { return opi.ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// checkCallback checks a completion_callback before anything is written: present, and a URL
// opi's CC client can post to.
func checkCallback(callback string, urls URLChecker) error {
	if callback == "" {
		return invalid("completion_callback", "is required")
	}
	if err := urls.CheckURL(callback); err != nil {
		return invalid("completion_callback", "cannot be used: %v", err)
	}
	return nil
}
