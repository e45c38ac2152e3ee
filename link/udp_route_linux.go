package link

// Routes and neighbours, as the kernel's rdma_resolve_addr resolves them
// (drivers/infiniband/core/addr.c): the route from the link's address to
// a destination (addr4_resolve, addr6_resolve: ip_route_output_key) and
// the next hop's link-layer address (addr_resolve_neigh, fetch_ha: the
// neighbour, resolved if need be). softnic asks the kernel through
// rtnetlink (RTM_GETROUTE, RTM_GETNEIGH, RTM_NEWNEIGH with NTF_USE) on a
// socket the link opened with its UDP socket, so the answers come from
// the link's network namespace whichever thread asks.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rtnl is a NETLINK_ROUTE socket for requests, one at a time.
type rtnl struct {
	mu  sync.Mutex
	fd  int // -1 when it could not be opened
	seq uint32
	buf []byte
}

// open opens the socket in the calling thread's network namespace.
func (r *rtnl) open() {
	r.fd = -1
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return
	}
	// A reply that never comes must not hold the request forever.
	tv := unix.Timeval{Sec: 5}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	r.fd = fd
	r.buf = make([]byte, 1<<16)
}

func (r *rtnl) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// request sends one request of type typ with body and attributes and
// returns the answer's messages of type want (their own memory, which the
// caller may read after other requests), or the errno of an NLMSG_ERROR.
func (r *rtnl) request(typ, flags uint16, body []byte, attrs []rtAttr, want uint16) ([]syscall.NetlinkMessage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return nil, fmt.Errorf("link: no netlink socket: %w", syscall.EOPNOTSUPP)
	}
	r.seq++
	seq := r.seq
	msg := make([]byte, unix.SizeofNlMsghdr, 256)
	msg = append(msg, body...)
	for _, a := range attrs {
		msg = a.append(msg)
	}
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	if err := unix.Sendto(r.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	for {
		n, _, err := unix.Recvfrom(r.fd, r.buf, 0)
		if err == unix.EINTR {
			// With SO_RCVTIMEO set, a signal ends the wait whatever
			// SA_RESTART says (signal(7)).
			continue
		}
		if err != nil {
			return nil, err
		}
		// The messages returned are read after r.mu is released, while
		// another request may fill r.buf: they get a copy of their own.
		msgs, err := syscall.ParseNetlinkMessage(bytes.Clone(r.buf[:n]))
		if err != nil {
			return nil, err
		}
		var out []syscall.NetlinkMessage
		done := false
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // the answer to an earlier request that timed out
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, syscall.EINVAL
				}
				if e := -int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					return nil, syscall.Errno(e)
				}
				done = true // an ACK
			case want:
				out = append(out, m)
				done = flags&unix.NLM_F_DUMP == 0
			case unix.NLMSG_DONE:
				done = true
			}
		}
		if done {
			return out, nil
		}
	}
}

// rtAttr is a netlink attribute to send.
type rtAttr struct {
	typ uint16
	val []byte
}

// parseRtAttrs splits b, the route attributes (struct rtattr) after a
// netlink message's fixed part, each aligned to 4 bytes, and reports
// whether they were well formed: each at least its header long and
// within b (what it returns is those before the first that was not). It
// is syscall.ParseNetlinkRouteAttr's walk with the bounds checked and
// for any message: that one slices past the end of its buffer when the
// last attribute's length, aligned, is longer than what is left, and
// panics (FuzzIfaceMTUParse found it), and knows no neighbour messages.
func parseRtAttrs(b []byte) ([]rtAttr, bool) {
	var attrs []rtAttr
	for len(b) >= unix.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b))
		if n < unix.SizeofRtAttr || n > len(b) {
			return attrs, false
		}
		attrs = append(attrs, rtAttr{typ: binary.NativeEndian.Uint16(b[2:]), val: b[unix.SizeofRtAttr:n]})
		b = b[min((n+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1), len(b)):]
	}
	return attrs, true
}

func (a rtAttr) append(b []byte) []byte {
	n := unix.SizeofRtAttr + len(a.val)
	var h [unix.SizeofRtAttr]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(n))
	binary.NativeEndian.PutUint16(h[2:], a.typ)
	b = append(b, h[:]...)
	b = append(b, a.val...)
	for len(b)%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

// nudValid are the neighbour states with a usable link-layer address
// (include/net/neighbour.h NUD_VALID).
const nudValid = unix.NUD_PERMANENT | unix.NUD_NOARP | unix.NUD_REACHABLE | unix.NUD_PROBE | unix.NUD_STALE | unix.NUD_DELAY

// neighPoll bounds the wait between two looks at a neighbour being
// resolved.
const neighPoll = 20 * time.Millisecond

// ResolveRoute resolves the route from the link's address to dst and the
// next hop's link-layer address, as rdma_resolve_addr does (Resolver):
// it asks the kernel for the route (RTM_GETROUTE, from the link's
// address: addr4_resolve's ip_route_output_key with the bound source),
// whose errno it returns (ENETUNREACH: no route; EHOSTUNREACH: an
// unreachable route; EACCES: prohibit; EINVAL: blackhole). A local
// destination or a multicast one needs no neighbour. Otherwise it looks
// the next hop up in the neighbour table (RTM_GETNEIGH); if it is not
// valid it has the kernel resolve it (RTM_NEWNEIGH with NTF_USE: the
// kernel's neigh_event_send, as fetch_ha calls it) and waits, looking
// again now and then, until it is valid or ctx ends: ETIMEDOUT, as
// addr.c's process_one_req reports a neighbour that did not resolve in
// time. Deliberate difference from the kernel: without CAP_NET_ADMIN the
// kernel refuses NTF_USE (EPERM), and softnic, which cannot make it
// resolve the neighbour, takes the route without a link-layer address
// (the first datagram sent resolves it).
func (l *UDPLink) ResolveRoute(ctx context.Context, dst netip.Addr) (Route, error) {
	if l.closed.Load() {
		return Route{}, ErrLinkClosed
	}
	dst = dst.Unmap().WithZone("")
	if dst.Is4() != l.v4 {
		return Route{}, fmt.Errorf("link: route to %v from %v: %w", dst, l.addr, syscall.EAFNOSUPPORT)
	}
	rt, err := l.route(dst)
	if err != nil {
		return Route{}, fmt.Errorf("link: route to %v from %v: %w", dst, l.addr, err)
	}
	if rt.Local || dst.IsMulticast() {
		return rt, nil
	}
	hop := dst
	if rt.Gateway.IsValid() {
		hop = rt.Gateway
	}
	triggered := false
	for {
		hw, state, err := l.neigh(rt.Iface, hop)
		switch {
		case err == nil && state&nudValid != 0:
			rt.HWAddr = hw
			return rt, nil
		case err != nil && !errors.Is(err, syscall.ENOENT):
			return rt, nil // the kernel cannot say: the first send resolves it
		}
		if !triggered {
			triggered = true
			if err := l.resolveNeigh(rt.Iface, hop); err != nil {
				return rt, nil // EPERM: see above
			}
			continue
		}
		select {
		case <-ctx.Done():
			return Route{}, fmt.Errorf("link: neighbour %v of the route to %v: %w", hop, dst, syscall.ETIMEDOUT)
		case <-time.After(neighPoll):
		}
	}
}

// route asks the kernel for the route from the link's address to dst.
func (l *UDPLink) route(dst netip.Addr) (Route, error) {
	fam, bits := byte(unix.AF_INET), byte(32)
	if !l.v4 {
		fam, bits = unix.AF_INET6, 128
	}
	body := make([]byte, unix.SizeofRtMsg)
	body[0], body[1] = fam, bits // rtm_family, rtm_dst_len
	body[2] = bits               // rtm_src_len
	src := l.addr.WithZone("")
	attrs := []rtAttr{{unix.RTA_DST, dst.AsSlice()}, {unix.RTA_SRC, src.AsSlice()}}
	msgs, err := l.rtnl.request(unix.RTM_GETROUTE, 0, body, attrs, unix.RTM_NEWROUTE)
	if err != nil {
		return Route{}, err
	}
	if len(msgs) == 0 {
		return Route{}, syscall.ENETUNREACH
	}
	m := &msgs[0]
	if len(m.Data) < unix.SizeofRtMsg {
		return Route{}, syscall.EINVAL
	}
	rtm := (*unix.RtMsg)(unsafe.Pointer(&m.Data[0]))
	rt := Route{Local: rtm.Type == unix.RTN_LOCAL}
	switch rtm.Type {
	case unix.RTN_UNREACHABLE:
		return Route{}, syscall.EHOSTUNREACH
	case unix.RTN_PROHIBIT:
		return Route{}, syscall.EACCES
	case unix.RTN_BLACKHOLE:
		return Route{}, syscall.EINVAL
	}
	attrsIn, ok := parseRtAttrs(m.Data[unix.SizeofRtMsg:])
	if !ok {
		return Route{}, syscall.EINVAL
	}
	for _, a := range attrsIn {
		switch a.typ {
		case unix.RTA_OIF:
			if len(a.val) >= 4 {
				rt.Iface = int(binary.NativeEndian.Uint32(a.val))
			}
		case unix.RTA_GATEWAY:
			if ip, ok := netip.AddrFromSlice(a.val); ok {
				rt.Gateway = ip.Unmap()
			}
		case unix.RTA_PREFSRC:
			if ip, ok := netip.AddrFromSlice(a.val); ok {
				rt.Src = ip.Unmap()
			}
		}
	}
	if !rt.Src.IsValid() {
		rt.Src = src
	}
	return rt, nil
}

// ndmsg builds a struct ndmsg for ifindex.
func (l *UDPLink) ndmsg(ifindex int, state uint16, flags uint8) []byte {
	b := make([]byte, unix.SizeofNdMsg)
	b[0] = unix.AF_INET
	if !l.v4 {
		b[0] = unix.AF_INET6
	}
	binary.NativeEndian.PutUint32(b[4:], uint32(int32(ifindex)))
	binary.NativeEndian.PutUint16(b[8:], state)
	b[10] = flags
	return b
}

// neigh looks hop up in the neighbour table of interface ifindex
// (RTM_GETNEIGH for one entry): its link-layer address and NUD state;
// ENOENT when there is none.
func (l *UDPLink) neigh(ifindex int, hop netip.Addr) (net.HardwareAddr, uint16, error) {
	msgs, err := l.rtnl.request(unix.RTM_GETNEIGH, 0, l.ndmsg(ifindex, 0, 0),
		[]rtAttr{{unix.NDA_DST, hop.AsSlice()}}, unix.RTM_NEWNEIGH)
	if err != nil {
		return nil, 0, err
	}
	if len(msgs) == 0 || len(msgs[0].Data) < unix.SizeofNdMsg {
		return nil, 0, syscall.ENOENT
	}
	m := &msgs[0]
	ndm := (*unix.NdMsg)(unsafe.Pointer(&m.Data[0]))
	var hw net.HardwareAddr
	attrs, _ := parseRtAttrs(m.Data[unix.SizeofNdMsg:]) // those before a malformed one
	for _, a := range attrs {
		if a.typ == unix.NDA_LLADDR {
			hw = net.HardwareAddr(append([]byte(nil), a.val...))
		}
	}
	return hw, ndm.State, nil
}

// resolveNeigh has the kernel resolve hop on interface ifindex: an
// RTM_NEWNEIGH with NTF_USE creates the entry if need be and calls
// neigh_event_send, which sends the ARP request or neighbour
// solicitation (net/core/neighbour.c neigh_add).
func (l *UDPLink) resolveNeigh(ifindex int, hop netip.Addr) error {
	_, err := l.rtnl.request(unix.RTM_NEWNEIGH, unix.NLM_F_CREATE|unix.NLM_F_ACK,
		l.ndmsg(ifindex, 0, unix.NTF_USE), []rtAttr{{unix.NDA_DST, hop.AsSlice()}}, unix.RTM_NEWNEIGH)
	return err
}
