package instances_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestInstances(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Instances Suite")
}
