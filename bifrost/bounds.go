package bifrost

import (
	"github.com/opi-bridge/opi/models"
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

// checkCount refuses a list of n entries beyond highest.
func checkCount(field string, n, highest int) error {
	if n > highest {
		return invalid(field, "has %d entries, at most %d are allowed", n, highest)
	}
	return nil
}

// checkDesireCounts checks a desire's lists against the count bounds, before any of them is
// converted.
func checkDesireCounts(req models.DesireLRPRequest) error {
	if err := checkCount("ports", len(req.Ports), MaxPorts); err != nil {
		return err
	}
	if err := checkCount("environment", len(req.Environment), MaxEnvEntries); err != nil {
		return err
	}
	if err := checkCount("egress_rules", len(req.EgressRules), MaxEgressRules); err != nil {
		return err
	}
	return checkCount("volume_mounts", len(req.VolumeMounts), MaxVolumeMounts)
}

// checkEnvListCount checks a task's or a staging's environment list.
func checkEnvListCount(env []models.EnvironmentVariable) error {
	return checkCount("environment", len(env), MaxEnvEntries)
}
