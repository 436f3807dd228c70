package loggregator_test

import (
	"context"
	"crypto/tls"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/tlsconfig"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

var _ = Describe("Server", func() {
	var (
		server *standin.Server
		conn   *grpc.ClientConn
		client loggregator_v2.IngressClient
	)

	dial := func(cfg *tls.Config) *grpc.ClientConn { return dialTLS(server.Addr(), cfg) }
	env := func(payload string) *loggregator_v2.Envelope {
		return &loggregator_v2.Envelope{SourceId: "app", InstanceId: "0", Message: &loggregator_v2.Envelope_Log{
			Log: &loggregator_v2.Log{Payload: []byte(payload)},
		}}
	}
	payloads := func() []string {
		var out []string
		for _, e := range server.Envelopes() {
			out = append(out, string(e.GetLog().GetPayload()))
		}
		return out
	}

	BeforeEach(func() {
		var err error
		server, err = standin.Start(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(server.Stop)
		cfg, err := clientTLS(server.ClientFiles())
		Expect(err).NotTo(HaveOccurred())
		conn = dial(cfg)
		client = loggregator_v2.NewIngressClient(conn)
	})

	It("records what the three ingress calls carry, in order", func() {
		ctx := context.Background()
		_, err := client.Send(ctx, &loggregator_v2.EnvelopeBatch{Batch: []*loggregator_v2.Envelope{env("send-1"), env("send-2")}})
		Expect(err).NotTo(HaveOccurred())
		Expect(server.Sends()).To(Equal(1))

		sender, err := client.Sender(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(sender.Send(env("sender"))).To(Succeed())
		_, err = sender.CloseAndRecv()
		Expect(err).NotTo(HaveOccurred())

		batches, err := client.BatchSender(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(batches.Send(&loggregator_v2.EnvelopeBatch{Batch: []*loggregator_v2.Envelope{env("batch")}})).To(Succeed())
		_, err = batches.CloseAndRecv()
		Expect(err).NotTo(HaveOccurred())

		Expect(payloads()).To(Equal([]string{"send-1", "send-2", "sender", "batch"}))
	})

	It("hands what arrives to an observer, with its arrival time, instead of recording it", func() {
		ctx := context.Background()
		_, err := client.Send(ctx, &loggregator_v2.EnvelopeBatch{Batch: []*loggregator_v2.Envelope{env("kept")}})
		Expect(err).NotTo(HaveOccurred())
		var observed []string
		var at time.Time
		before := time.Now()
		server.Observe(func(t time.Time, envs []*loggregator_v2.Envelope) {
			at = t
			for _, e := range envs {
				observed = append(observed, string(e.GetLog().GetPayload()))
			}
		})
		_, err = client.Send(ctx, &loggregator_v2.EnvelopeBatch{Batch: []*loggregator_v2.Envelope{env("a"), env("b")}})
		Expect(err).NotTo(HaveOccurred())
		Expect(observed).To(Equal([]string{"a", "b"}))
		Expect(at).NotTo(BeTemporally("<", before))
		Expect(payloads()).To(Equal([]string{"kept"}))
	})

	It("refuses a client without a certificate", func() {
		cfg, err := clientTLS(server.ClientFiles())
		Expect(err).NotTo(HaveOccurred())
		cfg.Certificates = nil
		_, err = loggregator_v2.NewIngressClient(dial(cfg)).Send(context.Background(), &loggregator_v2.EnvelopeBatch{Batch: []*loggregator_v2.Envelope{env("x")}})
		Expect(err).To(HaveOccurred())
		Expect(server.Envelopes()).To(BeEmpty())
	})

	It("stops, refuses calls, and serves again on the same port", func() {
		addr := server.Addr()
		server.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := client.Send(ctx, &loggregator_v2.EnvelopeBatch{Batch: []*loggregator_v2.Envelope{env("lost")}})
		Expect(err).To(HaveOccurred())

		Expect(server.Restart()).To(Succeed())
		Expect(server.Addr()).To(Equal(addr))
		Expect(server.Restart()).To(MatchError("the stand-in is running"))
		Eventually(func() error {
			_, err := client.Send(ctx, &loggregator_v2.EnvelopeBatch{Batch: []*loggregator_v2.Envelope{env("back")}})
			return err
		}).Should(Succeed())
		Expect(payloads()).To(Equal([]string{"back"}))
	})
})

// clientTLS is what the module's NewIngressTLSConfig builds (its root package is not imported
// here: it brings the batching client's dependencies along).
// dialTLS is a client connection to addr until the spec ends.
func dialTLS(addr string, cfg *tls.Config) *grpc.ClientConn {
	// A short reconnect backoff: gRPC's own starts at 1 s.
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 2, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: 10 * time.Second, // a connection attempt may take longer than the backoff
		}))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	return c
}

func clientTLS(files standin.ClientFiles) (*tls.Config, error) {
	return tlsconfig.Build(
		tlsconfig.WithInternalServiceDefaults(),
		tlsconfig.WithIdentityFromFile(files.Cert, files.Key),
	).Client(
		tlsconfig.WithAuthorityFromFile(files.CA),
		tlsconfig.WithServerName(standin.ServerName),
	)
}
