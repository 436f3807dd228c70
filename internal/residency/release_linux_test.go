//go:build linux

package residency_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	"golang.org/x/sys/unix"

	"github.com/opi-bridge/opi/internal/residency"
)

var _ = Describe("Release", func() {
	It("takes this process's binary out of its resident memory, and the program runs on", func() {
		// Touch a little more of the binary: regexp and JSON code and tables.
		Expect(regexp.MustCompile(`^a+b$`).MatchString("aaab")).To(BeTrue())
		before, err := residency.Resident()
		Expect(err).NotTo(HaveOccurred())
		Expect(before).To(BeNumerically(">", 4<<20), "a Ginkgo test binary has megabytes of its code and data resident once started")

		res, err := residency.Release()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Mappings).To(BeNumerically(">=", 2), "the text and the read-only data")
		Expect(res.Before).To(BeNumerically(">", 4<<20))
		Expect(res.After).To(BeNumerically("<", res.Before/2))
		Expect(res.CachedBefore).To(BeNumerically(">", 0), "the binary's pages were in the page cache")

		// Code and data the process needs come back on first use.
		out, err := json.Marshal(map[string][]int{"b": {1, 2}})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(Equal(`{"b":[1,2]}`))
		Expect(regexp.MustCompile(`^(x|y)z$`).MatchString("yz")).To(BeTrue())
		now, err := residency.Resident()
		Expect(err).NotTo(HaveOccurred())
		Expect(now).To(BeNumerically("<", before))
	})
})

var _ = Describe("ReleaseFile", func() {
	It("unmaps a read-only mapping of the file and drops its pages from the page cache; they read back unchanged", func() {
		// A file of 16 MiB written 1 MiB at a time (a kernel with large folios caches it in
		// folios that large), on disk before it is mapped.
		path := filepath.Join(diskDir(), "image")
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
		f, err := os.Create(path)
		Expect(err).NotTo(HaveOccurred())
		for i := range 16 {
			chunk[0] = byte(i)
			_, err := f.Write(chunk)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(f.Sync()).To(Succeed())
		Expect(f.Close()).To(Succeed())

		mapped := mapReadOnly(path, 16<<20)
		touch := func() (sum int) {
			for i := range 16 {
				sum += int(mapped[i<<20]) + int(mapped[i<<20+512<<10])
			}
			return sum
		}
		sum := touch()
		Expect(sum).To(Equal(15*16/2 + 16*int('0')))
		resident := func() int64 {
			smaps, err := os.ReadFile("/proc/self/smaps")
			Expect(err).NotTo(HaveOccurred())
			mappings, err := residency.BinaryMappings(bytes.NewReader(smaps), path)
			Expect(err).NotTo(HaveOccurred())
			Expect(mappings).To(HaveLen(1))
			return mappings[0].Resident
		}
		touched := resident()
		Expect(touched).To(BeNumerically(">=", 32<<12), "32 pages touched")

		res, err := residency.ReleaseFile(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(MatchFields(IgnoreExtras, Fields{"Mappings": Equal(1), "Before": Equal(touched), "After": BeZero()}))
		Expect(resident()).To(BeZero())
		Expect(res.CachedBefore).To(BeNumerically(">=", touched))
		Expect(res.CachedAfter).To(BeZero(), "no process maps the file any more, and it is written")

		// The same pages read back what the file holds, each alone: no read-ahead fills the
		// cache around them, so the kernel maps about the 32 pages touched (it mapped 64 KiB
		// around each, or the whole folio where the cache held larger ones).
		Expect(touch()).To(Equal(sum))
		Expect(resident()).To(BeNumerically("<=", 2*32*os.Getpagesize()))
	})
})

var _ = Describe("ReleaseFile of a file that is gone", func() {
	It("releases the mappings and says apart why the page cache kept the file's part", func() {
		path := filepath.Join(diskDir(), "image")
		Expect(os.WriteFile(path, bytes.Repeat([]byte{7}, 1<<20), 0o600)).To(Succeed())
		mapped := mapReadOnly(path, 1<<20)
		Expect(mapped[0] + mapped[512<<10]).To(Equal(byte(14)))
		// Removed while mapped, the file is named "<path> (deleted)" in the process's
		// mappings, and can no longer be opened by any name.
		Expect(os.Remove(path)).To(Succeed())
		gone := path + " (deleted)"

		res, err := residency.ReleaseFile(gone)
		Expect(err).NotTo(HaveOccurred(), "the mapping was released: that is no failure")
		Expect(res).To(MatchFields(IgnoreExtras, Fields{
			"Mappings": Equal(1), "Before": BeNumerically(">", 0), "After": BeZero(),
			"CachedBefore": Equal(int64(-1)), "CachedAfter": Equal(int64(-1)),
		}))
		Expect(res.CacheErr).To(MatchError(ContainSubstring("no such file")))
		Expect(mapped[0]+mapped[512<<10]).To(Equal(byte(14)), "the pages read back")
	})
})

// mapReadOnly maps the first size bytes of the file at path read-only and private, as a
// binary's text is mapped, until the spec ends.
func mapReadOnly(path string, size int) []byte {
	ro, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(ro.Close)
	mapped, err := unix.Mmap(int(ro.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(unix.Munmap(mapped)).To(Succeed()) })
	return mapped
}

// diskDir is a temporary folder on a disk-backed file system: the test's temporary folder, or
// where that is in memory (tmpfs, whose pages are never dropped from its cache) one in the
// package's folder.
func diskDir() string {
	dir := GinkgoT().TempDir()
	var fs unix.Statfs_t
	Expect(unix.Statfs(dir, &fs)).To(Succeed())
	if fs.Type != unix.TMPFS_MAGIC {
		return dir
	}
	dir, err := os.MkdirTemp(".", "residency-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	abs, err := filepath.Abs(dir)
	Expect(err).NotTo(HaveOccurred())
	return abs
}
