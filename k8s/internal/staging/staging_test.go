package staging_test

import (
	"context"
	"errors"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/staging"
	"github.com/opi-bridge/opi/opi"
)

const stagingGUID = "3f6b1e2a-9c4d-4e5f-8a7b-6c5d4e3f2a1b"

func sampleStaging() *opi.Staging {
	return &opi.Staging{
		GUID: stagingGUID, AppGUID: "app-guid", AppName: "hello", SpaceGUID: "space-guid", OrgGUID: "org-guid",
		Image:           "registry.example.com/team/app:v1",
		PrivateRegistry: &opi.PrivateRegistry{Server: "registry.example.com", Username: "stager", Password: "s3cret-pw"},
		CallbackURL:     "https://cc.internal:9023/internal/v3/staging/" + stagingGUID + "/build_completed",
	}
}

var _ = Describe("Staging", func() {
	var (
		ctx      context.Context
		client   *fake.Clientset
		logger   *lagertest.TestLogger
		reader   *fakes.FakeImageReader
		notifier *fakes.FakeStagingNotifier
		service  *staging.Service
		name     string
	)

	newServiceWith := func(opts staging.Options) *staging.Service {
		s, err := staging.New(logger, staging.Config{Namespace: backendtest.Namespace, Options: opts}, staging.Deps{Client: client, ImageReader: reader, Notifier: notifier})
		Expect(err).NotTo(HaveOccurred())
		return s
	}
	newService := func() *staging.Service { return newServiceWith(staging.Options{}) }
	// lead runs the service's leader work until the test ends (or stop is called) and waits for
	// it to return.
	lead := func(s *staging.Service) (stop func()) { return backendtest.Lead(s.Run) }
	secretExists := func() bool {
		_, err := client.CoreV1().Secrets(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		logger = lagertest.NewTestLogger("staging")
		reader = new(fakes.FakeImageReader)
		notifier = new(fakes.FakeStagingNotifier)
		service = newService()
		name = staging.SecretName(stagingGUID)
	})

	Describe("Stage", func() {
		It("records the staging as one Secret, credentials in its data only", func() {
			before := time.Now()
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			Expect(actionsSince(client, 0)).To(Equal([]string{"create secrets " + name}))

			secret := backendtest.GetSecret(client, name)
			Expect(secret.Type).To(Equal(corev1.SecretTypeOpaque))
			Expect(secret.Labels).To(Equal(map[string]string{
				"opi-bridge.io/staging-guid":   stagingGUID,
				"opi-bridge.io/app-guid":       "app-guid",
				"opi-bridge.io/source-type":    "STG",
				"app.kubernetes.io/managed-by": "opi",
			}))
			Expect(secret.Annotations).To(HaveLen(1))
			accepted, err := time.Parse(time.RFC3339Nano, secret.Annotations["opi-bridge.io/accepted-at"])
			Expect(err).NotTo(HaveOccurred())
			Expect(accepted).To(BeTemporally(">=", before.Truncate(time.Nanosecond)))
			Expect(secret.Data).To(Equal(map[string][]byte{
				"image":             []byte("registry.example.com/team/app:v1"),
				"callback-url":      []byte(sampleStaging().CallbackURL),
				"registry-server":   []byte("registry.example.com"),
				"registry-username": []byte("stager"),
				"registry-password": []byte("s3cret-pw"),
			}))
			Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring("s3cret-pw"))
		})

		It("records a public image without credentials", func() {
			s := sampleStaging()
			s.PrivateRegistry = nil
			Expect(service.Stage(ctx, s)).To(Succeed())
			Expect(backendtest.GetSecret(client, name).Data).To(HaveLen(2))
		})

		It("leaves a pending staging as it is when it is staged again", func() {
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			first := backendtest.GetSecret(client, name)
			from := len(client.Actions())
			again := sampleStaging()
			again.Image = "other:v2"
			Expect(service.Stage(ctx, again)).To(Succeed())
			Expect(actionsSince(client, from)).To(Equal([]string{"create secrets " + name}))
			Expect(backendtest.GetSecret(client, name)).To(Equal(first))
		})

		It("says the orchestrator is unavailable when the API server is", func() {
			client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("etcd is down")
			})
			Expect(service.Stage(ctx, sampleStaging())).To(MatchError(opi.ErrUnavailable))
		})
	})

	Describe("the leader's staging work", func() {
		var cfg *opi.ImageConfig

		BeforeEach(func() {
			cfg = &opi.ImageConfig{Entrypoint: []string{"/bin/app"}, Ports: []opi.ImagePort{{Port: 8080, Protocol: "tcp"}}}
			reader.ReadImageConfigReturns(cfg, nil)
		})

		It("reads the image with the staging's credentials, delivers the result, then deletes the record", func() {
			lead(service)
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			accepted, err := time.Parse(time.RFC3339Nano, backendtest.GetSecret(client, name).Annotations["opi-bridge.io/accepted-at"])
			Expect(err).NotTo(HaveOccurred())

			Eventually(secretExists).Should(BeFalse())
			Expect(reader.ReadImageConfigCallCount()).To(Equal(1))
			_, image, registry := reader.ReadImageConfigArgsForCall(0)
			Expect(image).To(Equal("registry.example.com/team/app:v1"))
			Expect(registry).To(Equal(sampleStaging().PrivateRegistry))
			Expect(notifier.StagingCompletedCallCount()).To(Equal(1))
			_, completion := notifier.StagingCompletedArgsForCall(0)
			Expect(completion).To(Equal(opi.StagingCompletion{
				StagingGUID: stagingGUID, CallbackURL: sampleStaging().CallbackURL,
				Image: "registry.example.com/team/app:v1", Config: cfg, OwedSince: accepted,
			}))
			var deletes []k8stesting.DeleteAction
			for _, a := range client.Actions() {
				if d, ok := a.(k8stesting.DeleteAction); ok {
					deletes = append(deletes, d)
				}
			}
			Expect(deletes).To(HaveLen(1))
			Expect(deletes[0].GetName()).To(Equal(name))
			Expect(deletes[0].GetDeleteOptions().Preconditions.UID).NotTo(BeNil())
			Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring("s3cret-pw"))
		})

		It("delivers a failure with the reader's reason when the image cannot be read", func() {
			reader.ReadImageConfigReturns(nil, errors.New("image registry.example.com/team/app:v1 not found"))
			lead(service)
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())

			Eventually(secretExists).Should(BeFalse())
			_, completion := notifier.StagingCompletedArgsForCall(0)
			Expect(completion.Config).To(BeNil())
			Expect(completion.Failed()).To(BeTrue())
			Expect(completion.FailureReason).To(Equal("image registry.example.com/team/app:v1 not found"))
		})

		It("keeps the record while the result is owed, and delivers it again", func() {
			notifier.StagingCompletedReturnsOnCall(0, context.DeadlineExceeded)
			lead(service)
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())

			Eventually(secretExists).Should(BeFalse())
			Expect(notifier.StagingCompletedCallCount()).To(Equal(2))
		})

		It("works off the records left from before it started (a restart or a new leader)", func() {
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())

			lead(service)
			Eventually(secretExists).Should(BeFalse())
			Expect(notifier.StagingCompletedCallCount()).To(Equal(1))
		})

		It("leaves the record when its leadership ends before CC has the result", func() {
			delivering := make(chan struct{})
			notifier.StagingCompletedStub = func(ctx context.Context, _ opi.StagingCompletion) error {
				close(delivering)
				<-ctx.Done()
				return ctx.Err()
			}
			stop := lead(service)
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			Eventually(delivering).Should(BeClosed())
			stop()
			Expect(secretExists()).To(BeTrue())

			// The next leader delivers it.
			notifier.StagingCompletedStub = nil
			next := newService()
			lead(next)
			Eventually(secretExists).Should(BeFalse())
			Expect(notifier.StagingCompletedCallCount()).To(Equal(2))
		})

		It("leaves Secrets that are not staging records alone", func() {
			lead(service)
			other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Name: "app-env", Namespace: backendtest.Namespace, Labels: map[string]string{"opi-bridge.io/source-type": "APP"},
			}}
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, other, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			Eventually(secretExists).Should(BeFalse())
			_, err = client.CoreV1().Secrets(backendtest.Namespace).Get(ctx, "app-env", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
		})

		It("deletes a record it cannot use instead of retrying it forever", func() {
			broken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: backendtest.Namespace, Labels: map[string]string{"opi-bridge.io/source-type": "STG"},
			}}
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, broken, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			lead(service)
			Eventually(secretExists).Should(BeFalse())
			Expect(notifier.StagingCompletedCallCount()).To(BeZero())
		})

		// annotate sets an annotation of the staging record, as an earlier leader left it.
		annotate := func(key, value string) {
			secret := backendtest.GetSecret(client, name)
			secret.Annotations[key] = value
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		It("counts the attempt on the record before the read starts", func() {
			var counted []string
			reader.ReadImageConfigStub = func(context.Context, string, *opi.PrivateRegistry) (*opi.ImageConfig, error) {
				counted = append(counted, backendtest.GetSecret(client, name).Annotations["opi-bridge.io/staging-attempts"])
				return cfg, nil
			}
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			annotate("opi-bridge.io/staging-attempts", "2")
			lead(service)

			Eventually(secretExists).Should(BeFalse())
			Expect(counted).To(Equal([]string{"3"}))
			_, completion := notifier.StagingCompletedArgsForCall(0)
			Expect(completion.Config).To(Equal(cfg))
		})

		It("settles a record at its attempts bound as a StagingError without reading (a read that killed opi is not tried again)", func() {
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			annotate("opi-bridge.io/staging-attempts", "5")
			lead(service)

			Eventually(secretExists).Should(BeFalse())
			Expect(reader.ReadImageConfigCallCount()).To(BeZero())
			Expect(notifier.StagingCompletedCallCount()).To(Equal(1))
			_, completion := notifier.StagingCompletedArgsForCall(0)
			Expect(completion.Config).To(BeNil())
			Expect(completion.FailureReason).To(Equal("staging gave up reading the image after repeated attempts"))
		})

		It("settles a record older than its age bound without reading", func() {
			service = newServiceWith(staging.Options{MaxAge: time.Minute})
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			annotate("opi-bridge.io/accepted-at", time.Now().Add(-2*time.Minute).UTC().Format(time.RFC3339Nano))
			lead(service)

			Eventually(secretExists).Should(BeFalse())
			Expect(reader.ReadImageConfigCallCount()).To(BeZero())
			_, completion := notifier.StagingCompletedArgsForCall(0)
			Expect(completion.FailureReason).To(Equal("staging gave up reading the image after repeated attempts"))
		})

		It("reads while the configured bound allows, and settles at it", func() {
			service = newServiceWith(staging.Options{MaxAttempts: 2})
			// Each read ends with the leadership, as an out-of-memory kill would.
			reading := make(chan struct{}, 2)
			reader.ReadImageConfigStub = func(ctx context.Context, _ string, _ *opi.PrivateRegistry) (*opi.ImageConfig, error) {
				reading <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())
			for range 2 {
				stop := lead(service)
				Eventually(reading).Should(Receive())
				stop()
			}
			Expect(backendtest.GetSecret(client, name).Annotations["opi-bridge.io/staging-attempts"]).To(Equal("2"))

			lead(service)
			Eventually(secretExists).Should(BeFalse())
			Expect(reader.ReadImageConfigCallCount()).To(Equal(2))
			_, completion := notifier.StagingCompletedArgsForCall(0)
			Expect(completion.FailureReason).To(Equal("staging gave up reading the image after repeated attempts"))
		})

		It("delivers what it read once while CC refuses, past the attempts bound (a busy CC is not a failed read)", func() {
			service = newServiceWith(staging.Options{MaxAttempts: 2})
			for i := range 4 {
				notifier.StagingCompletedReturnsOnCall(i, errors.New("cloud controller is busy"))
			}
			lead(service)
			Expect(service.Stage(ctx, sampleStaging())).To(Succeed())

			Eventually(secretExists, 30*time.Second).Should(BeFalse())
			Expect(notifier.StagingCompletedCallCount()).To(Equal(5))
			Expect(reader.ReadImageConfigCallCount()).To(Equal(1))
			_, completion := notifier.StagingCompletedArgsForCall(4)
			Expect(completion.Failed()).To(BeFalse())
			Expect(completion.Config).To(Equal(cfg))
		})

	})

	Describe("New", func() {
		DescribeTable("refuses staging half configured",
			func(withReader, withNotifier bool, ok bool) {
				deps := staging.Deps{Client: client}
				if withReader {
					deps.ImageReader = reader
				}
				if withNotifier {
					deps.Notifier = notifier
				}
				s, err := staging.New(logger, staging.Config{Namespace: backendtest.Namespace, Options: staging.Options{}}, deps)
				if ok {
					Expect(deps.Check()).To(Succeed())
					Expect(err).NotTo(HaveOccurred())
					Expect(s.Enabled()).To(Equal(withReader))
					return
				}
				Expect(err).To(MatchError("staging needs both an image reader and a staging notifier"))
				Expect(deps.Check()).To(MatchError(err.Error()))
				Expect(s).To(BeNil())
			},
			Entry("neither", false, false, true),
			Entry("both", true, true, true),
			Entry("a reader alone", true, false, false),
			Entry("a notifier alone", false, true, false),
		)

		It("refuses a missing client", func() {
			_, err := staging.New(logger, staging.Config{Namespace: backendtest.Namespace, Options: staging.Options{}}, staging.Deps{ImageReader: reader, Notifier: notifier})
			Expect(err).To(MatchError("staging needs a Kubernetes client"))
		})

		It("records stagings without an image reader and a notifier, and is not enabled", func() {
			plain, err := staging.New(logger, staging.Config{Namespace: backendtest.Namespace, Options: staging.Options{}}, staging.Deps{Client: client})
			Expect(err).NotTo(HaveOccurred())
			Expect(plain.Enabled()).To(BeFalse())
			Expect(plain.Stage(ctx, sampleStaging())).To(Succeed())
			Expect(secretExists()).To(BeTrue())
		})
	})
})
