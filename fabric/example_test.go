package fabric_test

import (
	"fmt"
	"net/netip"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// Two endpoints exchange RC SEND ONLY packets over a fabric that loses 1%
// of them. The seed makes the losses the same on every run.
func Example() {
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	f.SetImpairment(fabric.Impairment{Loss: 0.01})
	a, _ := f.Attach(netip.MustParseAddr("192.0.2.1"))
	b, _ := f.Attach(netip.MustParseAddr("192.0.2.2"))

	enc := wire.Encap{
		Src: a.LocalAddr(), Dst: b.LocalAddr(),
		SrcPort: wire.SrcPortBase, DstPort: wire.UDPPort,
		HopLimit: 64, FragOff: wire.IPv4DF,
	}
	buf := make([]byte, link.MaxDatagram)
	for psn := range 200 {
		h := wire.Headers{BTH: wire.BTHFields{
			Opcode: wire.RCSendOnly, PKey: 0xFFFF, DestQP: 0x12, PSN: wire.PSN(psn),
		}}
		n, _ := wire.Build(buf, &enc, &h, []byte("hello"))
		a.WriteBatch([]link.Datagram{{Encap: enc, Buf: buf[:n]}}) // buf is reusable at once
	}

	msgs := make([]link.Datagram, b.BatchSize())
	for i := range msgs {
		msgs[i].Buf = make([]byte, 0, link.MaxDatagram)
	}
	next := wire.PSN(0)
	for got := uint64(0); got < f.Stats().Delivered.Packets; {
		n, _ := b.ReadBatch(msgs)
		got += uint64(n)
		for _, m := range msgs[:n] {
			var p wire.Packet
			if wire.Parse(m.Buf, &p) != nil || wire.CheckICRC(&m.Encap, m.Buf) != nil {
				continue
			}
			if p.PSN() == 0 {
				fmt.Printf("%v from %v: %q\n", p.Opcode, m.Encap.Src, p.Payload)
			}
			for ; next != p.PSN(); next = next.Next() {
				fmt.Println("lost PSN", next)
			}
			next = next.Next()
		}
	}
	st := f.Stats()
	fmt.Printf("sent %d, delivered %d, lost %d\n", st.Sent.Packets, st.Delivered.Packets, st.DropImpairment.Packets)
	// Output:
	// RC_SEND_ONLY from 192.0.2.1: "hello"
	// lost PSN 105
	// lost PSN 136
	// lost PSN 181
	// lost PSN 189
	// sent 200, delivered 196, lost 4
}
