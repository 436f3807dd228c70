package objects

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// ExitDescription words a container's termination the way Diego words an exit, one wording for
// every report of it: an instance's crash_reason (after its "APP/PROC/<TYPE>: " source), a crash
// report's exit_description and a failed task's failure_reason. "Exited with status 1", and
// "Exited with status 137 (out of memory)" when the kubelet says OOMKilled. The termination
// message is left out: it is the app's own output and may hold anything.
func ExitDescription(t *corev1.ContainerStateTerminated) string {
	text := fmt.Sprintf("Exited with status %d", t.ExitCode)
	if t.Reason == "OOMKilled" {
		text += " (out of memory)"
	}
	return text
}
