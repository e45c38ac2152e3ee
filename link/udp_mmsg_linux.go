package link

// The system calls both paths make: recvmmsg's and sendmmsg's message
// headers, why the calls are raw (rawIO), how their results are decoded
// (mmsgResult), and the fault hook tests put in the kernel's place
// (sysResult).

import (
	"golang.org/x/sys/unix"
)

// sockaddrLen is room for a sockaddr_in6 (or a sockaddr_in).
const sockaddrLen = unix.SizeofSockaddrInet6

func cmsgSpace(n int) int { return unix.CmsgSpace(n) }

// mmsghdr is struct mmsghdr; Go pads it to the C size (64 bytes on 64-bit).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// rawIO: recvmmsg and sendmmsg are made with RawSyscall6, not Syscall6.
// Both pass MSG_DONTWAIT, so neither sleeps, and the runtime need not
// know the goroutine is in a system call (entersyscall/exitsyscall).
// When it knows, sysmon takes the P away from any call that spans one of
// its ticks (20 µs and up) if no other P is idle - always so with one P -
// and hands it to another thread, and the caller must get a P back on
// return (futex wake-ups, thread switches). Natively the calls take a few
// µs and that is rare; under emulation nearly every call outlasts a tick,
// and the hand-offs doubled write_lat between two qemu guests
// (docs/performance.md, "link.UDPLink: recvmmsg and sendmmsg as raw
// system calls").
// The cost: a GC stop-the-world waits for a call in progress, which is
// as short as the call.

// sysResult is what a test's fault hook makes sendmmsg or recvmmsg
// return instead of the kernel, exactly as the raw syscall returns it:
// r1 = ^uintptr(0) (-1) with an errno for a failed call, or a count below
// vlen with errno 0 for a partial batch. For a partial batch the link
// makes the real call with vlen set to that count, so that the messages
// reported done really are (sent, or received). The link decodes either
// with the code that decodes the kernel's results.
type sysResult struct {
	r1    uintptr
	errno unix.Errno
	hit   bool // false: make the real call
}

// sysFail is a failed call's result: -1 and errno.
func sysFail(e unix.Errno) sysResult { return sysResult{r1: ^uintptr(0), errno: e, hit: true} }

// sysPartial is a partial batch's result: n messages, no error.
func sysPartial(n int) sysResult { return sysResult{r1: uintptr(n), hit: true} }

// errBadCount stands for a result no kernel gives: a count above vlen,
// or no messages and no error.
const errBadCount = unix.EPROTO

// mmsgResult decodes a raw sendmmsg/recvmmsg return for a call over vlen
// messages: (-1, errno) failed and did nothing; (n, 0) did the first n
// messages. Both calls return an error only when they did no message at
// all; after a partial batch the next call reports the error of the
// message that stopped it (__sys_sendmmsg, do_recvmmsg). A count out of
// range, never from the kernel, is errBadCount, never an index.
func mmsgResult(r1 uintptr, e unix.Errno, vlen int) (int, unix.Errno) {
	if e != 0 {
		return 0, e
	}
	n := int(r1)
	if n <= 0 || n > vlen {
		return 0, errBadCount
	}
	return n, 0
}
