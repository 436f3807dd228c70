package k8s_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/k8s/internal/backendtest"
)

// The root's specs: its wiring (NewBackend, the leader work it assembles), its start-up and
// the layering of k8s/. The specs of each concern are beside its package under internal/.
func TestK8s(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Backend Suite")
}

var _ = BeforeSuite(backendtest.KlogToGinkgo)
