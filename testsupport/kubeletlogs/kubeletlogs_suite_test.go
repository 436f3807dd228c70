package kubeletlogs_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestKubeletLogs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Kubelet Logs Suite")
}
