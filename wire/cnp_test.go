package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/softnic/softnic/wire"
)

// TestBuildCNP checks a CNP byte for byte against A17.9.3: opcode 0x81,
// BECN (byte 4 = 0x40), the default P_Key, DestQP, PSN 0, 16 reserved
// zero bytes and an ICRC that verifies.
func TestBuildCNP(t *testing.T) {
	e := testEncap4()
	b := make([]byte, wire.MaxDatagram)
	n, err := wire.BuildCNP(b, &e, 0x123456)
	if err != nil || n != wire.CNPLength {
		t.Fatalf("BuildCNP = %d, %v; want %d, nil", n, err, wire.CNPLength)
	}
	want := []byte{0x81, 0x00, 0xFF, 0xFF, 0x40, 0x12, 0x34, 0x56, 0, 0, 0, 0}
	if got := b[:wire.BTHLen]; !bytes.Equal(got, want) {
		t.Fatalf("BTH = % x, want % x", got, want)
	}
	if got := b[wire.BTHLen : wire.BTHLen+16]; !bytes.Equal(got, make([]byte, 16)) {
		t.Fatalf("reserved bytes = % x, want zeros", got)
	}
	if err := wire.CheckICRC(&e, b[:n]); err != nil {
		t.Fatalf("CheckICRC: %v", err)
	}
	var p wire.Packet
	if err := wire.Parse(b[:n], &p); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if p.Opcode != wire.CNP || !p.Is(wire.MaskCNP) || p.DestQP() != 0x123456 || p.PSN() != 0 || len(p.Payload) != 0 {
		t.Fatalf("parsed %v qp=%#x psn=%d payload=%d", p.Opcode, p.DestQP(), p.PSN(), len(p.Payload))
	}
	if err := p.CheckCNP(); err != nil {
		t.Fatalf("CheckCNP: %v", err)
	}
	wire.BTH(b).SetBECN(false)
	if err := p.CheckCNP(); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("CheckCNP without BECN = %v, want ErrMalformed", err)
	}
}

func TestECN(t *testing.T) {
	for _, tt := range []struct{ tc, ecn, want uint8 }{
		{0x00, wire.ECNECT0, 0x02},
		{0xB8, wire.ECNECT0, 0xBA}, // DSCP EF kept
		{0xBA, wire.ECNCE, 0xBB},
		{0xBB, wire.ECNNotECT, 0xB8},
	} {
		if got := wire.WithECN(tt.tc, tt.ecn); got != tt.want || wire.ECN(got) != tt.ecn {
			t.Errorf("WithECN(%#x, %d) = %#x, want %#x", tt.tc, tt.ecn, got, tt.want)
		}
	}
}

// FuzzCNP builds a CNP for any QP number and encapsulation and parses it
// back, and parses arbitrary bytes as a CNP. Properties: BuildCNP's
// packet parses as a CNP for the QP (masked to 24 bits) with PSN 0, the
// BECN set and a valid ICRC; any input that parses with the CNP opcode
// and passes CheckCNP rebuilds by BuildCNP into the same bytes except
// the fields a CNP leaves zero (flags, P_Key, PSN, reserved) and the
// ICRC.
func FuzzCNP(f *testing.F) {
	e := testEncap4()
	b := make([]byte, wire.MaxDatagram)
	n, _ := wire.BuildCNP(b, &e, 0x11)
	f.Add(uint32(0x11), bytes.Clone(b[:n]))
	f.Add(uint32(wire.QPNMask+1), []byte{0x81})
	f.Fuzz(func(t *testing.T, qpn uint32, data []byte) {
		out := make([]byte, wire.MaxDatagram)
		n, err := wire.BuildCNP(out, &e, qpn)
		if err != nil || n != wire.CNPLength {
			t.Fatalf("BuildCNP(%#x) = %d, %v", qpn, n, err)
		}
		var p wire.Packet
		if err := wire.Parse(out[:n], &p); err != nil {
			t.Fatalf("Parse(BuildCNP): %v", err)
		}
		if p.CheckCNP() != nil || p.DestQP() != qpn&wire.QPNMask || p.PSN() != 0 || wire.CheckICRC(&e, out[:n]) != nil {
			t.Fatalf("BuildCNP(%#x) parsed as %v qp=%#x psn=%d", qpn, p.Opcode, p.DestQP(), p.PSN())
		}

		var q wire.Packet
		if wire.Parse(data, &q) != nil || q.CheckCNP() != nil {
			return
		}
		if len(data) != wire.CNPLength {
			t.Fatalf("a %d-byte CNP parsed", len(data))
		}
		m, _ := wire.BuildCNP(out, &e, q.DestQP())
		if m != len(data) || out[0] != data[0] || !bytes.Equal(out[5:8], data[5:8]) {
			t.Fatalf("rebuilt CNP % x, from % x", out[:m], data)
		}
	})
}
