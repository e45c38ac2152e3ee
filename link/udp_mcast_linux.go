package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/wire"
)

// Multicast on the UDP link (Multicaster).
//
// The link's socket is bound to its unicast address, and Linux delivers
// a multicast datagram only to sockets bound to the group's address or to
// the wildcard (__udp_is_mcast_sock), so each joined group gets a socket
// of its own: bound to the group address on the link's port with
// SO_REUSEADDR (other processes on the host may join the same group on
// the same port, each getting a copy), joined to the group on the
// interface holding the link's address (IP_ADD_MEMBERSHIP with that
// address, IPV6_JOIN_GROUP with its index), as rxe joins on its netdev
// (rxe_mcast.c rxe_mcast_add). A goroutine per group reads it and queues
// what it reads for ReadBatch and TryReadBatch, then wakes a ReadBatch
// parked on the unicast socket by setting that socket's read deadline to
// now. The unicast receive path is unchanged but for one atomic load per
// ReadBatch and TryReadBatch (is any group joined?); multicast pays a
// goroutine hand-off and a copy per datagram.
//
// Sending needs no group: the unicast socket sends to a group address
// like any other, out of the interface holding the link's address
// (IP_MULTICAST_IF / IPV6_MULTICAST_IF, set at ListenUDP), looped back to
// the host's own members (IP_MULTICAST_LOOP), with the socket's unicast
// TTL as its multicast default (IP_MULTICAST_TTL / IPV6_MULTICAST_HOPS)
// so that a datagram's Encap.HopLimit means the same for both.

// mcastQueueLen bounds the multicast datagrams waiting for a reader;
// more are dropped and counted (UDPStats.RxMcastDrops).
const mcastQueueLen = 1024

// udpMcast is the UDP link's multicast state.
type udpMcast struct {
	active atomic.Bool // a group is joined: readers look at q
	// queued is set by a group's reader after it queues a datagram, and
	// taken by ReadBatch, which then looks at q: a ReadBatch with nothing
	// queued for it pays no deadline reset or lock per call.
	queued atomic.Bool

	mu     sync.Mutex
	groups map[netip.Addr]*udpGroup // guarded by mu
	wg     sync.WaitGroup           // the groups' readers

	qmu sync.Mutex
	q   []mcastDatagram // guarded by qmu
}

// udpGroup is one joined group: its socket.
type udpGroup struct {
	conn *net.UDPConn
}

// mcastDatagram is a datagram a group's reader queued.
type mcastDatagram struct {
	enc  wire.Encap
	icrc ICRCStatus
	buf  []byte
}

// setupMulticastSend sets the unicast socket's multicast send options
// (see above); s is its descriptor. Failures are returned: a link whose
// interface cannot send multicast still sends unicast, so ListenUDP
// ignores them.
func (l *UDPLink) setupMulticastSend(s int) error {
	if l.v4 {
		mreq := &unix.IPMreqn{Address: l.addr.As4()}
		if err := unix.SetsockoptIPMreqn(s, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, mreq); err != nil {
			return fmt.Errorf("IP_MULTICAST_IF: %w", err)
		}
		if err := unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1); err != nil {
			return fmt.Errorf("IP_MULTICAST_LOOP: %w", err)
		}
		return unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, int(l.ttl))
	}
	ifi, err := interfaceOf(l.cfg.Addr)
	if err != nil {
		return err
	}
	if err := unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, ifi.Index); err != nil {
		return fmt.Errorf("IPV6_MULTICAST_IF: %w", err)
	}
	if err := unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, 1); err != nil {
		return fmt.Errorf("IPV6_MULTICAST_LOOP: %w", err)
	}
	return unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, int(l.ttl))
}

// JoinGroup starts receiving datagrams sent to group on the link's port
// (Multicaster): EINVAL for an address that is not multicast or not of
// the link's family, EADDRINUSE for a group already joined, and the
// kernel's errno when the socket cannot be made or the group joined
// (ENODEV when the interface has no multicast: `ip link set lo multicast
// on` and a route, 224.0.0.0/4 or ff00::/8, are needed on loopback).
func (l *UDPLink) JoinGroup(group netip.Addr) error {
	g := group.Unmap()
	switch {
	case !g.IsMulticast():
		return fmt.Errorf("%w: %v is not a multicast address", syscall.EINVAL, group)
	case g.Is4() != l.v4:
		return fmt.Errorf("%w: group %v is not of the link address %v's family", syscall.EINVAL, group, l.addr)
	case l.closed.Load():
		return ErrLinkClosed
	}
	m := &l.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.groups[g]; ok {
		return fmt.Errorf("join %v: %w", g, syscall.EADDRINUSE)
	}
	conn, err := l.groupSocket(g)
	if err != nil {
		return fmt.Errorf("join %v: %w", g, err)
	}
	if m.groups == nil {
		m.groups = make(map[netip.Addr]*udpGroup)
	}
	gr := &udpGroup{conn: conn}
	m.groups[g] = gr
	m.active.Store(true)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		l.readGroup(g, conn)
	}()
	return nil
}

// LeaveGroup stops receiving group's datagrams: its socket is closed,
// which leaves the group; EADDRNOTAVAIL for a group not joined.
func (l *UDPLink) LeaveGroup(group netip.Addr) error {
	g := group.Unmap()
	m := &l.mc
	m.mu.Lock()
	gr, ok := m.groups[g]
	if ok {
		delete(m.groups, g)
		if len(m.groups) == 0 {
			// The unicast path goes back to not looking; what the last
			// group left queued is dropped and counted.
			m.active.Store(false)
			m.qmu.Lock()
			l.ctr.rxMcastDrops.Add(uint64(len(m.q)))
			clear(m.q)
			m.q = m.q[:0]
			m.qmu.Unlock()
		}
	}
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("leave %v: %w", g, syscall.EADDRNOTAVAIL)
	}
	return gr.conn.Close()
}

// closeGroups closes every group's socket and waits for their readers
// (Close).
func (l *UDPLink) closeGroups() {
	m := &l.mc
	m.mu.Lock()
	gs := m.groups
	m.groups = nil
	m.mu.Unlock()
	for _, gr := range gs {
		gr.conn.Close()
	}
	m.wg.Wait()
}

// groupSocket opens the socket of group g: bound to g on the link's port
// with SO_REUSEADDR, asking for the control messages the unicast socket
// gets, and joined to g on the link's interface.
func (l *UDPLink) groupSocket(g netip.Addr) (*net.UDPConn, error) {
	var ifindex int
	if !l.v4 {
		ifi, err := interfaceOf(l.cfg.Addr)
		if err != nil {
			return nil, err
		}
		ifindex = ifi.Index
	}
	// The socket is made by hand: Go's ListenPacket binds a multicast
	// address as the wildcard (net/sock_posix.go listenDatagram), which
	// would clash with the link's own socket on the port.
	var sa unix.Sockaddr
	family := unix.AF_INET
	if l.v4 {
		sa = &unix.SockaddrInet4{Port: int(l.port), Addr: g.As4()}
	} else {
		family = unix.AF_INET6
		sa6 := &unix.SockaddrInet6{Port: int(l.port), Addr: g.As16()}
		if g.IsLinkLocalMulticast() || g.IsInterfaceLocalMulticast() {
			sa6.ZoneId = uint32(ifindex)
		}
		sa = sa6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err := l.setupGroup(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("softnic-mcast-%v", g))
	pc, err := net.FilePacketConn(f)
	f.Close() // FilePacketConn made its own descriptor
	if err != nil {
		return nil, err
	}
	conn := pc.(*net.UDPConn)
	raw, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	var joinErr error
	err = raw.Control(func(fd uintptr) {
		s := int(fd)
		if l.v4 {
			joinErr = unix.SetsockoptIPMreqn(s, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP,
				&unix.IPMreqn{Multiaddr: g.As4(), Address: l.addr.As4()})
		} else {
			joinErr = unix.SetsockoptIPv6Mreq(s, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP,
				&unix.IPv6Mreq{Multiaddr: g.As16(), Interface: uint32(ifindex)})
		}
	})
	if err == nil {
		err = joinErr
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// setupGroup sets a group socket's options before bind.
func (l *UDPLink) setupGroup(fd int) error {
	opts := []struct{ level, opt, v int }{{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1}}
	if l.v4 {
		opts = append(opts,
			struct{ level, opt, v int }{unix.IPPROTO_IP, unix.IP_PKTINFO, 1},
			struct{ level, opt, v int }{unix.IPPROTO_IP, unix.IP_RECVTOS, 1},
			struct{ level, opt, v int }{unix.IPPROTO_IP, unix.IP_RECVTTL, 1},
			// Only the groups this socket joined (it is bound to one).
			struct{ level, opt, v int }{unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0})
	} else {
		opts = append(opts,
			struct{ level, opt, v int }{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1},
			struct{ level, opt, v int }{unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1},
			struct{ level, opt, v int }{unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1},
			struct{ level, opt, v int }{unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1},
			struct{ level, opt, v int }{unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1})
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
			return fmt.Errorf("setsockopt %d/%d: %w", o.level, o.opt, err)
		}
	}
	return nil
}

// readGroup reads group g's socket until it is closed, queueing each
// datagram with its headers as the unicast receive path reports them
// (udpRx.parse), and wakes a parked ReadBatch.
func (l *UDPLink) readGroup(g netip.Addr, conn *net.UDPConn) {
	buf := make([]byte, MaxDatagram+1)
	oob := make([]byte, rxOOBLen)
	for {
		n, oobn, flags, src, err := conn.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.ctr.rxError(errnoOf(err))
			continue
		}
		if n > MaxDatagram || flags&unix.MSG_TRUNC != 0 {
			l.ctr.rxTruncated.Add(1)
			continue
		}
		d := mcastDatagram{buf: append([]byte(nil), buf[:n]...)}
		e := &d.enc
		e.Src, e.SrcPort = src.Addr().Unmap(), src.Port()
		e.Dst, e.DstPort = g, l.port
		parseGroupOOB(oob[:oobn], e)
		d.icrc = ICRCUnchecked
		if l.v4 {
			e.FragOff = wire.IPv4DF
			d.icrc = ICRCGuessedIPv4ID // identification 0 guessed, as on the unicast path
			if l.cfg.IPv4ICRC == IPv4ICRCSkip {
				d.icrc = ICRCUnverifiable
			}
		}
		m := &l.mc
		m.qmu.Lock()
		full := len(m.q) >= mcastQueueLen
		if !full {
			m.q = append(m.q, d)
		}
		m.qmu.Unlock()
		if full {
			l.ctr.rxMcastDrops.Add(1)
			continue
		}
		m.queued.Store(true)
		// Wake a ReadBatch parked on the unicast socket.
		l.wakeReader()
	}
}

// parseGroupOOB reads a group socket's control messages into e: the
// destination, traffic class and hop limit.
func parseGroupOOB(oob []byte, e *wire.Encap) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, c := range msgs {
		h, data := c.Header, c.Data
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			e.Dst = netip.AddrFrom4([4]byte(data[8:12]))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			e.TrafficClass = data[0]
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TTL && len(data) >= 4:
			e.HopLimit = uint8(binary.NativeEndian.Uint32(data))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			e.Dst = netip.AddrFrom16([16]byte(data[0:16]))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			e.TrafficClass = uint8(binary.NativeEndian.Uint32(data))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_HOPLIMIT && len(data) >= 4:
			e.HopLimit = uint8(binary.NativeEndian.Uint32(data))
		}
	}
}

// errnoOf returns the errno inside err, or EIO.
func errnoOf(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EIO
}

// takeMcast moves queued multicast datagrams into msgs (each Buf
// resliced within its capacity) and returns how many.
func (l *UDPLink) takeMcast(msgs []Datagram) int {
	m := &l.mc
	m.qmu.Lock()
	defer m.qmu.Unlock()
	n := 0
	for n < len(msgs) && n < len(m.q) {
		d, q := &msgs[n], &m.q[n]
		d.Buf = d.Buf[:copy(d.Buf[:cap(d.Buf)], q.buf)]
		d.Encap, d.ICRC, d.Seq, d.Loan = q.enc, q.icrc, 0, nil
		l.ctr.rxPackets.Add(1)
		l.ctr.rxBytes.Add(uint64(len(d.Buf)))
		n++
	}
	rest := copy(m.q, m.q[n:])
	clear(m.q[rest:])
	m.q = m.q[:rest]
	if rest > 0 {
		m.queued.Store(true) // more than msgs held: the next ReadBatch takes them
	}
	return n
}
