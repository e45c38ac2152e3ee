package wire_test

import (
	"fmt"
	"testing"

	"github.com/softnic/softnic/wire"
)

// writeMiddle returns a 4 KiB-payload RC_RDMA_WRITE_MIDDLE packet and its
// IPv4 encapsulation, the datapath's common case at a 4096 PMTU.
func writeMiddle(tb testing.TB, n int) (wire.Encap, wire.Headers, []byte, []byte) {
	e := testEncap4()
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteMiddle, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: 0x123456}}
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i)
	}
	return e, h, payload, build(tb, &e, &h, payload)
}

func BenchmarkParseVerify4K(b *testing.B) {
	e, _, _, pkt := writeMiddle(b, 4096)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	var p wire.Packet
	for b.Loop() {
		if err := wire.Parse(pkt, &p); err != nil {
			b.Fatal(err)
		}
		if err := wire.CheckICRC(&e, pkt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuild4K(b *testing.B) {
	e, h, payload, pkt := writeMiddle(b, 4096)
	buf := make([]byte, len(pkt))
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.Build(buf, &e, &h, payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFinish4K(b *testing.B) {
	e, h, payload, pkt := writeMiddle(b, 4096)
	buf := make([]byte, len(pkt))
	hn, err := wire.PutHeaders(buf, &h)
	if err != nil {
		b.Fatal(err)
	}
	copy(buf[hn:], payload)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.Finish(buf, &e, hn, len(payload)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkICRC(b *testing.B) {
	for _, n := range []int{64, 4096} {
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			e, _, _, pkt := writeMiddle(b, n)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			var sum uint32
			for b.Loop() {
				sum += wire.ComputeICRC(&e, pkt)
			}
			_ = sum
		})
	}
}

// TestZeroAllocs checks the receive path (Parse + CheckICRC) and the send
// path (PutHeaders + Finish) allocate nothing.
func TestZeroAllocs(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		e, h, payload, pkt := writeMiddle(t, 4096)
		if v6 {
			e = testEncap6()
			pkt = build(t, &e, &h, payload)
		}
		var p wire.Packet
		if got := testing.AllocsPerRun(100, func() {
			if err := wire.Parse(pkt, &p); err != nil {
				t.Fatal(err)
			}
			if err := wire.CheckICRC(&e, pkt); err != nil {
				t.Fatal(err)
			}
		}); got != 0 {
			t.Errorf("IPv6 %v: Parse+CheckICRC: got %v allocs/op, want 0", v6, got)
		}

		buf := make([]byte, len(pkt))
		if got := testing.AllocsPerRun(100, func() {
			hn, err := wire.PutHeaders(buf, &h)
			if err != nil {
				t.Fatal(err)
			}
			copy(buf[hn:], payload)
			if _, err := wire.Finish(buf, &e, hn, len(payload)); err != nil {
				t.Fatal(err)
			}
		}); got != 0 {
			t.Errorf("IPv6 %v: PutHeaders+Finish: got %v allocs/op, want 0", v6, got)
		}
		if got := testing.AllocsPerRun(100, func() {
			if _, err := wire.Build(buf, &e, &h, payload); err != nil {
				t.Fatal(err)
			}
		}); got != 0 {
			t.Errorf("IPv6 %v: Build: got %v allocs/op, want 0", v6, got)
		}
	}
}
