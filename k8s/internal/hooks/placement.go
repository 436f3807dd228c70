package hooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// DefaultPlacementKey is the node label (and taint key) of isolation segments.
const DefaultPlacementKey = "cloudfoundry.org/isolation-segment"

// LabelPlacementTag is the pods' isolation segment (names.LabelPlacementTag: the read path
// decodes it, below the hooks).
const LabelPlacementTag = names.LabelPlacementTag

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
//
//   - shape: pods get the node selector <NodeLabel>=<tag> and, with a TaintKey, tolerate the
//     taint <TaintKey>=<tag>:NoSchedule.
//
//     The pod template is labelled with the tag (LabelPlacementTag).
//
// It owns no objects. Without nodes of the segment the pods stay unscheduled, and instances
// read back UNCLAIMED with Diego's placement error: found no compatible cell with placement
// tag "<tag>".
type placementHook struct {
	opts PlacementOptions
}

// NewPlacement is the placement hook with opts.
func NewPlacement(opts PlacementOptions) Hook {
	return &placementHook{opts: opts}
}

func (h *placementHook) Name() string { return "placement" }

func (h *placementHook) Check(_ context.Context, lrp *opi.LRP) error {
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

func (h *placementHook) Shape(lrp *opi.LRP, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec) {
	if len(lrp.PlacementTags) == 0 {
		return
	}
	tag := lrp.PlacementTags[0]
	label := h.opts.NodeLabel
	if label == "" {
		label = DefaultPlacementKey
	}
	// A copy: the template may share its labels map with the workload.
	labels := make(map[string]string, len(template.Labels)+1)
	for k, v := range template.Labels {
		labels[k] = v
	}
	labels[LabelPlacementTag] = tag
	template.Labels = labels
	spec := &template.Spec
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
