package fabric

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

var (
	addrA  = netip.MustParseAddr("10.0.0.1")
	addrB  = netip.MustParseAddr("10.0.0.2")
	addrC  = netip.MustParseAddr("10.0.0.3")
	addr6A = netip.MustParseAddr("fd00::1")
	addr6B = netip.MustParseAddr("fd00::2")
	t0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// newEncap returns the Encap rxe would put on a connected QP's packets.
func newEncap(src, dst netip.Addr) wire.Encap {
	e := wire.Encap{
		Src: src, Dst: dst,
		SrcPort: wire.ConnectedSrcPort(0x11, 0x22), DstPort: wire.UDPPort,
		HopLimit: 64,
	}
	if e.IsIPv4() {
		e.FragOff = wire.IPv4DF
	}
	return e
}

// build returns a complete RoCEv2 datagram with a valid ICRC for e.
func build(t testing.TB, e *wire.Encap, op wire.Opcode, psn wire.PSN, payload []byte) []byte {
	t.Helper()
	h := wire.Headers{BTH: wire.BTHFields{Opcode: op, PKey: 0xFFFF, DestQP: 0x22, PSN: psn}}
	if op.Is(wire.HasRETH) {
		h.RETH = wire.RETHFields{VA: 0x1000, RKey: 0x42, DMALen: uint32(len(payload))}
	}
	if op.Is(wire.HasAETH) {
		h.AETH = wire.AETHFields{Syndrome: wire.SyndromeACK, MSN: 1}
	}
	b := make([]byte, wire.PacketLen(op, len(payload)))
	n, err := wire.Build(b, e, &h, payload)
	if err != nil {
		t.Fatalf("wire.Build(%v): %v", op, err)
	}
	return b[:n]
}

// payload returns n bytes that encode i.
func payload(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i + j)
	}
	if n >= 2 {
		b[0], b[1] = byte(i>>8), byte(i)
	}
	return b
}

// sendSeq sends n RC SEND ONLY datagrams from src to dst with PSNs 0..n-1.
func sendSeq(t testing.TB, src *Endpoint, dst netip.Addr, n int) {
	t.Helper()
	e := newEncap(src.LocalAddr(), dst)
	for i := range n {
		pkt := build(t, &e, wire.RCSendOnly, wire.PSN(i), payload(i, 64))
		if _, err := src.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}}); err != nil {
			t.Fatalf("WriteBatch: %v", err)
		}
	}
}

// queued returns how many datagrams wait in e's receive queue.
func queued(e *Endpoint) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// drain reads every datagram queued at e without blocking.
func drain(t testing.TB, e *Endpoint) []link.Datagram {
	t.Helper()
	var out []link.Datagram
	msgs := make([]link.Datagram, e.BatchSize())
	buf := make([]byte, link.MaxDatagram*len(msgs))
	for queued(e) > 0 {
		for i := range msgs {
			msgs[i].Buf = buf[i*link.MaxDatagram : i*link.MaxDatagram : (i+1)*link.MaxDatagram]
		}
		n, err := e.ReadBatch(msgs)
		if err != nil {
			t.Fatalf("ReadBatch: %v", err)
		}
		for _, m := range msgs[:n] {
			m.Buf = bytes.Clone(m.Buf)
			out = append(out, m)
		}
	}
	return out
}

// psns returns the PSN of each datagram (each must parse).
func psns(t testing.TB, msgs []link.Datagram) []wire.PSN {
	t.Helper()
	var out []wire.PSN
	for _, m := range msgs {
		var p wire.Packet
		if err := wire.Parse(m.Buf, &p); err != nil {
			t.Fatalf("wire.Parse: %v", err)
		}
		out = append(out, p.PSN())
	}
	return out
}

// pair returns a fabric on a Manual clock with endpoints at addrA and addrB.
func pair(t testing.TB, cfg Config) (*Fabric, *clock.Manual, *Endpoint, *Endpoint) {
	t.Helper()
	var mc *clock.Manual
	if cfg.Clock == nil {
		mc = clock.NewManual(t0)
		cfg.Clock = mc
	}
	f := New(cfg)
	t.Cleanup(func() { f.Close() })
	a, err := f.Attach(addrA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Attach(addrB)
	if err != nil {
		t.Fatal(err)
	}
	return f, mc, a, b
}
