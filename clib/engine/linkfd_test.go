package main

import (
	"net/netip"
	"testing"

	"github.com/softnic/softnic/link"
)

// linkFD finds the UDP link's socket among the process's descriptors,
// through a wrapping link too, and none for a link that is no socket.
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
	if got := linkFD(link.NewPcapLink(l, nil)); got != fd {
		t.Errorf("linkFD through a pcap link = %d, want %d", got, fd)
	}
	if got := linkFD(nil); got != -1 {
		t.Errorf("linkFD(nil) = %d, want -1", got)
	}
}
