package staging_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/testsupport/fakekube"
)

func TestStaging(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Staging Suite")
}

var _ = BeforeSuite(backendtest.KlogToGinkgo)

// actionsSince describes the client's actions from index from on, as "verb resource name",
// watches and lists excluded.
func actionsSince(client *fake.Clientset, from int) []string {
	return fakekube.ActionsSince(client, from, "watch", "list")
}
