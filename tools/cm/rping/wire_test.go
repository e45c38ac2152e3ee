package rping

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/wire"
)

// rcStep is one packet of a connection's data, ACKs left out (when a
// NIC acknowledges is its own affair): who sent it, its opcode and its
// length (the payload's, or a READ request's RETH length).
func rcStep(fromClient bool, p *wire.Packet) (string, bool) {
	if p.DestQP() == 1 || p.Opcode == wire.RCAck {
		return "", false
	}
	who := "server"
	if fromClient {
		who = "client"
	}
	n := len(p.Payload)
	if p.Opcode == wire.RCReadRequest {
		n = int(p.RETH().DMALen())
	}
	return fmt.Sprintf("%s %v %d", who, p.Opcode, n), true
}

// TestWireLikeRxe: three pings of softnic's rping put on the wire what
// rping put on it between two rxe hosts (wire/testdata/rping_cm.pcap,
// rping -C 3 -S 64): the same operations, sizes and order.
func TestWireLikeRxe(t *testing.T) {
	dgs, err := capture.ReadFile("../../../wire/testdata/rping_cm.pcap")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	var client netip.Addr
	for _, d := range dgs {
		var p wire.Packet
		if wire.Parse(d.Payload, &p) != nil {
			continue
		}
		src := d.Encap.Src.Unmap()
		if !client.IsValid() && p.DestQP() != 1 {
			client = src // the client SENDs first
		}
		if s, ok := rcStep(src == client, &p); ok {
			want = append(want, s)
		}
	}
	if len(want) == 0 {
		t.Fatal("no RC packets in the capture")
	}

	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	var mu sync.Mutex
	var got []string
	cli := netip.MustParseAddr("10.0.0.2")
	remove := f.Tap(func(p fabric.Packet) {
		if !p.Parsed {
			return
		}
		if s, ok := rcStep(p.Src == cli, &p.Wire); ok {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}
	})
	defer remove()
	cfg := Defaults()
	cfg.Count = 3
	srv, cl := runPair(t, f, cfg, cfg)
	if srv.res != nil || cl.res != nil {
		t.Fatalf("server: %v %s\nclient: %v %s", srv.res, srv.err.String(), cl.res, cl.err.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("softnic's rping on the wire:\n%v\nrxe's:\n%v", got, want)
	}
}
