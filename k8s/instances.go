package k8s

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/opi"
)

// Reasons a container waits with when its process keeps failing.
var crashReasons = map[string]bool{"CrashLoopBackOff": true, "Error": true}

// maxPlacementMessage bounds the scheduler text quoted in a placement error (CC stores it).
const maxPlacementMessage = 120

// GetInstances reports the LRP's instances from the pod cache (no API call). Deployments have
// no stable ordinals, so an instance's index is the rank of its pod among the LRP's pods that
// are not terminating, ordered by creation time then name; ranks at or above the desired
// count are not reported. ErrNotFound when the LRP is absent.
func (b *Backend) GetInstances(_ context.Context, id opi.LRPIdentifier) ([]*opi.Instance, error) {
	if err := b.checkSynced(); err != nil {
		return nil, err
	}
	deployment := b.cachedDeployment(id)
	if deployment == nil {
		return nil, notFound(id)
	}
	pods := rankedPods(b.cachedPods(id))
	if replicas := int(deployment.replicas); len(pods) > replicas {
		pods = pods[:replicas]
	}
	instances := make([]*opi.Instance, 0, len(pods))
	for i, pod := range pods {
		instances = append(instances, pod.instance(int32(i)))
	}
	return instances, nil
}

// instanceState maps a pod to Diego's instance states (state, since in Unix nanoseconds, and
// the placement error of an unplaced one):
//   - CRASHED: the pod failed, or the app container is waiting after failures
//     (CrashLoopBackOff, Error) or has terminated with a non-zero exit code;
//   - RUNNING: running and Ready (since the container started);
//   - UNCLAIMED: the scheduler cannot place it, with a Diego-worded placement error;
//   - CLAIMED: anything else (pending, pulling, starting, running but not ready yet).
func instanceState(pod *corev1.Pod) (state string, since int64, placement string) {
	created := nanos(pod.CreationTimestamp)
	if crashed, since := crashState(pod); crashed {
		if since == 0 {
			since = created
		}
		return opi.InstanceCrashed, since, ""
	}
	if ready := podCondition(pod, corev1.PodReady); pod.Status.Phase == corev1.PodRunning &&
		ready != nil && ready.Status == corev1.ConditionTrue {
		since := nanos(ready.LastTransitionTime)
		if s := appContainerStatus(pod); s != nil && s.State.Running != nil && !s.State.Running.StartedAt.IsZero() {
			since = nanos(s.State.Running.StartedAt)
		}
		return opi.InstanceRunning, since, ""
	}
	if scheduled := podCondition(pod, corev1.PodScheduled); scheduled != nil &&
		scheduled.Status == corev1.ConditionFalse && scheduled.Reason == corev1.PodReasonUnschedulable {
		return opi.InstanceUnclaimed, created, placementError(scheduled.Message, pod.Labels[LabelPlacementTag])
	}
	return opi.InstanceClaimed, created, ""
}

// crashState reports whether the pod is crashed and since when (0 when unknown).
func crashState(pod *corev1.Pod) (bool, int64) {
	s := appContainerStatus(pod)
	var finished int64
	if s != nil {
		if t := s.State.Terminated; t != nil {
			finished = nanos(t.FinishedAt)
			if t.ExitCode != 0 {
				return true, finished
			}
		}
		if w := s.State.Waiting; w != nil && crashReasons[w.Reason] {
			if t := s.LastTerminationState.Terminated; t != nil {
				finished = nanos(t.FinishedAt)
			}
			return true, finished
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return true, finished
	}
	return false, 0
}

// placementError words the scheduler's reason the way Diego does, which CC shows. tag is the
// pod's isolation segment, if any.
func placementError(message, tag string) string {
	switch {
	case tag != "" && strings.Contains(message, "node affinity/selector"):
		return placementTagError(tag)
	case strings.Contains(message, "Insufficient memory"):
		return "Insufficient resources: memory"
	case strings.Contains(message, "Insufficient cpu"):
		return "Insufficient resources: cpu"
	case strings.Contains(message, "Insufficient ephemeral-storage"):
		return "Insufficient resources: disk"
	}
	return "found no compatible cell: " + shortSchedulerMessage(message)
}

// shortSchedulerMessage drops the scheduler's preemption report and bounds the length.
func shortSchedulerMessage(message string) string {
	if i := strings.Index(message, "preemption:"); i >= 0 {
		message = message[:i]
	}
	message = strings.TrimSpace(message)
	if len(message) > maxPlacementMessage {
		message = strings.TrimSpace(message[:maxPlacementMessage]) + "..."
	} else {
		message = strings.TrimSuffix(message, ".")
	}
	if message == "" {
		return "unschedulable"
	}
	return message
}

// nanos is t in Unix nanoseconds, 0 for an unset time.
func nanos(t metav1.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// appContainerStatus is the status of the app's container (or the only one), nil if none.
func appContainerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == ContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	if len(pod.Status.ContainerStatuses) == 1 {
		return &pod.Status.ContainerStatuses[0]
	}
	return nil
}
