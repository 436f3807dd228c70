package bifrost

import (
	"strings"

	"github.com/distribution/reference"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// ConvertDesire validates a DesireLRPRequest and turns it into an opi.LRP. Every check of the
// contract happens here, and those of Kubernetes for what the request puts into its objects
// (with rules for the cluster's own), so that a rejected request never reaches the backend.
func ConvertDesire(req models.DesireLRPRequest, rules Rules) (*opi.LRP, error) {
	id := opi.LRPIdentifier{GUID: req.GUID, Version: req.Version}
	if err := ValidateIdentifier(id); err != nil {
		return nil, err
	}
	if req.ProcessGUID != "" && req.ProcessGUID != id.ProcessGUID() {
		return nil, invalid("process_guid", "%q does not match guid-version %q", req.ProcessGUID, id.ProcessGUID())
	}

	if err := checkDesireCounts(req); err != nil {
		return nil, err
	}
	docker, err := dockerImage(req.Lifecycle, "runs")
	if err != nil {
		return nil, err
	}

	if err := checkRange("instances", int64(req.Instances), 0, MaxInstances); err != nil {
		return nil, err
	}
	if err := checkResources(req.MemoryMB, 1, req.DiskMB, req.CPUWeight); err != nil {
		return nil, err
	}
	if err := checkRange("health_check_timeout_ms", req.HealthCheckTimeoutMs, 0, 1<<31-1); err != nil {
		return nil, err
	}
	if err := checkRange("start_timeout_ms", req.StartTimeoutMs, 0, 1<<31-1); err != nil {
		return nil, err
	}
	ports := make([]int32, 0, len(req.Ports))
	for _, p := range req.Ports {
		if err := checkRange("ports", p, 1, MaxPort); err != nil {
			return nil, err
		}
		ports = append(ports, int32(p))
	}
	if err := ValidatePorts("ports", ports); err != nil {
		return nil, err
	}

	health, err := convertHealthCheck(req, len(ports) > 0)
	if err != nil {
		return nil, err
	}

	if err := ValidateEnv("environment", req.Environment, rules); err != nil {
		return nil, err
	}
	env := make(map[string]string, len(req.Environment))
	for name, value := range req.Environment {
		env[name] = value
	}

	routes, err := convertRoutes("routes", req.Routes)
	if err != nil {
		return nil, err
	}
	if err := checkCount("routes", len(routes), MaxRoutes); err != nil {
		return nil, err
	}
	if err := ValidateUserAnnotations("user_defined_annotations", req.UserDefinedAnnotations, rules); err != nil {
		return nil, err
	}
	egress, err := ConvertEgressRules(req.EgressRules)
	if err != nil {
		return nil, err
	}
	placement, err := convertPlacementTags(req.PlacementTags)
	if err != nil {
		return nil, err
	}
	mounts, err := convertVolumeMounts(req.VolumeMounts)
	if err != nil {
		return nil, err
	}

	lrp := &opi.LRP{
		LRPIdentifier:          id,
		ProcessType:            req.ProcessType,
		AppGUID:                req.AppGUID,
		AppName:                req.AppName,
		SpaceGUID:              req.SpaceGUID,
		SpaceName:              req.SpaceName,
		OrganizationGUID:       req.OrganizationGUID,
		OrganizationName:       req.OrganizationName,
		Image:                  docker.Image,
		Command:                docker.Command,
		Env:                    env,
		Ports:                  ports,
		Health:                 health,
		MemoryMB:               req.MemoryMB,
		DiskMB:                 req.DiskMB,
		CPUWeight:              int32(req.CPUWeight),
		Instances:              int32(req.Instances),
		Routes:                 routes,
		LastUpdated:            req.LastUpdated,
		UserDefinedAnnotations: req.UserDefinedAnnotations,
		EgressRules:            egress,
		PlacementTags:          placement,
		VolumeMounts:           mounts,
	}
	if docker.RegistryUsername != "" || docker.RegistryPassword != "" {
		lrp.PrivateRegistry = &opi.PrivateRegistry{
			Server:   RegistryServer(docker.Image),
			Username: docker.RegistryUsername,
			Password: docker.RegistryPassword,
		}
	}
	return lrp, nil
}

func convertHealthCheck(req models.DesireLRPRequest, hasPorts bool) (opi.HealthCheck, error) {
	hc := opi.HealthCheck{
		Type:           req.HealthCheckType,
		TimeoutMs:      req.HealthCheckTimeoutMs,
		StartTimeoutMs: req.StartTimeoutMs,
	}
	if req.HealthCheckHTTPEndpoint != nil {
		hc.Endpoint = *req.HealthCheckHTTPEndpoint
	}
	switch hc.Type {
	case "":
		// CC always names one; Diego's default is a port check when there is a port.
		hc.Type = opi.HealthCheckProcess
		if hasPorts {
			hc.Type = defaultHCType
		}
	case opi.HealthCheckPort, opi.HealthCheckHTTP:
		if !hasPorts {
			return hc, invalid("health_check_type", "%q needs at least one port in ports", hc.Type)
		}
	case opi.HealthCheckProcess, opi.HealthCheckNone:
	default:
		return hc, invalid("health_check_type", "%q is not one of port, http, process, none", hc.Type)
	}
	if hc.Type == opi.HealthCheckHTTP && hc.Endpoint == "" {
		hc.Endpoint = "/"
	}
	return hc, nil
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

// ConvertUpdate validates an update and turns it into an opi.LRPUpdate.
func ConvertUpdate(req models.UpdateDesiredLRPRequest) (opi.LRPIdentifier, opi.LRPUpdate, error) {
	id := opi.LRPIdentifier{GUID: req.GUID, Version: req.Version}
	if err := ValidateIdentifier(id); err != nil {
		return id, opi.LRPUpdate{}, err
	}
	if req.Update == nil {
		return id, opi.LRPUpdate{}, invalid("update", "is required")
	}
	var out opi.LRPUpdate
	if n := req.Update.Instances; n != nil {
		if err := checkRange("update.instances", int64(*n), 0, MaxInstances); err != nil {
			return id, out, err
		}
		instances := int32(*n)
		out.Instances = &instances
	}
	if req.Update.Routes != nil {
		routes, err := convertRoutes("update.routes", req.Update.Routes)
		if err != nil {
			return id, out, err
		}
		if err := checkCount("update.routes", len(routes), MaxRoutes); err != nil {
			return id, out, err
		}
		out.Routes = &routes
	}
	out.Annotation = req.Update.Annotation
	if img := req.Update.Image; img != nil {
		if err := ValidateImage("update.image", *img); err != nil {
			return id, out, err
		}
		out.Image = img
	}
	return id, out, nil
}

// SchedulingInfo is the Diego-shaped summary of an LRP that CC's sync loop reads.
func SchedulingInfo(lrp *opi.LRP) models.DesiredLRPSchedulingInfo {
	return models.DesiredLRPSchedulingInfo{
		DesiredLRPKey: models.DesiredLRPKey{
			ProcessGUID: lrp.ProcessGUID(),
			Domain:      cfAppsDomain,
			LogGUID:     lrp.AppGUID,
		},
		Annotation:         lrp.LastUpdated,
		Instances:          lrp.Instances,
		DesiredLRPResource: models.DesiredLRPResource{MemoryMB: lrp.MemoryMB, DiskMB: lrp.DiskMB},
		ModificationTag:    models.ModificationTag{Epoch: lrp.ModificationTag.Epoch, Index: lrp.ModificationTag.Index},
		GUID:               lrp.GUID,
		Version:            lrp.Version,
	}
}

// DesiredLRP is the Diego-shaped detail of an LRP.
func DesiredLRP(lrp *opi.LRP) models.DesiredLRP {
	routes := make([]models.Route, 0, len(lrp.Routes))
	for _, r := range lrp.Routes {
		routes = append(routes, models.Route{Hostname: r.Hostname, Port: r.Port})
	}
	ports := lrp.Ports
	if ports == nil {
		ports = []int32{}
	}
	return models.DesiredLRP{
		ProcessGUID:            lrp.ProcessGUID(),
		GUID:                   lrp.GUID,
		Version:                lrp.Version,
		Domain:                 cfAppsDomain,
		LogGUID:                lrp.AppGUID,
		ProcessType:            lrp.ProcessType,
		AppGUID:                lrp.AppGUID,
		AppName:                lrp.AppName,
		SpaceGUID:              lrp.SpaceGUID,
		SpaceName:              lrp.SpaceName,
		OrganizationGUID:       lrp.OrganizationGUID,
		OrganizationName:       lrp.OrganizationName,
		Instances:              lrp.Instances,
		Annotation:             lrp.LastUpdated,
		Image:                  lrp.Image,
		Command:                lrp.Command,
		Ports:                  ports,
		MemoryMB:               lrp.MemoryMB,
		DiskMB:                 lrp.DiskMB,
		CPUWeight:              lrp.CPUWeight,
		HealthCheckType:        lrp.Health.Type,
		Routes:                 map[string][]models.Route{models.CFRouterKey: routes},
		UserDefinedAnnotations: lrp.UserDefinedAnnotations,
		ModificationTag:        models.ModificationTag{Epoch: lrp.ModificationTag.Epoch, Index: lrp.ModificationTag.Index},
	}
}

// Instance is the Diego-shaped view of an instance. A crash reason goes out twice: as Diego's
// crash_reason, and as placement_error, the only key whose text CC shows (as the instance's
// details in `cf app`); CC keeps a CRASHED instance CRASHED whatever placement_error says.
func Instance(in *opi.Instance) models.Instance {
	out := models.Instance{Index: in.Index, State: in.State, Since: in.Since, PlacementError: in.PlacementError}
	if in.State == opi.InstanceCrashed && in.CrashReason != "" {
		out.CrashReason = in.CrashReason
		if out.PlacementError == "" {
			out.PlacementError = in.CrashReason
		}
	}
	return out
}
