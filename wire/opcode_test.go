package wire_test

import (
	"strings"
	"testing"

	"github.com/softnic/softnic/wire"
)

// wantValid is the set of defined opcodes, written out independently of
// the table (IBTA Table 38; ib_pack.h; RoCEv2 A17.9.3 for the CNP).
func wantValid(op wire.Opcode) bool {
	o := op & 0x1F
	switch op & 0xE0 {
	case 0x00, 0xA0: // RC, XRC
		return o <= 0x14 || o == 0x16 || o == 0x17 || o == 0x1C || o == 0x1D
	case 0x20: // UC
		return o <= 0x0B
	case 0x40: // RD: SEND..FETCH_ADD and RESYNC
		return o <= 0x15
	case 0x60: // UD
		return o == 0x04 || o == 0x05
	case 0x80:
		return op == 0x81
	}
	return false
}

func TestOpcodeValidSet(t *testing.T) {
	for i := range 256 {
		op := wire.Opcode(i)
		if got, want := op.Valid(), wantValid(op); got != want {
			t.Errorf("Opcode(0x%02X).Valid() = %v, want %v", i, got, want)
		}
		if !op.Valid() {
			info := op.Info()
			if info.Name != "" || info.Mask != 0 || info.Length != 0 {
				t.Errorf("reserved opcode 0x%02X has a table row %+v", i, *info)
			}
			if got, want := op.String(), "OPCODE_0x"+strings.ToUpper(hex2(uint8(i))); got != want {
				t.Errorf("Opcode(0x%02X).String() = %q, want %q", i, got, want)
			}
		}
	}
	if got, want := len(validOpcodes()), 25+12+22+2+1+25; got != want {
		t.Errorf("got %d valid opcodes, want %d", got, want)
	}
}

func hex2(v uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>4], digits[v&15]})
}

// TestOpcodeOffsets checks rxe_opcode.c's invariant: each present header
// starts where the previous one ends, in wire order, and Length is the end
// of the last one.
func TestOpcodeOffsets(t *testing.T) {
	for _, op := range validOpcodes() {
		info := op.Info()
		off := wire.BTHLen
		for _, h := range allHeaders {
			if !info.Has(h) {
				continue
			}
			if got := int(info.Offset[h]); got != off {
				t.Errorf("%v: %v offset %d, want %d", op, h, got, off)
			}
			off += h.Len()
		}
		if info.Length != off {
			t.Errorf("%v: Length %d, want %d", op, info.Length, off)
		}
		if info.Length%4 != 0 {
			t.Errorf("%v: Length %d is not a multiple of 4", op, info.Length)
		}
	}
}

func TestOpcodeNamesUnique(t *testing.T) {
	seen := map[string]wire.Opcode{}
	prefix := map[wire.Opcode]string{
		wire.ClassRC: "RC_", wire.ClassUC: "UC_", wire.ClassRD: "RD_", wire.ClassUD: "UD_",
		wire.ClassXRC: "XRC_", wire.ClassCNP: "CNP",
	}
	for _, op := range validOpcodes() {
		name := op.String()
		if name != op.Info().Name {
			t.Errorf("%v: String() %q, Info().Name %q", op, name, op.Info().Name)
		}
		if prev, ok := seen[name]; ok {
			t.Errorf("name %q used by 0x%02X and 0x%02X", name, uint8(prev), uint8(op))
		}
		seen[name] = op
		if p := prefix[op.Class()]; !strings.HasPrefix(name, p) {
			t.Errorf("0x%02X: name %q, want prefix %q", uint8(op), name, p)
		}
	}
}

// TestOpcodeHeaderLengths checks header lengths against rxe-interop-facts.md
// §2.5 (rxe_opcode.c) and the named opcode constants against ib_pack.h.
func TestOpcodeHeaderLengths(t *testing.T) {
	tests := []struct {
		op    wire.Opcode
		value uint8
		name  string
		len   int
	}{
		{wire.RCSendFirst, 0x00, "RC_SEND_FIRST", 12},
		{wire.RCSendMiddle, 0x01, "RC_SEND_MIDDLE", 12},
		{wire.RCSendLast, 0x02, "RC_SEND_LAST", 12},
		{wire.RCSendLastImm, 0x03, "RC_SEND_LAST_WITH_IMMEDIATE", 16},
		{wire.RCSendOnly, 0x04, "RC_SEND_ONLY", 12},
		{wire.RCSendOnlyImm, 0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", 16},
		{wire.RCWriteFirst, 0x06, "RC_RDMA_WRITE_FIRST", 28},
		{wire.RCWriteMiddle, 0x07, "RC_RDMA_WRITE_MIDDLE", 12},
		{wire.RCWriteLast, 0x08, "RC_RDMA_WRITE_LAST", 12},
		{wire.RCWriteLastImm, 0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 16},
		{wire.RCWriteOnly, 0x0A, "RC_RDMA_WRITE_ONLY", 28},
		{wire.RCWriteOnlyImm, 0x0B, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32},
		{wire.RCReadRequest, 0x0C, "RC_RDMA_READ_REQUEST", 28},
		{wire.RCReadResponseFirst, 0x0D, "RC_RDMA_READ_RESPONSE_FIRST", 16},
		{wire.RCReadResponseMiddle, 0x0E, "RC_RDMA_READ_RESPONSE_MIDDLE", 12},
		{wire.RCReadResponseLast, 0x0F, "RC_RDMA_READ_RESPONSE_LAST", 16},
		{wire.RCReadResponseOnly, 0x10, "RC_RDMA_READ_RESPONSE_ONLY", 16},
		{wire.RCAck, 0x11, "RC_ACKNOWLEDGE", 16},
		{wire.RCAtomicAck, 0x12, "RC_ATOMIC_ACKNOWLEDGE", 24},
		{wire.RCCompareSwap, 0x13, "RC_COMPARE_SWAP", 40},
		{wire.RCFetchAdd, 0x14, "RC_FETCH_ADD", 40},
		{wire.RCSendLastInv, 0x16, "RC_SEND_LAST_WITH_INVALIDATE", 16},
		{wire.RCSendOnlyInv, 0x17, "RC_SEND_ONLY_WITH_INVALIDATE", 16},
		{wire.RCFlush, 0x1C, "RC_FLUSH", 32},
		{wire.RCAtomicWrite, 0x1D, "RC_ATOMIC_WRITE", 28},
		{wire.UCSendFirst, 0x20, "UC_SEND_FIRST", 12},
		{wire.UCSendMiddle, 0x21, "UC_SEND_MIDDLE", 12},
		{wire.UCSendLast, 0x22, "UC_SEND_LAST", 12},
		{wire.UCSendLastImm, 0x23, "UC_SEND_LAST_WITH_IMMEDIATE", 16},
		{wire.UCSendOnly, 0x24, "UC_SEND_ONLY", 12},
		{wire.UCSendOnlyImm, 0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", 16},
		{wire.UCWriteFirst, 0x26, "UC_RDMA_WRITE_FIRST", 28},
		{wire.UCWriteMiddle, 0x27, "UC_RDMA_WRITE_MIDDLE", 12},
		{wire.UCWriteLast, 0x28, "UC_RDMA_WRITE_LAST", 12},
		{wire.UCWriteLastImm, 0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 16},
		{wire.UCWriteOnly, 0x2A, "UC_RDMA_WRITE_ONLY", 28},
		{wire.UCWriteOnlyImm, 0x2B, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32},
		{wire.UDSendOnly, 0x64, "UD_SEND_ONLY", 20},
		{wire.UDSendOnlyImm, 0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", 24},
		{wire.CNP, 0x81, "CNP", 28},
	}
	for _, tt := range tests {
		if got := uint8(tt.op); got != tt.value {
			t.Errorf("%s = 0x%02X, want 0x%02X", tt.name, got, tt.value)
		}
		if got := tt.op.String(); got != tt.name {
			t.Errorf("Opcode(0x%02X).String() = %q, want %q", tt.value, got, tt.name)
		}
		if got := tt.op.Info().Length; got != tt.len {
			t.Errorf("%s: header length %d, want %d", tt.name, got, tt.len)
		}
	}
}

func TestHeaderConstants(t *testing.T) {
	tests := []struct {
		h    wire.Header
		bit  wire.Mask
		len  int
		name string
	}{
		{wire.HdrRDETH, wire.HasRDETH, 4, "RDETH"},
		{wire.HdrDETH, wire.HasDETH, 8, "DETH"},
		{wire.HdrXRCETH, wire.HasXRCETH, 4, "XRCETH"},
		{wire.HdrFETH, wire.HasFETH, 4, "FETH"},
		{wire.HdrRETH, wire.HasRETH, 16, "RETH"},
		{wire.HdrAtomicETH, wire.HasAtomicETH, 28, "AtomicETH"},
		{wire.HdrAETH, wire.HasAETH, 4, "AETH"},
		{wire.HdrAtomicAckETH, wire.HasAtomicAckETH, 8, "AtomicAckETH"},
		{wire.HdrImmDt, wire.HasImmDt, 4, "ImmDt"},
		{wire.HdrIETH, wire.HasIETH, 4, "IETH"},
		{wire.HdrCNP, wire.HasCNP, 16, "CNP"},
	}
	if len(tests) != len(allHeaders) {
		t.Fatalf("got %d header cases, want %d", len(tests), len(allHeaders))
	}
	for i, tt := range tests {
		if tt.h != allHeaders[i] {
			t.Errorf("header %d is %v, want %v (wire order)", i, allHeaders[i], tt.h)
		}
		if got := tt.h.Bit(); got != tt.bit {
			t.Errorf("%v.Bit() = %#x, want %#x", tt.h, got, tt.bit)
		}
		if got := tt.h.Len(); got != tt.len {
			t.Errorf("%v.Len() = %d, want %d", tt.h, got, tt.len)
		}
		if got := tt.h.String(); got != tt.name {
			t.Errorf("Header(%d).String() = %q, want %q", uint8(tt.h), got, tt.name)
		}
	}
	if got, want := wire.Header(200).String(), "Header(200)"; got != want {
		t.Errorf("Header(200).String() = %q, want %q", got, want)
	}
	if wire.BTHLen != 12 || wire.ICRCLen != 4 {
		t.Errorf("BTHLen %d, ICRCLen %d, want 12, 4", wire.BTHLen, wire.ICRCLen)
	}
}

// headersOf lists op's extension headers in wire order.
func headersOf(op wire.Opcode) []wire.Header {
	var hs []wire.Header
	for _, h := range allHeaders {
		if op.Info().Has(h) {
			hs = append(hs, h)
		}
	}
	return hs
}

func sameHeaders(a, b []wire.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOpcodeHeaderOrder checks the header lists (and so their order) of
// the opcodes whose order matters (IBTA 9.3; rxe-interop-facts.md §2.5).
func TestOpcodeHeaderOrder(t *testing.T) {
	H := func(hs ...wire.Header) []wire.Header { return hs }
	tests := []struct {
		op   wire.Opcode
		want []wire.Header
	}{
		{wire.RCSendOnly, nil},
		{wire.RCWriteOnlyImm, H(wire.HdrRETH, wire.HdrImmDt)},
		{wire.UCWriteOnlyImm, H(wire.HdrRETH, wire.HdrImmDt)},
		{wire.RCAtomicAck, H(wire.HdrAETH, wire.HdrAtomicAckETH)},
		{wire.RCFlush, H(wire.HdrFETH, wire.HdrRETH)},
		{wire.RCAtomicWrite, H(wire.HdrRETH)},
		{wire.RCCompareSwap, H(wire.HdrAtomicETH)},
		{wire.RCFetchAdd, H(wire.HdrAtomicETH)},
		{wire.RCReadRequest, H(wire.HdrRETH)},
		{wire.RCReadResponseFirst, H(wire.HdrAETH)},
		{wire.RCReadResponseMiddle, nil},
		{wire.RCSendOnlyInv, H(wire.HdrIETH)},
		{wire.UDSendOnly, H(wire.HdrDETH)},
		{wire.UDSendOnlyImm, H(wire.HdrDETH, wire.HdrImmDt)},
		{wire.CNP, H(wire.HdrCNP)},
		{wire.ClassXRC | 0x0B, H(wire.HdrXRCETH, wire.HdrRETH, wire.HdrImmDt)},
		{wire.ClassXRC | 0x13, H(wire.HdrXRCETH, wire.HdrAtomicETH)},
		{wire.ClassXRC | 0x1C, H(wire.HdrXRCETH, wire.HdrFETH, wire.HdrRETH)},
		{wire.ClassXRC | 0x12, H(wire.HdrAETH, wire.HdrAtomicAckETH)},
		{wire.ClassRD | 0x05, H(wire.HdrRDETH, wire.HdrDETH, wire.HdrImmDt)},
		{wire.ClassRD | 0x0B, H(wire.HdrRDETH, wire.HdrDETH, wire.HdrRETH, wire.HdrImmDt)},
		{wire.ClassRD | 0x14, H(wire.HdrRDETH, wire.HdrDETH, wire.HdrAtomicETH)},
		{wire.ClassRD | 0x0F, H(wire.HdrRDETH, wire.HdrAETH)},
		{wire.ClassRD | 0x12, H(wire.HdrRDETH, wire.HdrAETH, wire.HdrAtomicAckETH)},
		{wire.ClassRD | 0x15, H(wire.HdrRDETH, wire.HdrDETH)},
	}
	for _, tt := range tests {
		if got := headersOf(tt.op); !sameHeaders(got, tt.want) {
			t.Errorf("%v headers %v, want %v", tt.op, got, tt.want)
		}
	}
}

// kind classifies an opcode name by its position in a message.
func kind(name string) string {
	for _, k := range []string{"FIRST", "MIDDLE", "LAST", "ONLY"} {
		if strings.Contains(name, "_"+k) {
			return k
		}
	}
	return ""
}

// TestOpcodeClassRules checks the per-class rules of IBTA Table 38 and
// 9.3 against every row, and that each row's semantics bits agree with
// its headers, payload rule and name.
func TestOpcodeClassRules(t *testing.T) {
	for _, op := range validOpcodes() {
		info := op.Info()
		m := info.Mask
		has := func(h wire.Header) bool { return info.Has(h) }
		errorf := func(format string, args ...any) {
			t.Helper()
			t.Errorf("%v (0x%02X): "+format, append([]any{op, uint8(op)}, args...)...)
		}

		if op.Class()|op.Op() != op || op.Op() > 0x1F || op.Class()&0x1F != 0 {
			errorf("Class 0x%02X, Op 0x%02X do not split the opcode", uint8(op.Class()), uint8(op.Op()))
		}
		if op.Mask() != m {
			errorf("Mask() %#x, Info().Mask %#x", op.Mask(), m)
		}
		if !op.Is(m) || (m != 0 && op.Is(m|wire.MaskCNP|wire.MaskRequest|wire.MaskResponse)) {
			errorf("Is is not a subset test")
		}

		req, resp := m&wire.MaskRequest != 0, m&wire.MaskResponse != 0
		if op == wire.CNP {
			if req || resp || m&wire.MaskCNP == 0 || !has(wire.HdrCNP) || info.Payload != wire.PayloadCNP {
				errorf("CNP row %+v", *info)
			}
			continue
		}
		if req == resp {
			errorf("request %v, response %v: want exactly one", req, resp)
		}
		if has(wire.HdrCNP) || m&wire.MaskCNP != 0 {
			errorf("non-CNP opcode has CNP bits")
		}

		// Semantics bits that mirror a header.
		if got, want := m&wire.MaskImmediate != 0, has(wire.HdrImmDt); got != want {
			errorf("MaskImmediate %v, ImmDt %v", got, want)
		}
		if got, want := m&wire.MaskInvalidate != 0, has(wire.HdrIETH); got != want {
			errorf("MaskInvalidate %v, IETH %v", got, want)
		}
		if got, want := m&wire.MaskAtomic != 0 && req, has(wire.HdrAtomicETH); got != want {
			errorf("atomic request %v, AtomicETH %v", got, want)
		}
		if got, want := m&wire.MaskAtomic != 0 && resp, has(wire.HdrAtomicAckETH); got != want {
			errorf("atomic response %v, AtomicAckETH %v", got, want)
		}
		if got, want := m&wire.MaskFlush != 0, has(wire.HdrFETH); got != want {
			errorf("MaskFlush %v, FETH %v", got, want)
		}
		if m&wire.MaskAck != 0 && (!resp || !has(wire.HdrAETH)) {
			errorf("ACK without AETH or not a response")
		}

		// Payload rule, payload bit and message position agree with the name.
		if got, want := m&wire.MaskPayload != 0, info.Payload != wire.PayloadNone; got != want {
			errorf("MaskPayload %v, payload rule %d", got, info.Payload)
		}
		start, middle, end := m&wire.MaskStart != 0, m&wire.MaskMiddle != 0, m&wire.MaskEnd != 0
		switch k := kind(info.Name); k {
		case "FIRST":
			if !start || middle || end || info.Payload != wire.PayloadFull {
				errorf("FIRST: start %v middle %v end %v payload %d", start, middle, end, info.Payload)
			}
		case "MIDDLE":
			if start || !middle || end || info.Payload != wire.PayloadFull {
				errorf("MIDDLE: start %v middle %v end %v payload %d", start, middle, end, info.Payload)
			}
		case "LAST":
			if start || middle || !end || info.Payload != wire.PayloadLast {
				errorf("LAST: start %v middle %v end %v payload %d", start, middle, end, info.Payload)
			}
		case "ONLY":
			if !start || middle || !end || info.Payload != wire.PayloadUpToPMTU {
				errorf("ONLY: start %v middle %v end %v payload %d", start, middle, end, info.Payload)
			}
		default: // single-packet operations
			if !start || middle || !end {
				errorf("single packet: start %v middle %v end %v", start, middle, end)
			}
			want := wire.PayloadNone
			if m&wire.MaskAtomicWrite != 0 {
				want = wire.PayloadExact8
			}
			if info.Payload != want {
				errorf("payload rule %d, want %d", info.Payload, want)
			}
		}

		// Exactly one operation family.
		fam := 0
		for _, f := range []wire.Mask{wire.MaskSend, wire.MaskWrite, wire.MaskRead, wire.MaskAtomic, wire.MaskAtomicWrite, wire.MaskFlush} {
			if m&f != 0 {
				fam++
			}
		}
		if want := 1; fam != want && m&wire.MaskAck == 0 && !strings.HasSuffix(info.Name, "RESYNC") {
			errorf("%d operation families, want %d", fam, want)
		}

		// Class rules.
		rcInfo := (wire.ClassRC | op.Op()).Info()
		switch op.Class() {
		case wire.ClassRC:
			if has(wire.HdrRDETH) || has(wire.HdrDETH) || has(wire.HdrXRCETH) {
				errorf("RC opcode with a datagram or XRC header")
			}
		case wire.ClassUC:
			if m&(wire.MaskRead|wire.MaskAtomic|wire.MaskAck|wire.MaskResponse|wire.MaskFlush|wire.MaskAtomicWrite) != 0 {
				errorf("UC opcode with READ/atomic/ACK/response bits")
			}
			if m != rcInfo.Mask || info.Length != rcInfo.Length || info.Payload != rcInfo.Payload {
				errorf("differs from its RC twin %v", wire.ClassRC|op.Op())
			}
		case wire.ClassUD:
			if op != wire.UDSendOnly && op != wire.UDSendOnlyImm {
				errorf("UD opcode other than SEND_ONLY(+IMM)")
			}
			if !has(wire.HdrDETH) || info.Offset[wire.HdrDETH] != wire.BTHLen {
				errorf("UD opcode without a DETH right after the BTH")
			}
			if m&^wire.HasDETH != rcInfo.Mask {
				errorf("mask %#x differs from RC twin's %#x beyond the DETH", m, rcInfo.Mask)
			}
		case wire.ClassRD:
			if !has(wire.HdrRDETH) || info.Offset[wire.HdrRDETH] != wire.BTHLen {
				errorf("RD opcode without an RDETH right after the BTH")
			}
			if got := has(wire.HdrDETH); got != req {
				errorf("RD DETH %v, request %v", got, req)
			}
			if req && info.Offset[wire.HdrDETH] != wire.BTHLen+wire.RDETHLen {
				errorf("RD request DETH at %d, want %d", info.Offset[wire.HdrDETH], wire.BTHLen+wire.RDETHLen)
			}
			if op.Op() <= 0x14 {
				extra := wire.RDETHLen
				if req {
					extra += wire.DETHLen
				}
				if info.Length != rcInfo.Length+extra {
					errorf("length %d, want RC %d + %d", info.Length, rcInfo.Length, extra)
				}
			}
		case wire.ClassXRC:
			if got := has(wire.HdrXRCETH); got != req {
				errorf("XRC XRCETH %v, request %v", got, req)
			}
			if req && info.Offset[wire.HdrXRCETH] != wire.BTHLen {
				errorf("XRCETH at %d, want %d", info.Offset[wire.HdrXRCETH], wire.BTHLen)
			}
			if m&^wire.HasXRCETH != rcInfo.Mask {
				errorf("mask %#x differs from RC twin's %#x beyond the XRCETH", m, rcInfo.Mask)
			}
		default:
			errorf("unexpected class 0x%02X", uint8(op.Class()))
		}
	}
}

// TestOpcodeSemantics spot-checks the rxe_opcode.c masks the engine routes on.
func TestOpcodeSemantics(t *testing.T) {
	tests := []struct {
		op      wire.Opcode
		is, not wire.Mask
	}{
		{wire.RCSendFirst, wire.MaskRequest | wire.MaskSend | wire.MaskStart | wire.MaskRecvWQE, wire.MaskComplete | wire.MaskEnd},
		{wire.RCSendMiddle, wire.MaskRecvWQE | wire.MaskMiddle, wire.MaskSolicited | wire.MaskComplete},
		{wire.RCSendOnly, wire.MaskRecvWQE | wire.MaskComplete | wire.MaskSolicited | wire.MaskStart | wire.MaskEnd, wire.MaskImmediate},
		{wire.RCSendLastImm, wire.MaskImmediate | wire.MaskComplete | wire.MaskSolicited | wire.HasImmDt, wire.MaskStart},
		{wire.RCWriteFirst, wire.MaskWrite | wire.HasRETH, wire.MaskRecvWQE | wire.MaskComplete},
		{wire.RCWriteOnly, wire.MaskWrite | wire.HasRETH, wire.MaskRecvWQE | wire.MaskSolicited},
		{wire.RCWriteLastImm, wire.MaskRecvWQE | wire.MaskComplete | wire.MaskSolicited | wire.MaskImmediate, wire.HasRETH},
		{wire.RCWriteOnlyImm, wire.MaskRecvWQE | wire.MaskComplete | wire.HasRETH | wire.HasImmDt, 0},
		{wire.RCReadRequest, wire.MaskRequest | wire.MaskRead | wire.HasRETH, wire.MaskPayload | wire.MaskRecvWQE},
		{wire.RCReadResponseMiddle, wire.MaskResponse | wire.MaskRead | wire.MaskPayload, wire.HasAETH},
		{wire.RCAck, wire.MaskResponse | wire.MaskAck | wire.HasAETH, wire.MaskPayload | wire.MaskAtomic},
		{wire.RCAtomicAck, wire.MaskResponse | wire.MaskAck | wire.MaskAtomic, wire.MaskPayload},
		{wire.RCCompareSwap, wire.MaskRequest | wire.MaskAtomic | wire.HasAtomicETH, wire.MaskPayload | wire.MaskAck},
		{wire.RCSendOnlyInv, wire.MaskInvalidate | wire.HasIETH | wire.MaskRecvWQE, 0},
		{wire.RCFlush, wire.MaskFlush | wire.HasFETH | wire.HasRETH, wire.MaskPayload | wire.MaskWrite},
		{wire.RCAtomicWrite, wire.MaskAtomicWrite | wire.HasRETH | wire.MaskPayload, wire.MaskAtomic | wire.MaskWrite},
		{wire.UDSendOnly, wire.MaskRecvWQE | wire.HasDETH, wire.HasImmDt},
		{wire.CNP, wire.MaskCNP | wire.HasCNP, wire.MaskRequest | wire.MaskResponse | wire.MaskPayload},
	}
	for _, tt := range tests {
		if !tt.op.Is(tt.is) {
			t.Errorf("%v: mask %#x lacks %#x", tt.op, tt.op.Mask(), tt.is&^tt.op.Mask())
		}
		if got := tt.op.Mask() & tt.not; got != 0 {
			t.Errorf("%v: mask has %#x, want none of it", tt.op, got)
		}
	}
}

func TestOpcodeClassOp(t *testing.T) {
	tests := []struct {
		op       wire.Opcode
		class, o wire.Opcode
		sameAsRC wire.Opcode
	}{
		{wire.UCSendOnly, wire.ClassUC, 0x04, wire.RCSendOnly},
		{wire.UDSendOnlyImm, wire.ClassUD, 0x05, wire.RCSendOnlyImm},
		{wire.RCAtomicWrite, wire.ClassRC, 0x1D, wire.RCAtomicWrite},
		{wire.CNP, wire.ClassCNP, 0x01, wire.RCSendMiddle},
		{0xB3, wire.ClassXRC, 0x13, wire.RCCompareSwap},
	}
	for _, tt := range tests {
		if got := tt.op.Class(); got != tt.class {
			t.Errorf("%v.Class() = 0x%02X, want 0x%02X", tt.op, uint8(got), uint8(tt.class))
		}
		if got := tt.op.Op(); got != tt.o {
			t.Errorf("%v.Op() = 0x%02X, want 0x%02X", tt.op, uint8(got), uint8(tt.o))
		}
		if got := wire.ClassRC | tt.op.Op(); got != tt.sameAsRC {
			t.Errorf("ClassRC|%v.Op() = %v, want %v", tt.op, got, tt.sameAsRC)
		}
	}
}
