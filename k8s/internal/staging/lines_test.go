package staging_test

import (
	"context"
	"errors"
	"strings"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/encoding/prototext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/staging"
	"github.com/opi-bridge/opi/k8s/internal/staging/stagingfakes"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("The STG lines of a docker staging", func() {
	var (
		reader   *fakes.FakeImageReader
		notifier *fakes.FakeStagingNotifier
		lines    *stagingfakes.FakeEmitter
		service  *staging.Service
		gone     func() bool
	)

	BeforeEach(func() {
		client := backendtest.NewClient()
		reader = new(fakes.FakeImageReader)
		notifier = new(fakes.FakeStagingNotifier)
		lines = new(stagingfakes.FakeEmitter)
		lines.EmitReturns(true)
		var err error
		service, err = staging.New(lagertest.NewTestLogger("staging"), staging.Config{Namespace: backendtest.Namespace},
			staging.Deps{Client: client, ImageReader: reader, Notifier: notifier, Lines: lines})
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			service.Run(ctx)
		}()
		DeferCleanup(func() {
			cancel()
			Eventually(done).Should(BeClosed())
		})
		gone = func() bool {
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Get(context.Background(), staging.SecretName(stagingGUID), metav1.GetOptions{})
			return err != nil
		}
	})

	// sent are the lines' envelopes, each checked for the identity of the app's staging, and
	// their payloads; no envelope holds the registry's user or password.
	sent := func() []string {
		GinkgoHelper()
		var payloads []string
		for i := range lines.EmitCallCount() {
			env, ack := lines.EmitArgsForCall(i)
			Expect(ack).To(BeNil())
			Expect(env.GetSourceId()).To(Equal("app-guid"))
			Expect(env.GetInstanceId()).To(Equal("0"))
			Expect(env.GetTags()).To(Equal(map[string]string{"source_type": "STG", "app_id": "app-guid"}))
			Expect(env.GetLog().GetType()).To(Equal(loggregator_v2.Log_OUT))
			Expect(env.GetTimestamp()).NotTo(BeZero())
			all := prototext.Format(env)
			Expect(all).NotTo(ContainSubstring("s3cret-pw"))
			Expect(all).NotTo(ContainSubstring("stager"))
			payloads = append(payloads, string(env.GetLog().GetPayload()))
		}
		return payloads
	}

	It("says what it reads and what was staged, without the registry's credentials", func() {
		reader.ReadImageConfigReturns(&opi.ImageConfig{
			Entrypoint: []string{"/bin/app"}, Cmd: []string{"--port", "8080"}, User: "vcap",
			Ports: []opi.ImagePort{{Port: 8080, Protocol: "tcp"}, {Port: 9090, Protocol: "udp"}},
		}, nil)
		Expect(service.Stage(context.Background(), sampleStaging())).To(Succeed())
		Eventually(gone).Should(BeTrue())
		Expect(sent()).To(Equal([]string{
			"Reading the configuration of image registry.example.com/team/app:v1 with the registry credentials given",
			"Staging complete: image registry.example.com/team/app:v1, process types: web, ports: 8080/tcp 9090/udp, user: vcap, command: /bin/app --port 8080",
		}))
	})

	It("gives a failure's line the very reason CC is given, once while CC's delivery is retried", func() {
		reason := "image registry.example.com/team/app:v1 not found"
		reader.ReadImageConfigReturns(nil, errors.New(reason))
		notifier.StagingCompletedReturnsOnCall(0, context.DeadlineExceeded)
		Expect(service.Stage(context.Background(), sampleStaging())).To(Succeed())
		Eventually(gone).Should(BeTrue())
		Expect(notifier.StagingCompletedCallCount()).To(Equal(2))
		_, completion := notifier.StagingCompletedArgsForCall(1)
		Expect(completion.FailureReason).To(Equal(reason))
		Expect(sent()).To(Equal([]string{
			"Reading the configuration of image registry.example.com/team/app:v1 with the registry credentials given",
			"Staging failed: " + reason,
		}))
	})

	It("leaves credentials typed into the image reference out of its lines", func() {
		reader.ReadImageConfigReturns(&opi.ImageConfig{}, nil)
		s := sampleStaging()
		s.Image = "https://stager:s3cret-pw@registry.example.com/team/app:v1"
		s.PrivateRegistry = nil
		Expect(service.Stage(context.Background(), s)).To(Succeed())
		Eventually(gone).Should(BeTrue())
		payloads := sent()
		Expect(payloads).To(Equal([]string{
			"Reading the configuration of image registry.example.com/team/app:v1",
			"Staging complete: image registry.example.com/team/app:v1, process types: web, ports: none exposed, user: the image's default",
		}))
		Expect(strings.Join(payloads, "\n")).NotTo(ContainSubstring("s3cret-pw"))
	})
})
