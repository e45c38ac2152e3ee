package link

// What the network reports back: the UDP link's socket has IP_RECVERR
// (IPV6_RECVERR), so the kernel queues every ICMP error about a datagram
// it sent on the socket's error queue and sets the socket's error
// (__udp4_lib_err, __udp6_lib_err: sk->sk_err, sk_error_report), which
// the next recvmmsg returns once. The receive pass that gets such an
// errno drains the queue (recvmsg with MSG_ERRQUEUE) and keeps the ICMP
// errors; the reader hands them to the watchers (WatchSendErrors) once it
// has let go of the receive state. A send that fails with EMSGSIZE queues
// an entry too (ip_local_error) without setting the socket's error: the
// next pass drains it. rxe's own UDP socket has no error handler and the
// kernel drops these ICMPs; softnic hears them (see SendError).

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ICMP origins of a sock_extended_err (include/uapi/linux/errqueue.h).
const (
	eeOriginICMP  = 2 // SO_EE_ORIGIN_ICMP
	eeOriginICMP6 = 3 // SO_EE_ORIGIN_ICMP6
)

// maxErrDrain bounds the entries one pass takes off the error queue.
const maxErrDrain = 64

// udpErrs is the link's share of the error queue: the errors drained and
// not yet handed over, and the watchers.
type udpErrs struct {
	// drain: an entry may be queued without the socket's error set (a
	// send's EMSGSIZE): the next receive pass drains.
	drain    atomic.Bool
	any      atomic.Bool // pending has errors
	mu       sync.Mutex
	pending  []SendError // guarded by mu
	watchers Watchers[func(SendError)]
	buf      [512]byte // the drained datagram's head, discarded; guarded by rxMu
	oob      [256]byte // guarded by rxMu
}

// WatchSendErrors has the link call fn with every ICMP error the network
// reports back about a datagram it sent (ErrorWatcher), read from the
// socket's error queue (IP_RECVERR): ECONNREFUSED for a port
// unreachable, EHOSTUNREACH, ENETUNREACH, EMSGSIZE, ... fn runs on the
// reader that found the error (ReadBatch, or TryReadBatch), outside the
// receive state's lock.
func (l *UDPLink) WatchSendErrors(fn func(SendError)) (stop func(), ok bool) {
	return l.errs.watchers.Add(fn), true
}

// drainErrQueue takes the entries of the socket's error queue, keeping
// the ICMP errors for the watchers. Run by a receive pass, under rxMu.
func (l *UDPLink) drainErrQueue(fd uintptr) {
	e := &l.errs
	for range maxErrDrain {
		iov := unix.Iovec{Base: &e.buf[0]}
		iov.SetLen(len(e.buf))
		var name [unix.SizeofSockaddrInet6]byte
		var h unix.Msghdr
		h.Name = &name[0]
		h.Namelen = uint32(len(name))
		h.Iov = &iov
		h.SetIovlen(1)
		h.Control = &e.oob[0]
		h.SetControllen(len(e.oob))
		_, _, errno := unix.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&h)),
			unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if errno != 0 {
			return // EAGAIN: empty
		}
		se, ok := parseErrQueue(name[:h.Namelen], e.oob[:h.Controllen])
		if !ok {
			continue
		}
		e.mu.Lock()
		if len(e.pending) < maxErrDrain {
			e.pending = append(e.pending, se)
			e.any.Store(true)
		}
		e.mu.Unlock()
	}
}

// parseErrQueue decodes one error queue entry: the original destination
// from its address, the error from its IP_RECVERR (IPV6_RECVERR)
// control message, the reporter from the offender address after it
// (SO_EE_OFFENDER). It reports false for an entry that is not an ICMP
// error (a local one, such as a send's EMSGSIZE, which the sender saw
// already).
func parseErrQueue(name, oob []byte) (SendError, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return SendError{}, false
	}
	for _, m := range msgs {
		if !(m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR) &&
			!(m.Header.Level == unix.SOL_IPV6 && m.Header.Type == unix.IPV6_RECVERR) {
			continue
		}
		if len(m.Data) < int(unsafe.Sizeof(unix.SockExtendedErr{})) {
			continue
		}
		ee := (*unix.SockExtendedErr)(unsafe.Pointer(&m.Data[0]))
		if ee.Origin != eeOriginICMP && ee.Origin != eeOriginICMP6 {
			return SendError{}, false
		}
		return SendError{Dst: sockaddrPort(name), From: sockaddrAddr(m.Data[int(unsafe.Sizeof(unix.SockExtendedErr{})):]),
			Errno: unix.Errno(ee.Errno)}, true
	}
	return SendError{}, false
}

// sockaddrPort decodes a sockaddr_in or sockaddr_in6's address and port.
func sockaddrPort(b []byte) netip.AddrPort {
	if len(b) < 4 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:4])
	return netip.AddrPortFrom(sockaddrAddr(b), port)
}

// sockaddrAddr decodes a sockaddr_in or sockaddr_in6's address (IPv4
// unmapped); invalid when b is neither.
func sockaddrAddr(b []byte) netip.Addr {
	if len(b) < 2 {
		return netip.Addr{}
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrFrom4([4]byte(b[4:8]))
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		}
	}
	return netip.Addr{}
}

// tellErrors hands the drained errors to the watchers. The readers call
// it once they have let go of the receive state.
func (l *UDPLink) tellErrors() {
	e := &l.errs
	if !e.any.Load() {
		return
	}
	e.mu.Lock()
	q := e.pending
	e.pending = nil
	e.any.Store(false)
	e.mu.Unlock()
	for _, se := range q {
		e.watchers.Each(func(fn func(SendError)) { fn(se) })
	}
}
