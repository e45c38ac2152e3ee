//go:build !amd64 && !arm64

package verbs

import (
	"bytes"
	"runtime"
	"strconv"
)

// goroutine returns the calling goroutine's number, read from the first
// line of its stack trace ("goroutine 18 [running]:"): slower than the
// g's address the assembly of amd64 and arm64 reads, but as unique.
func goroutine() uintptr {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	n, _ := strconv.ParseUint(string(b), 10, 64)
	return uintptr(n)
}
