//go:build linux

package residency

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Release drops the running binary's read-only mappings from the process's page tables
// (madvise MADV_DONTNEED), then asks the kernel to drop their part of the file from the page
// cache (posix_fadvise POSIX_FADV_DONTNEED: clean pages no process maps leave, a page another
// process maps, such as another replica's, stays). Their pages leave the process's RSS, and
// any page used later is mapped again on first use; the mappings are marked for random access
// first (MADV_RANDOM), so such a fault reads that page alone where it was dropped, and the
// process maps what it runs, not the read-ahead around it. A mapping that holds a private copy
// of a page (a debugger's breakpoint) is left as it is.
func Release() (Result, error) {
	exe, err := self()
	if err != nil {
		return Result{}, err
	}
	// /proc/self/exe opens the binary even once it was replaced on disk.
	return release(exe, "/proc/self/exe")
}

// ReleaseFile is Release for the process's mappings of another file, by its path.
func ReleaseFile(path string) (Result, error) { return release(path, path) }

// release releases the read-only mappings smaps names name, of the file open opens. Once a
// mapping is released, the error of a later step (the page cache's part, counting) is in the
// Result, not returned: what was released stays released.
func release(name, open string) (Result, error) {
	mappings, err := readMappings(name)
	if err != nil {
		return Result{}, err
	}
	res := Result{CachedBefore: -1, CachedAfter: -1}
	var released []Mapping
	for _, m := range mappings {
		if !m.Releasable() {
			continue
		}
		// No read-ahead for this mapping from now on (a fault reads its page alone, not the
		// megabytes around it, which the kernel would cache in large folios again), then out of
		// the page tables.
		for _, advice := range []uintptr{unix.MADV_RANDOM, unix.MADV_DONTNEED} {
			// The mapping is not a Go slice: madvise by its address.
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.Start), uintptr(m.End-m.Start), advice); errno != 0 {
				return res, fmt.Errorf("madvise(%d) %x-%x: %w", advice, m.Start, m.End, errno)
			}
		}
		released = append(released, m)
		res.Mappings++
		res.Before += m.Resident
	}
	res.CacheErr = dropCached(open, released, &res)
	after, err := readMappings(name)
	if err != nil {
		res.After = -1
		return res, nil
	}
	for _, m := range after {
		if m.Releasable() {
			res.After += m.Resident
		}
	}
	return res, nil
}

// dropCached asks the kernel to drop the released mappings' part of the file from the page
// cache, and counts how much of it was cached before and after. A page not yet written back
// (a binary just built) cannot be dropped, so the file's dirty pages are written first; a
// file system that cannot (read-only) has none.
func dropCached(path string, released []Mapping, res *Result) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	_ = f.Sync()
	before, countErr := cachedBytes(fd, released)
	for _, m := range released {
		if err := unix.Fadvise(fd, int64(m.Offset), int64(m.End-m.Start), unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("fadvise %x+%x: %w", m.Offset, m.End-m.Start, err)
		}
	}
	after, err := cachedBytes(fd, released)
	if countErr == nil && err == nil {
		res.CachedBefore, res.CachedAfter = before, after
	}
	return nil
}

// cachedBytes counts the pages of the mappings' file ranges in the page cache (mincore on a
// mapping of its own, which faults nothing in).
func cachedBytes(fd int, mappings []Mapping) (int64, error) {
	page := uint64(os.Getpagesize())
	var sum int64
	for _, m := range mappings {
		length := int(m.End - m.Start)
		region, err := unix.Mmap(fd, int64(m.Offset), length, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return 0, fmt.Errorf("map %x+%x: %w", m.Offset, length, err)
		}
		vec := make([]byte, (uint64(length)+page-1)/page)
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&region[0])), uintptr(length), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			err = errno
		}
		if unmapErr := unix.Munmap(region); err == nil {
			err = unmapErr
		}
		if err != nil {
			return 0, fmt.Errorf("mincore %x+%x: %w", m.Offset, length, err)
		}
		for _, v := range vec {
			if v&1 != 0 {
				sum += int64(page)
			}
		}
	}
	return sum, nil
}

// Resident is the bytes of the running binary's mappings resident now.
func Resident() (int64, error) {
	exe, err := self()
	if err != nil {
		return 0, err
	}
	mappings, err := readMappings(exe)
	var sum int64
	for _, m := range mappings {
		sum += m.Resident
	}
	return sum, err
}

// self is the running binary's path, as the process's mappings name it.
func self() (string, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "", fmt.Errorf("find the binary: %w", err)
	}
	return exe, nil
}

// readMappings are the process's mappings of the file exe.
func readMappings(exe string) ([]Mapping, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("read the process's mappings: %w", err)
	}
	defer f.Close()
	return BinaryMappings(f, exe)
}
