package lrp

import (
	"context"
	"encoding/json"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// UpdateLRP changes the LRP's instance count, annotation, routes and image with one strategic
// merge patch of just those fields. The hooks act first (routing objects for new routes, the
// PodDisruptionBudget for a new instance count) and the patch, which carries CC's last_updated
// token, last: an update interrupted between them leaves the old token, so CC's sync sends it
// again and it completes. A patch carries no resourceVersion and sets absolute values,
// so concurrent writers (CC's workers, the workload controller writing status) cannot make
// it conflict, and the cache, which keeps only what reads need of a workload, is enough to
// decide what changed. An update that changes nothing makes no write.
func (s *Service) UpdateLRP(ctx context.Context, id opi.LRPIdentifier, update opi.LRPUpdate) error {
	logger := s.logger.Session("update-lrp", lager.Data{"process-guid": id.ProcessGUID()})
	if err := s.cache.CheckWritable(ctx); err != nil {
		return err
	}
	current, err := s.cache.FindWorkload(ctx, id)
	if err != nil {
		return err
	}
	patch, changed := updatePatch(current, update)
	if !changed {
		logger.Info("unchanged", lager.Data{s.kindName(): current.Name})
		return nil
	}
	if err := preflightUpdate(current, id, updateAnnotations(update), s.kindName()); err != nil {
		logger.Info("refused-before-writing", lager.Data{"reason": err.Error()})
		return err
	}
	before := current.LRP()
	after := applyUpdate(before, update)
	if err := s.checkHooks(ctx, after); err != nil {
		return err
	}
	if err := s.runUpdatedHooks(ctx, logger, s.targetOf(current, after), before, update); err != nil {
		return err
	}
	// One patch: a refusal (422, or 403 from a webhook) changes nothing, so there is nothing to
	// undo.
	updated, err := s.kind.Patch(ctx, current.Name, patch)
	if err != nil {
		return kube.Refusal(err, "update "+s.kindName())
	}
	if err := s.cache.WaitForWorkload(ctx, logger, updated, true, s.liveCheck(updated)); err != nil {
		return err
	}
	logger.Info("updated", lager.Data{s.kindName(): current.Name})
	return nil
}

// workloadPatch is the part of a workload (Deployment or StatefulSet: the same fields) an
// update may change.
type workloadPatch struct {
	Metadata *patchMetadata `json:"metadata,omitempty"`
	Spec     *patchSpec     `json:"spec,omitempty"`
}

type patchMetadata struct {
	Annotations map[string]string `json:"annotations"`
}

type patchSpec struct {
	Replicas *int32         `json:"replicas,omitempty"`
	Template *patchTemplate `json:"template,omitempty"`
}

type patchTemplate struct {
	Spec patchPodSpec `json:"spec"`
}

type patchPodSpec struct {
	// Containers merge by name in a strategic merge patch: only the app's image is replaced.
	Containers []patchContainer `json:"containers"`
}

type patchContainer struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

// updateAnnotations are the workload annotations update sets.
func updateAnnotations(update opi.LRPUpdate) map[string]string {
	out := map[string]string{}
	if update.Annotation != nil {
		out[names.AnnotationLastUpdated] = *update.Annotation
	}
	if update.Routes != nil {
		out[names.AnnotationRoutes] = objects.RoutesAnnotation(*update.Routes)
	}
	return out
}

// updatePatch is the strategic merge patch that applies update to d, and whether it would
// change anything. The patch holds every field the update gives, not only those that differ from
// d: d comes from the cache and may lag a concurrent update, and CC's update must land whole
// (instances and annotation from the same request), never mixed with another. Only an update
// that changes nothing at all is skipped.
func updatePatch(d *store.WorkloadRecord, update opi.LRPUpdate) ([]byte, bool) {
	var p workloadPatch
	changed := false
	if update.Instances != nil {
		p.Spec = &patchSpec{Replicas: ptr.To(*update.Instances)}
		changed = changed || d.ReplicaCount != *update.Instances
	}
	setAnnotation := func(key, value, current string) {
		if p.Metadata == nil {
			p.Metadata = &patchMetadata{Annotations: map[string]string{}}
		}
		p.Metadata.Annotations[key] = value
		changed = changed || current != value
	}
	if update.Annotation != nil {
		setAnnotation(names.AnnotationLastUpdated, *update.Annotation, d.LastUpdated)
	}
	if update.Routes != nil {
		setAnnotation(names.AnnotationRoutes, objects.RoutesAnnotation(*update.Routes), d.RoutesAnnotation)
	}
	if update.Image != nil {
		if p.Spec == nil {
			p.Spec = &patchSpec{}
		}
		p.Spec.Template = &patchTemplate{Spec: patchPodSpec{Containers: []patchContainer{{Name: names.ContainerName, Image: *update.Image}}}}
		changed = changed || d.Image != *update.Image
	}
	if !changed {
		return nil, false
	}
	body, _ := json.Marshal(p) // strings and ints always marshal
	return body, true
}

// applyUpdate is a copy of lrp with update's fields applied.
func applyUpdate(lrp *opi.LRP, update opi.LRPUpdate) *opi.LRP {
	out := *lrp
	if update.Instances != nil {
		out.Instances = *update.Instances
	}
	if update.Routes != nil {
		out.Routes = *update.Routes
	}
	if update.Annotation != nil {
		out.LastUpdated = *update.Annotation
	}
	if update.Image != nil {
		out.Image = *update.Image
	}
	return &out
}
