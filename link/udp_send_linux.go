package link

// The send path: WriteBatch's checks, runs of datagrams grouped into UDP
// GSO sends, the messages built (a split datagram's payload sent from
// where it lies), sendmmsg, and each send error counted by errno, with
// the plain resend when the kernel refuses GSO.

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/wire"
)

// UDP GSO limits: the kernel takes at most UDP_MAX_SEGMENTS segments (64
// before Linux 6.1 raised it) and one IP datagram's worth of payload.
const (
	gsoMaxSegments = 64
	gsoMaxBytes4   = 0xFFFF - wire.IPv4HeaderLen - wire.UDPHeaderLen
	gsoMaxBytes6   = 0xFFFF - wire.UDPHeaderLen
)

// txOOBLen is the control-message room per sent message: UDP_SEGMENT,
// TOS and TTL.
var txOOBLen = 3 * cmsgSpace(4)

// SendsSplit says that WriteBatch takes datagrams with a Payload
// (CanSendSplit): the kernel copies it from where it lies.
func (l *UDPLink) SendsSplit() bool { return true }

// udpTx is one writer's preallocated state.
type udpTx struct {
	l     *UDPLink
	hs    []mmsghdr
	iov   []unix.Iovec
	names []byte
	oob   []byte
	first []int // first datagram of each message (group)
	count []int // datagrams in each message
	idp   wire.IDPatch

	fn         func(uintptr) bool
	start, end int
	got        int
	errno      unix.Errno
}

func (l *UDPLink) getTx() *udpTx {
	l.txMu.Lock()
	if n := len(l.txFree); n > 0 {
		t := l.txFree[n-1]
		l.txFree = l.txFree[:n-1]
		l.txMu.Unlock()
		return t
	}
	l.txMu.Unlock()
	n := l.bs
	// Up to three iovecs a datagram: one, or a split one's three
	// (Datagram.Payload).
	t := &udpTx{l: l, hs: make([]mmsghdr, n), iov: make([]unix.Iovec, 3*n), names: make([]byte, n*sockaddrLen),
		oob: make([]byte, n*txOOBLen), first: make([]int, n), count: make([]int, n)}
	t.fn = t.send
	return t
}

func (l *UDPLink) putTx(t *udpTx) {
	l.txMu.Lock()
	l.txFree = append(l.txFree, t)
	l.txMu.Unlock()
}

func (t *udpTx) send(fd uintptr) bool {
	vlen := t.end - t.start
	var res sysResult
	if f := t.l.sendFault; f != nil {
		res = f(t, vlen)
	}
	r1, e := res.r1, res.errno
	if !res.hit || res.errno == 0 && int(res.r1) <= vlen {
		if res.hit {
			vlen = int(res.r1) // a partial batch: send only that many
		}
		r1, e = 0, 0
		if vlen > 0 {
			// Raw: the call never sleeps (see rawIO).
			r1, _, e = unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&t.hs[t.start])), uintptr(vlen),
				unix.MSG_DONTWAIT, 0, 0)
		}
	}
	if e == unix.EAGAIN || e == unix.EINTR {
		return false // wait for send buffer space
	}
	t.got, t.errno = mmsgResult(r1, e, vlen)
	return true
}

// WriteBatch sends msgs and returns how many datagrams the kernel took.
// Each datagram goes from the link's address and port with DF set; the
// ICRC in its Buf is patched to the headers really sent, and its Encap is
// rewritten to them (source, source port, identification, DF, hop
// limit). Datagrams the link cannot send (another address family, no
// destination, a Payload's Split outside Buf) are dropped, counted, their Encap zeroed and their Err
// set; datagrams a send error drops are counted by errno and get it in
// their Err. It waits only for socket buffer space. While the link's
// interface is administratively down it sends nothing and marks every
// datagram ENETDOWN. After Close it returns ErrLinkClosed, every datagram
// not sent marked EBADF.
func (l *UDPLink) WriteBatch(msgs []Datagram) (int, error) {
	if l.closed.Load() {
		markUnsent(msgs)
		return 0, ErrLinkClosed
	}
	if l.iface.down() {
		// The interface is administratively down: rxe finds no route
		// through a netdev without IFF_UP (rxe_net.c rxe_find_route4
		// looks up with its ifindex, and ip_route_output_key answers
		// -ENETUNREACH), and a packet that reaches one is refused with
		// -ENETDOWN (__dev_queue_xmit). The socket, bound to an address
		// and not to the interface, might still route it out of another
		// one: the link refuses it itself, each datagram marked ENETDOWN.
		for i := range msgs {
			if msgs[i].Err == 0 {
				msgs[i].Err = unix.ENETDOWN
			}
		}
		l.ctr.txError(unix.ENETDOWN, len(msgs))
		return 0, nil
	}
	t := l.getTx()
	defer l.putTx(t)
	sent := 0
	for len(msgs) > 0 {
		k := min(len(msgs), len(t.first))
		n, err := t.write(msgs[:k], false, l.gso.Load())
		sent += n
		if err != nil {
			markUnsent(msgs[k:])
			return sent, err
		}
		msgs = msgs[k:]
	}
	return sent, nil
}

// markUnsent marks datagrams a closed link never tried to send.
func markUnsent(msgs []Datagram) {
	for i := range msgs {
		if msgs[i].Err == 0 {
			msgs[i].Err = unix.EBADF
		}
	}
}

// sendable reports whether the link can send d, counting it and setting
// its Err if not.
func (l *UDPLink) sendable(d *Datagram) bool {
	e := &d.Encap
	switch {
	case !e.Dst.IsValid() || e.DstPort == 0 || e.Dst.IsUnspecified():
		d.Err = unix.EDESTADDRREQ
	case e.Dst.Unmap().Is4() != l.v4:
		d.Err = unix.EAFNOSUPPORT
	case d.Payload != nil && (d.Split < 0 || d.Split > len(d.Buf)-wire.ICRCLen):
		d.Err = unix.EINVAL // the payload's place is outside Buf or after its ICRC
	default:
		return true
	}
	l.ctr.txBadEncap.Add(1)
	return false
}

// sameFlow reports whether b can follow a in one GSO send.
func sameFlow(a, b *wire.Encap) bool {
	return a.Dst == b.Dst && a.DstPort == b.DstPort && a.TrafficClass == b.TrafficClass && a.HopLimit == b.HopLimit
}

// coalesce adds msgs[i] to the sends msgs[:i] were grouped into, nm of
// them so far, send g being the count[g] datagrams from msgs[first[g]],
// and returns how many there are now. With gso, msgs[i] joins the last
// send when the kernel can cut them apart again (UDP_SEGMENT): it comes
// right after the send's last datagram, to the same destination with
// the same traffic class and hop limit (sameFlow); the send's last
// datagram has the first one's size, and msgs[i] is not empty and no
// larger (the kernel cuts at the first one's size: only the last
// segment may be shorter); and the send stays within gsoMaxSegments and
// maxBytes of payload. Otherwise it starts a send of its own.
func coalesce(msgs []Datagram, i int, first, count []int, nm, maxBytes int, gso bool) int {
	d := &msgs[i]
	if gso && nm > 0 {
		g := nm - 1
		f := &msgs[first[g]]
		last := &msgs[first[g]+count[g]-1]
		size := f.Len()
		if first[g]+count[g] == i && count[g] < gsoMaxSegments &&
			last.Len() == size && d.Len() <= size && d.Len() > 0 &&
			(count[g]+1)*size <= maxBytes && sameFlow(&f.Encap, &d.Encap) {
			count[g]++
			return nm
		}
	}
	first[nm], count[nm] = i, 1
	return nm + 1
}

// write sends at most len(t.first) datagrams, in GSO sends if gso; resend
// marks a second pass over datagrams already checked and counted.
func (t *udpTx) write(msgs []Datagram, resend, gso bool) (int, error) {
	l := t.l
	maxBytes := gsoMaxBytes6
	if l.v4 {
		maxBytes = gsoMaxBytes4
	}
	// Group the datagrams into messages.
	nm := 0
	for i := range msgs {
		d := &msgs[i]
		if resend && (d.Err != 0 || !d.Encap.Dst.IsValid()) {
			continue // dropped and counted on the first pass
		}
		if !l.sendable(d) {
			d.Encap = wire.Encap{} // nothing of it went on the wire
			continue
		}
		nm = coalesce(msgs, i, t.first, t.count, nm, maxBytes, gso)
	}
	// Patch each datagram to its wire headers and build the messages.
	t.patchWire(msgs, nm)
	for g, io := 0, 0; g < nm; g++ {
		io = t.build(g, msgs, io)
	}
	sent := 0
	t.start, t.end = 0, nm
	retried := -1 // the message sent again after a socket error
	for t.start < t.end {
		t.got, t.errno = 0, 0
		if err := l.sock.Write(t.fn); err != nil {
			for g := t.start; g < t.end; g++ {
				t.fail(msgs, g, unix.EBADF) // closed: not an error to count
			}
			return sent, ErrLinkClosed
		}
		for g := t.start; g < t.start+t.got; g++ {
			sent += t.count[g]
			l.ctr.txPackets.Add(uint64(t.count[g]))
			for s := range t.count[g] {
				l.ctr.txBytes.Add(uint64(msgs[t.first[g]+s].Len()))
			}
			if t.count[g] > 1 {
				l.ctr.txGSOSends.Add(1)
			}
		}
		t.start += t.got
		if t.errno == 0 {
			// All sent, or a partial batch: sendmmsg stopped before the
			// message that fails, and the next call reports its errno.
			continue
		}
		// The call failed and sent nothing: message t.start is the one.
		g := t.start
		if t.errno == unix.ECONNREFUSED && retried != g {
			// A UDP send has no ECONNREFUSED of its own: this is the
			// socket's error, an ICMP port unreachable about an earlier
			// datagram (IP_RECVERR), which the send took
			// (sock_alloc_send_pskb) instead of the datagram. Send it
			// again, once; the readers drain the ICMP from the error
			// queue (udp_errq_linux.go).
			retried = g
			l.errs.drain.Store(true)
			l.wakeReader()
			continue
		}
		if t.count[g] > 1 && (t.errno == unix.EIO || t.errno == unix.EINVAL) {
			ds := msgs[t.first[g] : t.first[g]+t.count[g]]
			if t.errno == unix.EIO {
				// The route cannot segment (no checksum offload): stop
				// using GSO and send the rest of the batch plainly.
				l.gso.Store(false)
				l.ctr.txGSOFallbacks.Add(1)
				ds = msgs[t.first[g]:]
			}
			// On EINVAL the segments are larger than the route's MTU:
			// udp_send_skb refuses such a GSO send with EINVAL where a
			// single datagram gets EMSGSIZE, so send them one by one for
			// each to get its errno (and be counted by it).
			n, err := l.sendPlain(ds)
			sent += n
			if err != nil || t.errno == unix.EIO {
				return sent, err
			}
			t.start++
			continue
		}
		t.fail(msgs, g, t.errno)
		l.ctr.txError(t.errno, t.count[g])
		if t.errno != unix.ENOBUFS {
			// The error queue may hold an entry for the readers: a
			// local EMSGSIZE (ip_local_error), or the ICMP error whose
			// socket error this send took (sock_alloc_send_pskb
			// returns a pending sk_err, so the reader it woke may find
			// none). The next pass drains it (udp_errq_linux.go).
			l.errs.drain.Store(true)
			l.wakeReader()
		}
		t.start++
	}
	return sent, nil
}

// fail marks the datagrams of message g not sent, with errno e.
func (t *udpTx) fail(msgs []Datagram, g int, e unix.Errno) {
	for s := range t.count[g] {
		msgs[t.first[g]+s].Err = e
	}
}

// sendPlain sends ds (checked and patched by a first pass) one datagram
// per message, with a writer of its own, each ICRC patched again for
// identification 0.
func (l *UDPLink) sendPlain(ds []Datagram) (int, error) {
	l.patchPlain(ds)
	t := l.getTx()
	defer l.putTx(t)
	return t.write(ds, true, false)
}

// build fills message g of t from its datagrams, with iovecs from t.iov[io]
// on, and returns the index of the first iovec it left unused: a datagram
// takes one, or three when it has a Payload (its headers, the payload
// where it lies, the rest of Buf), so that the kernel copies the payload
// straight from the application's memory.
func (t *udpTx) build(g int, msgs []Datagram, io int) int {
	l := t.l
	first, cnt := t.first[g], t.count[g]
	start := io
	for s := range cnt {
		d := &msgs[first+s]
		if d.Payload == nil {
			io = setIovec(t.iov, io, d.Buf)
			continue
		}
		io = setIovec(t.iov, io, d.Buf[:d.Split])
		io = setIovec(t.iov, io, d.Payload)
		io = setIovec(t.iov, io, d.Buf[d.Split:])
	}
	e := &msgs[first].Encap
	h := &t.hs[g]
	h.hdr = unix.Msghdr{}
	h.len = 0
	h.hdr.Iov = &t.iov[start]
	h.hdr.SetIovlen(io - start)
	name := t.names[g*sockaddrLen : (g+1)*sockaddrLen]
	clear(name)
	if l.v4 {
		binary.NativeEndian.PutUint16(name[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(name[2:], e.DstPort)
		a := e.Dst.As4()
		copy(name[4:8], a[:])
		h.hdr.Namelen = unix.SizeofSockaddrInet4
	} else {
		binary.NativeEndian.PutUint16(name[0:], unix.AF_INET6)
		binary.BigEndian.PutUint16(name[2:], e.DstPort)
		a := e.Dst.As16()
		copy(name[8:24], a[:])
		if e.Dst.IsLinkLocalUnicast() {
			binary.NativeEndian.PutUint32(name[24:], l.scope)
		}
		h.hdr.Namelen = unix.SizeofSockaddrInet6
	}
	h.hdr.Name = &name[0]
	oob := t.oob[g*txOOBLen : (g+1)*txOOBLen]
	n := 0
	if cnt > 1 {
		n += putCmsg(oob[n:], unix.IPPROTO_UDP, unix.UDP_SEGMENT, 2, uint32(msgs[first].Len()))
	}
	lvl, tos, ttl := unix.IPPROTO_IPV6, unix.IPV6_TCLASS, unix.IPV6_HOPLIMIT
	if l.v4 {
		lvl, tos, ttl = unix.IPPROTO_IP, unix.IP_TOS, unix.IP_TTL
	}
	if e.TrafficClass != l.tos {
		n += putCmsg(oob[n:], lvl, tos, 4, uint32(e.TrafficClass))
	}
	if e.HopLimit != l.ttl {
		n += putCmsg(oob[n:], lvl, ttl, 4, uint32(e.HopLimit))
	}
	if n > 0 {
		h.hdr.Control = &oob[0]
		h.hdr.SetControllen(n)
	}
	return io
}

// setIovec points iov[i] at b and returns i+1.
func setIovec(iov []unix.Iovec, i int, b []byte) int {
	iov[i].Base = unsafe.SliceData(b)
	iov[i].SetLen(len(b))
	return i + 1
}

// putCmsg writes a control message with a size-byte native-endian value
// into b and returns its space.
func putCmsg(b []byte, level, typ, size int, v uint32) int {
	c := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	c.Level, c.Type = int32(level), int32(typ)
	c.SetLen(unix.CmsgLen(size))
	data := b[unix.CmsgLen(0):]
	if size == 2 {
		binary.NativeEndian.PutUint16(data, uint16(v))
	} else {
		binary.NativeEndian.PutUint32(data, v)
	}
	return unix.CmsgSpace(size)
}
