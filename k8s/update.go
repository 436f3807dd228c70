package k8s

import (
	"context"
	"encoding/json"

	"code.cloudfoundry.org/lager/v3"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/opi"
)

// UpdateLRP changes the LRP's instance count, annotation, routes and image. It starts from the
// cached Deployment (one call when nothing raced it) and on a conflict re-reads it from the
// API and tries again. An update that changes nothing makes no write.
func (b *Backend) UpdateLRP(ctx context.Context, id opi.LRPIdentifier, update opi.LRPUpdate) error {
	logger := b.logger.Session("update-lrp", lager.Data{"process-guid": id.ProcessGUID()})
	if err := b.checkSynced(); err != nil {
		return err
	}
	current, err := b.findDeployment(ctx, id)
	if err != nil {
		return err
	}
	updated, changed, err := kube.UpdateOnConflict(ctx, b.client.AppsV1().Deployments(b.namespace),
		current.Name, current.DeepCopy(), func(d *appsv1.Deployment) bool {
			return applyUpdate(d, update)
		})
	if err != nil {
		return apiError(err, "update deployment")
	}
	if changed {
		b.waitForDeployment(ctx, logger, updated.Name, updated.ResourceVersion, true)
	}
	logger.Info("updated", lager.Data{"deployment": current.Name, "changed": changed})
	return nil
}

// applyUpdate sets the fields of update that are given on d and reports whether d changed.
func applyUpdate(d *appsv1.Deployment, update opi.LRPUpdate) bool {
	changed := false
	if update.Instances != nil && (d.Spec.Replicas == nil || *d.Spec.Replicas != *update.Instances) {
		d.Spec.Replicas = ptr(*update.Instances)
		changed = true
	}
	setAnnotation := func(key, value string) {
		if v, ok := d.Annotations[key]; ok && v == value {
			return
		}
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[key] = value
		changed = true
	}
	if update.Annotation != nil {
		setAnnotation(AnnotationLastUpdated, *update.Annotation)
	}
	if update.Routes != nil {
		routes := make([]routeJSON, 0, len(*update.Routes))
		for _, r := range *update.Routes {
			routes = append(routes, routeJSON{Hostname: r.Hostname, Port: r.Port})
		}
		routesJSON, _ := json.Marshal(routes) // strings and ints always marshal
		setAnnotation(AnnotationRoutes, string(routesJSON))
	}
	if update.Image != nil {
		if c := appContainer(&d.Spec.Template.Spec); c != nil && c.Image != *update.Image {
			c.Image = *update.Image
			changed = true
		}
	}
	return changed
}
