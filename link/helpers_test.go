package link

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/wire"
)

var udpSeed = flag.Uint64("udpseed", 0, "seed for the randomized UDP link tests (0: from the clock)")

// newRand returns a seeded generator and logs the seed (STYLE.md 19).
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *udpSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("random seed %d (repeat with -udpseed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
}

// randEncap returns an Encap of the given family with random covered and
// masked fields.
func randEncap(r *rand.Rand, v4 bool) wire.Encap {
	var e wire.Encap
	if v4 {
		e.Src = netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
		e.Dst = netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
		e.ID = uint16(r.Uint32())
		e.FragOff = wire.IPv4DF
	} else {
		var a, b [16]byte
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		a[0], b[0] = 0x20, 0x20 // not IPv4-mapped
		e.Src, e.Dst = netip.AddrFrom16(a), netip.AddrFrom16(b)
		e.FlowLabel = r.Uint32() & 0xFFFFF
	}
	e.SrcPort, e.DstPort = uint16(r.Uint32()), wire.UDPPort
	e.TrafficClass, e.HopLimit, e.UDPChecksum = uint8(r.Uint32()), uint8(r.Uint32()), uint16(r.Uint32())
	return e
}

// randPacket builds a SEND_ONLY of n random payload bytes for e.
func randPacket(t testing.TB, r *rand.Rand, e *wire.Encap, n int) []byte {
	t.Helper()
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey,
		DestQP: r.Uint32() & wire.QPNMask, PSN: wire.PSN(r.Uint32() & wire.PSNMask)}}
	b := make([]byte, MaxDatagram)
	k, err := wire.Build(b, e, &h, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b[:k]
}

// rxBatch returns n receive Datagrams with buffers of cap MaxDatagram.
func rxBatch(n int) []Datagram {
	msgs := make([]Datagram, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 0, MaxDatagram)
	}
	return msgs
}

// clone copies received datagrams out of reusable buffers.
func clone(ds []Datagram) []Datagram {
	out := make([]Datagram, len(ds))
	for i, d := range ds {
		out[i] = d
		out[i].Buf = bytes.Clone(d.Buf)
	}
	return out
}
