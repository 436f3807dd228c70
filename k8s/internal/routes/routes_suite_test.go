package routes_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/k8s/internal/backendtest"
)

func TestRoutes(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Routes Suite")
}

// Some specs start a backend: its informers log through klog.
var _ = BeforeSuite(backendtest.KlogToGinkgo)
