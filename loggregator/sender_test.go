package loggregator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/opi-bridge/opi/loggregator"
	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

var _ = Describe("Sender", func() {
	var (
		ingress *standin.Server
		logger  *lagertest.TestLogger
		cfg     loggregator.SenderConfig
	)

	BeforeEach(func() {
		var err error
		ingress, err = standin.Start(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ingress.Stop)
		files := ingress.ClientFiles()
		cfg = loggregator.SenderConfig{
			Addr: ingress.Addr(), CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key,
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			DrainTimeout: -1, // the specs of the drain at stop set it
		}
		logger = lagertest.NewTestLogger("test")
	})

	// start makes a sender and runs it until the spec ends (Run must have returned by then).
	start := func() *loggregator.Sender {
		s, err := loggregator.NewSender(cfg, logger)
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		DeferCleanup(func() {
			cancel()
			Eventually(done).Should(Receive(MatchError(context.Canceled)))
			Expect(s.Close()).To(Succeed())
		})
		return s
	}
	lines := func(payloads ...string) []*loggregator_v2.Envelope {
		var envs []*loggregator_v2.Envelope
		for i, p := range payloads {
			envs = append(envs, logEnvelope(at.Add(time.Duration(i)), loggregator_v2.Log_OUT, p))
		}
		return envs
	}
	received := func() []*loggregator_v2.Envelope { return ingress.Envelopes() }
	matching := func(want []*loggregator_v2.Envelope) func([]*loggregator_v2.Envelope) bool {
		return func(got []*loggregator_v2.Envelope) bool { return equalEnvelopes(got, want) }
	}

	It("delivers the exact envelopes in order and acknowledges each once it is delivered", func() {
		s := start()
		var mu sync.Mutex
		var acked []int
		want := append(lines("one", "two"), loggregator.NewContainerMetrics(web, at, loggregator.Usage{CPUPercent: 1}))
		for i, env := range want {
			Expect(s.Emit(env, func() { mu.Lock(); acked = append(acked, i); mu.Unlock() })).To(BeTrue())
		}
		Eventually(received).Should(Satisfy(matching(want)))
		Eventually(func() []int { mu.Lock(); defer mu.Unlock(); return append([]int(nil), acked...) }).Should(Equal([]int{0, 1, 2}))
		st := s.Stats()
		st.PeakBuffered, st.PeakBufferedBytes = 0, 0 // how many were buffered at once depends on the Sends
		Expect(st).To(Equal(loggregator.SenderStats{Delivered: 3}))
	})

	It("keeps what it could not send through an outage and delivers it, in batches, once the ingress is back", func() {
		cfg.MaxBatchEnvelopes = 2
		ingress.Stop()
		s := start()
		want := lines("a", "b", "c", "d", "e")
		for _, env := range want {
			Expect(s.Emit(env, nil)).To(BeTrue())
		}
		Eventually(func() uint64 { return s.Stats().FailedSends }).Should(BeNumerically(">=", 2))
		Expect(s.Stats().Buffered).To(Equal(5))
		Expect(s.Stats().Delivered).To(BeZero())
		Eventually(logger).Should(gbytes.Say("send-failed-retrying"))

		Expect(ingress.Restart()).To(Succeed())
		Eventually(received).Should(Satisfy(matching(want)))
		Expect(ingress.Sends()).To(Equal(3))
		Eventually(logger).Should(gbytes.Say("send-succeeded-again"))
		// The stand-in records a batch before its Send returns: the buffer empties just after.
		Eventually(func() loggregator.SenderStats { return s.Stats() }).Should(And(
			HaveField("Buffered", BeZero()), HaveField("BufferedBytes", BeZero())))
	})

	It("drops and counts what does not fit while the ingress is down, logs it once, and sends again when it is back", func() {
		cfg.MaxBufferedEnvelopes = 3
		ingress.Stop()
		s := start()
		envs := lines("a", "b", "c", "d", "e")
		var accepted []bool
		for _, env := range envs {
			accepted = append(accepted, s.Emit(env, nil))
		}
		Expect(accepted).To(Equal([]bool{true, true, true, false, false}))
		Expect(s.Stats().Dropped).To(Equal(uint64(2)))
		drops := 0
		for _, m := range logger.LogMessages() {
			if m == "test.loggregator-sender.buffer-full-dropping" {
				drops++
			}
		}
		Expect(drops).To(Equal(1))

		Expect(ingress.Restart()).To(Succeed())
		Eventually(received).Should(Satisfy(matching(envs[:3])))
		Eventually(func() int { return s.Stats().Buffered }).Should(BeZero())
		more := lines("f")
		Expect(s.Emit(more[0], nil)).To(BeTrue())
		Eventually(received).Should(Satisfy(matching(append(envs[:3:3], more...))))
		Expect(logger.Logs()).To(ContainElement(And(
			HaveField("Message", "test.loggregator-sender.buffer-has-room-again"),
			HaveField("Data", HaveKeyWithValue("dropped", BeNumerically("==", 2))),
		)))
		Expect(s.Stats().Dropped).To(Equal(uint64(2)))
	})

	It("makes EmitWait wait for room through an outage longer than the buffer, never holding more than the bound, and delivers every envelope in order", func() {
		cfg.MaxBufferedEnvelopes = 3
		ingress.Stop()
		s := start()
		want := lines("a", "b", "c", "d", "e", "f", "g")
		emitted := make(chan int, len(want))
		go func() {
			defer GinkgoRecover()
			for i, env := range want {
				Expect(s.EmitWait(context.Background(), "a", env, nil)).To(Succeed())
				emitted <- i
			}
		}()
		// The first three fit; the fourth waits (the stand-in is down: nothing leaves).
		Eventually(emitted).Should(Receive(Equal(0)))
		Eventually(emitted).Should(Receive(Equal(1)))
		Eventually(emitted).Should(Receive(Equal(2)))
		Eventually(func() uint64 { return s.Stats().Waits }).Should(Equal(uint64(1)))
		Eventually(func() uint64 { return s.Stats().FailedSends }).Should(BeNumerically(">=", 2))
		Expect(emitted).NotTo(Receive())

		Expect(ingress.Restart()).To(Succeed())
		Eventually(received).Should(Satisfy(matching(want)))
		Eventually(emitted).Should(HaveLen(4)) // 3 to 6, once each
		Eventually(func() int { return s.Stats().Buffered }).Should(BeZero())
		st := s.Stats()
		Expect(st.Dropped).To(BeZero())
		Expect(st.Delivered).To(Equal(uint64(len(want))))
		Expect(st.PeakBuffered).To(Equal(3))
	})

	It("gives up an EmitWait when its context ends, buffering nothing", func() {
		cfg.MaxBufferedEnvelopes = 1
		ingress.Stop()
		s := start()
		envs := lines("a", "b")
		Expect(s.EmitWait(context.Background(), "a", envs[0], nil)).To(Succeed())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.EmitWait(ctx, "a", envs[1], nil) }()
		Eventually(func() uint64 { return s.Stats().Waits }).Should(Equal(uint64(1)))
		cancel()
		Eventually(done).Should(Receive(MatchError(context.Canceled)))
		Expect(ingress.Restart()).To(Succeed())
		Eventually(received).Should(Satisfy(matching(envs[:1])))
		Eventually(func() int { return s.Stats().Buffered }).Should(BeZero())
		Expect(s.Stats().Delivered).To(Equal(uint64(1)))
	})

	It("lets EmitWait buffer an envelope larger than the byte bound once the buffer is empty", func() {
		big := lines("0123456789")[0]
		cfg.MaxBufferedBytes = len(mustMarshal(big)) - 1
		s := start()
		Expect(s.EmitWait(context.Background(), "a", big, nil)).To(Succeed())
		Eventually(received).Should(Satisfy(matching([]*loggregator_v2.Envelope{big})))
	})

	It("bounds the buffer's bytes as well", func() {
		one := lines("0123456789")[0]
		cfg.MaxBufferedBytes = 2*len(mustMarshal(one)) + 1
		ingress.Stop()
		s := start()
		Expect(s.Emit(one, nil)).To(BeTrue())
		Expect(s.Emit(one, nil)).To(BeTrue())
		Expect(s.Emit(one, nil)).To(BeFalse())
		Expect(s.Stats().Dropped).To(Equal(uint64(1)))
	})

	It("delivers nothing to an ingress that does not trust its certificate", func() {
		other, err := standin.Start(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(other.Stop)
		files := other.ClientFiles()
		cfg.CertFile, cfg.KeyFile = files.Cert, files.Key // signed by the other stand-in's CA
		s := start()
		Expect(s.Emit(lines("a")[0], nil)).To(BeTrue())
		Eventually(func() uint64 { return s.Stats().FailedSends }).Should(BeNumerically(">=", 1))
		Expect(ingress.Envelopes()).To(BeEmpty())
	})

	// payload is an envelope's log text.
	payload := func(env *loggregator_v2.Envelope) string { return string(env.GetLog().GetPayload()) }

	It("shares the batches between sources: once both are queued, a quiet source's line waits behind at most a quantum and one envelope of a noisy one", func() {
		cfg.Quantum = 1000
		cfg.MaxBatchEnvelopes = 7
		s, err := loggregator.NewSender(cfg, logger)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s.Close)
		var noisy, quiet []*loggregator_v2.Envelope
		for i := range 40 {
			noisy = append(noisy, logEnvelope(at, loggregator_v2.Log_OUT, fmt.Sprintf("noisy %02d %s", i, strings.Repeat("n", 400))))
		}
		for i := range 5 {
			quiet = append(quiet, logEnvelope(at, loggregator_v2.Log_OUT, fmt.Sprintf("quiet %d", i)))
		}
		var mu sync.Mutex
		var acked []string
		ack := func(env *loggregator_v2.Envelope) func() {
			return func() { mu.Lock(); acked = append(acked, payload(env)); mu.Unlock() }
		}
		// The noisy source queued first, all of it: a single queue would send all of it first.
		for _, env := range noisy {
			Expect(s.EmitWait(context.Background(), "noisy/opi", env, ack(env))).To(Succeed())
		}
		for _, env := range quiet {
			Expect(s.EmitWait(context.Background(), "quiet/opi", env, ack(env))).To(Succeed())
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		DeferCleanup(func() { cancel(); Eventually(done).Should(Receive()) })
		Eventually(func() int { return len(received()) }).Should(Equal(45))

		got := received()
		noisyBound := cfg.Quantum + len(mustMarshal(noisy[0]))
		var order []string
		noisyBetween, quietSeen := 0, 0
		for _, env := range got {
			order = append(order, payload(env))
			if strings.HasPrefix(payload(env), "quiet") {
				Expect(noisyBetween).To(BeNumerically("<=", noisyBound), "noisy bytes before %q", payload(env))
				noisyBetween = 0
				quietSeen++
				continue
			}
			if quietSeen < len(quiet) {
				noisyBetween += len(mustMarshal(env))
			}
		}
		Expect(quietSeen).To(Equal(len(quiet)))
		// Each source's lines go out, and are acknowledged, in the order they came.
		var wantNoisy, wantQuiet []string
		for _, env := range noisy {
			wantNoisy = append(wantNoisy, payload(env))
		}
		for _, env := range quiet {
			wantQuiet = append(wantQuiet, payload(env))
		}
		of := func(prefix string, in []string) []string {
			var out []string
			for _, p := range in {
				if strings.HasPrefix(p, prefix) {
					out = append(out, p)
				}
			}
			return out
		}
		Expect(of("noisy", order)).To(Equal(wantNoisy))
		Expect(of("quiet", order)).To(Equal(wantQuiet))
		Eventually(func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), acked...) }).Should(Equal(order))
	})

	Describe("at stop", func() {
		// runStopped runs s with a context that has already ended: only the drain sends.
		runStopped := func(s *loggregator.Sender) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			Expect(s.Run(ctx)).To(MatchError(context.Canceled))
		}

		It("delivers and acknowledges what it buffered before Run returns", func() {
			cfg.DrainTimeout = time.Minute
			s, err := loggregator.NewSender(cfg, logger)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(s.Close)
			want := lines("a", "b", "c")
			acked := 0
			for _, env := range want {
				Expect(s.EmitWait(context.Background(), "a", env, func() { acked++ })).To(Succeed())
			}
			runStopped(s)
			Expect(received()).To(Satisfy(matching(want)))
			Expect(acked).To(Equal(3))
			Expect(s.Stats()).To(And(HaveField("Buffered", BeZero()), HaveField("Delivered", Equal(uint64(3)))))
		})

		It("keeps what it could not deliver within the drain's bound, unacknowledged", func() {
			cfg.DrainTimeout = 50 * time.Millisecond
			ingress.Stop()
			s, err := loggregator.NewSender(cfg, logger)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(s.Close)
			acked := 0
			for _, env := range lines("a", "b") {
				Expect(s.EmitWait(context.Background(), "a", env, func() { acked++ })).To(Succeed())
			}
			runStopped(s)
			Expect(acked).To(BeZero())
			Expect(s.Stats().Buffered).To(Equal(2))
			Expect(logger).To(gbytes.Say("stopped-with-undelivered"))
		})
	})

	DescribeTable("refuses a configuration it cannot use",
		func(change func(*loggregator.SenderConfig), says string) {
			change(&cfg)
			_, err := loggregator.NewSender(cfg, lager.NewLogger("test"))
			Expect(err).To(MatchError(ContainSubstring(says)))
		},
		Entry("no port", func(c *loggregator.SenderConfig) { c.Addr = "localhost" }, "is not host:port"),
		Entry("no key", func(c *loggregator.SenderConfig) { c.KeyFile = "" }, "needs mutual TLS"),
		Entry("a CA file that is missing", func(c *loggregator.SenderConfig) { c.CAFile = "/nonexistent/ca.crt" }, "load loggregator TLS files"),
		Entry("a certificate that is no PEM", func(c *loggregator.SenderConfig) {
			bad := filepath.Join(GinkgoT().TempDir(), "bad.crt")
			Expect(os.WriteFile(bad, []byte("not pem"), 0o600)).To(Succeed())
			c.CertFile = bad
		}, "load loggregator TLS files"),
	)
})
