package bifrost

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/opi-bridge/opi/models"
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

func checkRange(field string, value, lowest, highest int64) error {
	if value < lowest || value > highest {
		return invalid(field, "must be between %d and %d, got %d", lowest, highest, value)
	}
	return nil
}

// convertRoutes reads the cf-router routes; other routers are ignored. A cf-router value that
// is not a list of {hostname|hostnames, port} objects is malformed.
func convertRoutes(field string, routes models.Routes) ([]opi.Route, error) {
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
		if err := checkRange(name+".port", route.Port, 1, MaxPort); err != nil {
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
	return out, nil
}

// dockerImage is the request's docker lifecycle with its image checked as the kubelet parses it:
// a buildpack lifecycle (droplets, which opi cannot host) or none at all is refused; doing says
// what opi does with images, for the refusal ("runs", "stages").
func dockerImage(lifecycle models.Lifecycle, doing string) (*models.DockerLifecycle, error) {
	docker := lifecycle.DockerLifecycle
	if docker == nil {
		if len(lifecycle.BuildpackLifecycle) > 0 && string(lifecycle.BuildpackLifecycle) != "null" {
			return nil, invalid("lifecycle", "buildpack_lifecycle is not supported: opi %s docker images only (docker_lifecycle)", doing)
		}
		return nil, invalid("lifecycle.docker_lifecycle", "is required")
	}
	if err := ValidateImage("lifecycle.docker_lifecycle.image", docker.Image); err != nil {
		return nil, err
	}
	return docker, nil
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

// checkResources checks memory (at least minMemoryMB), disk and cpu weight against the
// contract's bounds.
func checkResources(memoryMB, minMemoryMB, diskMB, cpuWeight int64) error {
	if err := checkRange("memory_mb", memoryMB, minMemoryMB, MaxMemoryMB); err != nil {
		return err
	}
	if err := checkRange("disk_mb", diskMB, 0, MaxDiskMB); err != nil {
		return err
	}
	return checkRange("cpu_weight", cpuWeight, 0, MaxCPUWeight)
}
