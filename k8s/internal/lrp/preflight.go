package lrp

import (
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// An update's checks against the API server's rules before it writes; a desire's are
// preflight, in desire.go, which also holds refusedObject.

// preflightUpdate checks the workload's annotations as an update would leave them: the
// annotations opi keeps (rebuilt from the cache's record) with the update's applied. kind names
// the workload in the refusal ("deployment").
func preflightUpdate(d *store.WorkloadRecord, id opi.LRPIdentifier, changed map[string]string, kind string) error {
	annotations := map[string]string{
		names.AnnotationProcessGUID: id.ProcessGUID(),
		names.AnnotationLastUpdated: d.LastUpdated,
		names.AnnotationProcessType: d.ProcessType,
		names.AnnotationAppName:     d.AppName,
		names.AnnotationSpaceName:   d.SpaceName,
		names.AnnotationSpaceGUID:   d.SpaceGUID,
		names.AnnotationOrgName:     d.OrgName,
		names.AnnotationOrgGUID:     d.OrgGUID,
		names.AnnotationRoutes:      d.RoutesAnnotation,
		names.AnnotationHealthCheck: d.HealthCheckAnnotation,
	}
	for k, v := range changed {
		annotations[k] = v
	}
	return refusedObject(kind, d.Name, apimachineryvalidation.ValidateAnnotations(annotations, field.NewPath("metadata", "annotations")))
}
