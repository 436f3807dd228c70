package store

import (
	"cmp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// What a pod's status says of its instance, decoded once when the pod changes (RecordPod).

// Reasons a container waits with when its process keeps failing.
var crashReasons = map[string]bool{"CrashLoopBackOff": true, "Error": true}

// imageOrConfigReasons are the reasons a container waits with when it cannot be started at all:
// the kubelet retries them for ever, so without this the instance would stay CLAIMED and
// `cf push` would wait until it times out. Each maps to the text CC shows.
var imageOrConfigReasons = map[string]string{
	"ErrImagePull":               "Failed to pull the image",
	"ImagePullBackOff":           "Failed to pull the image",
	"InvalidImageName":           "Invalid image name",
	"ErrImageNeverPull":          "Image not present and never pulled",
	"CreateContainerConfigError": "Failed to configure the container",
	"CreateContainerError":       "Failed to create the container",
}

// maxPlacementMessage bounds the scheduler text quoted in a placement error (CC stores it).
const maxPlacementMessage = 120

// maxCrashMessage bounds the kubelet text quoted in a crash reason.
const maxCrashMessage = 160

// instanceState maps a pod to Diego's instance states (state, since in Unix nanoseconds, the
// placement error of an unplaced one and the reason of a crashed one):
//   - CRASHED: the pod failed (evicted, node shutdown), or the app container is waiting after
//     failures (CrashLoopBackOff, Error) or because it cannot be pulled or configured
//     (imageOrConfigReasons), or has terminated with a non-zero exit code;
//   - RUNNING: running and Ready (since the container started);
//   - UNCLAIMED: the scheduler cannot place it, with a Diego-worded placement error;
//   - CLAIMED: anything else (pending, pulling, starting, running but not ready yet).
//
// since is taken from the time the pod entered the state as Kubernetes records it, never from
// the time of the read, so it changes only when the state does.
func instanceState(pod *corev1.Pod) (state string, since int64, placement, reason string) {
	created := nanos(pod.CreationTimestamp)
	if crashed, since, reason := crashState(pod); crashed {
		if since == 0 {
			since = created
		}
		return opi.InstanceCrashed, since, "", reason
	}
	if ready := podCondition(pod, corev1.PodReady); pod.Status.Phase == corev1.PodRunning &&
		ready != nil && ready.Status == corev1.ConditionTrue {
		since := nanos(ready.LastTransitionTime)
		if s := appContainerStatus(pod); s != nil && s.State.Running != nil && !s.State.Running.StartedAt.IsZero() {
			since = nanos(s.State.Running.StartedAt)
		}
		return opi.InstanceRunning, since, "", ""
	}
	if scheduled := podCondition(pod, corev1.PodScheduled); scheduled != nil &&
		scheduled.Status == corev1.ConditionFalse && scheduled.Reason == corev1.PodReasonUnschedulable {
		return opi.InstanceUnclaimed, created, placementError(scheduled.Message, pod.Labels[names.LabelPlacementTag]), ""
	}
	return opi.InstanceClaimed, created, "", ""
}

// crashState reports whether the pod is crashed, since when (0 when unknown) and why, in words
// close to Diego's ("APP/PROC/WEB: Exited with status 1").
func crashState(pod *corev1.Pod) (bool, int64, string) {
	s := appContainerStatus(pod)
	proc := "APP/PROC/" + strings.ToUpper(cmp.Or(pod.Labels[names.LabelProcessType], "web"))
	var terminated *corev1.ContainerStateTerminated
	if s != nil {
		terminated = s.State.Terminated
	}
	if pod.Status.Phase == corev1.PodFailed {
		// The pod as a whole is over: the pod's own reason (eviction, node shutdown) says more
		// than its container's exit.
		since := notReadySince(pod)
		if terminated != nil {
			since = nanos(terminated.FinishedAt)
		}
		switch {
		case pod.Status.Reason == "Evicted":
			return true, since, withMessage("Instance was evicted", pod.Status.Message)
		case pod.Status.Reason != "":
			return true, since, withMessage("Instance failed: "+pod.Status.Reason, pod.Status.Message)
		case terminated != nil:
			return true, since, proc + ": " + objects.ExitDescription(terminated)
		}
		return true, since, "Instance failed"
	}
	if s == nil {
		return false, 0, ""
	}
	if terminated != nil && terminated.ExitCode != 0 {
		return true, nanos(terminated.FinishedAt), proc + ": " + objects.ExitDescription(terminated)
	}
	if w := s.State.Waiting; w != nil {
		if crashReasons[w.Reason] {
			if t := s.LastTerminationState.Terminated; t != nil {
				return true, nanos(t.FinishedAt), proc + ": " + objects.ExitDescription(t)
			}
			return true, 0, proc + ": Exited"
		}
		if text, ok := imageOrConfigReasons[w.Reason]; ok {
			// The kubelet alternates ErrImagePull and ImagePullBackOff: the time the pod last
			// stopped being ready stays put through both.
			return true, notReadySince(pod), withMessage(text, w.Message)
		}
	}
	return false, 0, ""
}

// readySince is when the pod became Ready (Unix nanoseconds), 0 while it is not Ready or is
// being deleted; a Ready condition without a time counts from the pod's creation.
func readySince(pod *corev1.Pod) int64 {
	ready := podCondition(pod, corev1.PodReady)
	if pod.DeletionTimestamp != nil || ready == nil || ready.Status != corev1.ConditionTrue {
		return 0
	}
	if t := nanos(ready.LastTransitionTime); t != 0 {
		return t
	}
	return max(nanos(pod.CreationTimestamp), 1)
}

// notReadySince is when the pod last became not ready, 0 when Kubernetes has not said.
func notReadySince(pod *corev1.Pod) int64 {
	if ready := podCondition(pod, corev1.PodReady); ready != nil && ready.Status != corev1.ConditionTrue {
		return nanos(ready.LastTransitionTime)
	}
	return 0
}

// withMessage appends the kubelet's or the evictor's message, bounded (CC stores it).
func withMessage(text, message string) string {
	message = strings.TrimSpace(message)
	if message == "" {
		return text
	}
	if len(message) > maxCrashMessage {
		message = strings.TrimSpace(message[:maxCrashMessage]) + "..."
	}
	return text + ": " + message
}

// placementError words the scheduler's reason the way Diego does, which CC shows. tag is the
// pod's isolation segment, if any.
func placementError(message, tag string) string {
	switch {
	case tag != "" && strings.Contains(message, "node affinity/selector"):
		return names.PlacementTagError(tag)
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
		if pod.Status.ContainerStatuses[i].Name == names.ContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	if len(pod.Status.ContainerStatuses) == 1 {
		return &pod.Status.ContainerStatuses[0]
	}
	return nil
}

// PodCrash is what the pod cache keeps of a pod whose app container has terminated at least
// once; nil (one pointer in the record) for the pods that never did, which are most of them.
// Shared: do not modify.
type PodCrash struct {
	// Count is how often the container has crashed: its restart count, plus one while it is
	// not running after a termination (terminated, or waiting to be restarted).
	Count int32
	// Reported is names.AnnotationCrashesReported (0 when absent or unreadable).
	Reported int32
	// The last termination: exit code, kubelet's reason (Error, OOMKilled, Completed...) and
	// when it finished, in Unix seconds (0 when unknown).
	ExitCode   int32
	Reason     string
	FinishedAt int64
}

// crashOf works out a pod's crashes from its app container's status; nil when it has none.
//
// A pod being deleted was terminated by whoever deleted it (a stop, a scale-down, a rolling
// update): its current termination is not a crash, only the ones before it are.
func crashOf(p *corev1.Pod) *PodCrash {
	s := appContainerStatus(p)
	if s == nil {
		return nil
	}
	count := s.RestartCount
	last := s.LastTerminationState.Terminated
	switch {
	case s.State.Terminated != nil && p.DeletionTimestamp == nil:
		count++
		last = s.State.Terminated
	case s.State.Waiting != nil && last != nil:
		// Waiting to be restarted after the last termination (CrashLoopBackOff): the restart
		// count does not include it yet.
		count++
	}
	if count <= 0 || last == nil {
		return nil
	}
	c := &PodCrash{
		Count:    count,
		ExitCode: last.ExitCode,
		Reason:   last.Reason,
	}
	if !last.FinishedAt.IsZero() {
		c.FinishedAt = last.FinishedAt.Unix()
	}
	if v, err := strconv.ParseInt(p.Annotations[names.AnnotationCrashesReported], 10, 32); err == nil && v > 0 {
		c.Reported = int32(v)
	}
	return c
}
