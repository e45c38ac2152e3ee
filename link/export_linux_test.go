package link

import "syscall"

// SetSendFault installs f as l's send fault hook for tests outside the
// package: before each sendmmsg call over vlen messages f returns the
// syscall's results to use instead (r1 = ^uintptr(0) and an errno, or a
// partial count), or hit false to make the real call. Set it before the
// link carries traffic.
func SetSendFault(l *UDPLink, f func(vlen int) (r1 uintptr, errno syscall.Errno, hit bool)) {
	l.sendFault = func(_ *udpTx, vlen int) sysResult {
		r1, e, hit := f(vlen)
		return sysResult{r1: r1, errno: e, hit: hit}
	}
}
