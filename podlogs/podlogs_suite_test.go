package podlogs_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestPodlogs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Podlogs Suite")
}
