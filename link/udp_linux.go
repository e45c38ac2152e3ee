package link

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
	// groBufferLen is the size of one GRO receive buffer: a coalesced
	// packet holds at most 64 KiB.
	groBufferLen = 1 << 16
	// sockaddrLen is room for a sockaddr_in6 (or a sockaddr_in).
	sockaddrLen = unix.SizeofSockaddrInet6
)

// Control-message room per message: receive PKTINFO, TOS/TCLASS, TTL/
// HOPLIMIT, UDP_GRO and SO_RXQ_OVFL; send UDP_SEGMENT, TOS and TTL.
var (
	rxOOBLen = cmsgSpace(unix.SizeofInet6Pktinfo) + 4*cmsgSpace(4)
	txOOBLen = 3 * cmsgSpace(4)
)

func cmsgSpace(n int) int { return unix.CmsgSpace(n) }

// mmsghdr is struct mmsghdr; Go pads it to the C size (64 bytes on 64-bit).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// UDPLink is a Link carrying RoCEv2 over a kernel UDP socket (STYLE.md
// 11). ReadBatch is meant for one goroutine at a time (the engine has
// one receive loop; a mutex keeps others safe). TryReadBatch (Poller)
// reads without waiting, beside a ReadBatch blocked on the same link: a
// busy-polling application drives the receive with it. WriteBatch may be
// called concurrently.
//
// # Transmit
//
// The link sends from one unconnected UDP socket bound to its address and
// port (4791), with IP_MTU_DISCOVER = IP_PMTUDISC_DO. For an unconnected
// socket with DF set the kernel sends IPv4 identification 0
// (ip_select_ident_segs), and the segments of a UDP GSO send get the
// identifications 0, 1, 2, ... when they are cut (inet_gso_segment), so
// the whole IPv4 header the ICRC covers is known before sending
// (rxe-interop-facts.md §3). TestUDPWireHeaders checks it on a packet
// socket; with tcpdump in a network namespace whose loopback segments in
// software (ethtool -K lo tx-udp-segmentation off) the RC end-to-end
// test's packets showed "id 0, 1, 2, ..., flags [DF]" and "softnic
// decode" found every ICRC right.
//
// Source port. rxe gives each QP a UDP source port in 0xC000-0xFFFF, but
// a socket bound to 4791 sends from 4791. rxe never checks the source
// port it receives (§2.1, §3), so sending from the bound port is
// interoperable; only the ICRC, which covers the source port, must
// follow. The link says which port it sends from (SrcPort) and the engine
// builds every datagram with it, so the ICRC the transport computed is
// already the one for the wire: nothing is patched on the way out except
// the identification of GSO segments 1, 2, ..., which the kernel numbers
// as it cuts them. That one fix-up is cheap because a CRC is linear:
// changing header bytes changes the ICRC by a value computed from those
// bytes and the packet length alone (wire.PatchICRC, about 0.1 µs,
// against about 1.5 µs for a CRC pass over a 4 KiB packet on the machine
// this was written on). The same patch also serves other callers of
// WriteBatch (cmd/udpbench, tests) that send another source port:
// whatever the Encap asked, WriteBatch reports what went on the wire by
// rewriting each Datagram's Encap (source address and port,
// identification, DF, hop limit) and leaves an ICRC right for it. The
// cost of one source port is ECMP entropy: every QP's packets share one
// 5-tuple. A raw-socket transmit mode could keep the per-QP ports at the
// price of GSO and CAP_NET_RAW.
//
// Traffic class and hop limit follow each Datagram's Encap through IP_TOS
// / IP_TTL (IPV6_TCLASS / IPV6_HOPLIMIT) control messages, sent only when
// they differ from the socket's defaults (TOS 0, the route's TTL). Runs of
// datagrams to one destination with one size (the last may be shorter)
// go out as one UDP GSO send (UDP_SEGMENT, at most 64 segments and 64 KiB);
// everything is batched with sendmmsg. If the kernel refuses GSO (EIO: no
// checksum offload on the route), the link turns GSO off and resends
// plainly.
//
// # Receive
//
// recvmmsg fills a batch; with UDP_GRO the kernel may hand over several
// coalesced datagrams in one buffer with their segment size, which the
// link splits (copying each into the caller's buffer; without GRO the
// kernel writes straight into the caller's buffers). Each Datagram's
// Encap comes from the socket: source address and port from the sender's
// address, destination from IP_PKTINFO / IPV6_PKTINFO, traffic class from
// IP_RECVTOS / IPV6_RECVTCLASS, TTL / hop limit from IP_RECVTTL /
// IPV6_RECVHOPLIMIT. The UDP checksum and IPv6 flow label are masked by
// the ICRC and left 0. IPv6 sockets set UDP_NO_CHECK6_RX so that rxe's
// zero-checksum IPv6 datagrams are accepted. Every recvmmsg is
// non-blocking and made under a mutex, never held while a reader waits:
// ReadBatch waits on Go's poller between calls, and TryReadBatch, one
// call and no wait, can run beside it (see "receive" below).
//
// IPv6: every field the ICRC covers is visible, so the engine checks the
// ICRC fully.
//
// IPv4: a UDP socket cannot see the identification field, which the ICRC
// covers, nor the DF bit. The choices were:
//
//   - a packet socket (AF_PACKET, BPF filter on address and port) next to
//     the UDP socket: sees real headers, but needs CAP_NET_RAW, receives
//     every datagram a second time (the UDP socket must still be bound and
//     drained or filtered), and still cannot tell the identifications of
//     a GRO-coalesced packet's segments (GRO accepts both fixed and
//     incrementing identifications and does not say which);
//   - a raw IPPROTO_UDP socket: a copy of every UDP packet of the host;
//   - assuming identification 0 and DF: right for softnic senders without
//     GSO, wrong for GSO segments and for every rxe packet (the kernel
//     hashes rxe's identifications), which would then be dropped;
//   - solving for the identification. The ICRC is linear in the header
//     bits, so from the mismatch between the stored ICRC and the one
//     computed with a guessed identification the receiver can compute
//     the only identification that fits, in one multiplication and two
//     table look-ups (wire.SolveIPv4ID), and accept the packet if one
//     exists. The ICRC is still computed once, as for IPv6; what is lost
//     is 16 of its 32 bits against corruption (a corrupted packet passes
//     with probability 2^-16). DF is assumed set (rxe and softnic always
//     set it).
//
// The default, [IPv4ICRCSolve], is the last: full speed, every sender
// (softnic with or without GSO, rxe) verified, no privileges, and the
// UDP checksum (which softnic senders fill in and the kernel checks)
// still guards softnic-to-softnic traffic. The link guesses
// identification 0, or i for the i-th segment of a GRO batch, which is
// right for softnic senders, and marks the datagram ICRCGuessedIPv4ID;
// the engine's ICRC check (Datagram.CheckICRC) solves for the
// identification from the datagram alone and corrects Encap.ID. IPv6
// datagrams are handed over ICRCUnchecked. The cheap alternative,
// [IPv4ICRCSkip], marks IPv4 datagrams ICRCUnverifiable: the engine
// counts them (ICRCUnverified) and no CRC pass is spent on them.
//
// # Errors
//
// sendmmsg and recvmmsg return -1 with an errno when they did nothing,
// and a count below vlen, without an error, when they stopped early: the
// next call then reports the errno of the message that stopped them
// (__sys_sendmmsg, do_recvmmsg). The link decodes both (mmsgResult) and
// never uses a count it did not check. On send, the failing message's
// datagrams are dropped, each marked with the errno in its Err, counted
// by errno (UDPStats.TxErrnos: EMSGSIZE, ENETUNREACH, EHOSTUNREACH,
// EPERM, ENOBUFS, ECONNREFUSED, other) and the rest of the batch is sent;
// the engine counts each as send_err and the transports recover (RC by
// its retransmit timer, UD as rxe does: see internal/transport/ud). A GSO send
// that the kernel refuses with EIO turns GSO off and goes out plainly; one
// refused with EINVAL (segments over the route's MTU, where a single
// datagram gets EMSGSIZE) goes out plainly, one datagram per message, so
// that each is counted by its own errno. On receive, a failed call loses
// nothing (the datagrams stay queued): it is counted by errno
// (UDPStats.RxErrnos) and retried. Two errnos never come from the kernel
// to this socket, which is unconnected and has no IP_RECVERR: ENOBUFS
// (udp_send_skb swallows a full queue's drop) and ECONNREFUSED (an ICMP
// error sets no socket error, __udp4_lib_err); they are counted all the
// same should a kernel report them.
//
// # Costs and limits
//
// No allocation and no goroutine hand-off per packet: the link owns
// preallocated mmsghdr, iovec, address and control-message arrays, one
// set the two readers share and one per concurrent writer (kept in a
// free list). golang.org/x/net's ipv4.PacketConn.ReadBatch would
// allocate a net.IP and a *net.UDPAddr per datagram, so the link calls
// recvmmsg and sendmmsg itself through the socket's syscall.RawConn,
// which keeps Go's poller (Close unblocks a waiting reader). With GRO
// the link holds BatchSize receive buffers of 64 KiB. Socket buffers
// default to 8 MiB (SO_SNDBUFFORCE / SO_RCVBUFFORCE when permitted, else
// capped by net.core.wmem_max / rmem_max); rxe-interop-facts.md §3 saw
// 1-4 % receive loss with the default 208 KiB. Datagrams the kernel
// dropped for want of receive buffer are counted (SO_RXQ_OVFL).
type UDPLink struct {
	cfg    UDPConfig
	addr   netip.Addr // bound address, IPv4 unmapped
	port   uint16
	v4     bool
	conn   *net.UDPConn
	raw    syscall.RawConn
	bs     int
	gro    bool
	gso    atomic.Bool // cleared for good when the kernel refuses GSO
	ttl    uint8       // the socket's default TTL / hop limit
	scope  uint32      // IPv6 scope ID for link-local peers
	sndbuf int
	rcvbuf int
	closed atomic.Bool
	// yield is SetReadYield's question, asked when ReadBatch finds the
	// socket empty (nil: never).
	yield atomic.Pointer[func() bool]
	ctr   udpCounters
	ifmtu ifaceMTU // the interface's MTU (udp_mtu_linux.go)
	mc    udpMcast // joined multicast groups (udp_mcast_linux.go)
	// sendFault and recvFault, set only by tests, stand in for the kernel
	// at the syscall boundary: see sysResult.
	sendFault func(t *udpTx, vlen int) sysResult
	recvFault func(vlen int) sysResult

	// rxMu guards the receive state both readers share; waitMu
	// serializes ReadBatch callers, and is held while one waits.
	rxMu   sync.Mutex
	rx     udpRx // guarded by rxMu
	waitMu sync.Mutex
	wait   udpWait // guarded by waitMu

	txMu   sync.Mutex
	txFree []*udpTx // guarded by txMu
}

// The UDP link has every capability of a link that carries datagrams
// itself (caps.go).
var (
	_ Link              = (*UDPLink)(nil)
	_ Poller            = (*UDPLink)(nil)
	_ Multicaster       = (*UDPLink)(nil)
	_ BusyPollPreferrer = (*UDPLink)(nil)
	_ ReadYielder       = (*UDPLink)(nil)
	_ ReadWaker         = (*UDPLink)(nil)
	_ Sequencer         = (*UDPLink)(nil)
	_ Lender            = (*UDPLink)(nil)
	_ SplitSender       = (*UDPLink)(nil)
	_ LinkCloser        = (*UDPLink)(nil)
)

// ListenUDP opens a UDP link on cfg.Addr and cfg.Port.
func ListenUDP(cfg UDPConfig) (*UDPLink, error) {
	if !cfg.Addr.IsValid() || cfg.Addr.IsUnspecified() || cfg.Addr.IsMulticast() {
		return nil, fmt.Errorf("%w: UDP link needs a unicast local address, not %v", syscall.EINVAL, cfg.Addr)
	}
	if cfg.Port == 0 {
		cfg.Port = wire.UDPPort
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultUDPBatch
	}
	if cfg.SocketBuffer <= 0 {
		cfg.SocketBuffer = DefaultUDPSocketBuffer
	}
	if cfg.IPv4ICRC > IPv4ICRCSkip {
		return nil, fmt.Errorf("%w: IPv4 ICRC mode %d", syscall.EINVAL, cfg.IPv4ICRC)
	}
	l := &UDPLink{cfg: cfg, addr: cfg.Addr.Unmap(), port: cfg.Port, bs: cfg.BatchSize}
	l.v4 = l.addr.Is4()
	network := "udp6"
	if l.v4 {
		network = "udp4"
	}
	ap := netip.AddrPortFrom(l.addr, l.port)
	var setupErr error
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		if err := c.Control(func(fd uintptr) { setupErr = l.setup(int(fd)) }); err != nil {
			return err
		}
		return setupErr
	}}
	pc, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			hint := ""
			if l.port == wire.UDPPort {
				hint = " (another softnic, or a kernel rxe device, which binds it on every address)"
			}
			return nil, fmt.Errorf("nic: UDP link: %v is already in use%s: %w", ap, hint, err)
		}
		return nil, fmt.Errorf("nic: UDP link on %v: %w", ap, err)
	}
	l.conn = pc.(*net.UDPConn)
	if l.raw, err = l.conn.SyscallConn(); err != nil {
		l.conn.Close()
		return nil, err
	}
	if z := cfg.Addr.Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			l.scope = uint32(ifi.Index)
		}
	}
	// Probe the offloads now that the socket exists.
	var probeErr error
	err = l.raw.Control(func(fd uintptr) {
		s := int(fd)
		if !cfg.DisableGSO {
			// quic-go's test: the option exists if it can be read.
			if _, err := unix.GetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_SEGMENT); err == nil {
				l.gso.Store(true)
			}
		}
		if !cfg.DisableGRO {
			l.gro = unix.SetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
		}
		l.sndbuf, _ = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF)
		l.rcvbuf, _ = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF)
		var ttl int
		if l.v4 {
			ttl, probeErr = unix.GetsockoptInt(s, unix.IPPROTO_IP, unix.IP_TTL)
		} else {
			ttl, probeErr = unix.GetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS)
		}
		l.ttl = uint8(ttl)
		if l.ttl == 0 {
			l.ttl = 64
		}
		// Best effort: an interface without multicast still does unicast.
		_ = l.setupMulticastSend(s)
	})
	if err == nil {
		err = probeErr
	}
	if err != nil {
		l.conn.Close()
		return nil, fmt.Errorf("nic: UDP link on %v: %w", ap, err)
	}
	if l.ttl == 0 {
		l.ttl = 64
	}
	l.rx.init(l)
	l.ifmtu.start(cfg.Addr)
	return l, nil
}

// setup sets the socket options before bind.
func (l *UDPLink) setup(fd int) error {
	set := func(level, opt, v int, what string) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return fmt.Errorf("setsockopt %s: %w", what, err)
		}
		return nil
	}
	// Buffers: forced when the process may (CAP_NET_ADMIN), else capped by
	// net.core.{w,r}mem_max.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, l.cfg.SocketBuffer) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, l.cfg.SocketBuffer)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, l.cfg.SocketBuffer) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, l.cfg.SocketBuffer)
	}
	if err := set(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1, "SO_RXQ_OVFL"); err != nil {
		return err
	}
	if l.v4 {
		for _, o := range []struct {
			opt, v int
			name   string
		}{
			{unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER"},
			{unix.IP_PKTINFO, 1, "IP_PKTINFO"},
			{unix.IP_RECVTOS, 1, "IP_RECVTOS"},
			{unix.IP_RECVTTL, 1, "IP_RECVTTL"},
		} {
			if err := set(unix.IPPROTO_IP, o.opt, o.v, o.name); err != nil {
				return err
			}
		}
		return nil
	}
	for _, o := range []struct {
		opt, v int
		name   string
	}{
		{unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER"},
		{unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO"},
		{unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"},
		{unix.IPV6_RECVHOPLIMIT, 1, "IPV6_RECVHOPLIMIT"},
	} {
		if err := set(unix.IPPROTO_IPV6, o.opt, o.v, o.name); err != nil {
			return err
		}
	}
	// rxe sends IPv6 with UDP checksum 0 (rxe_net.c prepare_udp_hdr).
	return set(unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX")
}

// LocalAddr returns the bound address (IPv4 unmapped).
func (l *UDPLink) LocalAddr() netip.Addr { return l.addr }

// Port returns the bound UDP port, which is also the source port of
// everything the link sends.
func (l *UDPLink) Port() uint16 { return l.port }

// BatchSize returns the configured batch size.
func (l *UDPLink) BatchSize() int { return l.bs }

// GSO reports whether sends use UDP GSO (false if disabled, unsupported
// or refused by the kernel since).
func (l *UDPLink) GSO() bool { return l.gso.Load() }

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

// SendsSplit says that WriteBatch takes datagrams with a Payload
// (CanSendSplit): the kernel copies it from where it lies.
func (l *UDPLink) SendsSplit() bool { return true }

// GRO reports whether the socket receives with UDP GRO.
func (l *UDPLink) GRO() bool { return l.gro }

// PreferBusyPoll is true: see the package's PreferBusyPoll.
func (l *UDPLink) PreferBusyPoll() bool { return true }

// SocketBuffers returns the send and receive buffer sizes the kernel
// reports (twice what was set, for its bookkeeping).
func (l *UDPLink) SocketBuffers() (snd, rcv int) { return l.sndbuf, l.rcvbuf }

// Stats returns the link's counters.
func (l *UDPLink) Stats() UDPStats { return l.ctr.snapshot() }

// SrcPort returns the port the link is bound to: the source port of
// everything it sends.
func (l *UDPLink) SrcPort() uint16 { return l.port }

// Closed reports whether Close was called (LinkCloser).
func (l *UDPLink) Closed() bool { return l.closed.Load() }

// Close closes the socket and unblocks ReadBatch; later calls return
// ErrLinkClosed.
func (l *UDPLink) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.ifmtu.stop()
	err := l.conn.Close()
	l.closeGroups()
	return err
}

// ---- receive ----
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
// ReadBatch makes its passes inside RawConn.Read's callback and waits by
// returning false from it: FD.RawRead (internal/poll/fd_unix.go) then
// parks on the runtime poller (pollDesc.waitRead) holding the read lock,
// which only ReadBatch callers take.
//
// The pass has to be inside the callback, not before RawConn.Read: RawRead
// first clears the descriptor's readiness (pollDesc.prepareRead, the
// runtime's poll_runtime_pollReset), so a datagram arriving between an
// earlier empty pass and that reset would leave no readiness behind and
// the reader would park with it queued. Inside the callback every pass
// follows the reset; every datagram queued after it wakes the socket's
// waiters (net/ipv4/udp.c: __udp_enqueue_schedule_skb calls
// sk_data_ready), which the runtime's edge-triggered epoll turns into
// readiness that waitRead consumes without parking if it came first. So a
// ReadBatch parks only after a pass, under rxMu, found no leftovers and
// an empty socket, and whatever arrives later wakes it; datagrams or GRO
// leftovers TryReadBatch leaves behind came from such arrivals. A woken
// reader whose datagrams TryReadBatch took finds nothing and parks again.

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

// udpWait is ReadBatch's state for RawConn.Read's callback, guarded by
// waitMu, which ReadBatch holds while it waits.
type udpWait struct {
	l      *UDPLink
	msgs   []Datagram
	n      int
	closed bool
	fn     func(uintptr) bool
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
		}
		return got, errno
	}
}

// rawIO: recvmmsg and sendmmsg are made with RawSyscall6, not Syscall6.
// Both pass MSG_DONTWAIT, so neither sleeps, and the runtime need not
// know the goroutine is in a system call (entersyscall/exitsyscall).
// When it knows, sysmon takes the P away from any call that spans one of
// its ticks (20 µs and up) if no other P is idle - always so with one P -
// and hands it to another thread, and the caller must get a P back on
// return (futex wake-ups, thread switches). Natively the calls take a few
// µs and that is rare; under emulation (a 1-vCPU qemu TCG guest) each
// takes 50-200 µs and it happened on nearly every one: write_lat 8 B
// between two such guests made 24 context switches, 1.1 futex and 4.1
// nanosleep (sysmon) calls a round trip; raw, 10, 0.09 and 0.24, and
// t_typical went from 1063-1421 µs to 627-870 µs (blocking) and from
// 1657-2822 µs to 590-1570 µs (--busy-poll), at par with a plain Go UDP
// ping-pong with as many datagrams (632 µs). Natively on 2 CPUs nothing
// changes; both sides on one CPU (taskset): 84 → 71 µs.
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

// ReadBatch blocks until datagrams arrive and fills msgs[:n]: each Buf
// resliced within its capacity, Encap from the socket (see udp.go), an
// IPv4 datagram's identification guessed (ICRCGuessedIPv4ID) or, in the
// IPv4ICRCSkip mode, ICRCUnverifiable. Datagrams longer than their buffer
// are dropped and counted; a failed recvmmsg is counted and retried.
// While it waits it holds nothing TryReadBatch needs. It returns 0
// datagrams when it finds the socket empty and its read yield says so
// (SetReadYield). After Close it returns ErrLinkClosed.
func (l *UDPLink) ReadBatch(msgs []Datagram) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	l.waitMu.Lock()
	defer l.waitMu.Unlock()
	w := &l.wait
	woken := false
	for {
		if woken || l.mc.queued.Swap(false) {
			// Multicast (udp_mcast_linux.go): clear the deadline a
			// group's reader sets to wake us, then take what it queued.
			// A reader that queues after the Swap also sets the
			// deadline, so the Read below returns at once: no datagram
			// waits for the next unicast one.
			_ = l.conn.SetReadDeadline(time.Time{})
			if n := l.takeMcast(msgs); n > 0 {
				return n, nil
			}
		}
		w.msgs, w.n, w.closed = msgs, 0, false
		err := l.raw.Read(w.fn)
		n, closed := w.n, w.closed
		w.msgs = nil
		if err != nil && !closed && !l.closed.Load() && isWake(err) {
			woken = true
			continue
		}
		if err != nil || closed {
			return 0, ErrLinkClosed
		}
		return n, nil
	}
}

// read is ReadBatch's RawConn.Read callback: passes until one delivers,
// false (wait for readiness) when the socket is empty, true when the link
// is closed. It runs after RawRead's readiness reset (see the receive
// notes above).
func (w *udpWait) read(fd uintptr) bool {
	l := w.l
	for {
		if l.closed.Load() {
			w.closed = true
			return true
		}
		l.rxMu.Lock()
		n, e := l.rx.pass(fd, w.msgs)
		l.rxMu.Unlock()
		if n > 0 {
			w.n = n
			return true
		}
		if e == unix.EAGAIN {
			// SetReadYield: step off here, at a wake-up that found the
			// datagram taken by a poll, or wait on for the next one.
			y := l.yield.Load()
			return y != nil && (*y)()
		}
		// A failed call (counted), or datagrams all dropped as
		// truncated: what else is queued sends no new readiness, so
		// try again now.
	}
}

// SetReadYield sets the question ReadBatch asks when it finds the
// socket empty (the package's SetReadYield): true makes it return 0
// datagrams. nil takes it away.
func (l *UDPLink) SetReadYield(yield func() bool) bool {
	if yield == nil {
		l.yield.Store(nil)
	} else {
		l.yield.Store(&yield)
	}
	return true
}

// WakeRead wakes a ReadBatch waiting on the socket (the package's
// WakeRead; wakeReader): it then asks its read yield and returns 0
// datagrams if that says so, or waits on. It reports false once the link
// is closed.
func (l *UDPLink) WakeRead() bool {
	if l.closed.Load() {
		return false
	}
	l.wakeReader()
	return true
}

// wakeReader makes a ReadBatch parked on the socket return from its wait
// now, or the next one at once: it sets the socket's read deadline in
// the past, which ReadBatch takes as a wake-up (isWake), clears, and
// follows with a look at the multicast queue and a new pass over the
// socket (with its read yield). ReadBatch clears the deadline before it
// looks, so a wake-up set after the look is not lost. The multicast
// readers, TryReadBatch's GRO leftovers and WakeRead use it.
func (l *UDPLink) wakeReader() { _ = l.conn.SetReadDeadline(time.Now()) }

// TryReadBatch is ReadBatch without the wait (Poller): one pass, which
// hands out GRO leftovers or makes one non-blocking recvmmsg, so n may be
// 0. It runs beside a ReadBatch parked on the socket without waiting for
// it. A failed recvmmsg is counted and reported as n = 0: the datagrams
// stay queued for the next call. After Close it returns ErrLinkClosed.
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
	err := l.raw.Control(r.tryFn)
	n := r.tryN
	r.tryMsgs = nil
	left := r.cur < r.filled
	l.rxMu.Unlock()
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

// ---- transmit ----

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
// their Err. It waits only for socket buffer space. After Close it
// returns ErrLinkClosed, every datagram not sent marked EBADF.
func (l *UDPLink) WriteBatch(msgs []Datagram) (int, error) {
	if l.closed.Load() {
		markUnsent(msgs)
		return 0, ErrLinkClosed
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

// wireEncap returns the headers the kernel will send for e, as segment
// seg of its send.
func (l *UDPLink) wireEncap(e *wire.Encap, seg int) wire.Encap {
	w := wire.Encap{Src: l.addr, Dst: e.Dst, SrcPort: l.port, DstPort: e.DstPort,
		TrafficClass: e.TrafficClass, HopLimit: e.HopLimit}
	if w.HopLimit == 0 {
		w.HopLimit = l.ttl
	}
	if l.v4 {
		w.Dst = w.Dst.Unmap()
		w.ID = uint16(seg)
		w.FragOff = wire.IPv4DF
	}
	return w
}

// sameFlow reports whether b can follow a in one GSO send.
func sameFlow(a, b *wire.Encap) bool {
	return a.Dst == b.Dst && a.DstPort == b.DstPort && a.TrafficClass == b.TrafficClass && a.HopLimit == b.HopLimit
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
		if gso && nm > 0 {
			g := nm - 1
			f := &msgs[t.first[g]]
			last := &msgs[t.first[g]+t.count[g]-1]
			size := f.Len()
			if t.first[g]+t.count[g] == i && t.count[g] < gsoMaxSegments &&
				last.Len() == size && d.Len() <= size && d.Len() > 0 &&
				(t.count[g]+1)*size <= maxBytes && sameFlow(&f.Encap, &d.Encap) {
				t.count[g]++
				continue
			}
		}
		t.first[nm], t.count[nm] = i, 1
		nm++
	}
	// Patch each datagram to its wire headers and build the messages.
	for g := range nm {
		for s := range t.count[g] {
			d := &msgs[t.first[g]+s]
			seg := 0
			if t.count[g] > 1 {
				seg = s
			}
			w := l.wireEncap(&d.Encap, seg)
			t.idp.PatchEncapAt(icrcOf(d), d.Len(), &d.Encap, &w)
			d.Encap = w
		}
	}
	for g, io := 0, 0; g < nm; g++ {
		io = t.build(g, msgs, io)
	}
	sent := 0
	t.start, t.end = 0, nm
	for t.start < t.end {
		t.got, t.errno = 0, 0
		if err := l.raw.Write(t.fn); err != nil {
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
	for i := range ds {
		d := &ds[i]
		if d.Err != 0 || !d.Encap.Dst.IsValid() {
			continue
		}
		if w := l.wireEncap(&d.Encap, 0); d.Encap != w {
			wire.PatchICRCAt(icrcOf(d), d.Len(), &d.Encap, &w)
			d.Encap = w
		}
	}
	t := l.getTx()
	defer l.putTx(t)
	return t.write(ds, true, false)
}

// icrcOf returns the four bytes of d's ICRC, the end of its Buf (nil if
// Buf is shorter).
func icrcOf(d *Datagram) []byte {
	if len(d.Buf) < wire.ICRCLen {
		return nil
	}
	return d.Buf[len(d.Buf)-wire.ICRCLen:]
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
	if e.TrafficClass != 0 {
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
