package localkube_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/localkube"
)

func TestLocalkube(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Localkube Suite")
}

var (
	binDir  string
	cluster *localkube.Cluster
)

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	binDir, err = localkube.BinDir()
	Expect(err).NotTo(HaveOccurred())

	cluster, err = localkube.Start(ctx, localkube.Options{BinDir: binDir, Nodes: 1, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(20*time.Minute)) // a cold BinDir builds the binaries first

var _ = AfterSuite(func() {
	if cluster == nil {
		return
	}
	pids := cluster.PIDs()
	Expect(cluster.Stop()).To(Succeed())
	expectAllGone(pids)
})

func init() {
	SetDefaultEventuallyTimeout(time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
}

// testContext bounds one client call so a hung API server fails the spec instead of the run.
func testContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Second)
}
