package fabric

import (
	"fmt"
	"testing"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// BenchmarkFabricRoundTrip sends a batch A->B, reads it at B, sends it back
// B->A and reads it at A: two WriteBatch and two ReadBatch calls per op.
func BenchmarkFabricRoundTrip(b *testing.B) {
	for _, hooked := range []bool{false, true} {
		for _, batch := range []int{1, 32} {
			for _, size := range []int{64, 1024, 4096} {
				name := fmt.Sprintf("batch=%d/size=%d", batch, size)
				if hooked {
					name = "hooked/" + name
				}
				b.Run(name, func(b *testing.B) { benchRoundTrip(b, batch, size, hooked) })
			}
		}
	}
}

func benchRoundTrip(b *testing.B, batch, size int, hooked bool) {
	f, _, ea, eb := pair(b, Config{})
	if hooked { // a tap, a filter and a (no-op) impairment: the parse and draw costs
		f.Tap(func(Packet) {})
		f.AddFilter(DropIf(OpcodeIs(wire.RCAck)))
		f.SetImpairment(Impairment{Loss: 1e-12})
	}
	ab, ba := newEncap(addrA, addrB), newEncap(addrB, addrA)
	tx := make([]link.Datagram, batch)
	for i := range tx {
		tx[i] = link.Datagram{Encap: ab, Buf: build(b, &ab, wire.RCSendOnly, wire.PSN(i), payload(i, size))}
	}
	rx := make([]link.Datagram, batch)
	for i := range rx {
		rx[i].Buf = make([]byte, 0, link.MaxDatagram)
	}
	round := func() {
		ea.WriteBatch(tx)
		n, _ := eb.ReadBatch(rx)
		for i := range rx[:n] {
			rx[i].Encap = ba
		}
		eb.WriteBatch(rx[:n])
		ea.ReadBatch(rx)
	}
	round() // warm the free list
	b.SetBytes(int64(2 * batch * len(tx[0].Buf)))
	b.ReportAllocs()
	for b.Loop() {
		round()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*batch), "ns/datagram")
}
