package loggregator_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestLoggregatorStandin(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Loggregator Stand-in Suite")
}
