package lrp_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestLRP(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s LRP Service Suite")
}
