// Package residency gives back the pages of the running binary that only its start-up used.
//
// A Go program's package initialisation (client-go's scheme registering every API group, type
// tables, protobuf descriptors, templates) touches code and read-only data scattered over the
// whole binary, and the kernel maps at least 64 KiB around each touched page, and the whole of
// a large page-cache folio when the file's cache holds one (on Linux 6.18 with ext4, a file is
// cached in folios as large as the writes that made it, up to 2 MiB: touching the same 39 pages
// of opi's binary mapped 2.5 MB of it when it was written 32 KiB at a time, 16 MB when the Go
// linker had just written it, 40 MB in 1 MiB writes, 80 MB in 8 MiB writes). Those pages
// stay in the process's resident set, counted in its RSS, although most are never used again.
// Release drops the binary's read-only mappings from the process's page tables, with no
// read-ahead for them from then on, and asks the kernel to drop their part of the file from the
// page cache where no other process maps it: the pages the program uses afterwards come back on
// first use, each read and mapped alone, so what remains resident is what the program runs.
package residency

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Mapping is one of the binary's mappings in the process's address space.
type Mapping struct {
	Start, End uint64 // [Start, End)
	Perms      string // as /proc/<pid>/maps gives them, e.g. "r-xp"
	Offset     uint64 // where in the file the mapping begins
	Resident   int64  // bytes resident (Rss)
	Anonymous  int64  // bytes of private copies (pages written since the mapping was made)
}

// Result is what Release did.
type Result struct {
	Mappings int   // the binary's read-only mappings released
	Before   int64 // bytes of them resident before
	After    int64 // bytes of them resident right after (-1 when unknown)
	// The bytes of the mappings' part of the file in the page cache before and after Release
	// asked the kernel to drop it (pages another process maps stay; -1 when unknown).
	CachedBefore, CachedAfter int64
	// CacheErr is why the page cache was not asked to drop the file's part (the file could
	// not be opened, the kernel refused): the mappings are released all the same.
	CacheErr error
}

// BinaryMappings reads smaps (the format of /proc/<pid>/smaps) and returns the mappings of the
// file exe (as /proc/<pid>/exe names it, " (deleted)" included when it was replaced).
func BinaryMappings(smaps io.Reader, exe string) ([]Mapping, error) {
	var out []Mapping
	var cur *Mapping
	sc := bufio.NewScanner(smaps)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if m, path, ok := header(line); ok {
			cur = nil
			if path == exe {
				out = append(out, m)
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur == nil {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "Rss":
			cur.Resident = kilobytes(value)
		case "Anonymous":
			cur.Anonymous = kilobytes(value)
		}
	}
	return out, sc.Err()
}

// Releasable says whether m may be dropped from the page tables without losing anything: it is
// never written (not writable, and no private copy of any of its pages), so every page of it
// can be read again from the file.
func (m Mapping) Releasable() bool {
	return len(m.Perms) == 4 && m.Perms[0] == 'r' && m.Perms[1] == '-' && m.Anonymous == 0
}

// header parses a mapping's first line: "start-end perms offset dev inode [path]".
func header(line string) (Mapping, string, bool) {
	fields := strings.Fields(line)
	if len(fields) < 5 {
		return Mapping{}, "", false
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return Mapping{}, "", false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	offset, err3 := strconv.ParseUint(fields[2], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil || end <= start || len(fields[1]) != 4 {
		return Mapping{}, "", false
	}
	path := ""
	if len(fields) > 5 {
		// The path is the rest of the line after the inode (it may hold spaces).
		path = strings.Join(fields[5:], " ")
	}
	return Mapping{Start: start, End: end, Perms: fields[1], Offset: offset}, path, true
}

// kilobytes parses smaps' "   1234 kB" into bytes.
func kilobytes(value string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
	if err != nil {
		return 0
	}
	return n * 1024
}
