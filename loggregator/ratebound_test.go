package loggregator_test

import (
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/loggregator"
)

var _ = Describe("RateBound", func() {
	var bound *loggregator.RateBound

	BeforeEach(func() {
		var err error
		bound, err = loggregator.NewRateBound(2, 3)
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses a bound that lets nothing through", func() {
		_, err := loggregator.NewRateBound(0, 3)
		Expect(err).To(MatchError(ContainSubstring("lines per second (0) must be above 0")))
		_, err = loggregator.NewRateBound(1, 0)
		Expect(err).To(HaveOccurred())
	})

	It("lets a burst through, drops and counts the rest, and bounds each instance on its own", func() {
		for i := 0; i < 3; i++ {
			Expect(bound.Admit("a/0", at)).To(BeTrue())
		}
		ok, _ := bound.Admit("a/0", at)
		Expect(ok).To(BeFalse())
		ok, _ = bound.Admit("a/0", at)
		Expect(ok).To(BeFalse())
		ok, dropped := bound.Admit("a/1", at)
		Expect(ok).To(BeTrue())
		Expect(dropped).To(BeZero())
		Expect(bound.Dropped()).To(Equal(uint64(2)))

		// Half a second later one token is back (2 per second): the line passes, reporting 2.
		ok, dropped = bound.Admit("a/0", at.Add(500*time.Millisecond))
		Expect(ok).To(BeTrue())
		Expect(dropped).To(Equal(uint64(2)))
		ok, _ = bound.Admit("a/0", at.Add(500*time.Millisecond))
		Expect(ok).To(BeFalse())
		ok, dropped = bound.Admit("a/0", at.Add(time.Second))
		Expect(ok).To(BeTrue())
		Expect(dropped).To(Equal(uint64(1)))
	})

	It("puts one notice in the instance's own stream before its first line under the bound again", func() {
		line := func(i int) *loggregator_v2.Envelope {
			return loggregator.NewLog(web, at, loggregator_v2.Log_OUT, []byte{byte('a' + i)})
		}
		var sent []*loggregator_v2.Envelope
		for i := 0; i < 7; i++ {
			sent = append(sent, bound.Log(web, line(i), at)...)
		}
		later := at.Add(2 * time.Second)
		sent = append(sent, bound.Log(web, line(7), later)...)
		sent = append(sent, bound.Log(web, line(8), later)...)

		Expect(equalEnvelopes(sent, []*loggregator_v2.Envelope{
			logEnvelope(at, loggregator_v2.Log_OUT, "a"),
			logEnvelope(at, loggregator_v2.Log_OUT, "b"),
			logEnvelope(at, loggregator_v2.Log_OUT, "c"),
			logEnvelope(later, loggregator_v2.Log_ERR, "opi: 4 log lines dropped: this instance wrote more than 2 lines per second (bursts of 3)"),
			logEnvelope(at, loggregator_v2.Log_OUT, "h"),
			logEnvelope(at, loggregator_v2.Log_OUT, "i"),
		})).To(BeTrue(), "%v", sent)
		Expect(bound.DropNotice(1)).To(Equal("opi: 1 log line dropped: this instance wrote more than 2 lines per second (bursts of 3)"))
	})

	It("forgets an instance that is gone", func() {
		for i := 0; i < 4; i++ {
			bound.Admit("a/0", at)
		}
		bound.Forget("a/0")
		ok, dropped := bound.Admit("a/0", at)
		Expect(ok).To(BeTrue())
		Expect(dropped).To(BeZero())
	})
})
