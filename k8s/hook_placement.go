package k8s

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opi-bridge/opi/opi"
)

// DefaultPlacementKey is the node label (and taint key) of isolation segments.
const DefaultPlacementKey = "cloudfoundry.org/isolation-segment"

// PlacementOptions configure where an LRP with placement tags (an isolation segment) runs.
type PlacementOptions struct {
	// NodeLabel is the node label whose value is the segment (default DefaultPlacementKey).
	NodeLabel string
	// TaintKey, when set, is the key of the NoSchedule taint that keeps other apps off a
	// segment's nodes; pods of the segment tolerate it with the segment as value.
	TaintKey string
}

// placementHook runs an LRP with a placement tag on the nodes of that isolation segment:
//
//   - check: at most one tag (a node has one segment), and a valid label value;
//   - shape: pods get the node selector <NodeLabel>=<tag> and, with a TaintKey, tolerate the
//     taint <TaintKey>=<tag>:NoSchedule.
//
// It owns no objects. Without nodes of the segment the pods stay unscheduled, and instances
// read back UNCLAIMED with the scheduler's reason as Diego's placement error ("found no
// compatible cell: ... didn't match Pod's node affinity/selector").
type placementHook struct {
	noHook
	opts PlacementOptions
}

func (h *placementHook) hookName() string { return "placement" }

func (h *placementHook) check(_ context.Context, lrp *opi.LRP) error {
	switch {
	case len(lrp.PlacementTags) == 0:
		return nil
	case len(lrp.PlacementTags) > 1:
		return fmt.Errorf("%w: placement_tags: %v names more than one isolation segment; a node belongs to one", opi.ErrInvalid, lrp.PlacementTags)
	}
	if errs := validation.IsValidLabelValue(lrp.PlacementTags[0]); len(errs) > 0 {
		return fmt.Errorf("%w: placement_tags: %q cannot be a node label value: %v", opi.ErrInvalid, lrp.PlacementTags[0], errs)
	}
	return nil
}

func (h *placementHook) shape(lrp *opi.LRP, d *appsv1.Deployment) {
	if len(lrp.PlacementTags) == 0 {
		return
	}
	tag := lrp.PlacementTags[0]
	label := h.opts.NodeLabel
	if label == "" {
		label = DefaultPlacementKey
	}
	spec := &d.Spec.Template.Spec
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[label] = tag
	if h.opts.TaintKey != "" {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key:      h.opts.TaintKey,
			Operator: corev1.TolerationOpEqual,
			Value:    tag,
			Effect:   corev1.TaintEffectNoSchedule,
		})
	}
}
