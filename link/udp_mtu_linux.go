package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MTU returns the MTU of the network interface holding the link's
// address (InterfaceMTU), read when the link opens and kept current by a
// netlink subscription to the kernel's RTM_NEWLINK notifications (see
// ifaceWatch), not by watching sends fail with EMSGSIZE; 0 when no
// interface holds the address.
func (l *UDPLink) MTU() int { return int(l.iface.mtu.Load()) }

// LinkState returns the state of the network interface holding the
// link's address (StateWatcher): Up and Carrier from its flags (IFF_UP,
// IFF_LOWER_UP) as the kernel last notified them (see ifaceWatch), Speed
// read now from ethtool (ETHTOOL_GLINKSETTINGS through the socket, as the
// kernel's ib_get_eth_speed reads __ethtool_get_link_ksettings at every
// ibv_query_port), 0 when the driver has no link settings or does not
// know. A closed link is down. It reports false when no interface holds
// the address.
func (l *UDPLink) LinkState() (LinkState, bool) {
	m := &l.iface
	if m.index == 0 {
		return LinkState{}, false
	}
	if l.closed.Load() {
		return LinkState{}, true
	}
	f := m.flags.Load()
	s := LinkState{Up: f&unix.IFF_UP != 0, Carrier: f&unix.IFF_LOWER_UP != 0}
	if name := m.name.Load(); name != nil {
		_ = l.sock.Control(func(fd uintptr) { s.Speed = ethtoolSpeed(int(fd), *name) })
	}
	return s, true
}

// WatchLinkState has the link call fn after every change of its
// interface's IFF_UP or IFF_LOWER_UP, as the kernel notifies it
// (RTM_NEWLINK: NETDEV_UP, NETDEV_DOWN, NETDEV_CHANGE), and once at Close
// (StateWatcher). fn runs on the link's netlink reader or in Close. It
// reports false, and never calls fn, when the link has no subscription
// (no interface holds its address, or the netlink socket could not be
// opened).
func (l *UDPLink) WatchLinkState(fn func()) (stop func(), ok bool) {
	m := &l.iface
	if m.nl == nil {
		return func() {}, false
	}
	return m.watchers.Add(fn), true
}

// down reports whether the link's interface is administratively down: the
// link then refuses every send with ENETDOWN (see WriteBatch).
func (m *ifaceWatch) down() bool {
	return m.index != 0 && m.flags.Load()&unix.IFF_UP == 0
}

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

// ifaceWatch follows the interface holding a UDP link's address, as rxe
// follows its netdev: rxe_net.c's netdev notifier calls rxe_set_mtu on
// NETDEV_CHANGEMTU and moves the port up and down on NETDEV_UP,
// NETDEV_DOWN and NETDEV_CHANGE. softnic subscribes to the kernel's link
// notifications (a NETLINK_ROUTE socket bound to RTMGRP_LINK: the
// RTM_NEWLINK messages those events send) before it reads the interface,
// so no change falls between the two, and stores each new IFLA_MTU,
// IFLA_IFNAME and ifi_flags of its interface, calling the watchers
// (WatchLinkState) when IFF_UP or IFF_LOWER_UP changed. If the
// notifications overflow the socket (ENOBUFS) it asks the kernel for the
// interface again on the same socket, so the answer comes from the
// link's own network namespace. Deliberate differences from rxe: the
// interface is chosen once, when the link opens (rxe is bound to its
// netdev by name; an address moved to another interface later is not
// followed), and if the netlink socket cannot be opened the MTU and
// flags read at open are kept.
type ifaceWatch struct {
	index int
	mtu   atomic.Int32
	flags atomic.Uint32          // ifi_flags: IFF_UP, IFF_LOWER_UP, ...
	name  atomic.Pointer[string] // the interface's name, for ethtool
	nl    *os.File               // the netlink socket; nil without a subscription
	done  chan struct{}          // closed when the watcher has returned

	watchers Watchers[func()]
}

// start subscribes, finds addr's interface and reads its MTU and flags.
// Failures leave the MTU 0 (unknown) or fixed; they never fail the link.
func (m *ifaceWatch) start(addr netip.Addr) {
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
	name := ifi.Name
	m.name.Store(&name)
	m.flags.Store(linkFlags(ifi))
	if m.nl != nil {
		m.done = make(chan struct{})
		go m.watch()
	}
}

// linkFlags returns ifi's ifi_flags as the kernel gives them (with
// IFF_LOWER_UP, which net.Interface does not carry), from a dump of the
// links in the calling thread's network namespace; from ifi.Flags if the
// dump fails.
func linkFlags(ifi *net.Interface) uint32 {
	if b, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC); err == nil {
		if msgs, err := syscall.ParseNetlinkMessage(b); err == nil {
			for i := range msgs {
				d := msgs[i].Data
				if msgs[i].Header.Type != unix.RTM_NEWLINK || len(d) < unix.SizeofIfInfomsg {
					continue
				}
				if info := (*unix.IfInfomsg)(unsafe.Pointer(&d[0])); int(info.Index) == ifi.Index {
					return info.Flags
				}
			}
		}
	}
	var f uint32
	if ifi.Flags&net.FlagUp != 0 {
		f |= unix.IFF_UP
	}
	if ifi.Flags&net.FlagRunning != 0 {
		f |= unix.IFF_RUNNING | unix.IFF_LOWER_UP
	}
	return f
}

// watch applies every RTM_NEWLINK about the interface until the socket
// is closed.
func (m *ifaceWatch) watch() {
	defer close(m.done)
	buf := make([]byte, 1<<16)
	for {
		n, err := m.nl.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			// Notifications were lost: ask for the interface afresh;
			// the answer is an RTM_NEWLINK like the others.
			m.nl.Write(getLinkMsg(m.index))
			continue
		}
		if err != nil {
			return // closed
		}
		m.parse(buf[:n])
	}
}

// getLinkMsg builds an RTM_GETLINK request for interface index.
func getLinkMsg(index int) []byte {
	n := unix.SizeofNlMsghdr + unix.SizeofIfInfomsg
	b := make([]byte, n)
	binary.NativeEndian.PutUint32(b[0:], uint32(n))
	binary.NativeEndian.PutUint16(b[4:], unix.RTM_GETLINK)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[unix.SizeofNlMsghdr+4:], uint32(index))
	return b
}

// stateFlags are the flags a port's state follows.
const stateFlags = unix.IFF_UP | unix.IFF_LOWER_UP

// parse applies the RTM_NEWLINK messages in b (several may share one
// read); anything malformed is ignored. The watchers are called once per
// read that changed IFF_UP or IFF_LOWER_UP.
func (m *ifaceWatch) parse(b []byte) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return
	}
	changed := false
	for i := range msgs {
		msg := &msgs[i]
		if msg.Header.Type != unix.RTM_NEWLINK || len(msg.Data) < unix.SizeofIfInfomsg {
			continue
		}
		ifi := (*unix.IfInfomsg)(unsafe.Pointer(&msg.Data[0]))
		if int(ifi.Index) != m.index {
			continue
		}
		attrs, ok := parseRtAttrs(msg.Data[unix.SizeofIfInfomsg:])
		if !ok {
			continue
		}
		if old := m.flags.Swap(ifi.Flags); old&stateFlags != ifi.Flags&stateFlags {
			changed = true
		}
		for _, a := range attrs {
			switch {
			case a.typ == unix.IFLA_MTU && len(a.val) >= 4:
				m.mtu.Store(int32(binary.NativeEndian.Uint32(a.val)))
			case a.typ == unix.IFLA_IFNAME && len(a.val) > 0:
				name := string(bytes.TrimRight(a.val, "\x00"))
				m.name.Store(&name)
			}
		}
	}
	if changed {
		m.watchers.Each(func(fn func()) { fn() })
	}
}

// stop closes the subscription and waits for the watcher, then tells the
// watchers (the link is closed).
func (m *ifaceWatch) stop() {
	if m.nl == nil {
		return
	}
	m.nl.Close()
	if m.done != nil {
		<-m.done
	}
	m.watchers.Each(func(fn func()) { fn() })
}

// The ethtool ioctl (include/uapi/linux/ethtool.h).
const (
	ethtoolGLinkSettings = 0x4c       // ETHTOOL_GLINKSETTINGS
	speedUnknown         = 0xFFFFFFFF // SPEED_UNKNOWN, (u32)-1
	linkSettingsLen      = 48         // struct ethtool_link_settings without its link mode masks
	linkSettingsSpeed    = 4          // offset of its __u32 speed
	linkSettingsNWords   = 15         // offset of its __s8 link_mode_masks_nwords
)

// ethtoolSpeed returns interface name's speed in Mb/s as ethtool reports
// it (ETHTOOL_GLINKSETTINGS through SIOCETHTOOL on socket fd, in the
// socket's network namespace), or 0 when unknown: SPEED_UNKNOWN, or an
// error (EOPNOTSUPP from a driver without link settings: loopback,
// dummy). The request is the two-step handshake of ethtool(8): the first
// call learns the number of 32-bit words in each link mode mask, the
// second reads the settings. The lanes, which only ethtool's netlink
// interface reports, are not read (see nic.EthSpeed).
func ethtoolSpeed(fd int, name string) int {
	if len(name) >= unix.IFNAMSIZ {
		return 0
	}
	call := func(buf []byte) bool {
		var ifr struct {
			name [unix.IFNAMSIZ]byte
			data unsafe.Pointer
			_    [16]byte
		}
		copy(ifr.name[:], name)
		ifr.data = unsafe.Pointer(&buf[0])
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		runtime.KeepAlive(buf)
		return e == 0
	}
	buf := make([]byte, linkSettingsLen)
	binary.NativeEndian.PutUint32(buf, ethtoolGLinkSettings)
	if !call(buf) {
		return 0
	}
	nwords := -int(int8(buf[linkSettingsNWords])) // negative from the handshake
	if nwords <= 0 {
		return 0
	}
	buf = make([]byte, linkSettingsLen+3*4*nwords)
	binary.NativeEndian.PutUint32(buf, ethtoolGLinkSettings)
	buf[linkSettingsNWords] = byte(int8(nwords))
	if !call(buf) {
		return 0
	}
	speed := binary.NativeEndian.Uint32(buf[linkSettingsSpeed:])
	if speed == speedUnknown || speed > math.MaxInt32 {
		return 0
	}
	return int(speed)
}
