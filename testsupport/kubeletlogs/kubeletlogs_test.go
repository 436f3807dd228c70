package kubeletlogs_test

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/podlogs"
	"github.com/opi-bridge/opi/testsupport/kubeletlogs"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func content(path string) string {
	b, err := os.ReadFile(path)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return string(b)
}

func names(dir string) []string {
	entries, err := os.ReadDir(dir)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

var _ = Describe("Container", func() {
	var (
		root string
		c    *kubeletlogs.Container
	)

	BeforeEach(func() {
		root = GinkgoT().TempDir()
		var err error
		c, err = kubeletlogs.New(root, "cf-workloads", "dora-dev-abc-5d8f9-x7k2p", "0f5c2e4a-1b7d-4e8e-9a51-3c1f0d2b7a66", "opi")
		Expect(err).NotTo(HaveOccurred())
	})

	It("writes CRI lines in the kubelet's folder and file", func() {
		Expect(c.Dir()).To(Equal(filepath.Join(root, "cf-workloads_dora-dev-abc-5d8f9-x7k2p_0f5c2e4a-1b7d-4e8e-9a51-3c1f0d2b7a66", "opi")))
		Expect(c.Line(t0.Add(1500*time.Microsecond), kubeletlogs.Stdout, "listening on 8080")).To(Succeed())
		Expect(c.Line(t0.Add(time.Second), kubeletlogs.Stderr, "")).To(Succeed())
		Expect(c.Path()).To(Equal(filepath.Join(c.Dir(), "0.log")))
		Expect(content(c.Path())).To(Equal(
			"2026-12-01T12:00:00.0015Z stdout F listening on 8080\n" +
				"2026-12-01T12:00:01Z stderr F \n"))
	})

	It("writes a line in parts, P then F, stamped a microsecond apart", func() {
		Expect(c.Partial(t0, kubeletlogs.Stdout, "al", "ph", "a")).To(Succeed())
		Expect(content(c.Path())).To(Equal(
			"2026-12-01T12:00:00Z stdout P al\n" +
				"2026-12-01T12:00:00.000001Z stdout P ph\n" +
				"2026-12-01T12:00:00.000002Z stdout F a\n"))
	})

	It("rotates as the kubelet does: renamed with the time, a new empty file, older ones gzipped", func() {
		Expect(c.Line(t0, kubeletlogs.Stdout, "one")).To(Succeed())
		first, err := c.Rotate(t0)
		Expect(err).NotTo(HaveOccurred())
		Expect(first).To(Equal(filepath.Join(c.Dir(), "0.log.20261201-120000")))
		Expect(content(c.Path())).To(BeEmpty())
		Expect(c.Line(t0.Add(time.Minute), kubeletlogs.Stdout, "two")).To(Succeed())

		_, err = c.Rotate(t0.Add(time.Minute))
		Expect(err).NotTo(HaveOccurred())
		Expect(names(c.Dir())).To(ConsistOf("0.log", "0.log.20261201-120000.gz", "0.log.20261201-120100"))
		Expect(content(filepath.Join(c.Dir(), "0.log.20261201-120100"))).To(Equal("2026-12-01T12:01:00Z stdout F two\n"))
		f, err := os.Open(filepath.Join(c.Dir(), "0.log.20261201-120000.gz"))
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		zr, err := gzip.NewReader(f)
		Expect(err).NotTo(HaveOccurred())
		Expect(io.ReadAll(zr)).To(BeEquivalentTo("2026-12-01T12:00:00Z stdout F one\n"))

		_, err = c.Rotate(t0.Add(time.Minute))
		Expect(err).To(MatchError(ContainSubstring("exists already")))
	})

	It("begins <n+1>.log on a restart, keeping the old file", func() {
		Expect(c.Line(t0, kubeletlogs.Stdout, "first run")).To(Succeed())
		n, err := c.Restart()
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1))
		Expect(c.Restarts()).To(Equal(1))
		Expect(c.Line(t0.Add(time.Second), kubeletlogs.Stdout, "second run")).To(Succeed())
		Expect(names(c.Dir())).To(ConsistOf("0.log", "1.log"))
		Expect(content(filepath.Join(c.Dir(), "1.log"))).To(Equal("2026-12-01T12:00:01Z stdout F second run\n"))
	})

	It("writes what the agent's reader reads back line for line, through a rotation cutting a line and a restart", func() {
		Expect(c.Line(t0, kubeletlogs.Stdout, "one")).To(Succeed())
		Expect(c.Raw(kubeletlogs.Format(t0.Add(time.Millisecond), kubeletlogs.Stderr, true, "cut by "))).To(Succeed())
		_, err := c.Rotate(t0)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Raw(kubeletlogs.Format(t0.Add(2*time.Millisecond), kubeletlogs.Stderr, false, "the rotation"))).To(Succeed())
		_, err = c.Restart()
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Partial(t0.Add(time.Second), kubeletlogs.Stdout, "again ", "and again")).To(Succeed())

		f := podlogs.NewFollower(c.Dir(), podlogs.Position{}, podlogs.Options{})
		DeferCleanup(f.Close)
		var got []podlogs.Line
		Expect(f.Next(func(l podlogs.Line, _ podlogs.Position) { got = append(got, l) })).To(Succeed())
		Expect(got).To(Equal([]podlogs.Line{
			{Time: t0, Stream: podlogs.Stdout, Text: "one"},
			{Time: t0.Add(time.Millisecond), Stream: podlogs.Stderr, Text: "cut by the rotation"},
			{Time: t0.Add(time.Second), Stream: podlogs.Stdout, Text: "again and again"},
		}))
		Expect(f.Malformed()).To(BeZero())
	})

	It("refuses what the kubelet would never write, writing nothing", func() {
		Expect(c.Line(t0, "stdin", "x")).To(MatchError(ContainSubstring(`stream "stdin"`)))
		Expect(c.Line(t0, kubeletlogs.Stdout, "two\nlines")).To(MatchError(ContainSubstring("newline")))
		Expect(c.Partial(t0, kubeletlogs.Stdout)).To(MatchError(ContainSubstring("at least one part")))
		Expect(names(c.Dir())).To(BeEmpty())

		_, err := kubeletlogs.New(root, "cf-workloads", "web", "a_b", "opi")
		Expect(err).To(MatchError(ContainSubstring(`pod uid "a_b"`)))
		_, err = kubeletlogs.New(root, "cf-workloads", "web", "uid", "")
		Expect(err).To(MatchError(ContainSubstring("container")))
	})
})
