package bifrost

import (
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

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
