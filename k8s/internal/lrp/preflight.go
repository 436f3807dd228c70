package lrp

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// maxObjectBytes bounds the encoded size of an object opi creates. etcd refuses requests above
// 1.5 MiB by default, and the stored object also carries its managed fields (about the size of
// the spec's field names again), so 1 MiB of spec keeps a safe distance.
const maxObjectBytes = 1 << 20

// preflight runs, before a desire's first write, the checks the API server would run on what
// opi derived from the request (names, labels, annotations, a Secret's size, an object's size),
// with the validation functions apimachinery publishes. bifrost has checked the request's own
// fields by the same rules; this catches what only the assembled objects show (opi's own
// annotations, say, made too large by a long app name or many routes), so that a desire
// Kubernetes would refuse halfway is refused whole. serviceMeta is the Service's metadata, if
// the LRP gets one.
func preflight(secrets []*corev1.Secret, w workload.Object, serviceMeta *metav1.ObjectMeta) error {
	for _, s := range secrets {
		errs := apimachineryvalidation.ValidateObjectMeta(&s.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		total := 0
		for key, value := range s.Data {
			for _, msg := range validation.IsConfigMapKey(key) {
				errs = append(errs, field.Invalid(field.NewPath("data"), key, msg))
			}
			total += len(value)
		}
		if total > corev1.MaxSecretSize {
			errs = append(errs, field.TooLong(field.NewPath("data"), "", corev1.MaxSecretSize))
		}
		if err := refusedObject("secret", s.Name, errs); err != nil {
			return err
		}
	}

	errs := apimachineryvalidation.ValidateObjectMeta(w.Meta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	template := field.NewPath("spec", "template", "metadata")
	errs = append(errs, metav1validation.ValidateLabels(w.Template.Labels, template.Child("labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(w.Template.Annotations, template.Child("annotations"))...)
	if size := w.Size(); size > maxObjectBytes {
		errs = append(errs, field.TooLong(field.NewPath("(encoded object)"), "", maxObjectBytes))
	}
	if err := refusedObject(w.Kind, w.Meta.Name, errs); err != nil {
		return err
	}

	if serviceMeta != nil {
		errs := apimachineryvalidation.ValidateObjectMeta(serviceMeta, true, apimachineryvalidation.NameIsDNS1035Label, field.NewPath("metadata"))
		if err := refusedObject("service", serviceMeta.Name, errs); err != nil {
			return err
		}
	}
	return nil
}

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

// refusedObject is nil without errors, else an opi.ErrInvalid naming the object and the first
// rule it breaks (the others usually follow from it).
func refusedObject(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the %s %s would break a rule of Kubernetes: %s", opi.ErrInvalid, kind, name, errs[0].Error())
}
