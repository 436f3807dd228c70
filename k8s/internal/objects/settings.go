package objects

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"
)

// Workload is what the operator configures for every LRP's pods (the root's Options).
type Workload struct {
	// ProbeTimeoutSeconds bounds one liveness or readiness check (and one startup check).
	ProbeTimeoutSeconds int32
	// MinReadySeconds is how long a new pod must stay Ready before a rollout counts it.
	MinReadySeconds int32
	// PodSecurity is PodSecurityBaseline or PodSecurityRestricted.
	PodSecurity string
	// InstanceIndexEnv sets CF_INSTANCE_INDEX from the pod's ordinal (StatefulSets only: a
	// Deployment's pod cannot know its index, ADR 0003).
	InstanceIndexEnv bool
}

// Defaults of PodOptions.
const (
	// DefaultProbeTimeout is Diego's per-check timeout.
	DefaultProbeTimeout = time.Second
	DefaultMinReady     = 10 * time.Second
)

// PodOptions are the operator's settings of every app pod, as durations and names; Workload
// turns them into what the builders take.
type PodOptions struct {
	// ProbeTimeout bounds each health check of an instance (default DefaultProbeTimeout;
	// rounded up to whole seconds). CC's health_check_timeout_ms is the start timeout, not this.
	ProbeTimeout time.Duration
	// MinReady is how long a new instance must stay Ready before a rollout counts it as
	// available (default DefaultMinReady; rounded up to whole seconds; negative: 0).
	MinReady time.Duration
	// PodSecurity is PodSecurityBaseline (default) or PodSecurityRestricted, for namespaces
	// that enforce the restricted Pod Security Standard.
	PodSecurity string
}

// Validate reports a setting the builders cannot work with.
func (o PodOptions) Validate() error {
	switch o.PodSecurity {
	case "", PodSecurityBaseline, PodSecurityRestricted:
	default:
		return fmt.Errorf("pod security %q is not one of %s, %s", o.PodSecurity, PodSecurityBaseline, PodSecurityRestricted)
	}
	if o.ProbeTimeout < 0 {
		return errors.New("probe timeout must not be negative")
	}
	return nil
}

// Workload is the builders' form of the settings, with the defaults applied; instanceIndexEnv
// sets CF_INSTANCE_INDEX from the pod's ordinal (StatefulSets).
func (o PodOptions) Workload(instanceIndexEnv bool) Workload {
	probe := o.ProbeTimeout
	if probe <= 0 {
		probe = DefaultProbeTimeout
	}
	minReady := o.MinReady
	if minReady == 0 {
		minReady = DefaultMinReady
	}
	return Workload{
		ProbeTimeoutSeconds: wholeSeconds(probe),
		MinReadySeconds:     wholeSeconds(minReady),
		PodSecurity:         cmp.Or(o.PodSecurity, PodSecurityBaseline),
		InstanceIndexEnv:    instanceIndexEnv,
	}
}

// wholeSeconds is d rounded up to whole seconds, 0 for d ≤ 0, at most MaxInt32.
func wholeSeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(min((d+time.Second-1)/time.Second, math.MaxInt32))
}
