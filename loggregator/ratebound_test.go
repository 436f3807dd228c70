package loggregator_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/loggregator"
)

var _ = Describe("RateBound", func() {
	var bound *loggregator.RateBound

	// Diego's executor (depot/log_streamer's LogRateLimiter) reports an instance over its
	// bound in its own stream with exactly these sentences:
	//   "app instance exceeded log rate limit (5 bytes/sec)"
	//   "app instance exceeded log rate limit (1 log-lines/sec) set by platform operator"
	const (
		bytesNotice = "app instance exceeded log rate limit (100 bytes/sec)"
		linesNotice = "app instance exceeded log rate limit (2 log-lines/sec) set by platform operator"
	)

	BeforeEach(func() {
		var err error
		bound, err = loggregator.NewRateBound(loggregator.RateBoundConfig{
			BytesPerSecond: 100, ByteBurst: 300, LinesPerSecond: 2, LineBurst: 3,
		})
		Expect(err).NotTo(HaveOccurred())
	})

	admit := func(key string, size int, t time.Time) bool {
		ok, _ := bound.Admit(key, size, t)
		return ok
	}

	DescribeTable("refuses a bound that lets nothing through",
		func(cfg loggregator.RateBoundConfig, msg string) {
			_, err := loggregator.NewRateBound(cfg)
			Expect(err).To(MatchError(ContainSubstring(msg)))
		},
		Entry("no bytes", loggregator.RateBoundConfig{ByteBurst: 1, LinesPerSecond: 1, LineBurst: 1}, "bytes per second (0) must be above 0"),
		Entry("no byte burst", loggregator.RateBoundConfig{BytesPerSecond: 1, LinesPerSecond: 1, LineBurst: 1}, "the byte burst (0) at least 1"),
		Entry("no lines", loggregator.RateBoundConfig{BytesPerSecond: 1, ByteBurst: 1, LineBurst: 1}, "lines per second (0) must be above 0"),
		Entry("no line burst", loggregator.RateBoundConfig{BytesPerSecond: 1, ByteBurst: 1, LinesPerSecond: 1}, "the line burst (0) at least 1"),
	)

	It("bounds a container's bytes, with Diego's notice naming the bound in bytes per second", func() {
		Expect(bound.Admit("pod-a/opi", 200, at)).To(BeTrue())
		ok, notice := bound.Admit("pod-a/opi", 101, at)
		Expect(ok).To(BeFalse())
		Expect(notice).To(Equal(bytesNotice))
		// The refused line took nothing: 100 bytes are still there.
		Expect(admit("pod-a/opi", 100, at)).To(BeTrue())
		Expect(admit("pod-a/opi", 1, at)).To(BeFalse())
		// One second later 100 bytes are back.
		Expect(admit("pod-a/opi", 100, at.Add(time.Second))).To(BeTrue())
		Expect(bound.Dropped()).To(Equal(uint64(2)))
	})

	It("bounds a container's lines, with Diego's notice for the line bound", func() {
		for range 3 {
			Expect(admit("pod-a/opi", 1, at)).To(BeTrue())
		}
		ok, notice := bound.Admit("pod-a/opi", 1, at)
		Expect(ok).To(BeFalse())
		Expect(notice).To(Equal(linesNotice))
		Expect(admit("pod-a/opi", 1, at.Add(500*time.Millisecond))).To(BeTrue())
	})

	It("hands out at most one notice per second per container", func() {
		Expect(admit("pod-a/opi", 300, at)).To(BeTrue())
		var notices []string
		for _, d := range []time.Duration{0, 10 * time.Millisecond, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second} {
			ok, notice := bound.Admit("pod-a/opi", 300, at.Add(d))
			Expect(ok).To(BeFalse())
			notices = append(notices, notice)
		}
		Expect(notices).To(Equal([]string{bytesNotice, "", "", bytesNotice, "", bytesNotice}))
		// Another container's first drop has its own notice.
		Expect(admit("pod-b/opi", 300, at)).To(BeTrue())
		_, notice := bound.Admit("pod-b/opi", 300, at.Add(10*time.Millisecond))
		Expect(notice).To(Equal(bytesNotice))
	})

	It("gives every container a bucket of its own, and forgets only the one that went", func() {
		Expect(admit("pod-a/opi", 300, at)).To(BeTrue())
		Expect(admit("pod-a/opi", 1, at)).To(BeFalse())
		// Another pod (a task, another instance) and another container of the same pod.
		Expect(admit("pod-b/opi", 300, at)).To(BeTrue())
		Expect(admit("pod-a/sidecar", 300, at)).To(BeTrue())

		bound.Forget("pod-b/opi")
		Expect(admit("pod-a/opi", 1, at)).To(BeFalse(), "a container that goes refills no other's bucket")
		Expect(admit("pod-a/sidecar", 1, at)).To(BeFalse())
		Expect(admit("pod-b/opi", 300, at)).To(BeTrue())
	})

	It("lets a line larger than the byte burst through once the bucket is full", func() {
		Expect(admit("pod-a/opi", 60<<10, at)).To(BeTrue())
		Expect(admit("pod-a/opi", 60<<10, at.Add(time.Second))).To(BeFalse())
		Expect(admit("pod-a/opi", 60<<10, at.Add(3*time.Second))).To(BeTrue())
	})

	It("keys a container by its pod's uid and its name", func() {
		Expect(loggregator.ContainerKey("uid-1", "opi")).To(Equal("uid-1/opi"))
	})
})
