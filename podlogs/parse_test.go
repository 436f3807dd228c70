package podlogs_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/podlogs"
)

var _ = Describe("ParseLine", func() {
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		Expect(err).NotTo(HaveOccurred())
		return t
	}

	DescribeTable("good lines",
		func(line string, want podlogs.Entry) {
			got, err := podlogs.ParseLine([]byte(line))
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Time.Equal(want.Time)).To(BeTrue(), "time %s, want %s", got.Time, want.Time)
			Expect(got.Stream).To(Equal(want.Stream))
			Expect(got.Partial).To(Equal(want.Partial))
			Expect(string(got.Content)).To(Equal(string(want.Content)))
		},
		Entry("a full stdout line", "2026-12-01T12:00:00.123456789Z stdout F hello world\n",
			podlogs.Entry{Time: at("2026-12-01T12:00:00.123456789Z"), Stream: podlogs.Stdout, Content: []byte("hello world")}),
		Entry("a partial stderr line without newline", "2026-12-01T12:00:00.1Z stderr P part one ",
			podlogs.Entry{Time: at("2026-12-01T12:00:00.1Z"), Stream: podlogs.Stderr, Partial: true, Content: []byte("part one ")}),
		Entry("an empty line", "2026-12-01T12:00:00Z stdout F \n",
			podlogs.Entry{Time: at("2026-12-01T12:00:00Z"), Stream: podlogs.Stdout}),
		Entry("an empty line without the separating space", "2026-12-01T12:00:00Z stdout F",
			podlogs.Entry{Time: at("2026-12-01T12:00:00Z"), Stream: podlogs.Stdout}),
		Entry("a zone offset and spaces in the content", "2026-12-01T13:00:00.5+01:00 stdout F  a  b ",
			podlogs.Entry{Time: at("2026-12-01T12:00:00.5Z"), Stream: podlogs.Stdout, Content: []byte(" a  b ")}),
	)

	DescribeTable("bad lines",
		func(line, says string) {
			_, err := podlogs.ParseLine([]byte(line))
			Expect(err).To(MatchError(podlogs.ErrMalformed))
			Expect(err.Error()).To(ContainSubstring(says))
		},
		Entry("empty", "", "no stream"),
		Entry("only a timestamp", "2026-12-01T12:00:00Z", "no stream"),
		Entry("a date that is no RFC 3339 timestamp", "12/01/2026 stdout F x", "not RFC 3339"),
		Entry("an unknown stream", "2026-12-01T12:00:00Z stdin F x", `stream "stdin"`),
		Entry("no tag", "2026-12-01T12:00:00Z stdout", "no tag"),
		Entry("an unknown tag", "2026-12-01T12:00:00Z stdout X x", `tag "X"`),
		Entry("a plain text line", "hello world from an app", "not RFC 3339"),
		Entry("a long garbage field, clipped", strings.Repeat("x", 500)+" stdout F x", "..."),
	)
})
