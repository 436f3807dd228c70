//go:build linux

package residency

import (
	"fmt"
	"os"
	"syscall"
)

// Release drops the running binary's read-only mappings from the process's page tables
// (madvise MADV_DONTNEED): their resident pages leave the process's RSS and stay in the page
// cache, and any page used later is mapped again on first use. A mapping that holds a private
// copy of a page (a debugger's breakpoint) is left as it is.
func Release() (Result, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Result{}, fmt.Errorf("find the binary: %w", err)
	}
	mappings, err := readMappings(exe)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for _, m := range mappings {
		if !m.Releasable() {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.Start), uintptr(m.End-m.Start), syscall.MADV_DONTNEED); errno != 0 {
			return res, fmt.Errorf("madvise %x-%x: %w", m.Start, m.End, errno)
		}
		res.Mappings++
		res.Before += m.Resident
	}
	after, err := readMappings(exe)
	if err != nil {
		return res, err
	}
	for _, m := range after {
		if m.Releasable() {
			res.After += m.Resident
		}
	}
	return res, nil
}

// Resident is the bytes of the running binary's mappings resident now.
func Resident() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("find the binary: %w", err)
	}
	mappings, err := readMappings(exe)
	var sum int64
	for _, m := range mappings {
		sum += m.Resident
	}
	return sum, err
}

func readMappings(exe string) ([]Mapping, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("read the process's mappings: %w", err)
	}
	defer f.Close()
	return BinaryMappings(f, exe)
}
