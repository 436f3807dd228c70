package imageconfig_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestImageConfig(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Image Config Suite")
}
