package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MTU returns the MTU of the network interface holding the link's
// address (InterfaceMTU), read when the link opens and kept current by a
// netlink subscription to the kernel's RTM_NEWLINK notifications (see
// ifaceMTU), not by watching sends fail with EMSGSIZE; 0 when no
// interface holds the address.
func (l *UDPLink) MTU() int { return int(l.ifmtu.mtu.Load()) }

// InterfaceMTU returns the name and MTU of the network interface holding
// addr: the interface with addr among its addresses (for an IPv6
// link-local address with a zone, the interface the zone names), else a
// loopback interface whose prefix covers addr (127.0.0.2 is lo's though
// only 127.0.0.1/8 is configured). It reads the MTU once; a UDPLink
// follows it.
func InterfaceMTU(addr netip.Addr) (name string, mtu int, err error) {
	ifi, err := interfaceOf(addr)
	if err != nil {
		return "", 0, err
	}
	return ifi.Name, ifi.MTU, nil
}

// interfaceOf finds the interface holding addr (InterfaceMTU).
func interfaceOf(addr netip.Addr) (*net.Interface, error) {
	zone := addr.Zone()
	a := addr.WithZone("").Unmap()
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var loop *net.Interface
	for i := range ifs {
		ifi := &ifs[i]
		if zone != "" && zone != ifi.Name && zone != fmt.Sprint(ifi.Index) {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue // gone since net.Interfaces
		}
		for _, x := range addrs {
			ipn, ok := x.(*net.IPNet)
			if !ok {
				continue
			}
			p, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			p = p.Unmap()
			if p == a {
				return ifi, nil
			}
			ones, _ := ipn.Mask.Size()
			if loop == nil && ifi.Flags&net.FlagLoopback != 0 && p.Is4() == a.Is4() {
				if pfx, err := p.Prefix(ones); err == nil && pfx.Contains(a) {
					loop = ifi
				}
			}
		}
	}
	if loop != nil {
		return loop, nil
	}
	return nil, fmt.Errorf("nic: no network interface holds %v: %w", addr, unix.EADDRNOTAVAIL)
}

// ifaceMTU follows the MTU of the interface holding a UDP link's address,
// as rxe follows its netdev's: rxe_net.c's netdev notifier calls
// rxe_set_mtu on NETDEV_CHANGEMTU. softnic subscribes to the kernel's
// link notifications (a NETLINK_ROUTE socket bound to RTMGRP_LINK, the
// RTM_NEWLINK messages that NETDEV_CHANGEMTU sends) before it reads the
// MTU, so no change falls between the two, and stores each new IFLA_MTU
// of its interface. If the notifications overflow the socket (ENOBUFS)
// it reads the MTU again. Deliberate differences from rxe: the interface
// is chosen once, when the link opens (rxe is bound to its netdev by
// name; an address moved to another interface later is not followed), and
// if the netlink socket cannot be opened the MTU read at open is kept.
type ifaceMTU struct {
	index int
	mtu   atomic.Int32
	nl    *os.File      // the netlink socket; nil without a subscription
	done  chan struct{} // closed when the watcher has returned
}

// start subscribes, finds addr's interface and reads its MTU. Failures
// leave the MTU 0 (unknown) or fixed; they never fail the link.
func (m *ifaceMTU) start(addr netip.Addr) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err == nil {
		if err = unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
			unix.Close(fd)
		} else {
			// A non-blocking descriptor goes to Go's poller: Close
			// unblocks the watcher's Read.
			m.nl = os.NewFile(uintptr(fd), "netlink-route")
		}
	}
	ifi, err := interfaceOf(addr)
	if err != nil {
		if m.nl != nil {
			m.nl.Close()
			m.nl = nil
		}
		return
	}
	m.index = ifi.Index
	m.mtu.Store(int32(ifi.MTU))
	if m.nl != nil {
		m.done = make(chan struct{})
		go m.watch()
	}
}

// watch stores the MTU of every RTM_NEWLINK about the interface until the
// socket is closed.
func (m *ifaceMTU) watch() {
	defer close(m.done)
	buf := make([]byte, 1<<16)
	for {
		n, err := m.nl.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			// Notifications were lost: read the MTU afresh.
			if ifi, err := net.InterfaceByIndex(m.index); err == nil {
				m.mtu.Store(int32(ifi.MTU))
			}
			continue
		}
		if err != nil {
			return // closed
		}
		m.parse(buf[:n])
	}
}

// parse applies the RTM_NEWLINK messages in b (several may share one
// read); anything malformed is ignored.
func (m *ifaceMTU) parse(b []byte) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return
	}
	for i := range msgs {
		msg := &msgs[i]
		if msg.Header.Type != unix.RTM_NEWLINK || len(msg.Data) < unix.SizeofIfInfomsg {
			continue
		}
		ifi := (*unix.IfInfomsg)(unsafe.Pointer(&msg.Data[0]))
		if int(ifi.Index) != m.index {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(msg)
		if err != nil {
			continue
		}
		for _, a := range attrs {
			if a.Attr.Type == unix.IFLA_MTU && len(a.Value) >= 4 {
				m.mtu.Store(int32(binary.NativeEndian.Uint32(a.Value)))
			}
		}
	}
}

// stop closes the subscription and waits for the watcher.
func (m *ifaceMTU) stop() {
	if m.nl == nil {
		return
	}
	m.nl.Close()
	if m.done != nil {
		<-m.done
	}
}
