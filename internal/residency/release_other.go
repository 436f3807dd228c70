//go:build !linux

package residency

import "errors"

// ErrUnsupported is Release's and Resident's answer where the kernel's process files are not
// available.
var ErrUnsupported = errors.New("releasing the binary's pages is only available on Linux")

// Release does nothing here.
func Release() (Result, error) { return Result{}, ErrUnsupported }

// Resident is unknown here.
func Resident() (int64, error) { return 0, ErrUnsupported }
