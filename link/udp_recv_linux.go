package link

// The receive path: one pass over the socket, shared by TryReadBatch and
// ReadBatch (whose wait is in udp_wait_linux.go): a non-blocking
// recvmmsg, each message's address and control messages parsed into its
// Encap, GRO-coalesced buffers split into the callers' buffers or lent
// (Lend), and every datagram numbered (NextSeq).
//
// Two readers share the socket: ReadBatch, which waits, and TryReadBatch,
// which does not. Both read in passes: a pass takes rxMu, hands out the
// GRO leftovers of an earlier pass or else makes one non-blocking
// recvmmsg (MSG_DONTWAIT) and parses and splits what it returned, and
// releases rxMu. Nothing a pass needs is held while a reader waits, so
// TryReadBatch never waits for a parked ReadBatch.
//
// TryReadBatch makes its pass through RawConn.Control, which holds a
// reference on the descriptor (so that Close cannot release it under the
// call) but not its read lock (internal/poll/fd_posix.go, FD.RawControl).

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/wire"
)

// groBufferLen is the size of one GRO receive buffer: a coalesced
// packet holds at most 64 KiB.
const groBufferLen = 1 << 16

// rxOOBLen is the control-message room per received message: PKTINFO,
// TOS/TCLASS, TTL/HOPLIMIT, UDP_GRO and SO_RXQ_OVFL.
var rxOOBLen = cmsgSpace(unix.SizeofInet6Pktinfo) + 4*cmsgSpace(4)

// NextSeq returns the Seq of the next datagram a read hands out (the
// package's NextSeq).
func (l *UDPLink) NextSeq() (uint64, bool) {
	l.rxMu.Lock()
	defer l.rxMu.Unlock()
	return l.rx.seq + 1, true
}

// Lend has the link hand the segments of a GRO-coalesced buffer over in
// place from now on (link.Lend, Datagram.Loan) instead of copying each
// into the caller's buffer; it reports whether it will: only with GRO.
// A segment handed over keeps its 64 KiB buffer from the next read
// until released, and the read takes another from a pool.
func (l *UDPLink) Lend() bool {
	l.rxMu.Lock()
	defer l.rxMu.Unlock()
	l.rx.lend = l.gro
	return l.gro
}

// udpRxMeta is what the socket told about one received buffer.
type udpRxMeta struct {
	enc   wire.Encap
	n     int  // bytes received
	seg   int  // GRO segment size, 0 if not coalesced
	trunc bool // longer than the buffer
}

// udpRx is the receive state both readers share, guarded by rxMu.
type udpRx struct {
	l     *UDPLink
	hs    []mmsghdr
	iov   []unix.Iovec
	names []byte
	oob   []byte
	loans []*Loan // GRO buffers (nil without GRO)
	meta  []udpRxMeta
	// lend: hand coalesced segments over in place (Lend). lent[i]: loans[i]
	// was lent since the last recvmmsg into it; lentN: no lent[i] is set
	// at i >= lentN, so that a poll of an empty socket looks at none.
	// pool: loans to take when one is still lent.
	lend  bool
	lent  []bool
	lentN int
	pool  *sync.Pool

	// GRO buffers not yet handed out: meta[cur:filled], from byte off of
	// buffer cur, which is segment segIdx of it.
	filled, cur, off, segIdx int
	// With GRO the headers point at the link's own buffers: headers
	// [0, groPrepped) are prepared, and [0, groDirty) of them were written
	// by the last recvmmsg. readGRO prepares only those again, so that a
	// poll of an empty socket (Progress, often) costs the syscall alone.
	groPrepped, groDirty int
	// seq is the number of the last datagram handed out (Datagram.Seq).
	seq uint64

	// TryReadBatch's pass, run by RawConn.Control: its batch and result
	// (a preallocated callback, so that the call allocates nothing).
	tryMsgs []Datagram
	tryN    int
	tryFn   func(uintptr)
}

func (r *udpRx) init(l *UDPLink) {
	r.l = l
	n := l.bs
	r.hs = make([]mmsghdr, n)
	r.iov = make([]unix.Iovec, n)
	r.names = make([]byte, n*sockaddrLen)
	r.oob = make([]byte, n*rxOOBLen)
	r.meta = make([]udpRxMeta, n)
	if l.gro {
		r.pool = newLoanPool(groBufferLen, &l.ctr.rxLentReleased)
		r.loans = make([]*Loan, n)
		r.lent = make([]bool, n)
		for i := range r.loans {
			r.loans[i] = r.pool.Get().(*Loan)
		}
	}
	r.tryFn = r.try
	l.wait = udpWait{l: l}
	l.wait.fn = l.wait.read
}

// recvmmsg makes one non-blocking recvmmsg over the first vlen prepared
// headers and returns how many messages it filled, or the errno of a
// call that filled none: EAGAIN when nothing is queued. A failed call
// loses nothing (the datagrams stay queued); it is counted by errno,
// except EAGAIN, which is not a failure. EINTR, which a call that never
// sleeps should not get (net/core/sock.c: sock_intr_errno only with a
// timeout), is retried at once, as internal/poll's ignoringEINTR does:
// waiting for readiness instead could park the reader with datagrams
// queued. A pending socket error (ECONNREFUSED and the like, which the
// kernel sets only on a socket with IP_RECVERR or a connected one,
// __udp4_lib_err) is reported once and cleared. recvFault, set by tests,
// stands in for the kernel.
func (r *udpRx) recvmmsg(fd uintptr, vlen int) (int, unix.Errno) {
	for {
		var res sysResult
		if f := r.l.recvFault; f != nil {
			res = f(vlen)
		}
		r1, e, n := res.r1, res.errno, vlen
		if !res.hit || res.errno == 0 && int(res.r1) <= vlen {
			if res.hit {
				n = int(res.r1) // a partial batch: receive only that many
			}
			r1, e = 0, 0
			if n > 0 {
				// Raw: the call never sleeps (see rawIO).
				r1, _, e = unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hs[0])), uintptr(n),
					unix.MSG_DONTWAIT, 0, 0)
			}
		}
		if e == unix.EINTR {
			continue
		}
		got, errno := mmsgResult(r1, e, n)
		if errno != 0 && errno != unix.EAGAIN {
			r.l.ctr.rxError(errno)
			// The socket's error: an ICMP error is on the error queue.
			r.l.drainErrQueue(fd)
		}
		return got, errno
	}
}

// prepare points header i at buffer b.
func (r *udpRx) prepare(i int, b []byte) {
	h := &r.hs[i]
	r.iov[i].Base = unsafe.SliceData(b)
	r.iov[i].SetLen(len(b))
	h.hdr.Iov = &r.iov[i]
	h.hdr.SetIovlen(1)
	h.hdr.Name = &r.names[i*sockaddrLen]
	h.hdr.Namelen = sockaddrLen
	h.hdr.Control = &r.oob[i*rxOOBLen]
	h.hdr.SetControllen(rxOOBLen)
	h.hdr.Flags = 0
	h.len = 0
}

// parse decodes header i's address and control messages into r.meta[i].
func (r *udpRx) parse(i int) {
	l := r.l
	m := &r.meta[i]
	h := &r.hs[i]
	*m = udpRxMeta{n: int(h.len), trunc: h.hdr.Flags&unix.MSG_TRUNC != 0}
	e := &m.enc
	e.Dst, e.DstPort = l.addr, l.port
	name := r.names[i*sockaddrLen : (i+1)*sockaddrLen]
	switch binary.NativeEndian.Uint16(name) {
	case unix.AF_INET:
		e.Src = netip.AddrFrom4([4]byte(name[4:8]))
	case unix.AF_INET6:
		e.Src = netip.AddrFrom16([16]byte(name[8:24])).Unmap()
	}
	e.SrcPort = binary.BigEndian.Uint16(name[2:4])
	if l.v4 {
		e.FragOff = wire.IPv4DF
	}
	oob := r.oob[i*rxOOBLen : i*rxOOBLen+int(h.hdr.Controllen)]
	for len(oob) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		cl := int(c.Len)
		if cl < unix.SizeofCmsghdr || cl > len(oob) {
			break
		}
		data := oob[unix.CmsgLen(0):cl]
		switch {
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			e.Dst = netip.AddrFrom4([4]byte(data[8:12])) // ipi_addr: the header's destination
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_TOS && len(data) >= 1:
			e.TrafficClass = data[0]
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_TTL && len(data) >= 4:
			e.HopLimit = uint8(binary.NativeEndian.Uint32(data))
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			e.Dst = netip.AddrFrom16([16]byte(data[0:16]))
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_TCLASS && len(data) >= 4:
			e.TrafficClass = uint8(binary.NativeEndian.Uint32(data))
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_HOPLIMIT && len(data) >= 4:
			e.HopLimit = uint8(binary.NativeEndian.Uint32(data))
		case c.Level == unix.IPPROTO_UDP && c.Type == unix.UDP_GRO && len(data) >= 4:
			m.seg = int(binary.NativeEndian.Uint32(data))
		case c.Level == unix.SOL_SOCKET && c.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			if d := uint64(binary.NativeEndian.Uint32(data)); d > l.ctr.rxDrops.Load() {
				l.ctr.rxDrops.Store(d) // stored only under rxMu
			}
		}
		sp := unix.CmsgSpace(cl - unix.CmsgLen(0))
		if sp > len(oob) {
			break
		}
		oob = oob[sp:]
	}
}

// deliver fills d from meta m for a datagram whose bytes are already in
// d.Buf[:n]; id is the guessed IPv4 identification.
func (l *UDPLink) deliver(d *Datagram, m *udpRxMeta, n int, id uint16) {
	l.rx.seq++ // under rxMu, as every pass
	d.Seq = l.rx.seq
	d.Encap = m.enc
	d.Buf = d.Buf[:n]
	d.Loan = nil
	d.ICRC = ICRCUnchecked
	if l.v4 {
		d.Encap.ID = id
		d.ICRC = ICRCGuessedIPv4ID
		if l.cfg.IPv4ICRC == IPv4ICRCSkip {
			d.ICRC = ICRCUnverifiable
		}
	}
	l.ctr.rxPackets.Add(1)
	l.ctr.rxBytes.Add(uint64(n))
}

// TryReadBatch is ReadBatch without the wait (Poller): one pass, which
// hands out GRO leftovers or makes one non-blocking recvmmsg, so n may be
// 0. It runs beside a ReadBatch parked on the socket without waiting for
// it. A failed recvmmsg is counted and reported as n = 0: the datagrams
// stay queued for the next call. Errors the network reported back go to
// the watchers (WatchSendErrors) before it returns. After Close it
// returns ErrLinkClosed.
func (l *UDPLink) TryReadBatch(msgs []Datagram) (int, error) {
	if l.closed.Load() {
		return 0, ErrLinkClosed
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	if l.mc.active.Load() {
		if n := l.takeMcast(msgs); n > 0 {
			return n, nil
		}
	}
	l.rxMu.Lock()
	r := &l.rx
	r.tryMsgs, r.tryN = msgs, 0
	err := l.sock.Control(r.tryFn)
	n := r.tryN
	r.tryMsgs = nil
	left := r.cur < r.filled
	l.rxMu.Unlock()
	l.tellErrors()
	if err != nil {
		return 0, ErrLinkClosed // closed under us
	}
	if left {
		// GRO segments are left in the link's buffers, and the socket
		// may be empty: a ReadBatch parked on it would not wake for
		// them (its first pass hands out what is left).
		l.wakeReader()
	}
	return n, nil
}

// try is TryReadBatch's RawConn.Control callback, run under rxMu.
func (r *udpRx) try(fd uintptr) {
	r.tryN, _ = r.pass(fd, r.tryMsgs)
}

// pass makes one receive pass into msgs, under rxMu: it returns how many
// datagrams it delivered and the errno of a recvmmsg that failed (EAGAIN:
// the socket is empty), 0 when the call succeeded even if every datagram
// was dropped.
func (r *udpRx) pass(fd uintptr, msgs []Datagram) (int, unix.Errno) {
	if r.l.errs.drain.Load() && r.l.errs.drain.Swap(false) {
		r.l.drainErrQueue(fd)
	}
	if r.l.gro {
		return r.readGRO(fd, msgs)
	}
	return r.readPlain(fd, msgs)
}

// readPlain receives straight into the callers' buffers.
func (r *udpRx) readPlain(fd uintptr, msgs []Datagram) (int, unix.Errno) {
	l := r.l
	vlen := min(len(msgs), len(r.hs))
	for i := range vlen {
		r.prepare(i, msgs[i].Buf[:cap(msgs[i].Buf)])
	}
	got, e := r.recvmmsg(fd, vlen)
	if e != 0 {
		return 0, e
	}
	out := 0
	for i := range got {
		r.parse(i)
		m := &r.meta[i]
		if m.trunc || m.seg != 0 {
			l.ctr.rxTruncated.Add(1)
			continue
		}
		if out != i {
			// Keep each Buf in its own backing array: the caller maps
			// buffers to msgs by index. Only after a drop (rare).
			copy(msgs[out].Buf[:cap(msgs[out].Buf)], msgs[i].Buf[:m.n])
		}
		l.deliver(&msgs[out], m, m.n, 0)
		out++
	}
	return out, 0
}

// readGRO receives into the link's buffers and splits coalesced
// datagrams into the callers' buffers, keeping what does not fit for the
// next pass, by either reader.
func (r *udpRx) readGRO(fd uintptr, msgs []Datagram) (int, unix.Errno) {
	l := r.l
	if r.cur >= r.filled {
		vlen := min(len(msgs), len(r.hs))
		for i := range min(r.groDirty, vlen) {
			r.prepare(i, r.loans[i].buf)
		}
		for i := r.groPrepped; i < vlen; i++ {
			r.prepare(i, r.loans[i].buf)
		}
		r.groPrepped = max(r.groPrepped, vlen)
		for i := range min(r.lentN, vlen) {
			// A buffer whose datagrams are still held gives way to
			// another for this read.
			if r.lent[i] {
				r.lent[i] = false
				if !r.loans[i].keep() {
					r.loans[i] = r.pool.Get().(*Loan)
					r.prepare(i, r.loans[i].buf)
				}
			}
		}
		if r.lentN <= vlen {
			r.lentN = 0
		}
		got, e := r.recvmmsg(fd, vlen)
		// A call that fails fills no header; the first is prepared
		// again all the same. Headers past vlen stay as dirty as they
		// were.
		if r.groDirty <= vlen {
			r.groDirty = 0
		}
		r.groDirty = max(r.groDirty, got, 1)
		if e != 0 {
			return 0, e
		}
		r.filled, r.cur, r.off, r.segIdx = got, 0, 0, 0
		for i := range got {
			r.parse(i)
			if m := &r.meta[i]; m.seg > 0 && m.seg < m.n {
				l.ctr.rxGRO.Add(1)
			}
		}
	}
	out := 0
	for out < len(msgs) && r.cur < r.filled {
		m := &r.meta[r.cur]
		if m.trunc {
			l.ctr.rxTruncated.Add(1)
			r.cur++
			continue
		}
		seg := m.n - r.off
		if m.seg > 0 {
			seg = min(seg, m.seg)
		}
		d := &msgs[out]
		id := uint16(r.segIdx)
		if r.lend && m.seg > 0 && m.seg < m.n {
			// A coalesced buffer's segment, in place.
			ln := r.loans[r.cur]
			d.Buf = ln.buf[r.off : r.off+seg : r.off+seg]
			l.deliver(d, m, seg, id)
			d.Loan = ln
			ln.lend()
			r.lent[r.cur] = true
			r.lentN = max(r.lentN, r.cur+1)
			l.ctr.rxLent.Add(1)
			out++
		} else if seg <= cap(d.Buf) {
			copy(d.Buf[:seg], r.loans[r.cur].buf[r.off:r.off+seg])
			l.deliver(d, m, seg, id)
			out++
		} else {
			l.ctr.rxTruncated.Add(1)
		}
		r.off += seg
		r.segIdx++
		if r.off >= m.n {
			r.cur, r.off, r.segIdx = r.cur+1, 0, 0
		}
	}
	return out, 0
}
