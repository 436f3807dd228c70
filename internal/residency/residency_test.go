package residency_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/internal/residency"
)

// smaps is /proc/<pid>/smaps of a process whose binary is /srv/opi (abridged to the fields read).
const smaps = `00400000-020c9000 r-xp 00000000 fe:00 1234                               /srv/opi
Size:              29444 kB
Rss:               21700 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
020c9000-0441f000 r--p 01cc9000 fe:00 1234                               /srv/opi
Size:              36184 kB
Rss:               31000 kB
Anonymous:             0 kB
0441f000-04447000 r--p 0401f000 fe:00 1234                               /srv/opi
Size:                160 kB
Rss:                 160 kB
Anonymous:             8 kB
04447000-044f9000 rw-p 04047000 fe:00 1234                               /srv/opi
Size:                712 kB
Rss:                 600 kB
Anonymous:           120 kB
044f9000-06720000 rw-p 00000000 00:00 0
Rss:                1000 kB
Anonymous:          1000 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:00 99                         /srv/other opi
Rss:                 400 kB
Anonymous:             0 kB
7f0000100000-7f0000200000 r--p 00000000 fe:00 77                         /srv/opi (deleted)
Rss:                  64 kB
Anonymous:             0 kB
`

var _ = Describe("BinaryMappings", func() {
	It("gives the binary's mappings with their file offsets, resident and privately copied bytes, no other file's", func() {
		mappings, err := residency.BinaryMappings(strings.NewReader(smaps), "/srv/opi")
		Expect(err).NotTo(HaveOccurred())
		Expect(mappings).To(Equal([]residency.Mapping{
			{Start: 0x400000, End: 0x20c9000, Perms: "r-xp", Resident: 21700 << 10},
			{Start: 0x20c9000, End: 0x441f000, Perms: "r--p", Offset: 0x1cc9000, Resident: 31000 << 10},
			{Start: 0x441f000, End: 0x4447000, Perms: "r--p", Offset: 0x401f000, Resident: 160 << 10, Anonymous: 8 << 10},
			{Start: 0x4447000, End: 0x44f9000, Perms: "rw-p", Offset: 0x4047000, Resident: 600 << 10, Anonymous: 120 << 10},
		}))
	})

	It("finds a replaced binary by the name the kernel gives it, paths with spaces included", func() {
		mappings, err := residency.BinaryMappings(strings.NewReader(smaps), "/srv/opi (deleted)")
		Expect(err).NotTo(HaveOccurred())
		Expect(mappings).To(ConsistOf(residency.Mapping{Start: 0x7f0000100000, End: 0x7f0000200000, Perms: "r--p", Resident: 64 << 10}))

		mappings, err = residency.BinaryMappings(strings.NewReader(smaps), "/srv/other opi")
		Expect(err).NotTo(HaveOccurred())
		Expect(mappings).To(HaveLen(1))
	})

	It("releases only what can be read again from the file: read-only, with no private copy", func() {
		mappings, err := residency.BinaryMappings(strings.NewReader(smaps), "/srv/opi")
		Expect(err).NotTo(HaveOccurred())
		var releasable []string
		for _, m := range mappings {
			if m.Releasable() {
				releasable = append(releasable, m.Perms)
			}
		}
		// The text and the read-only data; not the relocated read-only data a write copied, nor .data.
		Expect(releasable).To(Equal([]string{"r-xp", "r--p"}))
	})
})
