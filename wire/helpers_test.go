package wire_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/wire"
)

// newRand is wire.NewTestRand (icrc_patch_test.go): a seeded generator,
// its seed logged (-seed repeats it).
func newRand(t testing.TB) *rand.Rand { return wire.NewTestRand(t) }

// allHeaders lists every extension header in wire order.
var allHeaders = []wire.Header{
	wire.HdrRDETH, wire.HdrDETH, wire.HdrXRCETH, wire.HdrFETH, wire.HdrRETH,
	wire.HdrAtomicETH, wire.HdrAETH, wire.HdrAtomicAckETH, wire.HdrImmDt,
	wire.HdrIETH, wire.HdrCNP,
}

// validOpcodes returns every opcode the table defines, in numeric order.
func validOpcodes() []wire.Opcode {
	var ops []wire.Opcode
	for i := range 256 {
		if op := wire.Opcode(i); op.Valid() {
			ops = append(ops, op)
		}
	}
	return ops
}

// randHeaders returns headers for op with random values in every field the
// opcode's headers carry and zero elsewhere (what Packet.Headers decodes).
// TVer is 0 and Pad is left for Build to set.
func randHeaders(r *rand.Rand, op wire.Opcode) wire.Headers {
	info := op.Info()
	b := func() bool { return r.IntN(2) == 1 }
	h := wire.Headers{BTH: wire.BTHFields{
		Opcode: op, SE: b(), MigReq: b(), PKey: uint16(r.Uint32()), FECN: b(), BECN: b(),
		DestQP: r.Uint32() & wire.QPNMask, AckReq: b(), PSN: wire.PSN(r.Uint32() & wire.PSNMask),
	}}
	if info.Has(wire.HdrRDETH) {
		h.RDETH.EECnxt = r.Uint32() & wire.QPNMask
	}
	if info.Has(wire.HdrDETH) {
		h.DETH = wire.DETHFields{QKey: r.Uint32(), SrcQP: r.Uint32() & wire.QPNMask}
	}
	if info.Has(wire.HdrXRCETH) {
		h.XRCETH.XRCSRQ = r.Uint32() & wire.QPNMask
	}
	if info.Has(wire.HdrFETH) {
		h.FETH = wire.FETHFields{PlacementType: uint8(r.IntN(16)), Selectivity: uint8(r.IntN(4))}
	}
	if info.Has(wire.HdrRETH) {
		h.RETH = wire.RETHFields{VA: r.Uint64(), RKey: r.Uint32(), DMALen: r.Uint32()}
	}
	if info.Has(wire.HdrAtomicETH) {
		h.AtomicETH = wire.AtomicETHFields{VA: r.Uint64(), RKey: r.Uint32(), SwapAdd: r.Uint64(), Compare: r.Uint64()}
	}
	if info.Has(wire.HdrAETH) {
		h.AETH = wire.AETHFields{Syndrome: wire.Syndrome(r.Uint32()), MSN: r.Uint32() & wire.QPNMask}
	}
	if info.Has(wire.HdrAtomicAckETH) {
		h.AtomicAckETH.Orig = r.Uint64()
	}
	if info.Has(wire.HdrImmDt) {
		h.Imm = r.Uint32()
	}
	if info.Has(wire.HdrIETH) {
		h.InvRKey = r.Uint32()
	}
	return h
}

// maxHeaders returns headers for op with every field at its maximum
// (24-bit fields 0xFFFFFF, flags set) and zero in headers op lacks.
func maxHeaders(op wire.Opcode) wire.Headers {
	info := op.Info()
	h := wire.Headers{BTH: wire.BTHFields{
		Opcode: op, SE: true, MigReq: true, PKey: 0xFFFF, FECN: true, BECN: true,
		DestQP: 0xFFFFFF, AckReq: true, PSN: 0xFFFFFF,
	}}
	if info.Has(wire.HdrRDETH) {
		h.RDETH.EECnxt = 0xFFFFFF
	}
	if info.Has(wire.HdrDETH) {
		h.DETH = wire.DETHFields{QKey: 0xFFFFFFFF, SrcQP: 0xFFFFFF}
	}
	if info.Has(wire.HdrXRCETH) {
		h.XRCETH.XRCSRQ = 0xFFFFFF
	}
	if info.Has(wire.HdrFETH) {
		h.FETH = wire.FETHFields{PlacementType: 0xF, Selectivity: 3}
	}
	if info.Has(wire.HdrRETH) {
		h.RETH = wire.RETHFields{VA: ^uint64(0), RKey: ^uint32(0), DMALen: ^uint32(0)}
	}
	if info.Has(wire.HdrAtomicETH) {
		h.AtomicETH = wire.AtomicETHFields{VA: ^uint64(0), RKey: ^uint32(0), SwapAdd: ^uint64(0), Compare: ^uint64(0)}
	}
	if info.Has(wire.HdrAETH) {
		h.AETH = wire.AETHFields{Syndrome: 0xFF, MSN: 0xFFFFFF}
	}
	if info.Has(wire.HdrAtomicAckETH) {
		h.AtomicAckETH.Orig = ^uint64(0)
	}
	if info.Has(wire.HdrImmDt) {
		h.Imm = ^uint32(0)
	}
	if info.Has(wire.HdrIETH) {
		h.InvRKey = ^uint32(0)
	}
	return h
}

// payloadSizes returns payload lengths the opcode's PayloadRule allows
// (Parse does not apply the PMTU, so PayloadFull only needs no pad).
func payloadSizes(op wire.Opcode) []int {
	switch op.Info().Payload {
	case wire.PayloadFull:
		return []int{4, 256, 1024, 4096}
	case wire.PayloadLast:
		return []int{1, 2, 3, 4, 5, 63, 64, 1023, 4096}
	case wire.PayloadUpToPMTU:
		return []int{0, 1, 2, 3, 5, 64, 1021, 4096}
	case wire.PayloadExact8:
		return []int{8}
	default:
		return []int{0}
	}
}

// smallPayloadSize returns one short payload length valid for op, with a
// pad where the opcode allows one.
func smallPayloadSize(op wire.Opcode) int {
	switch op.Info().Payload {
	case wire.PayloadFull, wire.PayloadExact8:
		return 8
	case wire.PayloadLast, wire.PayloadUpToPMTU:
		return 5
	default:
		return 0
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// testEncap4 and testEncap6 are fixed encapsulations with every field
// non-zero, so a field that is dropped or mixed up shows.
func testEncap4() wire.Encap {
	return wire.Encap{
		Src: netip.MustParseAddr("10.77.0.3"), Dst: netip.MustParseAddr("10.77.0.2"),
		SrcPort: 0xC121, DstPort: wire.UDPPort, TrafficClass: 0x6A, HopLimit: 64,
		ID: 0x1234, FragOff: wire.IPv4DF, UDPChecksum: 0xBEEF,
	}
}

func testEncap6() wire.Encap {
	return wire.Encap{
		Src: netip.MustParseAddr("fe80::5054:ff:fe4d:7703"), Dst: netip.MustParseAddr("2001:db8::2"),
		SrcPort: 0xD872, DstPort: wire.UDPPort, TrafficClass: 0xA5, HopLimit: 1,
		FlowLabel: 0xABCDE, UDPChecksum: 0x1357,
	}
}

// randEncap returns a random IPv4 or IPv6 encapsulation whose fields all
// survive a PutHeaders/ParseEncap round trip (no fragment bits).
func randEncap(r *rand.Rand, v6 bool) wire.Encap {
	e := wire.Encap{
		SrcPort: wire.SrcPortBase | uint16(r.IntN(0x4000)), DstPort: wire.UDPPort,
		TrafficClass: uint8(r.Uint32()), HopLimit: uint8(r.Uint32()), UDPChecksum: uint16(r.Uint32()),
	}
	if v6 {
		var s, d [16]byte
		copy(s[:], randBytes(r, 16))
		copy(d[:], randBytes(r, 16))
		s[0], d[0] = 0x20, 0xFE // never IPv4-mapped
		e.Src, e.Dst = netip.AddrFrom16(s), netip.AddrFrom16(d)
		e.FlowLabel = r.Uint32() & 0xFFFFF
	} else {
		e.Src = netip.AddrFrom4([4]byte(randBytes(r, 4)))
		e.Dst = netip.AddrFrom4([4]byte(randBytes(r, 4)))
		e.ID = uint16(r.Uint32())
		e.FragOff = uint16(r.IntN(2)) * wire.IPv4DF
	}
	return e
}

// build returns a complete UDP payload (BTH through ICRC) built by wire.Build.
func build(t testing.TB, e *wire.Encap, h *wire.Headers, payload []byte) []byte {
	t.Helper()
	b := make([]byte, wire.PacketLen(h.BTH.Opcode, len(payload)))
	n, err := wire.Build(b, e, h, payload)
	if err != nil {
		t.Fatalf("Build(%v, %d bytes): %v", h.BTH.Opcode, len(payload), err)
	}
	if n != len(b) {
		t.Fatalf("Build(%v, %d bytes) = %d bytes, want PacketLen %d", h.BTH.Opcode, len(payload), n, len(b))
	}
	return b
}

// datagram returns the IP datagram (IP and UDP headers then pkt) e describes.
func datagram(e *wire.Encap, pkt []byte) []byte {
	d := make([]byte, e.HeaderLen()+len(pkt))
	n := e.PutHeaders(d, len(pkt))
	copy(d[n:], pkt)
	return d
}
