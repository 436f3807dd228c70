package objects_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/opi-bridge/opi/k8s/internal/objects"
)

var _ = DescribeTable("ExitDescription words an exit as Diego does",
	func(t corev1.ContainerStateTerminated, want string) {
		Expect(objects.ExitDescription(&t)).To(Equal(want))
	},
	Entry("an error", corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}, "Exited with status 3"),
	Entry("no reason", corev1.ContainerStateTerminated{ExitCode: 1}, "Exited with status 1"),
	Entry("a clean exit", corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}, "Exited with status 0"),
	Entry("killed for memory", corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}, "Exited with status 137 (out of memory)"),
	Entry("killed otherwise", corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: "the app's own words"}, "Exited with status 137"),
)
