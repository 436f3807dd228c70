package staging_test

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/staging"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/opi"
)

// The staging service's own specs are in staging_test.go; these prove its wiring in the backend
// (through k8s.NewBackend).
var _ = Describe("Staging wiring", func() {
	const stagingGUID = "3f6b1e2a-9c4d-4e5f-8a7b-6c5d4e3f2a1b"
	var (
		ctx      context.Context
		client   *fake.Clientset
		logger   *lagertest.TestLogger
		reader   *fakes.FakeImageReader
		notifier *fakes.FakeStagingNotifier
		name     string
	)
	sample := func() *opi.Staging {
		return &opi.Staging{
			GUID: stagingGUID, AppGUID: "app-guid", Image: "registry.example.com/team/app:v1",
			CallbackURL: "https://cc.internal:9023/internal/v3/staging/" + stagingGUID + "/build_completed",
		}
	}
	secretExists := func() bool {
		_, err := client.CoreV1().Secrets(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	// lead runs the backend's leader work until the test ends and waits for it to return.
	lead := func(b *k8s.Backend) { backendtest.Lead(b.RunLeaderWork) }
	// leaderWorks are the pieces of leader work b starts (RunLeaderWork's "starting" logs).
	leaderWorks := func(b *k8s.Backend) []string {
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		b.RunLeaderWork(ended)
		var works []string
		for _, entry := range logger.Logs() {
			if entry.Message == "k8s.k8s-backend.leader-work.starting" {
				works = append(works, entry.Data["work"].(string))
			}
		}
		return works
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		logger = lagertest.NewTestLogger("k8s")
		reader = new(fakes.FakeImageReader)
		notifier = new(fakes.FakeStagingNotifier)
		name = staging.SecretName(stagingGUID)
	})

	It("records a staging and works it off on the leader with an image reader and a notifier", func() {
		cfg := &opi.ImageConfig{Entrypoint: []string{"/bin/app"}}
		reader.ReadImageConfigReturns(cfg, nil)
		backend := backendtest.MustBackend(client, logger, k8s.Options{
			Namespace: backendtest.Namespace,
			Store:     store.Options{ReadWaitTimeout: 2 * time.Second},
			Notifiers: k8s.Notifiers{ImageReader: reader, Staging: notifier},
		})
		lead(backend)
		Expect(backend.Stage(ctx, sample())).To(Succeed())

		Eventually(secretExists).Should(BeFalse())
		Expect(notifier.StagingCompletedCallCount()).To(Equal(1))
		_, completion := notifier.StagingCompletedArgsForCall(0)
		Expect(completion.StagingGUID).To(Equal(stagingGUID))
		Expect(completion.Config).To(Equal(cfg))
	})

	It("records stagings without an image reader and a notifier, and runs no staging work", func() {
		backend := backendtest.MustBackend(client, logger, k8s.Options{Namespace: backendtest.Namespace})
		Expect(backend.Stage(ctx, sample())).To(Succeed())
		Expect(secretExists()).To(BeTrue())
		Expect(leaderWorks(backend)).NotTo(ContainElement("staging"))

		both := backendtest.MustBackend(client, logger, k8s.Options{Namespace: backendtest.Namespace, Notifiers: k8s.Notifiers{ImageReader: reader, Staging: notifier}})
		Expect(leaderWorks(both)).To(ContainElement("staging"))
	})

	DescribeTable("refuses staging half configured",
		func(opts k8s.Options) {
			opts.Namespace = backendtest.Namespace
			Expect(opts.Validate()).To(MatchError("staging needs both an image reader and a staging notifier"))

			// NewBackend validates: no backend is made that would accept stagings and never
			// deliver them.
			backend, err := k8s.NewBackend(client, logger, opts)
			Expect(err).To(MatchError("staging needs both an image reader and a staging notifier"))
			Expect(backend).To(BeNil())
			Expect(client.Actions()).To(BeEmpty())
		},
		Entry("a reader without a notifier", k8s.Options{Notifiers: k8s.Notifiers{ImageReader: new(fakes.FakeImageReader)}}),
		Entry("a notifier without a reader", k8s.Options{Notifiers: k8s.Notifiers{Staging: new(fakes.FakeStagingNotifier)}}),
	)
})
