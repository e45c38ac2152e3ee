package main

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/link"
)

// linkFD gives the UDP link's own socket (bound to the link's address and
// port), through a wrapping link too; none for a link that is no socket,
// nor once the link is closed.
func TestLinkFD(t *testing.T) {
	l, err := link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("127.31.0.1"), Port: 4791})
	if err != nil {
		t.Skipf("no UDP socket here: %v", err)
	}
	defer l.Close()
	fd := linkFD(l)
	if fd < 0 {
		t.Fatalf("linkFD = %d, want the link's socket", fd)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname(%d): %v", fd, err)
	}
	if a, ok := sa.(*unix.SockaddrInet4); !ok || netip.AddrFrom4(a.Addr) != l.LocalAddr().Unmap() || a.Port != int(l.Port()) {
		t.Errorf("linkFD = %d, bound to %+v; want the link's %v:%d", fd, sa, l.LocalAddr(), l.Port())
	}
	if got := linkFD(link.NewPcapLink(l, nil)); got != fd {
		t.Errorf("linkFD through a pcap link = %d, want %d", got, fd)
	}
	if got := linkFD(nil); got != -1 {
		t.Errorf("linkFD(nil) = %d, want -1", got)
	}
	l.Close()
	if got := linkFD(l); got != -1 {
		t.Errorf("linkFD of a closed link = %d, want -1", got)
	}
}
