package fabric

import (
	"net/netip"
	"testing"

	"github.com/softnic/softnic/link"
)

// TestEndpointMTU: an endpoint reports DefaultMTU until SetMTU, which
// takes 68..65536; a datagram whose IP packet (IPv4 20 or IPv6 40 bytes
// of header, UDP 8, the payload) exceeds the sender's MTU is dropped and
// counted as DropOversize, one that fits exactly is delivered.
func TestEndpointMTU(t *testing.T) {
	for _, c := range []struct {
		name     string
		src, dst netip.Addr
		fits     int // the largest UDP payload through MTU 1500
	}{
		{"ipv4", addrA, addrB, 1500 - 20 - 8},
		{"ipv6", netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 1500 - 40 - 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := New(Config{})
			defer f.Close()
			a, err := f.Attach(c.src)
			if err != nil {
				t.Fatal(err)
			}
			b, err := f.Attach(c.dst)
			if err != nil {
				t.Fatal(err)
			}
			if a.MTU() != DefaultMTU {
				t.Fatalf("MTU %d before SetMTU, want %d", a.MTU(), DefaultMTU)
			}
			for _, bad := range []int{0, 67, 65537} {
				if a.SetMTU(bad) == nil {
					t.Errorf("SetMTU(%d) accepted", bad)
				}
			}
			if err := a.SetMTU(1500); err != nil || a.MTU() != 1500 {
				t.Fatalf("SetMTU(1500): %v, MTU %d", err, a.MTU())
			}
			e := newEncap(c.src, c.dst)
			a.WriteBatch([]link.Datagram{{Encap: e, Buf: make([]byte, c.fits+1)}})
			a.WriteBatch([]link.Datagram{{Encap: e, Buf: make([]byte, c.fits)}})
			if got := a.Stats().DropOversize.Packets; got != 1 {
				t.Errorf("DropOversize = %d, want 1", got)
			}
			if got := drain(t, b); len(got) != 1 || len(got[0].Buf) != c.fits {
				t.Errorf("a datagram that fits the MTU was not delivered whole")
			}
		})
	}
}
