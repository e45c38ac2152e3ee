package link

import (
	"math/rand/v2"
	"testing"

	"github.com/softnic/softnic/wire"
)

// TestUDPECN sends runs of equal datagrams whose ECN codepoints change
// (ECT(0), CE, not-ECT) over loopback, with GSO and GRO, from a link
// with UDPConfig.ECN, and checks that each arrives with the traffic
// class it was sent with: the socket's default ECT(0) for the datagrams
// that ask for it, a control message for the others, and GRO never
// handing over a coalesced buffer whose segments were sent with
// different traffic classes.
func TestUDPECN(t *testing.T) {
	for _, ecn := range []bool{true, false} {
		a, b := listenPair(t, lo1, lo2, UDPConfig{ECN: ecn})
		r := rand.New(rand.NewPCG(1, 2))
		var ss []sample
		for _, tc := range []uint8{wire.ECNECT0, wire.ECNCE, wire.ECNECT0, wire.ECNNotECT, 0xB8 | wire.ECNCE, wire.ECNECT0} {
			for range 8 {
				ss = append(ss, sample{tc: tc, hop: 64, size: 1024})
			}
		}
		msgs := buildDatagrams(t, r, a, b, ss)
		if n, err := a.WriteBatch(msgs); err != nil || n != len(msgs) {
			t.Fatalf("ECN %v: WriteBatch = %d, %v", ecn, n, err)
		}
		got := readN(t, b, len(msgs))
		for i, d := range got {
			var p wire.Packet
			if err := wire.Parse(d.Buf, &p); err != nil {
				t.Fatalf("ECN %v: datagram %d: %v", ecn, i, err)
			}
			want := ss[p.PSN()].tc
			if d.Encap.TrafficClass != want {
				t.Errorf("ECN %v: PSN %d arrived with traffic class %#x, want %#x", ecn, p.PSN(), d.Encap.TrafficClass, want)
			}
		}
		if ecn && a.tos != wire.ECNECT0 {
			t.Errorf("socket default traffic class %#x, want ECT(0)", a.tos)
		}
	}
}
