package link

// The UDP link's socket: UDPLink (and how it was designed), ListenUDP with
// the socket options it sets before bind and the offloads it probes
// after, the link's accessors and Close.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/wire"
)

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
// bytes and the packet length alone (wire.PatchICRC, a small fraction of
// a CRC pass over the packet: docs/performance.md, "link.UDPLink:
// patching the ICRC of GSO segments"). The same patch also serves other callers of
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
// they differ from the socket's defaults (TOS 0, or ECT(0) with
// UDPConfig.ECN; the route's TTL). Runs of
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
// (UDPStats.RxErrnos) and retried. The socket has IP_RECVERR
// (IPV6_RECVERR), so the kernel reports what it would otherwise swallow:
// a queue's drop as ENOBUFS on send (udp_send_skb), and an ICMP error
// about a datagram sent (a port unreachable: ECONNREFUSED) as the
// socket's error, which the next recvmmsg (or sendmmsg: a datagram it
// then did not send) returns once, and as an entry of the socket's error
// queue, which the receive path drains and hands to the watchers
// (WatchSendErrors; udp_errq_linux.go): the RDMA CM learns from it that
// no RoCE NIC listens at an address.
//
// # Costs and limits
//
// No allocation and no goroutine hand-off per packet: the link owns
// preallocated mmsghdr, iovec, address and control-message arrays, one
// set the two readers share and one per concurrent writer (kept in a
// free list). golang.org/x/net's ipv4.PacketConn.ReadBatch would
// allocate a net.IP and a *net.UDPAddr per datagram, so the link calls
// recvmmsg and sendmmsg itself through the socket's syscall.RawConn,
// which keeps Go's poller (Close unblocks a waiting reader), or through
// one of its own outside the poller (UDPConfig.Unpolled,
// udp_unpolled_linux.go). With GRO
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
	sock   udpSock // the socket (udp_unpolled_linux.go)
	bs     int
	gro    bool
	gso    atomic.Bool // cleared for good when the kernel refuses GSO
	ttl    uint8       // the socket's default TTL / hop limit
	tos    uint8       // the socket's default traffic class (UDPConfig.ECN)
	scope  uint32      // IPv6 scope ID for link-local peers
	sndbuf int
	rcvbuf int
	closed atomic.Bool
	// yield is SetReadYield's question, asked when ReadBatch finds the
	// socket empty (nil: never).
	yield atomic.Pointer[func() bool]
	ctr   udpCounters
	iface ifaceWatch // the interface: its MTU, flags and name (udp_mtu_linux.go)
	mc    udpMcast   // joined multicast groups (udp_mcast_linux.go)
	errs  udpErrs    // ICMP errors reported back (udp_errq_linux.go)
	rtnl  rtnl       // routes and neighbours (udp_route_linux.go)
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
	_ StateWatcher      = (*UDPLink)(nil)
	_ ErrorWatcher      = (*UDPLink)(nil)
	_ Resolver          = (*UDPLink)(nil)
)

// unpolledTest, set only by the package's tests (TestMain), opens every
// link unpolled: the suite runs once in each mode.
var unpolledTest bool

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
	if unpolledTest {
		cfg.Unpolled = true
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
	conn := pc.(*net.UDPConn)
	raw, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	l.sock = netSock{RawConn: raw, conn: conn}
	if z := cfg.Addr.Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			l.scope = uint32(ifi.Index)
		}
	}
	// Probe the offloads now that the socket exists.
	var probeErr error
	err = l.sock.Control(func(fd uintptr) {
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
	if err == nil && cfg.Unpolled {
		err = l.unpoll(conn)
	}
	if err != nil {
		l.sock.close()
		return nil, fmt.Errorf("nic: UDP link on %v: %w", ap, err)
	}
	if l.ttl == 0 {
		l.ttl = 64
	}
	l.rx.init(l)
	l.iface.start(cfg.Addr)
	l.rtnl.open()
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
			{unix.IP_RECVERR, 1, "IP_RECVERR"},
		} {
			if err := set(unix.IPPROTO_IP, o.opt, o.v, o.name); err != nil {
				return err
			}
		}
		if l.cfg.ECN {
			// A UDP socket keeps the ECN bits of IP_TOS (only TCP
			// clears them: __ip_sock_set_tos).
			if err := set(unix.IPPROTO_IP, unix.IP_TOS, wire.ECNECT0, "IP_TOS"); err != nil {
				return err
			}
			l.tos = wire.ECNECT0
		}
		return nil
	}
	if l.cfg.ECN {
		if err := set(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, wire.ECNECT0, "IPV6_TCLASS"); err != nil {
			return err
		}
		l.tos = wire.ECNECT0
	}
	for _, o := range []struct {
		opt, v int
		name   string
	}{
		{unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER"},
		{unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO"},
		{unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"},
		{unix.IPV6_RECVHOPLIMIT, 1, "IPV6_RECVHOPLIMIT"},
		{unix.IPV6_RECVERR, 1, "IPV6_RECVERR"},
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

// PollFD returns the descriptor of the link's socket, for a caller that
// only waits for it to turn readable (poll(2), as softnic's libibverbs
// does in ibv_poll_cq with SOFTNIC_POLL_WAIT): it must not read, write or
// close it, and a wait that outlives the link finds it closed (POLLNVAL)
// or, the number reused, another file. -1 once the link is closed.
func (l *UDPLink) PollFD() int {
	if l.closed.Load() {
		return -1
	}
	fd := -1
	if err := l.sock.Control(func(d uintptr) { fd = int(d) }); err != nil {
		return -1
	}
	return fd
}

// BatchSize returns the configured batch size.
func (l *UDPLink) BatchSize() int { return l.bs }

// GSO reports whether sends use UDP GSO (false if disabled, unsupported
// or refused by the kernel since).
func (l *UDPLink) GSO() bool { return l.gso.Load() }

// GRO reports whether the socket receives with UDP GRO.
func (l *UDPLink) GRO() bool { return l.gro }

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
	l.iface.stop()
	l.rtnl.close()
	err := l.sock.close()
	l.closeGroups()
	return err
}
