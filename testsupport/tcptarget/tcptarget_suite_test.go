package tcptarget_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestTCPTarget(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "TCP Target Suite")
}
