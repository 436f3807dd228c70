package janitor_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestJanitor(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Janitor Suite")
}
