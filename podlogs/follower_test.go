package podlogs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/podlogs"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// cri is one line as the kubelet's runtime writes it; i sets its timestamp (t0 + i ms).
func cri(i int, stream, tag, content string) string {
	return fmt.Sprintf("%s %s %s %s\n", t0.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), stream, tag, content)
}

func ms(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }

// reader collects what a follower emits.
type reader struct {
	f     *podlogs.Follower
	lines []podlogs.Line
	last  podlogs.Position
}

// next runs one Next and returns the lines it emitted.
func (r *reader) next() []podlogs.Line {
	var got []podlogs.Line
	ExpectWithOffset(1, r.f.Next(func(l podlogs.Line, p podlogs.Position) {
		got = append(got, l)
		r.last = p
	})).To(Succeed())
	r.lines = append(r.lines, got...)
	return got
}

func texts(lines []podlogs.Line) []string {
	out := []string{}
	for _, l := range lines {
		out = append(out, string(l.Stream)+":"+l.Text)
	}
	return out
}

var _ = Describe("Follower", func() {
	var (
		root, dir string
		r         *reader
	)

	write := func(name string, lines ...string) {
		file, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
		Expect(err).NotTo(HaveOccurred())
		_, err = file.WriteString(strings.Join(lines, ""))
		Expect(err).NotTo(HaveOccurred())
		Expect(file.Close()).To(Succeed())
	}
	// rotate does what the kubelet does at containerLogMaxSize.
	rotate := func(n int, stamp string) {
		Expect(os.Rename(filepath.Join(dir, fmt.Sprintf("%d.log", n)), filepath.Join(dir, fmt.Sprintf("%d.log.%s", n, stamp)))).To(Succeed())
	}
	// compress replaces 0.log's file rotated at stamp by its compressed copy, as the kubelet does.
	compress := func(stamp string) {
		Expect(os.Remove(filepath.Join(dir, "0.log."+stamp))).To(Succeed())
		write("0.log."+stamp+".gz", "compressed\n")
	}
	follow := func(from podlogs.Position, opts podlogs.Options) *reader {
		f := podlogs.NewFollower(dir, from, opts)
		DeferCleanup(f.Close)
		return &reader{f: f}
	}

	BeforeEach(func() {
		root = GinkgoT().TempDir()
		dir = filepath.Join(root, "apps_web-6c9f-0_0f5c2e4a-1b7d-4e8e-9a51-3c1f0d2b7a66", "opi")
		Expect(os.MkdirAll(dir, 0o750)).To(Succeed())
		r = follow(podlogs.Position{}, podlogs.Options{})
	})

	It("emits each full line with its timestamp and stream, and only complete lines", func() {
		write("0.log", cri(1, "stdout", "F", "one"), cri(2, "stderr", "F", "two"), "2026-12-01T12:00:00.003Z stdout F thr")
		Expect(r.next()).To(Equal([]podlogs.Line{
			{Time: ms(1), Stream: podlogs.Stdout, Text: "one"},
			{Time: ms(2), Stream: podlogs.Stderr, Text: "two"},
		}))
		Expect(r.next()).To(BeEmpty())

		write("0.log", "ee\n")
		Expect(r.next()).To(Equal([]podlogs.Line{{Time: ms(3), Stream: podlogs.Stdout, Text: "three"}}))
	})

	It("is quiet while the folder is missing or empty", func() {
		r = &reader{f: podlogs.NewFollower(filepath.Join(root, "none"), podlogs.Position{}, podlogs.Options{})}
		Expect(r.next()).To(BeEmpty())
		Expect(os.MkdirAll(filepath.Join(root, "none"), 0o750)).To(Succeed())
		Expect(r.next()).To(BeEmpty())
	})

	It("joins partial lines per stream with the first part's timestamp", func() {
		write("0.log",
			cri(1, "stdout", "P", "al"), cri(2, "stderr", "P", "be"),
			cri(3, "stdout", "P", "pha "), cri(4, "stderr", "F", "ta"))
		Expect(texts(r.next())).To(Equal([]string{"stderr:beta"}))
		Expect(r.lines[0].Time).To(Equal(ms(2)))

		write("0.log", cri(5, "stdout", "F", "omega"))
		Expect(r.next()).To(Equal([]podlogs.Line{{Time: ms(1), Stream: podlogs.Stdout, Text: "alpha omega"}}))
	})

	It("emits a joined line past the bound in pieces and cuts a longer physical line", func() {
		r = follow(podlogs.Position{}, podlogs.Options{MaxLineBytes: 8})
		write("0.log",
			cri(1, "stdout", "P", "aaaa"), cri(2, "stdout", "P", "bbbb"), cri(3, "stdout", "F", "cc"),
			cri(4, "stdout", "F", strings.Repeat("x", 300)),
			cri(5, "stdout", "F", "after"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:aaaabbbb", "stdout:cc", "stdout:xxxxxxxx", "stdout:after"}))
		Expect(r.lines[1].Time).To(Equal(ms(3)))
	})

	It("emits whole a line longer than its read buffer and within the bound, cuts one past the bound, and waits for a long line's end", func() {
		long, longer := strings.Repeat("y", 20<<10), strings.Repeat("z", podlogs.DefaultMaxLineBytes+5000)
		write("0.log", cri(1, "stdout", "F", long), cri(2, "stderr", "F", longer), cri(3, "stdout", "F", "after"))
		Expect(r.next()).To(Equal([]podlogs.Line{
			{Time: ms(1), Stream: podlogs.Stdout, Text: long},
			{Time: ms(2), Stream: podlogs.Stderr, Text: longer[:podlogs.DefaultMaxLineBytes]},
			{Time: ms(3), Stream: podlogs.Stdout, Text: "after"},
		}))

		unfinished := cri(4, "stdout", "F", long)
		write("0.log", unfinished[:len(unfinished)-100])
		Expect(r.next()).To(BeEmpty())
		write("0.log", unfinished[len(unfinished)-100:])
		Expect(r.next()).To(Equal([]podlogs.Line{{Time: ms(4), Stream: podlogs.Stdout, Text: long}}))
	})

	It("reads a rotated file to its end before the new one: rotation between lines", func() {
		write("0.log", cri(1, "stdout", "F", "one"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:one"}))

		write("0.log", cri(2, "stdout", "F", "two"))
		rotate(0, "20261201-120000")
		write("0.log", cri(3, "stdout", "F", "three"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:two", "stdout:three"}))

		write("0.log", cri(4, "stdout", "F", "four"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:four"}))
		Expect(texts(r.lines)).To(Equal([]string{"stdout:one", "stdout:two", "stdout:three", "stdout:four"}))
	})

	It("joins a line the rotation cut in two", func() {
		write("0.log", cri(1, "stdout", "F", "one"), cri(2, "stdout", "P", "tw"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:one"}))

		rotate(0, "20261201-120000")
		write("0.log", cri(3, "stdout", "F", "o"))
		Expect(r.next()).To(Equal([]podlogs.Line{{Time: ms(2), Stream: podlogs.Stdout, Text: "two"}}))
	})

	It("follows two rotations in order, the compressed file skipped", func() {
		write("0.log", cri(1, "stdout", "F", "one"))
		rotate(0, "20261201-120000")
		write("0.log", cri(2, "stdout", "F", "two"))
		rotate(0, "20261201-120100")
		write("0.log", cri(3, "stdout", "F", "three"))
		write("0.log.20261130-110000.gz", "not a log line\n")
		Expect(texts(r.next())).To(Equal([]string{"stdout:one", "stdout:two", "stdout:three"}))
		Expect(r.f.Malformed()).To(BeZero())
	})

	It("reads on in order when its file was rotated twice and compressed between two reads", func() {
		write("0.log", cri(1, "stdout", "F", "one"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:one"}))

		write("0.log", cri(2, "stdout", "F", "two"))
		rotate(0, "20261201-120000")
		write("0.log", cri(3, "stdout", "F", "three"))
		rotate(0, "20261201-120100")
		write("0.log", cri(4, "stdout", "F", "four"))
		// The kubelet compresses all but the newest rotated file: the one being read goes.
		compress("20261201-120000")
		Expect(texts(r.next())).To(Equal([]string{"stdout:two", "stdout:three", "stdout:four"}))
		Expect(r.f.Lost()).To(BeEmpty())
	})

	It("reports the compressed files it skips, rotated away while it was still in an older one", func() {
		write("0.log.20261130-110000.gz", "compressed before\n")
		write("0.log", cri(1, "stdout", "F", "one"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:one"}))

		// No read while the kubelet rotates three times (as when the reader waits for room).
		write("0.log", cri(2, "stdout", "F", "two"))
		rotate(0, "20261201-120100")
		write("0.log", cri(3, "stdout", "F", "three"))
		rotate(0, "20261201-120200")
		write("0.log", cri(4, "stdout", "F", "four"))
		rotate(0, "20261201-120300")
		write("0.log", cri(5, "stdout", "F", "five"))
		compress("20261201-120100")
		compress("20261201-120200")
		// The file it had open is read to its end; the next, compressed, is lost.
		Expect(texts(r.next())).To(Equal([]string{"stdout:two", "stdout:four", "stdout:five"}))
		Expect(r.f.Lost()).To(Equal([]podlogs.Lost{{Name: "0.log.20261201-120200.gz"}}))
		Expect(r.f.Lost()).To(BeEmpty())
	})

	It("finishes the old container's file, an unterminated last line included, before the restart's", func() {
		write("0.log", cri(1, "stdout", "F", "one"), "2026-12-01T12:00:00.002Z stderr F crash")
		Expect(texts(r.next())).To(Equal([]string{"stdout:one"}))

		write("1.log", cri(3, "stdout", "F", "again"))
		Expect(texts(r.next())).To(Equal([]string{"stderr:crash", "stdout:again"}))
		Expect(r.last.Name).To(Equal("1.log"))
	})

	It("starts over in a file truncated below the position", func() {
		write("0.log", cri(1, "stdout", "F", "one"), cri(2, "stdout", "F", "two"))
		Expect(r.next()).To(HaveLen(2))

		Expect(os.Truncate(filepath.Join(dir, "0.log"), 0)).To(Succeed())
		write("0.log", cri(3, "stdout", "F", "new"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:new"}))
	})

	It("skips and counts lines that are no CRI lines", func() {
		write("0.log", "garbage\n", cri(1, "stdout", "F", "one"))
		Expect(texts(r.next())).To(Equal([]string{"stdout:one"}))
		Expect(r.f.Malformed()).To(Equal(uint64(1)))
	})

	Context("resuming from a checkpoint", func() {
		var (
			cpDir string
			key   string
		)
		BeforeEach(func() {
			cpDir = GinkgoT().TempDir()
			var err error
			key, err = podlogs.ContainerKey(root, dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(key).To(Equal("apps_web-6c9f-0_0f5c2e4a-1b7d-4e8e-9a51-3c1f0d2b7a66/opi"))
		})
		// checkpoint saves r's last position as an agent does after an acknowledged batch, and
		// reads it back as a restarted agent does.
		checkpoint := func() podlogs.Position {
			cp, err := podlogs.OpenCheckpoints(cpDir)
			Expect(err).NotTo(HaveOccurred())
			cp.Set(key, r.last)
			Expect(cp.Save()).To(Succeed())
			again, err := podlogs.OpenCheckpoints(cpDir)
			Expect(err).NotTo(HaveOccurred())
			return again.Get(key)
		}
		// stoppedAfter writes lines to 0.log, reads them and stops r as an agent stops: it returns
		// the checkpoint a restarted agent reads.
		stoppedAfter := func(lines ...string) podlogs.Position {
			write("0.log", lines...)
			r.next()
			from := checkpoint()
			Expect(r.f.Close()).To(Succeed())
			return from
		}

		It("continues after the last acknowledged line", func() {
			from := stoppedAfter(cri(1, "stdout", "F", "one"), cri(2, "stdout", "F", "two"))
			Expect(from).To(Equal(r.last))

			write("0.log", cri(3, "stdout", "F", "three"))
			Expect(texts(follow(from, podlogs.Options{}).next())).To(Equal([]string{"stdout:three"}))
		})

		It("finds its file after a rotation while it was not running", func() {
			from := stoppedAfter(cri(1, "stdout", "F", "one"))

			write("0.log", cri(2, "stdout", "F", "two"))
			rotate(0, "20261201-120000")
			write("0.log", cri(3, "stdout", "F", "three"))
			Expect(texts(follow(from, podlogs.Options{}).next())).To(Equal([]string{"stdout:two", "stdout:three"}))
		})

		It("starts at the oldest file there is when its file is gone", func() {
			from := stoppedAfter(cri(1, "stdout", "F", "one"))

			rotate(0, "20261201-120000")
			Expect(os.Remove(filepath.Join(dir, "0.log.20261201-120000"))).To(Succeed())
			write("0.log", cri(2, "stdout", "F", "two"))
			again := follow(from, podlogs.Options{})
			Expect(texts(again.next())).To(Equal([]string{"stdout:two"}))
			Expect(again.f.Lost()).To(Equal([]podlogs.Lost{{Name: "0.log", Offset: from.Offset}}))
		})

		It("reports its checkpoint's file and the compressed files after it as lost when they went while it was not running", func() {
			from := stoppedAfter(cri(1, "stdout", "F", "one"))

			write("0.log", cri(2, "stdout", "F", "two"))
			rotate(0, "20261201-120100")
			write("0.log", cri(3, "stdout", "F", "three"))
			rotate(0, "20261201-120200")
			write("0.log", cri(4, "stdout", "F", "four"))
			compress("20261201-120100") // the checkpoint's file
			compress("20261201-120200")
			again := follow(from, podlogs.Options{})
			Expect(texts(again.next())).To(Equal([]string{"stdout:four"}))
			Expect(again.f.Lost()).To(Equal([]podlogs.Lost{{Name: "0.log", Offset: from.Offset}, {Name: "0.log.20261201-120200.gz"}}))
		})

		It("stops a read under way once Done is closed", func() {
			write("0.log", cri(1, "stdout", "F", "one"), cri(2, "stdout", "F", "two"))
			done := make(chan struct{})
			f := podlogs.NewFollower(dir, podlogs.Position{}, podlogs.Options{Done: done})
			DeferCleanup(f.Close)
			var got []string
			err := f.Next(func(l podlogs.Line, _ podlogs.Position) { got = append(got, l.Text); close(done) })
			Expect(err).To(MatchError(podlogs.ErrStopped))
			Expect(got).To(Equal([]string{"one"}))
		})

		It("does not let a partial line on one stream hold back the other stream's position", func() {
			// The exact file: a stderr line that is never completed while stdout goes on.
			write("0.log",
				"2026-12-01T12:00:00.001Z stderr P half of a line\n",
				"2026-12-01T12:00:00.002Z stdout F one\n",
				"2026-12-01T12:00:00.003Z stdout F two\n",
			)
			Expect(texts(r.next())).To(Equal([]string{"stdout:one", "stdout:two"}))
			from := checkpoint()
			info, err := os.Stat(filepath.Join(dir, "0.log"))
			Expect(err).NotTo(HaveOccurred())
			// Reading resumes at the partial line; stdout's lines resume after "two".
			Expect(from.Offset).To(BeZero())
			Expect(from.Past).To(Equal(map[podlogs.Stream]podlogs.Mark{
				podlogs.Stdout: {Device: from.Device, Inode: from.Inode, Offset: info.Size(), First: from.First},
			}))
			Expect(r.f.Close()).To(Succeed())

			write("0.log",
				"2026-12-01T12:00:00.004Z stdout F three\n",
				"2026-12-01T12:00:00.005Z stderr F , the end\n",
			)
			again := follow(from, podlogs.Options{})
			Expect(texts(again.next())).To(Equal([]string{"stdout:three", "stderr:half of a line, the end"}))
			Expect(again.last.Past).To(BeNil())
			Expect(again.last.Offset).To(Equal(info.Size() + int64(len("2026-12-01T12:00:00.004Z stdout F three\n2026-12-01T12:00:00.005Z stderr F , the end\n"))))
		})

		It("keeps the other stream's mark across a rotation while a partial line from the old file pends", func() {
			write("0.log", cri(1, "stderr", "P", "a"), cri(2, "stdout", "F", "one"))
			rotate(0, "20261201-120000")
			write("0.log", cri(3, "stdout", "F", "two"))
			Expect(texts(r.next())).To(Equal([]string{"stdout:one", "stdout:two"}))
			from := checkpoint()
			Expect(from.Name).To(Equal("0.log.20261201-120000"))
			Expect(from.Past).To(HaveKey(podlogs.Stdout))
			Expect(r.f.Close()).To(Succeed())

			write("0.log", cri(4, "stderr", "F", "b"), cri(5, "stdout", "F", "three"))
			Expect(texts(follow(from, podlogs.Options{}).next())).To(Equal([]string{"stderr:ab", "stdout:three"}))
		})

		It("does not skip a stream's later lines when its mark's file went while it was not running", func() {
			write("0.log", cri(1, "stderr", "P", "a"))
			rotate(0, "20261201-120000")
			write("0.log", cri(2, "stdout", "F", "one"))
			Expect(texts(r.next())).To(Equal([]string{"stdout:one"}))
			from := checkpoint()
			Expect(from.Name).To(Equal("0.log.20261201-120000"))
			Expect(r.f.Close()).To(Succeed())

			// The container's restart writes 1.log; the mark's file (the newer one) is removed
			// after, so 1.log cannot have its inode.
			write("1.log", cri(3, "stdout", "F", "two"))
			Expect(os.Remove(filepath.Join(dir, "0.log"))).To(Succeed())
			Expect(texts(follow(from, podlogs.Options{}).next())).To(Equal([]string{"stdout:two"}))
		})

		It("does not skip a stream's lines in a file that took its mark's file's inode", func() {
			write("0.log", cri(1, "stderr", "P", "a"))
			rotate(0, "20261201-120000")
			from := stoppedAfter(cri(2, "stdout", "F", "one"))

			// As if 0.log went and 1.log got its inode (the file system reuses it): the mark
			// names 1.log's identity, with the first line of the file it was taken in.
			write("1.log", cri(3, "stdout", "F", "two"))
			Expect(os.Remove(filepath.Join(dir, "0.log"))).To(Succeed())
			info, err := os.Stat(filepath.Join(dir, "1.log"))
			Expect(err).NotTo(HaveOccurred())
			st := info.Sys().(*syscall.Stat_t)
			m := from.Past[podlogs.Stdout]
			m.Device, m.Inode = uint64(st.Dev), st.Ino
			from.Past[podlogs.Stdout] = m
			Expect(texts(follow(from, podlogs.Options{}).next())).To(Equal([]string{"stdout:two"}))
		})
	})

	It("reads a position saved before positions held per-stream marks", func() {
		write("0.log", cri(1, "stdout", "F", "one"), cri(2, "stdout", "F", "two"))
		r.next()
		cpDir := GinkgoT().TempDir()
		// positions.json as agents before per-stream marks wrote it.
		old := fmt.Sprintf(`{"ns_pod_uid/opi":{"dev":%d,"ino":%d,"name":"0.log","offset":%d,"first":%q}}`,
			r.last.Device, r.last.Inode, r.last.Offset, r.last.First)
		Expect(os.WriteFile(filepath.Join(cpDir, "positions.json"), []byte(old), 0o600)).To(Succeed())
		cp, err := podlogs.OpenCheckpoints(cpDir)
		Expect(err).NotTo(HaveOccurred())
		Expect(cp.Unreadable()).To(Succeed())
		Expect(cp.Get("ns_pod_uid/opi")).To(Equal(r.last))
		Expect(r.f.Close()).To(Succeed())

		write("0.log", cri(3, "stdout", "F", "three"))
		Expect(texts(follow(cp.Get("ns_pod_uid/opi"), podlogs.Options{}).next())).To(Equal([]string{"stdout:three"}))
	})
})

var _ = Describe("Checkpoints", func() {
	It("refuses a folder that does not exist", func() {
		_, err := podlogs.OpenCheckpoints(filepath.Join(GinkgoT().TempDir(), "none"))
		Expect(err).To(MatchError(ContainSubstring("open checkpoints folder")))
	})

	DescribeTable("starts with no positions from a checkpoint file it cannot read back, moving it aside and saying why",
		func(content []byte) {
			dir := GinkgoT().TempDir()
			Expect(os.WriteFile(filepath.Join(dir, "positions.json"), content, 0o600)).To(Succeed())
			cp, err := podlogs.OpenCheckpoints(dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(cp.Unreadable()).To(MatchError(ContainSubstring("read checkpoints")))
			Expect(cp.Keys()).To(BeEmpty())
			Expect(os.ReadFile(filepath.Join(dir, "positions.json.unreadable"))).To(Equal(content))

			cp.Set("a_b_c/d", podlogs.Position{Device: 1, Inode: 2, Name: "0.log", Offset: 3})
			Expect(cp.Save()).To(Succeed())
			again, err := podlogs.OpenCheckpoints(dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(again.Unreadable()).To(Succeed())
			Expect(again.Get("a_b_c/d")).To(Equal(podlogs.Position{Device: 1, Inode: 2, Name: "0.log", Offset: 3}))
		},
		Entry("garbage", []byte("{not json")),
		Entry("cut short", []byte(`{"a_b_c/d":{"dev":1,"ino":2,"name":"0.l`)),
		Entry("zeros (a file whose data never reached the disk)", make([]byte, 64)),
	)

	Describe("a crash while saving", func() {
		var (
			dir     string
			old     = podlogs.Position{Device: 1, Inode: 2, Name: "0.log", Offset: 3}
			newer   = podlogs.Position{Device: 1, Inode: 2, Name: "0.log", Offset: 4096}
			fs      *crashingFS
			saveNew func() error
		)
		BeforeEach(func() {
			dir = GinkgoT().TempDir()
			cp, err := podlogs.OpenCheckpoints(dir)
			Expect(err).NotTo(HaveOccurred())
			cp.Set("a_b_c/d", old)
			Expect(cp.Save()).To(Succeed())
			fs = &crashingFS{}
			saveNew = func() error {
				cp, err := podlogs.OpenCheckpointsOn(dir, fs)
				Expect(err).NotTo(HaveOccurred())
				cp.Set("a_b_c/d", newer)
				cp.Set("a_b_c/e", newer)
				return cp.Save()
			}
		})
		reopened := func() *podlogs.Checkpoints {
			cp, err := podlogs.OpenCheckpoints(dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(cp.Unreadable()).To(Succeed())
			return cp
		}

		DescribeTable("leaves the old positions whole",
			func(at string, bytes int) {
				fs.crashAt, fs.bytes = at, bytes
				Expect(saveNew()).To(HaveOccurred())
				Expect(fs.crashed).To(BeTrue(), "the save never reached the crash point")
				cp := reopened()
				Expect(cp.Get("a_b_c/d")).To(Equal(old))
				Expect(cp.Keys()).To(ConsistOf("a_b_c/d"))
			},
			Entry("creating the temporary file", "create", 0),
			Entry("after the first byte", "write", 1),
			Entry("half-way through the data", "write", 40),
			Entry("before the fsync", "sync", 0),
			Entry("before the rename", "rename", 0),
		)

		It("replaces the file only by renaming a temporary file written to its end and fsynced", func() {
			Expect(saveNew()).To(Succeed())
			Expect(fs.ops).To(Equal([]string{"create", "write", "sync", "close", "rename", "sync-folder"}))
			Expect(fs.renamedWhole).To(BeTrue(), "the renamed file did not hold the whole set")
			Expect(reopened().Get("a_b_c/e")).To(Equal(newer))
		})
	})

	It("saves atomically, leaving only its file, and forgets deleted keys", func() {
		dir := GinkgoT().TempDir()
		cp, err := podlogs.OpenCheckpoints(dir)
		Expect(err).NotTo(HaveOccurred())
		cp.Set("a_b_c/d", podlogs.Position{Device: 1, Inode: 2, Name: "0.log", Offset: 3})
		cp.Set("a_b_c/e", podlogs.Position{Device: 1, Inode: 4, Name: "1.log", Offset: 5})
		Expect(cp.Save()).To(Succeed())
		cp.Delete("a_b_c/e")
		Expect(cp.Save()).To(Succeed())

		entries, err := os.ReadDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(entries).To(HaveLen(1))
		again, err := podlogs.OpenCheckpoints(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Get("a_b_c/d")).To(Equal(podlogs.Position{Device: 1, Inode: 2, Name: "0.log", Offset: 3}))
		Expect(again.Get("a_b_c/e").IsZero()).To(BeTrue())
	})

	It("refuses a container folder that is not below the root", func() {
		_, err := podlogs.ContainerKey("/var/log/pods", "/tmp/x/y")
		Expect(err).To(HaveOccurred())
		_, err = podlogs.ContainerKey("/var/log/pods", "/var/log/pods/ns_pod_uid")
		Expect(err).To(HaveOccurred())
	})
})

// crashingFS saves through the operating system's files until the crash point (crashAt: an
// operation, or "write" after bytes bytes): there the process "dies", and every later call fails
// without effect, so what the crash left on disk stays for the next OpenCheckpoints.
type crashingFS struct {
	crashAt string
	bytes   int

	crashed      bool
	ops          []string
	renamedWhole bool
}

var errCrashed = errors.New("crashed")

func (c *crashingFS) step(op string) bool {
	if c.crashed || op == c.crashAt {
		c.crashed = true
		return false
	}
	c.ops = append(c.ops, op)
	return true
}

func (c *crashingFS) CreateTemp(dir, pattern string) (podlogs.TempFile, error) {
	if !c.step("create") {
		return nil, errCrashed
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &crashingFile{File: f, fs: c}, nil
}

func (c *crashingFS) Rename(oldpath, newpath string) error {
	if !c.step("rename") {
		return errCrashed
	}
	data, err := os.ReadFile(oldpath)
	c.renamedWhole = err == nil && json.Valid(data) && bytes.Contains(data, []byte(`"a_b_c/e"`))
	return os.Rename(oldpath, newpath)
}

func (c *crashingFS) Remove(name string) error {
	if c.crashed {
		return errCrashed // a dead process cleans nothing up
	}
	return os.Remove(name)
}

func (c *crashingFS) SyncDir(string) error {
	if !c.step("sync-folder") {
		return errCrashed
	}
	return nil
}

type crashingFile struct {
	*os.File
	fs *crashingFS
}

func (f *crashingFile) Write(b []byte) (int, error) {
	if f.fs.crashAt == "write" && !f.fs.crashed {
		n, _ := f.File.Write(b[:min(f.fs.bytes, len(b))])
		f.fs.crashed = true
		return n, errCrashed
	}
	if !f.fs.step("write") {
		return 0, errCrashed
	}
	return f.File.Write(b)
}

func (f *crashingFile) Sync() error {
	if !f.fs.step("sync") {
		return errCrashed
	}
	return f.File.Sync()
}

func (f *crashingFile) Close() error {
	if !f.fs.step("close") {
		_ = f.File.Close() // the descriptor goes with the process; the file's content stays
		return errCrashed
	}
	return f.File.Close()
}
