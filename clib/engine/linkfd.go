package main

import (
	"net/netip"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/link"
)

// linkFD returns the descriptor of the UDP socket the device's link
// receives on, or -1 when the link is no UDP socket. The C library's
// ibv_poll_cq waits for it to turn readable (poll(2)) once a CQ has
// stayed empty for a while (clib/libibverbs/cq.c: idle); it never reads
// it. The link keeps its descriptor to itself, so it is found among the
// process's: the datagram socket bound to the link's address and port.
func linkFD(l link.Link) int {
	for {
		u, ok := l.(link.Unwrapper)
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	u, ok := l.(*link.UDPLink)
	if !ok {
		return -1
	}
	want := netip.AddrPortFrom(u.LocalAddr().Unmap(), u.Port())
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || t != unix.SOCK_DGRAM {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		var got netip.AddrPort
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			got = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
		case *unix.SockaddrInet6:
			got = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
		}
		if got == want {
			return fd
		}
	}
	return -1
}
