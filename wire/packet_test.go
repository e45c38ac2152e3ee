package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/softnic/softnic/wire"
)

func TestPadForPacketLen(t *testing.T) {
	pads := []int{0, 3, 2, 1, 0, 3, 2, 1, 0}
	for n, want := range pads {
		if got := wire.PadFor(n); got != want {
			t.Errorf("PadFor(%d) = %d, want %d", n, got, want)
		}
	}
	tests := []struct {
		op   wire.Opcode
		n    int
		want int
	}{
		{wire.RCSendOnly, 0, 16},
		{wire.RCSendOnly, 1, 20},
		{wire.RCSendOnly, 64, 80},
		{wire.RCSendLast, 904, 920},
		{wire.RCWriteOnlyImm, 5, 44},
		{wire.RCAck, 0, 20},
		{wire.RCAtomicAck, 0, 28},
		{wire.RCCompareSwap, 0, 44},
		{wire.RCAtomicWrite, 8, 40},
		{wire.UDSendOnly, 512, 536},
		{wire.CNP, 0, 32},
	}
	for _, tt := range tests {
		if got := wire.PacketLen(tt.op, tt.n); got != tt.want {
			t.Errorf("PacketLen(%v, %d) = %d, want %d", tt.op, tt.n, got, tt.want)
		}
	}
}

// checkParsed checks everything Parse should have filled in for a packet
// built from h and payload.
func checkParsed(t *testing.T, pkt []byte, p *wire.Packet, h wire.Headers, payload []byte) {
	t.Helper()
	op := h.BTH.Opcode
	info := op.Info()
	want := h
	want.BTH.Pad = wire.PadFor(len(payload))
	if p.Opcode != op || p.Info != info {
		t.Fatalf("parsed opcode %v (info %p), want %v (info %p)", p.Opcode, p.Info, op, info)
	}
	if got := p.Headers(); got != want {
		t.Errorf("Headers() =\n%+v\nwant\n%+v", got, want)
	}
	if !bytes.Equal(p.Payload, payload) {
		t.Errorf("payload %d bytes % x..., want %d bytes", len(p.Payload), head(p.Payload), len(payload))
	}
	if p.Pad != want.BTH.Pad {
		t.Errorf("Pad %d, want %d", p.Pad, want.BTH.Pad)
	}
	if len(p.Hdr) != info.Length || &p.Hdr[0] != &pkt[0] {
		t.Errorf("Hdr is %d bytes (aliasing %v), want %d bytes of the packet", len(p.Hdr), &p.Hdr[0] == &pkt[0], info.Length)
	}
	if len(p.Raw) != len(pkt) || &p.Raw[0] != &pkt[0] {
		t.Errorf("Raw is not the packet")
	}
	if len(payload) > 0 && &p.Payload[0] != &pkt[info.Length] {
		t.Errorf("Payload does not alias the packet after the headers")
	}
	padStart := info.Length + len(payload)
	if pad := pkt[padStart : padStart+p.Pad]; !bytes.Equal(pad, make([]byte, p.Pad)) {
		t.Errorf("pad bytes % x, want zeros", pad)
	}
	if got := p.PSN(); got != h.BTH.PSN {
		t.Errorf("PSN() = %#x, want %#x", uint32(got), uint32(h.BTH.PSN))
	}
	if got := p.DestQP(); got != h.BTH.DestQP {
		t.Errorf("DestQP() = %#x, want %#x", got, h.BTH.DestQP)
	}
	if got := p.AckReq(); got != h.BTH.AckReq {
		t.Errorf("AckReq() = %v, want %v", got, h.BTH.AckReq)
	}
	if got := p.SE(); got != h.BTH.SE {
		t.Errorf("SE() = %v, want %v", got, h.BTH.SE)
	}
	if p.Mask() != info.Mask || !p.Is(info.Mask) {
		t.Errorf("Mask() = %#x, want %#x", p.Mask(), info.Mask)
	}
	views := map[wire.Header][]byte{
		wire.HdrRDETH: p.RDETH(), wire.HdrDETH: p.DETH(), wire.HdrXRCETH: p.XRCETH(),
		wire.HdrFETH: p.FETH(), wire.HdrRETH: p.RETH(), wire.HdrAtomicETH: p.AtomicETH(),
		wire.HdrAETH: p.AETH(), wire.HdrAtomicAckETH: p.AtomicAckETH(), wire.HdrImmDt: p.ImmDt(),
		wire.HdrIETH: p.IETH(), wire.HdrCNP: p.CNP(),
	}
	for _, hd := range allHeaders {
		v := views[hd]
		if !info.Has(hd) {
			if v != nil {
				t.Errorf("%v view is %d bytes, want nil", hd, len(v))
			}
			continue
		}
		off := int(info.Offset[hd])
		if len(v) != hd.Len() || &v[0] != &pkt[off] {
			t.Errorf("%v view is %d bytes, want %d bytes at offset %d", hd, len(v), hd.Len(), off)
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 8)] }

// TestRoundTrip builds every valid opcode with random, maximal and zero
// header fields and several payload sizes, over IPv4 and IPv6, and parses
// it back.
func TestRoundTrip(t *testing.T) {
	r := newRand(t)
	encaps := map[string]wire.Encap{"IPv4": testEncap4(), "IPv6": testEncap6(),
		"random IPv4": randEncap(r, false), "random IPv6": randEncap(r, true)}
	for _, op := range validOpcodes() {
		for _, n := range payloadSizes(op) {
			variants := map[string]wire.Headers{
				"random": randHeaders(r, op),
				"max":    maxHeaders(op),
				"zero":   {BTH: wire.BTHFields{Opcode: op}},
			}
			for vname, h := range variants {
				for ename, e := range encaps {
					t.Run(fmt.Sprintf("%v/%d/%s/%s", op, n, vname, ename), func(t *testing.T) {
						payload := randBytes(r, n)
						pkt := build(t, &e, &h, payload)
						var p wire.Packet
						if err := wire.Parse(pkt, &p); err != nil {
							t.Fatalf("Parse: %v", err)
						}
						checkParsed(t, pkt, &p, h, payload)
						if err := wire.CheckICRC(&e, pkt); err != nil {
							t.Errorf("CheckICRC: %v", err)
						}
						if got, want := p.ICRC(), wire.ComputeICRC(&e, pkt); got != want {
							t.Errorf("ICRC() = %#08x, want %#08x", got, want)
						}
						// The ICRC binds the encapsulation: another one fails.
						other := testEncap6()
						if e.IsIPv4() == other.IsIPv4() {
							other = testEncap4()
						}
						if err := wire.CheckICRC(&other, pkt); !errors.Is(err, wire.ErrBadICRC) {
							t.Errorf("CheckICRC with the other IP version = %v, want ErrBadICRC", err)
						}
					})
				}
			}
		}
	}
}

// TestFinishMatchesBuild checks that PutHeaders and Finish (the payload
// copied in after the headers) or FinishSplit (the payload left where it
// lies) write the bytes Build writes, whatever the buffer held before:
// the pad count fixed, nothing written past the packet (FinishSplit: past
// its part, the headers, pad and ICRC).
func TestFinishMatchesBuild(t *testing.T) {
	finishers := []struct {
		name string
		// finish completes the packet whose headers are buf[:hn] and
		// returns its bytes and the end of what it wrote in buf.
		finish func(buf []byte, e *wire.Encap, hn int, payload []byte) ([]byte, int, error)
	}{
		{"Finish", func(buf []byte, e *wire.Encap, hn int, payload []byte) ([]byte, int, error) {
			copy(buf[hn:], payload)
			total, err := wire.Finish(buf, e, hn, len(payload))
			return buf[:total], total, err
		}},
		{"FinishSplit", func(buf []byte, e *wire.Encap, hn int, payload []byte) ([]byte, int, error) {
			k, err := wire.FinishSplit(buf, e, hn, payload)
			return slices.Concat(buf[:hn], payload, buf[hn:k]), k, err
		}},
	}
	r := newRand(t)
	for _, op := range validOpcodes() {
		for _, n := range payloadSizes(op) {
			for _, e := range []wire.Encap{testEncap4(), testEncap6()} {
				h := randHeaders(r, op)
				payload := randBytes(r, n)
				want := build(t, &e, &h, payload)
				for _, f := range finishers {
					buf := filled(len(want)+7, 0xA5) // stale bytes where the pad goes
					h.BTH.Pad = 3 - wire.PadFor(n)   // a wrong pad Finish must fix
					hn, err := wire.PutHeaders(buf, &h)
					if err != nil || hn != op.Info().Length {
						t.Fatalf("%v: PutHeaders = %d, %v; want %d, nil", op, hn, err, op.Info().Length)
					}
					got, end, err := f.finish(buf, &e, hn, payload)
					if err != nil || len(got) != len(want) {
						t.Fatalf("%v/%d: %s = %d bytes, %v; want %d, nil", op, n, f.name, len(got), err, len(want))
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%v/%d: %s wrote\n% x\nBuild wrote\n% x", op, n, f.name, got, want)
					}
					if !bytes.Equal(buf[end:], filled(len(buf)-end, 0xA5)) {
						t.Errorf("%v/%d: %s wrote past the packet: % x", op, n, f.name, buf[end:])
					}
				}
			}
		}
	}
}

// FinishSplit refuses a buffer with no room for the pad and ICRC, or
// headers shorter than a BTH, as Finish does.
func TestFinishSplitTruncated(t *testing.T) {
	e := testEncap4()
	if _, err := wire.FinishSplit(make([]byte, wire.BTHLen+wire.ICRCLen), &e, wire.BTHLen, make([]byte, 3)); !errors.Is(err, wire.ErrTruncated) {
		t.Errorf("no room for the pad: %v, want ErrTruncated", err)
	}
	if _, err := wire.FinishSplit(make([]byte, 64), &e, wire.BTHLen-1, nil); !errors.Is(err, wire.ErrTruncated) {
		t.Errorf("headers shorter than a BTH: %v, want ErrTruncated", err)
	}
}

// TestBuildIntoLargerBuffer checks Build writes only PacketLen bytes.
func TestBuildIntoLargerBuffer(t *testing.T) {
	e := testEncap4()
	h := maxHeaders(wire.RCSendOnlyImm)
	payload := []byte{1, 2, 3, 4, 5}
	want := build(t, &e, &h, payload)
	buf := filled(len(want)+16, 0xEE)
	n, err := wire.Build(buf, &e, &h, payload)
	if err != nil || n != len(want) {
		t.Fatalf("Build = %d, %v; want %d, nil", n, err, len(want))
	}
	if !bytes.Equal(buf[:n], want) || !bytes.Equal(buf[n:], filled(16, 0xEE)) {
		t.Errorf("Build into a larger buffer wrote % x, want % x then untouched bytes", buf, want)
	}
}

func TestBuildErrors(t *testing.T) {
	e := testEncap4()
	payload := make([]byte, 5)
	for _, op := range validOpcodes() {
		h := maxHeaders(op)
		need := wire.PacketLen(op, len(payload))
		for _, size := range []int{0, wire.BTHLen - 1, op.Info().Length - 1, op.Info().Length, need - 1} {
			if size < 0 {
				continue
			}
			_, err := wire.Build(make([]byte, size), &e, &h, payload)
			if !errors.Is(err, wire.ErrTruncated) {
				t.Errorf("%v: Build into %d of %d bytes: %v, want ErrTruncated", op, size, need, err)
			}
		}
		if size := op.Info().Length - 1; size >= 0 {
			if _, err := wire.PutHeaders(make([]byte, size), &h); !errors.Is(err, wire.ErrTruncated) {
				t.Errorf("%v: PutHeaders into %d bytes: %v, want ErrTruncated", op, size, err)
			}
		}
		if _, err := wire.Finish(make([]byte, need-1), &e, op.Info().Length, len(payload)); !errors.Is(err, wire.ErrTruncated) {
			t.Errorf("%v: Finish into %d of %d bytes: %v, want ErrTruncated", op, need-1, need, err)
		}
	}
	for i := range 256 {
		op := wire.Opcode(i)
		if op.Valid() {
			continue
		}
		h := wire.Headers{BTH: wire.BTHFields{Opcode: op}}
		buf := make([]byte, 256)
		if _, err := wire.Build(buf, &e, &h, nil); !errors.Is(err, wire.ErrUnknownOpcode) {
			t.Errorf("Build(0x%02X) = %v, want ErrUnknownOpcode", i, err)
		}
		if _, err := wire.PutHeaders(buf, &h); !errors.Is(err, wire.ErrUnknownOpcode) {
			t.Errorf("PutHeaders(0x%02X) = %v, want ErrUnknownOpcode", i, err)
		}
	}
	if _, err := wire.Finish(make([]byte, 64), &e, wire.BTHLen-1, 0); !errors.Is(err, wire.ErrTruncated) {
		t.Errorf("Finish with an 11-byte header: %v, want ErrTruncated", err)
	}
}

// malformed is one packet Parse must refuse.
type malformed struct {
	name string
	pkt  []byte
	want error // the specific sentinel
}

// malformedPackets returns the table of packets Parse must refuse.
func malformedPackets(t *testing.T) []malformed {
	e := testEncap4()
	mk := func(op wire.Opcode, n int) []byte {
		h := maxHeaders(op)
		return build(t, &e, &h, make([]byte, n))
	}
	var ms []malformed
	add := func(name string, pkt []byte, want error) {
		ms = append(ms, malformed{name, pkt, want})
	}

	// Every length short of the opcode's headers and ICRC.
	for _, op := range validOpcodes() {
		pkt := mk(op, smallPayloadSize(op))
		for l := 0; l <= op.Info().Length+3; l++ {
			add(fmt.Sprintf("%v truncated to %d", op, l), pkt[:l], wire.ErrTruncated)
		}
	}

	// Lengths that are not a multiple of 4.
	for _, op := range []wire.Opcode{wire.RCSendOnly, wire.RCWriteOnlyImm, wire.UDSendOnly, wire.RCAck} {
		pkt := mk(op, smallPayloadSize(op))
		for extra := 1; extra <= 3; extra++ {
			add(fmt.Sprintf("%v plus %d bytes", op, extra), append(bytes.Clone(pkt), make([]byte, extra)...), wire.ErrBadLength)
			if len(pkt)-extra >= op.Info().Length+wire.ICRCLen {
				add(fmt.Sprintf("%v minus %d bytes", op, extra), pkt[:len(pkt)-extra], wire.ErrBadLength)
			}
		}
	}

	// Pad count larger than what follows the headers.
	for _, c := range []struct {
		op     wire.Opcode
		n, pad int
	}{
		{wire.RCSendOnly, 0, 1}, {wire.RCSendOnly, 0, 3}, {wire.UDSendOnlyImm, 0, 2},
		{wire.RCReadResponseOnly, 0, 3}, {wire.RCWriteOnly, 0, 1},
	} {
		pkt := mk(c.op, c.n)
		wire.BTH(pkt).SetPad(c.pad)
		add(fmt.Sprintf("%v pad %d with %d bytes", c.op, c.pad, c.n), pkt, wire.ErrBadPad)
	}

	// Payload on opcodes that carry none.
	for _, op := range []wire.Opcode{wire.RCAck, wire.RCAtomicAck, wire.RCReadRequest, wire.RCCompareSwap,
		wire.RCFetchAdd, wire.RCFlush, wire.CNP, wire.ClassXRC | 0x0C, wire.ClassRD | 0x11, wire.ClassRD | 0x15} {
		for _, n := range []int{1, 4, 8} {
			add(fmt.Sprintf("%v with %d payload bytes", op, n), mk(op, n), wire.ErrBadLength)
		}
	}

	// ATOMIC WRITE carries exactly 8 bytes.
	for _, n := range []int{0, 1, 4, 5, 7, 9, 12, 16} {
		add(fmt.Sprintf("RC_ATOMIC_WRITE with %d bytes", n), mk(wire.RCAtomicWrite, n), wire.ErrBadLength)
		add(fmt.Sprintf("XRC_ATOMIC_WRITE with %d bytes", n), mk(wire.ClassXRC|0x1D, n), wire.ErrBadLength)
	}

	// FIRST and MIDDLE packets are whole PMTUs: no pad.
	for _, op := range []wire.Opcode{wire.RCSendFirst, wire.RCSendMiddle, wire.RCWriteFirst, wire.RCWriteMiddle,
		wire.RCReadResponseFirst, wire.RCReadResponseMiddle, wire.UCSendFirst, wire.UCWriteMiddle} {
		for _, n := range []int{1, 1021, 1022, 1023} {
			add(fmt.Sprintf("%v with %d bytes (pad %d)", op, n, wire.PadFor(n)), mk(op, n), wire.ErrBadPad)
		}
	}

	// Reserved opcodes, with a plausible body.
	for i := range 256 {
		op := wire.Opcode(i)
		if op.Valid() {
			continue
		}
		pkt := make([]byte, 64)
		wire.BTH(pkt).Encode(&wire.BTHFields{Opcode: op, PKey: 0xFFFF, DestQP: 0x11})
		wire.SetICRC(&e, pkt)
		add(fmt.Sprintf("opcode 0x%02X", i), pkt, wire.ErrUnknownOpcode)
	}

	// Transport versions other than 0.
	for v := uint8(1); v < 16; v++ {
		pkt := mk(wire.RCSendOnly, 4)
		pkt[1] |= v
		add(fmt.Sprintf("TVer %d", v), pkt, wire.ErrBadVersion)
	}
	return ms
}

func TestParseMalformed(t *testing.T) {
	for _, m := range malformedPackets(t) {
		var p wire.Packet
		err := wire.Parse(m.pkt, &p)
		if !errors.Is(err, wire.ErrMalformed) || !errors.Is(err, m.want) {
			t.Errorf("%s: Parse = %v, want %v", m.name, err, m.want)
		}
		if p.Info != nil || p.Raw != nil || p.Hdr != nil || p.Payload != nil || p.Opcode != 0 || p.Pad != 0 {
			t.Errorf("%s: Parse filled the packet on error: %+v", m.name, p)
		}
	}
}

// TestParseUnknownOpcodes spells out the reserved opcodes the brief names,
// so the table cannot silently gain them.
func TestParseUnknownOpcodes(t *testing.T) {
	var ops []wire.Opcode
	ops = append(ops, 0x15, 0x18, 0x19, 0x1A, 0x1B, 0x1E, 0x1F)
	for op := wire.Opcode(0x2C); op < 0x40; op++ {
		ops = append(ops, op)
	}
	for op := wire.Opcode(0x56); op < 0x64; op++ {
		ops = append(ops, op)
	}
	for op := 0x66; op <= 0x80; op++ {
		ops = append(ops, wire.Opcode(op))
	}
	ops = append(ops, 0x82, 0x9F, 0xB5, 0xB8, 0xBB, 0xBE, 0xC0, 0xFF)
	e := testEncap4()
	for _, op := range ops {
		pkt := make([]byte, 32)
		wire.BTH(pkt).Encode(&wire.BTHFields{Opcode: op})
		wire.SetICRC(&e, pkt)
		var p wire.Packet
		err := wire.Parse(pkt, &p)
		if !errors.Is(err, wire.ErrUnknownOpcode) || !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("Parse(opcode 0x%02X) = %v, want ErrUnknownOpcode", uint8(op), err)
		}
	}
}

// TestParseAccepts lists edge cases Parse must accept: rules it leaves to
// CheckPMTU or to the QP, and garbage in fields it does not interpret.
func TestParseAccepts(t *testing.T) {
	e := testEncap4()
	tests := []struct {
		name string
		op   wire.Opcode
		n    int
		mod  func(pkt []byte)
	}{
		{"empty SEND_LAST (CheckPMTU's job)", wire.RCSendLast, 0, nil},
		{"empty SEND_FIRST (CheckPMTU's job)", wire.RCSendFirst, 0, nil},
		{"oversized ONLY (CheckPMTU's job)", wire.RCSendOnly, 8192, nil},
		{"ATOMIC_WRITE with 8 bytes", wire.RCAtomicWrite, 8, nil},
		{"bad ICRC (CheckICRC's job)", wire.RCSendOnly, 4, func(p []byte) { p[len(p)-1] ^= 1 }},
		{"non-zero pad bytes", wire.RCSendOnly, 1, func(p []byte) { p[wire.BTHLen+1] = 0xFF }},
		{"reserved bits set", wire.UDSendOnly, 0, func(p []byte) { p[4] |= 0x3F; p[8] |= 0x7F; p[16] = 0xFF }},
		{"DestQP 0 (the QP's job)", wire.RCAck, 0, func(p []byte) { wire.BTH(p).SetDestQP(0) }},
	}
	for _, tt := range tests {
		h := maxHeaders(tt.op)
		pkt := build(t, &e, &h, make([]byte, tt.n))
		if tt.mod != nil {
			tt.mod(pkt)
		}
		var p wire.Packet
		if err := wire.Parse(pkt, &p); err != nil {
			t.Errorf("%s: Parse = %v, want nil", tt.name, err)
		} else if len(p.Payload) != tt.n {
			t.Errorf("%s: payload %d bytes, want %d", tt.name, len(p.Payload), tt.n)
		}
	}
}

func TestCheckPMTU(t *testing.T) {
	e := testEncap4()
	for _, pmtu := range []int{256, 1024, 4096} {
		tests := []struct {
			op wire.Opcode
			n  int
			ok bool
		}{
			{wire.RCSendFirst, 0, false},
			{wire.RCSendFirst, pmtu - 4, false},
			{wire.RCSendFirst, pmtu, true},
			{wire.RCSendFirst, pmtu + 4, false},
			{wire.RCWriteMiddle, pmtu - 4, false},
			{wire.RCWriteMiddle, pmtu, true},
			{wire.RCWriteMiddle, 2 * pmtu, false},
			{wire.RCReadResponseFirst, pmtu, true},
			{wire.UCSendMiddle, pmtu + 4, false},
			{wire.RCSendLast, 0, false},
			{wire.RCSendLast, 1, true},
			{wire.RCSendLast, pmtu - 1, true},
			{wire.RCSendLast, pmtu, true},
			{wire.RCSendLast, pmtu + 1, false},
			{wire.RCReadResponseLast, pmtu + 4, false},
			{wire.UCWriteLastImm, 0, false},
			{wire.RCSendOnly, 0, true},
			{wire.RCSendOnly, 1, true},
			{wire.RCSendOnly, pmtu, true},
			{wire.RCSendOnly, pmtu + 1, false},
			{wire.RCWriteOnlyImm, pmtu + 4, false},
			{wire.RCReadResponseOnly, 0, true},
			{wire.UDSendOnly, pmtu, true},
			{wire.UDSendOnlyImm, pmtu + 1, false},
			{wire.RCAck, 0, true},
			{wire.RCCompareSwap, 0, true},
			{wire.RCAtomicWrite, 8, true},
			{wire.CNP, 0, true},
		}
		for _, tt := range tests {
			h := maxHeaders(tt.op)
			pkt := build(t, &e, &h, make([]byte, tt.n))
			var p wire.Packet
			if err := wire.Parse(pkt, &p); err != nil {
				t.Fatalf("%v with %d bytes: Parse: %v", tt.op, tt.n, err)
			}
			err := p.CheckPMTU(pmtu)
			if tt.ok && err != nil {
				t.Errorf("%v with %d bytes, PMTU %d: CheckPMTU = %v, want nil", tt.op, tt.n, pmtu, err)
			}
			if !tt.ok && (!errors.Is(err, wire.ErrBadLength) || !errors.Is(err, wire.ErrMalformed)) {
				t.Errorf("%v with %d bytes, PMTU %d: CheckPMTU = %v, want ErrBadLength", tt.op, tt.n, pmtu, err)
			}
		}
	}
}
