package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/softnic/softnic/wire"
)

func filled(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

func TestAsBTH(t *testing.T) {
	for n := range 20 {
		b, err := wire.AsBTH(make([]byte, n))
		if n < wire.BTHLen {
			if !errors.Is(err, wire.ErrTruncated) || !errors.Is(err, wire.ErrMalformed) || b != nil {
				t.Errorf("AsBTH(%d bytes) = %v, %v; want nil, ErrTruncated", n, b, err)
			}
			continue
		}
		if err != nil || len(b) != wire.BTHLen {
			t.Errorf("AsBTH(%d bytes) = %d bytes, %v; want %d bytes, nil", n, len(b), err, wire.BTHLen)
		}
	}
}

// TestBTHLayout checks the IBTA 9.2 byte layout of an encoded BTH.
func TestBTHLayout(t *testing.T) {
	tests := []struct {
		name string
		f    wire.BTHFields
		want []byte
	}{
		{"zero", wire.BTHFields{}, make([]byte, 12)},
		{"rxe SEND_ONLY", wire.BTHFields{Opcode: wire.RCSendOnly, PKey: 0xFFFF, DestQP: 0x11, AckReq: true, PSN: 0x87C0AC},
			[]byte{0x04, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x80, 0x87, 0xC0, 0xAC}},
		{"every field", wire.BTHFields{Opcode: 0xA5, SE: true, MigReq: true, Pad: 3, TVer: 0xF, PKey: 0x1234,
			FECN: true, BECN: true, DestQP: 0xFFFFFF, AckReq: true, PSN: 0xFFFFFF},
			[]byte{0xA5, 0xFF, 0x12, 0x34, 0xC0, 0xFF, 0xFF, 0xFF, 0x80, 0xFF, 0xFF, 0xFF}},
		{"flags apart", wire.BTHFields{SE: true, Pad: 1, FECN: true, DestQP: 0xABCDEF, PSN: 0x123456},
			[]byte{0x00, 0x90, 0x00, 0x00, 0x80, 0xAB, 0xCD, 0xEF, 0x00, 0x12, 0x34, 0x56}},
		{"more flags", wire.BTHFields{MigReq: true, Pad: 2, TVer: 1, BECN: true},
			[]byte{0x00, 0x61, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},
	}
	for _, tt := range tests {
		// Encode over 0xFF so that reserved bits left set would show.
		b := wire.BTH(filled(wire.BTHLen, 0xFF))
		b.Encode(&tt.f)
		if !bytes.Equal(b, tt.want) {
			t.Errorf("%s: Encode(%+v) = % x, want % x", tt.name, tt.f, []byte(b), tt.want)
		}
		if got := b.Fields(); got != tt.f {
			t.Errorf("%s: Fields() = %+v, want %+v", tt.name, got, tt.f)
		}
		if b.Resv6() != 0 || b.Resv7() != 0 {
			t.Errorf("%s: reserved bits resv6 %#x resv7 %#x, want 0", tt.name, b.Resv6(), b.Resv7())
		}
	}
}

// TestBTHOutOfRange checks that Encode and the setters keep out-of-range
// values inside their fields.
func TestBTHOutOfRange(t *testing.T) {
	b := wire.BTH(make([]byte, wire.BTHLen))
	b.Encode(&wire.BTHFields{Pad: 7, TVer: 0x1F, DestQP: 0xFF123456, PSN: 0xFF654321})
	want := []byte{0x00, 0x3F, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x00, 0x65, 0x43, 0x21}
	if !bytes.Equal(b, want) {
		t.Errorf("Encode with wide values = % x, want % x", []byte(b), want)
	}

	b = wire.BTH(make([]byte, wire.BTHLen))
	b.SetDestQP(0x1FFFFFF)
	b.SetPSN(0x1FFFFFF)
	b.SetPad(4 + 2)
	want = []byte{0x00, 0x20, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0x00, 0xFF, 0xFF, 0xFF}
	if !bytes.Equal(b, want) {
		t.Errorf("setters with wide values = % x, want % x", []byte(b), want)
	}
}

// TestBTHSetters sets each field alone, on an all-zero and an all-ones
// header, and checks that exactly that field changed.
func TestBTHSetters(t *testing.T) {
	tests := []struct {
		name string
		set  func(wire.BTH)
		get  func(wire.BTH) any
		want any
		// field is the field's bit mask over the 12 bytes.
		field []byte
	}{
		{"Opcode", func(b wire.BTH) { b.SetOpcode(0x5A) }, func(b wire.BTH) any { return b.Opcode() }, wire.Opcode(0x5A),
			[]byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"SE", func(b wire.BTH) { b.SetSE(true) }, func(b wire.BTH) any { return b.SE() }, true,
			[]byte{0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"MigReq", func(b wire.BTH) { b.SetMigReq(true) }, func(b wire.BTH) any { return b.MigReq() }, true,
			[]byte{0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"Pad", func(b wire.BTH) { b.SetPad(2) }, func(b wire.BTH) any { return b.Pad() }, 2,
			[]byte{0, 0x30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"PKey", func(b wire.BTH) { b.SetPKey(0x8001) }, func(b wire.BTH) any { return b.PKey() }, uint16(0x8001),
			[]byte{0, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"FECN", func(b wire.BTH) { b.SetFECN(true) }, func(b wire.BTH) any { return b.FECN() }, true,
			[]byte{0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0}},
		{"BECN", func(b wire.BTH) { b.SetBECN(true) }, func(b wire.BTH) any { return b.BECN() }, true,
			[]byte{0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0}},
		{"DestQP", func(b wire.BTH) { b.SetDestQP(0xFFFFFF) }, func(b wire.BTH) any { return b.DestQP() }, uint32(0xFFFFFF),
			[]byte{0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}},
		{"AckReq", func(b wire.BTH) { b.SetAckReq(true) }, func(b wire.BTH) any { return b.AckReq() }, true,
			[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0}},
		{"PSN", func(b wire.BTH) { b.SetPSN(0xFFFFFF) }, func(b wire.BTH) any { return b.PSN() }, wire.PSN(0xFFFFFF),
			[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF}},
	}
	for _, tt := range tests {
		// On zeros the setter must set exactly the field's bits that the
		// value has; on ones it must leave every other bit set.
		b := wire.BTH(make([]byte, wire.BTHLen))
		tt.set(b)
		if got := tt.get(b); got != tt.want {
			t.Errorf("%s on zeros: got %v, want %v", tt.name, got, tt.want)
		}
		for i := range b {
			if b[i]&^tt.field[i] != 0 {
				t.Errorf("%s on zeros: byte %d = %#02x, outside the field %#02x", tt.name, i, b[i], tt.field[i])
			}
		}
		b = wire.BTH(filled(wire.BTHLen, 0xFF))
		tt.set(b)
		if got := tt.get(b); got != tt.want {
			t.Errorf("%s on ones: got %v, want %v", tt.name, got, tt.want)
		}
		for i := range b {
			if b[i]|tt.field[i] != 0xFF {
				t.Errorf("%s on ones: byte %d = %#02x, cleared bits outside the field %#02x", tt.name, i, b[i], tt.field[i])
			}
		}
	}

	// Clearing flags.
	b := wire.BTH(filled(wire.BTHLen, 0xFF))
	b.SetSE(false)
	b.SetMigReq(false)
	b.SetFECN(false)
	b.SetBECN(false)
	b.SetAckReq(false)
	b.SetPad(0)
	want := []byte{0xFF, 0x0F, 0xFF, 0xFF, 0x3F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF}
	if !bytes.Equal(b, want) {
		t.Errorf("after clearing flags: % x, want % x", []byte(b), want)
	}
	if got := b.TVer(); got != 0xF {
		t.Errorf("TVer() = %d, want 15", got)
	}
	if got := b.Resv6(); got != 0x3F {
		t.Errorf("Resv6() = %#x, want 0x3f", got)
	}
	if got := b.Resv7(); got != 0x7F {
		t.Errorf("Resv7() = %#x, want 0x7f", got)
	}
}

// TestExtHeaderLayout checks the byte layout each extension header's
// Encode writes (IBTA 9.3; rxe_hdr.h), over a buffer of 0xFF so reserved
// bits that are not cleared show, and that the getters read it back.
func TestExtHeaderLayout(t *testing.T) {
	tests := []struct {
		name   string
		encode func(b []byte)
		check  func(b []byte) (got, want any)
		want   []byte
	}{
		{"RDETH",
			func(b []byte) { wire.RDETH(b).Encode(&wire.RDETHFields{EECnxt: 0xABCDEF}) },
			func(b []byte) (any, any) { return wire.RDETH(b).Fields(), wire.RDETHFields{EECnxt: 0xABCDEF} },
			[]byte{0x00, 0xAB, 0xCD, 0xEF}},
		{"RDETH max",
			func(b []byte) { wire.RDETH(b).Encode(&wire.RDETHFields{EECnxt: 0xFFFFFFFF}) },
			func(b []byte) (any, any) { return wire.RDETH(b).EECnxt(), uint32(0xFFFFFF) },
			[]byte{0x00, 0xFF, 0xFF, 0xFF}},
		{"DETH",
			func(b []byte) { wire.DETH(b).Encode(&wire.DETHFields{QKey: 0x80010000, SrcQP: 0x0E41E2}) },
			func(b []byte) (any, any) {
				return wire.DETH(b).Fields(), wire.DETHFields{QKey: 0x80010000, SrcQP: 0x0E41E2}
			},
			[]byte{0x80, 0x01, 0x00, 0x00, 0x00, 0x0E, 0x41, 0xE2}},
		{"DETH max",
			func(b []byte) { wire.DETH(b).Encode(&wire.DETHFields{QKey: 0xFFFFFFFF, SrcQP: 0xFFFFFF}) },
			func(b []byte) (any, any) { return wire.DETH(b).SrcQP(), uint32(0xFFFFFF) },
			[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0xFF, 0xFF, 0xFF}},
		{"XRCETH",
			func(b []byte) { wire.XRCETH(b).Encode(&wire.XRCETHFields{XRCSRQ: 0xFFFFFF}) },
			func(b []byte) (any, any) { return wire.XRCETH(b).Fields(), wire.XRCETHFields{XRCSRQ: 0xFFFFFF} },
			[]byte{0x00, 0xFF, 0xFF, 0xFF}},
		{"RETH",
			func(b []byte) {
				wire.RETH(b).Encode(&wire.RETHFields{VA: 0x0102030405060708, RKey: 0x090A0B0C, DMALen: 0x0D0E0F10})
			},
			func(b []byte) (any, any) {
				return wire.RETH(b).Fields(), wire.RETHFields{VA: 0x0102030405060708, RKey: 0x090A0B0C, DMALen: 0x0D0E0F10}
			},
			[]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{"AtomicETH",
			func(b []byte) {
				wire.AtomicETH(b).Encode(&wire.AtomicETHFields{VA: 0x0102030405060708, RKey: 0x090A0B0C,
					SwapAdd: 0x0D0E0F1011121314, Compare: 0x15161718191A1B1C})
			},
			func(b []byte) (any, any) {
				return wire.AtomicETH(b).Fields(), wire.AtomicETHFields{VA: 0x0102030405060708, RKey: 0x090A0B0C,
					SwapAdd: 0x0D0E0F1011121314, Compare: 0x15161718191A1B1C}
			},
			[]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28}},
		{"AETH",
			func(b []byte) { wire.AETH(b).Encode(&wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: 0xFFFFFF}) },
			func(b []byte) (any, any) {
				return wire.AETH(b).Fields(), wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: 0xFFFFFF}
			},
			[]byte{0x1F, 0xFF, 0xFF, 0xFF}},
		{"AETH NAK",
			func(b []byte) { wire.AETH(b).Encode(&wire.AETHFields{Syndrome: wire.NakPSNSequence, MSN: 0x000102}) },
			func(b []byte) (any, any) {
				return wire.AETH(b).Fields(), wire.AETHFields{Syndrome: wire.NakPSNSequence, MSN: 0x000102}
			},
			[]byte{0x60, 0x00, 0x01, 0x02}},
		{"AtomicAckETH",
			func(b []byte) { wire.AtomicAckETH(b).Encode(&wire.AtomicAckETHFields{Orig: 0x4E892ED93F5BB8A6}) },
			func(b []byte) (any, any) {
				return wire.AtomicAckETH(b).Fields(), wire.AtomicAckETHFields{Orig: 0x4E892ED93F5BB8A6}
			},
			[]byte{0x4E, 0x89, 0x2E, 0xD9, 0x3F, 0x5B, 0xB8, 0xA6}},
		{"ImmDt",
			func(b []byte) { wire.ImmDt(b).SetImm(0xDEADBEEF) },
			func(b []byte) (any, any) { return wire.ImmDt(b).Imm(), uint32(0xDEADBEEF) },
			[]byte{0xDE, 0xAD, 0xBE, 0xEF}},
		{"IETH",
			func(b []byte) { wire.IETH(b).SetRKey(0x00010203) },
			func(b []byte) (any, any) { return wire.IETH(b).RKey(), uint32(0x00010203) },
			[]byte{0x00, 0x01, 0x02, 0x03}},
		{"FETH",
			func(b []byte) {
				wire.FETH(b).Encode(&wire.FETHFields{PlacementType: wire.FlushPersistent, Selectivity: wire.FlushMR})
			},
			func(b []byte) (any, any) {
				return wire.FETH(b).Fields(), wire.FETHFields{PlacementType: wire.FlushPersistent, Selectivity: wire.FlushMR}
			},
			[]byte{0x00, 0x00, 0x00, 0x12}},
		{"FETH max",
			func(b []byte) { wire.FETH(b).Encode(&wire.FETHFields{PlacementType: 0xF, Selectivity: 3}) },
			func(b []byte) (any, any) {
				return wire.FETH(b).Fields(), wire.FETHFields{PlacementType: 0xF, Selectivity: 3}
			},
			[]byte{0x00, 0x00, 0x00, 0x3F}},
		{"FETH out of range",
			func(b []byte) { wire.FETH(b).Encode(&wire.FETHFields{PlacementType: 0xF1, Selectivity: 0xFE}) },
			func(b []byte) (any, any) {
				return wire.FETH(b).Fields(), wire.FETHFields{PlacementType: 1, Selectivity: 2}
			},
			[]byte{0x00, 0x00, 0x00, 0x21}},
	}
	for _, tt := range tests {
		b := filled(len(tt.want), 0xFF)
		tt.encode(b)
		if !bytes.Equal(b, tt.want) {
			t.Errorf("%s: encoded % x, want % x", tt.name, b, tt.want)
		}
		if got, want := tt.check(b); got != want {
			t.Errorf("%s: decoded %+v, want %+v", tt.name, got, want)
		}
	}
}

// TestExtHeaderSetters checks each extension-header setter writes its field
// and nothing else, including 24-bit fields at their maximum.
func TestExtHeaderSetters(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		set   func(b []byte)
		get   func(b []byte) any
		want  any
		field []byte // bytes the setter may write
	}{
		{"RDETH.EECnxt", 4, func(b []byte) { wire.RDETH(b).SetEECnxt(0xFFFFFF) }, func(b []byte) any { return wire.RDETH(b).EECnxt() }, uint32(0xFFFFFF), []byte{0xFF, 0xFF, 0xFF, 0xFF}},
		{"DETH.QKey", 8, func(b []byte) { wire.DETH(b).SetQKey(0x11111111) }, func(b []byte) any { return wire.DETH(b).QKey() }, uint32(0x11111111), []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}},
		{"DETH.SrcQP", 8, func(b []byte) { wire.DETH(b).SetSrcQP(0xFFFFFF) }, func(b []byte) any { return wire.DETH(b).SrcQP() }, uint32(0xFFFFFF), []byte{0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"XRCETH.XRCSRQ", 4, func(b []byte) { wire.XRCETH(b).SetXRCSRQ(0xFFFFFF) }, func(b []byte) any { return wire.XRCETH(b).XRCSRQ() }, uint32(0xFFFFFF), []byte{0xFF, 0xFF, 0xFF, 0xFF}},
		{"RETH.VA", 16, func(b []byte) { wire.RETH(b).SetVA(0x8000000000000001) }, func(b []byte) any { return wire.RETH(b).VA() }, uint64(0x8000000000000001), []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"RETH.RKey", 16, func(b []byte) { wire.RETH(b).SetRKey(0x80000001) }, func(b []byte) any { return wire.RETH(b).RKey() }, uint32(0x80000001), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}},
		{"RETH.DMALen", 16, func(b []byte) { wire.RETH(b).SetDMALen(0x80000001) }, func(b []byte) any { return wire.RETH(b).DMALen() }, uint32(0x80000001), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"AtomicETH.VA", 28, func(b []byte) { wire.AtomicETH(b).SetVA(0x8000000000000001) }, func(b []byte) any { return wire.AtomicETH(b).VA() }, uint64(0x8000000000000001), bytesAt(28, 0, 8)},
		{"AtomicETH.RKey", 28, func(b []byte) { wire.AtomicETH(b).SetRKey(0x80000001) }, func(b []byte) any { return wire.AtomicETH(b).RKey() }, uint32(0x80000001), bytesAt(28, 8, 4)},
		{"AtomicETH.SwapAdd", 28, func(b []byte) { wire.AtomicETH(b).SetSwapAdd(0x8000000000000001) }, func(b []byte) any { return wire.AtomicETH(b).SwapAdd() }, uint64(0x8000000000000001), bytesAt(28, 12, 8)},
		{"AtomicETH.Compare", 28, func(b []byte) { wire.AtomicETH(b).SetCompare(0x8000000000000001) }, func(b []byte) any { return wire.AtomicETH(b).Compare() }, uint64(0x8000000000000001), bytesAt(28, 20, 8)},
		{"AETH.Syndrome", 4, func(b []byte) { wire.AETH(b).SetSyndrome(0xA5) }, func(b []byte) any { return wire.AETH(b).Syndrome() }, wire.Syndrome(0xA5), bytesAt(4, 0, 1)},
		{"AETH.MSN", 4, func(b []byte) { wire.AETH(b).SetMSN(0xFFFFFF) }, func(b []byte) any { return wire.AETH(b).MSN() }, uint32(0xFFFFFF), bytesAt(4, 1, 3)},
		{"AETH.MSN wide", 4, func(b []byte) { wire.AETH(b).SetMSN(0xAB123456) }, func(b []byte) any { return wire.AETH(b).MSN() }, uint32(0x123456), bytesAt(4, 1, 3)},
		{"AtomicAckETH.Orig", 8, func(b []byte) { wire.AtomicAckETH(b).SetOrig(0x8000000000000001) }, func(b []byte) any { return wire.AtomicAckETH(b).Orig() }, uint64(0x8000000000000001), bytesAt(8, 0, 8)},
		{"ImmDt.Imm", 4, func(b []byte) { wire.ImmDt(b).SetImm(0x80000001) }, func(b []byte) any { return wire.ImmDt(b).Imm() }, uint32(0x80000001), bytesAt(4, 0, 4)},
		{"IETH.RKey", 4, func(b []byte) { wire.IETH(b).SetRKey(0x80000001) }, func(b []byte) any { return wire.IETH(b).RKey() }, uint32(0x80000001), bytesAt(4, 0, 4)},
	}
	for _, tt := range tests {
		for _, fill := range []byte{0x00, 0xFF} {
			b := filled(tt.n, fill)
			tt.set(b)
			if got := tt.get(b); got != tt.want {
				t.Errorf("%s on %#02x: got %#x, want %#x", tt.name, fill, got, tt.want)
			}
			for i := range b {
				if tt.field[i] == 0 && b[i] != fill {
					t.Errorf("%s on %#02x: byte %d changed to %#02x outside the field", tt.name, fill, i, b[i])
				}
			}
		}
	}
}

// bytesAt returns an n-byte mask with 0xFF in [off, off+l).
func bytesAt(n, off, l int) []byte {
	b := make([]byte, n)
	for i := off; i < off+l; i++ {
		b[i] = 0xFF
	}
	return b
}

// TestHeaderFieldsRoundTrip encodes random field values into every header
// and checks Fields returns them.
func TestHeaderFieldsRoundTrip(t *testing.T) {
	r := newRand(t)
	for range 1000 {
		bf := wire.BTHFields{
			Opcode: wire.Opcode(r.Uint32()), SE: r.IntN(2) == 0, MigReq: r.IntN(2) == 0, Pad: r.IntN(4),
			TVer: uint8(r.IntN(16)), PKey: uint16(r.Uint32()), FECN: r.IntN(2) == 0, BECN: r.IntN(2) == 0,
			DestQP: r.Uint32() & wire.QPNMask, AckReq: r.IntN(2) == 0, PSN: wire.PSN(r.Uint32() & wire.PSNMask),
		}
		bth := wire.BTH(randBytes(r, wire.BTHLen))
		bth.Encode(&bf)
		if got := bth.Fields(); got != bf {
			t.Fatalf("BTH Fields() = %+v, want %+v", got, bf)
		}
		if bth.Resv6() != 0 || bth.Resv7() != 0 {
			t.Fatalf("BTH Encode left reserved bits resv6 %#x resv7 %#x", bth.Resv6(), bth.Resv7())
		}

		rd := wire.RDETHFields{EECnxt: r.Uint32() & wire.QPNMask}
		if got := roundTrip(r, 4, func(b []byte) { wire.RDETH(b).Encode(&rd) }, func(b []byte) any { return wire.RDETH(b).Fields() }); got != rd {
			t.Fatalf("RDETH Fields() = %+v, want %+v", got, rd)
		}
		d := wire.DETHFields{QKey: r.Uint32(), SrcQP: r.Uint32() & wire.QPNMask}
		if got := roundTrip(r, 8, func(b []byte) { wire.DETH(b).Encode(&d) }, func(b []byte) any { return wire.DETH(b).Fields() }); got != d {
			t.Fatalf("DETH Fields() = %+v, want %+v", got, d)
		}
		x := wire.XRCETHFields{XRCSRQ: r.Uint32() & wire.QPNMask}
		if got := roundTrip(r, 4, func(b []byte) { wire.XRCETH(b).Encode(&x) }, func(b []byte) any { return wire.XRCETH(b).Fields() }); got != x {
			t.Fatalf("XRCETH Fields() = %+v, want %+v", got, x)
		}
		re := wire.RETHFields{VA: r.Uint64(), RKey: r.Uint32(), DMALen: r.Uint32()}
		if got := roundTrip(r, 16, func(b []byte) { wire.RETH(b).Encode(&re) }, func(b []byte) any { return wire.RETH(b).Fields() }); got != re {
			t.Fatalf("RETH Fields() = %+v, want %+v", got, re)
		}
		a := wire.AtomicETHFields{VA: r.Uint64(), RKey: r.Uint32(), SwapAdd: r.Uint64(), Compare: r.Uint64()}
		if got := roundTrip(r, 28, func(b []byte) { wire.AtomicETH(b).Encode(&a) }, func(b []byte) any { return wire.AtomicETH(b).Fields() }); got != a {
			t.Fatalf("AtomicETH Fields() = %+v, want %+v", got, a)
		}
		ae := wire.AETHFields{Syndrome: wire.Syndrome(r.Uint32()), MSN: r.Uint32() & wire.QPNMask}
		if got := roundTrip(r, 4, func(b []byte) { wire.AETH(b).Encode(&ae) }, func(b []byte) any { return wire.AETH(b).Fields() }); got != ae {
			t.Fatalf("AETH Fields() = %+v, want %+v", got, ae)
		}
		aa := wire.AtomicAckETHFields{Orig: r.Uint64()}
		if got := roundTrip(r, 8, func(b []byte) { wire.AtomicAckETH(b).Encode(&aa) }, func(b []byte) any { return wire.AtomicAckETH(b).Fields() }); got != aa {
			t.Fatalf("AtomicAckETH Fields() = %+v, want %+v", got, aa)
		}
		fe := wire.FETHFields{PlacementType: uint8(r.IntN(16)), Selectivity: uint8(r.IntN(4))}
		if got := roundTrip(r, 4, func(b []byte) { wire.FETH(b).Encode(&fe) }, func(b []byte) any { return wire.FETH(b).Fields() }); got != fe {
			t.Fatalf("FETH Fields() = %+v, want %+v", got, fe)
		}
	}
}

// roundTrip encodes into n random bytes and decodes.
func roundTrip(r interface{ Uint32() uint32 }, n int, enc func([]byte), dec func([]byte) any) any {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	enc(b)
	return dec(b)
}

func TestSyndrome(t *testing.T) {
	tests := []struct {
		s     wire.Syndrome
		typ   wire.Syndrome
		value uint8
		isACK bool
		str   string
	}{
		{0x00, wire.SyndromeACK, 0, true, "ACK(credits=0)"},
		{wire.AckUnlimited, wire.SyndromeACK, 31, true, "ACK(credits=31)"},
		{0x05, wire.SyndromeACK, 5, true, "ACK(credits=5)"},
		{wire.RNRNAK(0), wire.SyndromeRNRNAK, 0, false, "RNR_NAK(timer=0)"},
		{wire.RNRNAK(14), wire.SyndromeRNRNAK, 14, false, "RNR_NAK(timer=14)"},
		{wire.RNRNAK(31), wire.SyndromeRNRNAK, 31, false, "RNR_NAK(timer=31)"},
		{wire.RNRNAK(0xFF), wire.SyndromeRNRNAK, 31, false, "RNR_NAK(timer=31)"},
		{wire.NakPSNSequence, wire.SyndromeNAK, 0, false, "NAK_PSN_SEQ_ERR"},
		{wire.NakInvalidRequest, wire.SyndromeNAK, 1, false, "NAK_INVALID_REQ"},
		{wire.NakRemoteAccess, wire.SyndromeNAK, 2, false, "NAK_REM_ACCESS_ERR"},
		{wire.NakRemoteOp, wire.SyndromeNAK, 3, false, "NAK_REM_OP_ERR"},
		{wire.NakInvalidRDReq, wire.SyndromeNAK, 4, false, "NAK_INVALID_RD_REQ"},
		{0x6A, wire.SyndromeNAK, 10, false, "NAK(code=10)"},
		{0x41, wire.SyndromeReserved, 1, false, "RESERVED(0x41)"},
		{0x80, 0x80, 0, false, "RESERVED(0x80)"},
		{0xFF, 0xE0, 31, false, "RESERVED(0xff)"},
	}
	for _, tt := range tests {
		if got := tt.s.Type(); got != tt.typ {
			t.Errorf("Syndrome(%#x).Type() = %#x, want %#x", uint8(tt.s), uint8(got), uint8(tt.typ))
		}
		if got := tt.s.Value(); got != tt.value {
			t.Errorf("Syndrome(%#x).Value() = %d, want %d", uint8(tt.s), got, tt.value)
		}
		if got := tt.s.IsACK(); got != tt.isACK {
			t.Errorf("Syndrome(%#x).IsACK() = %v, want %v", uint8(tt.s), got, tt.isACK)
		}
		if got := tt.s.String(); got != tt.str {
			t.Errorf("Syndrome(%#x).String() = %q, want %q", uint8(tt.s), got, tt.str)
		}
	}
	// The IBTA Table 44 encodings rxe uses (rxe_hdr.h AETH_*).
	consts := []struct {
		got, want wire.Syndrome
		name      string
	}{
		{wire.SyndromeTypeMask, 0xE0, "SyndromeTypeMask"},
		{wire.SyndromeRNRNAK, 0x20, "SyndromeRNRNAK"},
		{wire.SyndromeReserved, 0x40, "SyndromeReserved"},
		{wire.SyndromeNAK, 0x60, "SyndromeNAK"},
		{wire.AckUnlimited, 0x1F, "AckUnlimited"},
	}
	for _, c := range consts {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, uint8(c.got), uint8(c.want))
		}
	}
}

// TestErrorsWrapMalformed checks every parser sentinel wraps ErrMalformed.
func TestErrorsWrapMalformed(t *testing.T) {
	for _, err := range []error{wire.ErrTruncated, wire.ErrBadVersion, wire.ErrUnknownOpcode,
		wire.ErrBadLength, wire.ErrBadPad, wire.ErrBadICRC, wire.ErrNotRoCE} {
		if !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%v does not wrap ErrMalformed", err)
		}
	}
}
