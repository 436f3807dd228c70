package store

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/names"
)

// PodSteps are the steps of a pod's life its lifecycle lines (package k8s/internal/lifecycle, the CELL
// lines of opi's leader) are made of, as the pod's status shows them; the times are Unix
// seconds (what the API server keeps), 0 when the step has not happened (or was undone).
type PodSteps struct {
	// ScheduledAt is when PodScheduled became True.
	ScheduledAt int64
	// Unschedulable is why no node takes the pod while PodScheduled is False: for the
	// scheduler's Unschedulable, the instance's placement error as CC gets it
	// ("Insufficient resources: memory"), else the condition's reason and clipped message.
	// UnschedulableAt is when it became False.
	Unschedulable   string
	UnschedulableAt int64
	// StartedAt is when the app container's current run started (0 while it does not run).
	StartedAt int64
}

// podSteps reads a pod's steps from its status.
func podSteps(p *corev1.Pod) PodSteps {
	var s PodSteps
	if c := podCondition(p, corev1.PodScheduled); c != nil {
		switch c.Status {
		case corev1.ConditionTrue:
			s.ScheduledAt = unixSeconds(c.LastTransitionTime)
		case corev1.ConditionFalse:
			// The same words as placement_error: a developer reads one reason in `cf app`
			// and in `cf logs`, and not the scheduler's report on every node.
			if c.Reason == corev1.PodReasonUnschedulable {
				s.Unschedulable = placementError(c.Message, p.Labels[names.LabelPlacementTag])
			} else {
				s.Unschedulable = c.Reason
				if c.Message != "" {
					s.Unschedulable += ": " + shortSchedulerMessage(c.Message)
				}
			}
			s.UnschedulableAt = unixSeconds(c.LastTransitionTime)
		}
	}
	if c := appContainerStatus(p); c != nil && c.State.Running != nil {
		s.StartedAt = unixSeconds(c.State.Running.StartedAt)
	}
	return s
}

// unixSeconds is t in Unix seconds, 0 for a zero time.
func unixSeconds(t metav1.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
