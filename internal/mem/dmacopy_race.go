//go:build race

package mem

import "unsafe"

// dmaCopy is copy(dst, src) for the bytes of registered memory, kept out
// of the race detector. The NIC's accesses to a registered region are
// DMA: by the verbs' rules they may meet each other and the
// application's own - a buffer being sent from while a receive lands in
// it (rdma-core's pingpongs post both on one buffer), a remote WRITE
// landing while the application reads - and what that leaves in memory
// is undefined, not the program. With run to completion, two QPs of one
// NIC copy on two goroutines at once (a receive goroutine placing a SEND
// while a processor gathers the other QP's), and the race detector,
// which cannot know that these races are the hardware's, flagged them
// (xsrqpingpong TestPairLossy). The copy runs here, byte by byte, in a
// function the detector does not instrument (the builtin copy would
// report through runtime.slicecopy), as perftest's peek reads the byte
// write_lat polls; races on the engine's own state stay visible. Only
// race builds pay for the loop.
//
//go:norace
func dmaCopy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	d, s := uintptr(unsafe.Pointer(&dst[0])), uintptr(unsafe.Pointer(&src[0]))
	if d > s && d < s+uintptr(n) {
		for i := n - 1; i >= 0; i-- { // overlapping, dst after src
			dst[i] = src[i]
		}
		return n
	}
	for i := 0; i < n; i++ {
		dst[i] = src[i]
	}
	return n
}
