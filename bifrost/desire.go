package bifrost

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// A desire is checked whole by validateDesire, then built by convertDesire, which checks
// nothing: a refused request never reaches the backend. The checks a desire shares with updates,
// tasks and staging follow the two in this file, in the order validateDesire takes them, so that
// a reader following a desire stays here.
//
// Among them are Kubernetes' own rules for the values that end up in Kubernetes objects, applied
// with the validation functions Kubernetes publishes (the API server runs the same ones), so that
// a request Kubernetes would refuse is refused whole, with the field and the rule named, instead
// of half-written (see opi/README.md, "Validation").

// desireParts are the values of a desire that validation parses to check them; conversion
// takes them as they are.
type desireParts struct {
	docker   *models.DockerLifecycle
	registry *opi.PrivateRegistry
	ports    []int32
	routes   []opi.Route
	egress   []opi.EgressRule
}

// validateDesire checks every field of req in one pass. The order is the order of refusal: the
// first field found wrong is the one a 400 names. Lists are counted before anything walks them.
func validateDesire(req models.DesireLRPRequest, rules Rules) (desireParts, error) {
	var parts desireParts
	if err := validateGUID("guid", req.GUID); err != nil {
		return parts, err
	}
	if err := validateGUID("version", req.Version); err != nil {
		return parts, err
	}
	id := opi.LRPIdentifier{GUID: req.GUID, Version: req.Version}
	if req.ProcessGUID != "" && req.ProcessGUID != id.ProcessGUID() {
		return parts, invalid("process_guid", "%q does not match guid-version %q", req.ProcessGUID, id.ProcessGUID())
	}
	if err := checkBounds(
		bound{field: "ports", value: int64(len(req.Ports)), highest: MaxPorts, count: true},
		bound{field: "environment", value: int64(len(req.Environment)), highest: MaxEnvEntries, count: true},
		bound{field: "egress_rules", value: int64(len(req.EgressRules)), highest: MaxEgressRules, count: true},
		bound{field: "volume_mounts", value: int64(len(req.VolumeMounts)), highest: MaxVolumeMounts, count: true},
	); err != nil {
		return parts, err
	}

	var err error
	if parts.docker, parts.registry, err = dockerImage(req.Lifecycle, "runs"); err != nil {
		return parts, err
	}
	if err := checkBounds(
		bound{field: "instances", value: int64(req.Instances), highest: MaxInstances},
		bound{field: "memory_mb", value: req.MemoryMB, lowest: 1, highest: MaxMemoryMB},
		bound{field: "disk_mb", value: req.DiskMB, highest: MaxDiskMB},
		bound{field: "cpu_weight", value: req.CPUWeight, highest: MaxCPUWeight},
		bound{field: "health_check_timeout_ms", value: req.HealthCheckTimeoutMs, highest: math.MaxInt32},
		bound{field: "start_timeout_ms", value: req.StartTimeoutMs, highest: math.MaxInt32},
	); err != nil {
		return parts, err
	}

	parts.ports = make([]int32, 0, len(req.Ports))
	for _, p := range req.Ports {
		if err := checkBounds(bound{field: "ports", value: p, lowest: 1, highest: MaxPort}); err != nil {
			return parts, err
		}
		parts.ports = append(parts.ports, int32(p))
	}
	// Then each port once: a Kubernetes Service takes each port once.
	seenPorts := make(map[int32]bool, len(parts.ports))
	for _, p := range parts.ports {
		if seenPorts[p] {
			return parts, invalid("ports", "lists port %d twice; a Kubernetes Service takes each port once", p)
		}
		seenPorts[p] = true
	}

	switch hc := req.HealthCheckType; hc {
	case "", opi.HealthCheckProcess, opi.HealthCheckNone:
	case opi.HealthCheckPort, opi.HealthCheckHTTP:
		if len(parts.ports) == 0 {
			return parts, invalid("health_check_type", "%q needs at least one port in ports", hc)
		}
	default:
		return parts, invalid("health_check_type", "%q is not one of port, http, process, none", hc)
	}

	if err := ValidateEnv("environment", req.Environment, rules); err != nil {
		return parts, err
	}
	if parts.routes, err = parseRoutes("routes", req.Routes); err != nil {
		return parts, err
	}
	// CC's user-defined annotations become pod annotations: Kubernetes' rules, with apimachinery's
	// ValidateAnnotations (qualified-name keys: an optional DNS-subdomain prefix and '/', then at
	// most 63 chars of [-._a-zA-Z0-9] starting and ending alphanumeric, case not mattering; at
	// most 256 KiB of keys and values), then each key, in sorted order, against rules' allow-list
	// of prefixes.
	const annotations = "user_defined_annotations"
	if errs := apimachineryvalidation.ValidateAnnotations(req.UserDefinedAnnotations, field.NewPath(annotations)); len(errs) > 0 {
		// apimachinery walks the map; sorted, the same bad key is named every time.
		sort.SliceStable(errs, func(i, j int) bool { return fmt.Sprint(errs[i].BadValue) < fmt.Sprint(errs[j].BadValue) })
		if e := errs[0]; e.Type != field.ErrorTypeTooLong {
			return parts, invalid(annotations, "has a key %q that is not a Kubernetes annotation key: %s", e.BadValue, e.Detail)
		}
		return parts, invalid(annotations, "are larger than the %d bytes (keys and values) Kubernetes allows", apimachineryvalidation.TotalAnnotationSizeLimitB)
	}
	prefixes := rules.UserAnnotationPrefixes
	if prefixes == nil {
		prefixes = DefaultUserAnnotationPrefixes
	}
	for _, k := range slices.Sorted(maps.Keys(req.UserDefinedAnnotations)) {
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		allowed := "none is allowed"
		if len(prefixes) > 0 {
			quoted := make([]string, len(prefixes))
			for i, p := range prefixes {
				quoted[i] = strconv.Quote(p)
			}
			allowed = "allowed are keys starting with " + strings.Join(quoted, ", ")
		}
		return parts, invalid(annotations, "has a key %q that opi does not pass to pods: %s (kubernetes.user_annotation_prefixes)", k, allowed)
	}
	if parts.egress, err = ConvertEgressRules(req.EgressRules); err != nil {
		return parts, err
	}

	for i, t := range req.PlacementTags {
		if strings.TrimSpace(t) == "" {
			return parts, invalid(fmt.Sprintf("placement_tags[%d]", i), "must not be empty")
		}
	}

	// Whether the orchestrator can serve a volume is the backend's to say; here, that each
	// mount names one and an absolute, distinct directory.
	mountDirs := map[string]bool{}
	for i, m := range req.VolumeMounts {
		mount := fmt.Sprintf("volume_mounts[%d]", i)
		if m.VolumeID == "" {
			return parts, invalid(mount+".volume_id", "is required")
		}
		if !path.IsAbs(m.MountDir) {
			return parts, invalid(mount+".mount_dir", "%q must be an absolute path", m.MountDir)
		}
		dir := path.Clean(m.MountDir)
		if dir == "/" {
			return parts, invalid(mount+".mount_dir", "must not be the root directory")
		}
		if mountDirs[dir] {
			return parts, invalid(mount+".mount_dir", "%q is mounted twice", dir)
		}
		mountDirs[dir] = true
	}
	return parts, nil
}

// convertDesire builds the LRP of a desire validateDesire accepted, with the parts it parsed.
func convertDesire(req models.DesireLRPRequest, parts desireParts) *opi.LRP {
	health := opi.HealthCheck{
		Type:           req.HealthCheckType,
		TimeoutMs:      req.HealthCheckTimeoutMs,
		StartTimeoutMs: req.StartTimeoutMs,
	}
	if req.HealthCheckHTTPEndpoint != nil {
		health.Endpoint = *req.HealthCheckHTTPEndpoint
	}
	if health.Type == "" {
		// CC always names one; Diego's default is a port check when there is a port.
		health.Type = opi.HealthCheckProcess
		if len(parts.ports) > 0 {
			health.Type = defaultHCType
		}
	}
	if health.Type == opi.HealthCheckHTTP && health.Endpoint == "" {
		health.Endpoint = "/"
	}

	env := make(map[string]string, len(req.Environment))
	maps.Copy(env, req.Environment)
	placement := append([]string(nil), req.PlacementTags...)
	mounts := make([]opi.VolumeMount, 0, len(req.VolumeMounts))
	for _, m := range req.VolumeMounts {
		mounts = append(mounts, opi.VolumeMount{VolumeID: m.VolumeID, MountDir: path.Clean(m.MountDir)})
	}

	return &opi.LRP{
		LRPIdentifier:          opi.LRPIdentifier{GUID: req.GUID, Version: req.Version},
		ProcessType:            req.ProcessType,
		AppGUID:                req.AppGUID,
		AppName:                req.AppName,
		SpaceGUID:              req.SpaceGUID,
		SpaceName:              req.SpaceName,
		OrganizationGUID:       req.OrganizationGUID,
		OrganizationName:       req.OrganizationName,
		Image:                  parts.docker.Image,
		Command:                parts.docker.Command,
		PrivateRegistry:        parts.registry,
		Env:                    env,
		Ports:                  parts.ports,
		Health:                 health,
		MemoryMB:               req.MemoryMB,
		DiskMB:                 req.DiskMB,
		CPUWeight:              int32(req.CPUWeight),
		Instances:              int32(req.Instances),
		Routes:                 parts.routes,
		LastUpdated:            req.LastUpdated,
		UserDefinedAnnotations: req.UserDefinedAnnotations,
		EgressRules:            parts.egress,
		PlacementTags:          placement,
		VolumeMounts:           mounts,
	}
}

// A bound is one of the contract's numeric bounds on a field: its value within lowest..highest,
// or, for a count (a list's length), at most highest.
type bound struct {
	field                  string
	value, lowest, highest int64
	count                  bool
}

// checkBounds refuses the first bound exceeded.
func checkBounds(bounds ...bound) error {
	for _, b := range bounds {
		switch {
		case b.count && b.value > b.highest:
			return invalid(b.field, "has %d entries, at most %d are allowed", b.value, b.highest)
		case !b.count && (b.value < b.lowest || b.value > b.highest):
			return invalid(b.field, "must be between %d and %d, got %d", b.lowest, b.highest, b.value)
		}
	}
	return nil
}

// ValidateIdentifier checks a guid and a version against the contract's bounds.
func ValidateIdentifier(id opi.LRPIdentifier) error {
	if err := validateGUID("guid", id.GUID); err != nil {
		return err
	}
	return validateGUID("version", id.Version)
}

func validateGUID(field, value string) error {
	switch {
	case value == "":
		return invalid(field, "is required")
	case len(value) > MaxGUIDLength:
		return invalid(field, "is %d characters long, at most %d are allowed", len(value), MaxGUIDLength)
	case !guidPattern.MatchString(value):
		return invalid(field, "%q may hold only lower-case letters, digits and '-'", value)
	}
	// It is a label value too, which must start and end with a letter or digit.
	return ValidateLabelValue(field, value)
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

// dockerImage is the request's docker lifecycle with its image checked as the kubelet parses it,
// and the registry its credentials are for (nil without credentials): a buildpack lifecycle
// (droplets, which opi cannot host) or none at all is refused; doing says what opi does with
// images, for the refusal ("runs", "stages").
func dockerImage(lifecycle models.Lifecycle, doing string) (*models.DockerLifecycle, *opi.PrivateRegistry, error) {
	docker := lifecycle.DockerLifecycle
	if docker == nil {
		if len(lifecycle.BuildpackLifecycle) > 0 && string(lifecycle.BuildpackLifecycle) != "null" {
			return nil, nil, invalid("lifecycle", "buildpack_lifecycle is not supported: opi %s docker images only (docker_lifecycle)", doing)
		}
		return nil, nil, invalid("lifecycle.docker_lifecycle", "is required")
	}
	if err := ValidateImage("lifecycle.docker_lifecycle.image", docker.Image); err != nil {
		return nil, nil, err
	}
	if docker.RegistryUsername == "" && docker.RegistryPassword == "" {
		return docker, nil, nil
	}
	return docker, &opi.PrivateRegistry{
		Server:   RegistryServer(docker.Image),
		Username: docker.RegistryUsername,
		Password: docker.RegistryPassword,
	}, nil
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

// RegistryServer is the registry an image is pulled from, as a docker config names it: the
// domain the kubelet's parser (github.com/distribution/reference) finds, Docker Hub's key for
// docker.io. An image that does not parse (refused before this is asked) falls back to Docker's
// rule: the first path component is a host when it has a '.' or ':' or is "localhost".
func RegistryServer(image string) string {
	if named, err := reference.ParseNormalizedNamed(image); err == nil {
		if domain := reference.Domain(named); domain != "docker.io" {
			return domain
		}
		return dockerHubServer
	}
	first, _, found := strings.Cut(image, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return dockerHubServer
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

// parseRoutes reads the cf-router routes, at most MaxRoutes hostnames; other routers are
// ignored. A cf-router value that is not a list of {hostname|hostnames, port} objects is
// malformed.
func parseRoutes(field string, routes models.Routes) ([]opi.Route, error) {
	raw, ok := routes[models.CFRouterKey]
	if !ok || string(raw) == "null" {
		return []opi.Route{}, nil
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, invalid(field+".cf-router", "must be a list of {\"hostname\",\"port\"} objects")
	}
	out := []opi.Route{}
	for i, entry := range entries {
		name := fmt.Sprintf("%s.cf-router[%d]", field, i)
		var route models.CFRoute
		if err := json.Unmarshal(entry, &route); err != nil {
			return nil, invalid(name, "must be a {\"hostname\",\"port\"} object")
		}
		if err := checkBounds(bound{field: name + ".port", value: route.Port, lowest: 1, highest: MaxPort}); err != nil {
			return nil, err
		}
		// CC sends "hostname", Diego's own form "hostnames"; each is checked under its own name.
		type named struct{ field, hostname string }
		var hostnames []named
		if route.Hostname != "" {
			hostnames = append(hostnames, named{name + ".hostname", route.Hostname})
		}
		for j, h := range route.Hostnames {
			hostnames = append(hostnames, named{fmt.Sprintf("%s.hostnames[%d]", name, j), h})
		}
		if len(hostnames) == 0 {
			return nil, invalid(name, "has no hostname")
		}
		for _, h := range hostnames {
			if h.hostname == "" {
				return nil, invalid(name, "has an empty hostname")
			}
			if err := ValidateRouteHostname(h.field, h.hostname); err != nil {
				return nil, err
			}
			out = append(out, opi.Route{Hostname: h.hostname, Port: int32(route.Port)})
		}
	}
	if err := checkBounds(bound{field: field, value: int64(len(out)), highest: MaxRoutes, count: true}); err != nil {
		return nil, err
	}
	return out, nil
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
