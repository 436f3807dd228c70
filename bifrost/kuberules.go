package bifrost

import (
	"fmt"
	"sort"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kubernetes' own rules for the values of a request that end up in Kubernetes objects. opi
// applies them before its first write, with the validation functions Kubernetes publishes (the
// API server runs the same ones), so that a request Kubernetes would refuse is refused whole,
// with the field and the rule named, instead of half-written. Converters of tasks and staging
// requests call them too (see opi/README.md, "Validation").

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

// ValidateUserAnnotations checks CC's user-defined annotations: Kubernetes' rules
// (ValidateAnnotations), then each key (in sorted order) against rules' allow-list of prefixes.
func ValidateUserAnnotations(fieldName string, annotations map[string]string, rules Rules) error {
	if err := ValidateAnnotations(fieldName, annotations); err != nil {
		return err
	}
	prefixes := rules.UserAnnotationPrefixes
	if prefixes == nil {
		prefixes = DefaultUserAnnotationPrefixes
	}
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !hasAnyPrefix(k, prefixes) {
			allowed := "none is allowed"
			if len(prefixes) > 0 {
				allowed = "allowed are keys starting with " + strings.Join(quoteAll(prefixes), ", ")
			}
			return invalid(fieldName, "has a key %q that opi does not pass to pods: %s (kubernetes.user_annotation_prefixes)", k, allowed)
		}
	}
	return nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// ValidateEnvName checks an environment variable name as the API server does for a container's
// env: validation.IsRelaxedEnvVarName, or validation.IsEnvVarName on a strict cluster.
func ValidateEnvName(fieldName, name string, rules Rules) error {
	check, rule := validation.IsRelaxedEnvVarName, "relaxed"
	if rules.StrictEnvNames {
		check, rule = validation.IsEnvVarName, "strict (this cluster's)"
	}
	if msgs := check(name); len(msgs) > 0 {
		return invalid(fieldName, "has a variable name %q that Kubernetes refuses under its %s rule: %s", name, rule, strings.Join(msgs, "; "))
	}
	return nil
}

// ValidateEnv checks every name of env (in sorted order, so the same bad name is reported every
// time) and its total size: names and values together at most MaxEnvBytes.
func ValidateEnv(fieldName string, env map[string]string, rules Rules) error {
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	total := 0
	for _, name := range names {
		if err := ValidateEnvName(fieldName, name, rules); err != nil {
			return err
		}
		total += len(name) + len(env[name])
	}
	if total > MaxEnvBytes {
		return invalid(fieldName, "is %d bytes (names and values), more than the %d a Kubernetes Secret holds", total, MaxEnvBytes)
	}
	return nil
}

// ValidateAnnotations checks annotations bound for a Kubernetes object: qualified-name keys
// (an optional DNS-subdomain prefix and '/', then at most 63 chars of [-._a-zA-Z0-9] starting
// and ending alphanumeric; case does not matter) and at most 256 KiB of keys and values, with
// apimachinery's ValidateAnnotations.
func ValidateAnnotations(fieldName string, annotations map[string]string) error {
	errs := apimachineryvalidation.ValidateAnnotations(annotations, field.NewPath(fieldName))
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool { return fmt.Sprint(errs[i].BadValue) < fmt.Sprint(errs[j].BadValue) })
	e := errs[0]
	if e.Type == field.ErrorTypeTooLong {
		return invalid(fieldName, "are larger than the %d bytes (keys and values) Kubernetes allows", apimachineryvalidation.TotalAnnotationSizeLimitB)
	}
	return invalid(fieldName, "has a key %q that is not a Kubernetes annotation key: %s", e.BadValue, e.Detail)
}

// ValidateLabelValue checks a value that opi puts into a label unchanged (guids and versions):
// at most 63 chars of [-._a-zA-Z0-9], starting and ending alphanumeric, or
// empty (validation.IsValidLabelValue).
func ValidateLabelValue(fieldName, value string) error {
	if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
		return invalid(fieldName, "%q cannot be a Kubernetes label value: %s", value, strings.Join(msgs, "; "))
	}
	return nil
}

// ValidateRouteHostname checks a route's hostname. Routing objects (Ingress, Gateway API
// routes) take a DNS-1123 subdomain or a wildcard one ("*.example.com"), lower case, at most 253
// chars. CC sends a route with a path as "host/path": the part before the first '/' is the
// hostname checked here; the path (from that '/' on) is kept unchanged for the routing objects
// to come, and must be printable ASCII without spaces, '?' or '#' (it is a URL path).
func ValidateRouteHostname(fieldName, hostname string) error {
	host, path, hasPath := strings.Cut(hostname, "/")
	check := validation.IsDNS1123Subdomain
	if strings.HasPrefix(host, "*.") {
		check = validation.IsWildcardDNS1123Subdomain
	}
	if msgs := check(host); len(msgs) > 0 {
		return invalid(fieldName, "%q is not a DNS name (RFC 1123 subdomain, optionally \"*.\"-prefixed): %s", host, strings.Join(msgs, "; "))
	}
	if hasPath {
		for i := 0; i < len(path); i++ {
			if c := path[i]; c <= ' ' || c > '~' || c == '?' || c == '#' {
				return invalid(fieldName, "%q has a path that is not a URL path (printable ASCII without spaces, '?' or '#')", hostname)
			}
		}
	}
	return nil
}

// ValidateImage checks an image reference as the kubelet does before pulling it: it parses it
// with github.com/distribution/reference's ParseNormalizedNamed, the parser the kubelet uses
// (an image it cannot parse is the pod's InvalidImageName). That library rather than
// go-containerregistry's name package, because agreeing with the kubelet is the point and
// go-containerregistry has a grammar of its own, close to it but not the same one.
// The API server itself refuses only an empty image or one with surrounding whitespace, which
// the parser refuses as well.
func ValidateImage(fieldName, image string) error {
	if image == "" {
		return invalid(fieldName, "is required")
	}
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return invalid(fieldName, "%q is not an image reference Kubernetes can pull: %v", image, err)
	}
	return nil
}

// ValidatePorts checks that ports are distinct: a Service may not list a port twice.
func ValidatePorts(fieldName string, ports []int32) error {
	seen := make(map[int32]bool, len(ports))
	for _, p := range ports {
		if seen[p] {
			return invalid(fieldName, "lists port %d twice; a Kubernetes Service takes each port once", p)
		}
		seen[p] = true
	}
	return nil
}
