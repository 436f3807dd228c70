package janitor_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/k8s/internal/backendtest"
)

func TestJanitor(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Janitor Suite")
}

// Some specs start a backend: its informers log through klog.
var _ = BeforeSuite(backendtest.KlogToGinkgo)
