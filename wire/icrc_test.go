package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/wire"
)

// maskedBits returns, for an IP datagram d carrying a RoCEv2 packet, a mask
// with a 1 for every bit the ICRC does not cover (rxe_icrc.c
// rxe_icrc_hdr; rxe-interop-facts.md §2.3): IPv4 TOS, TTL and header
// checksum, or IPv6 traffic class, flow label and hop limit; the UDP
// checksum; the BTH byte holding FECN, BECN and six reserved bits.
func maskedBits(d []byte, v4 bool) []byte {
	m := make([]byte, len(d))
	ip := wire.IPv6HeaderLen
	if v4 {
		ip = wire.IPv4HeaderLen
		m[1] = 0xFF               // TOS
		m[8] = 0xFF               // TTL
		m[10], m[11] = 0xFF, 0xFF // header checksum
	} else {
		m[0] = 0x0F // traffic class, high nibble
		m[1], m[2], m[3] = 0xFF, 0xFF, 0xFF
		m[7] = 0xFF // hop limit
	}
	m[ip+6], m[ip+7] = 0xFF, 0xFF // UDP checksum
	m[ip+wire.UDPHeaderLen+4] = 0xFF
	return m
}

// refICRC is the ICRC recipe of rxe-interop-facts.md §2.3 written
// independently of icrc.go: CRC-32 (IEEE) over eight 0xFF bytes, the
// datagram up to the ICRC with the masked bits set to one, stored
// little-endian.
func refICRC(d []byte, v4 bool) uint32 {
	m := maskedBits(d, v4)
	buf := append(bytes.Repeat([]byte{0xFF}, 8), d[:len(d)-wire.ICRCLen]...)
	for i := range m[:len(d)-wire.ICRCLen] {
		buf[8+i] |= m[i]
	}
	return crc32.ChecksumIEEE(buf)
}

// Both payload CRCs ComputeICRC may pick (wire.PayloadCRCs) give the
// reference ICRC for every opcode and payload size, IPv4 and IPv6.
func TestICRCMatchesReference(t *testing.T) {
	for name, f := range wire.PayloadCRCs {
		t.Run(name, func(t *testing.T) {
			defer wire.UsePayloadCRC(f)()
			testICRCMatchesReference(t)
		})
	}
}

func testICRCMatchesReference(t *testing.T) {
	r := newRand(t)
	for _, op := range validOpcodes() {
		for _, n := range payloadSizes(op) {
			for _, v6 := range []bool{false, true} {
				e := randEncap(r, v6)
				h := randHeaders(r, op)
				pkt := build(t, &e, &h, randBytes(r, n))
				d := datagram(&e, pkt)
				want := refICRC(d, !v6)
				if got := wire.ComputeICRC(&e, pkt); got != want {
					t.Fatalf("%v/%d/IPv6 %v: ComputeICRC = %#08x, reference %#08x", op, n, v6, got, want)
				}
				if got := binary.LittleEndian.Uint32(pkt[len(pkt)-4:]); got != want {
					t.Fatalf("%v/%d/IPv6 %v: stored ICRC %#08x, want %#08x little-endian", op, n, v6, got, want)
				}
				if got := wire.StoredICRC(pkt); got != want {
					t.Fatalf("%v/%d/IPv6 %v: StoredICRC = %#08x, want %#08x", op, n, v6, got, want)
				}
			}
		}
	}
}

func TestICRCShort(t *testing.T) {
	e := testEncap4()
	for n := range wire.BTHLen + wire.ICRCLen {
		pkt := filled(n, 0xAB)
		if err := wire.CheckICRC(&e, pkt); !errors.Is(err, wire.ErrTruncated) {
			t.Errorf("CheckICRC(%d bytes) = %v, want ErrTruncated", n, err)
		}
		if got := wire.ComputeICRC(&e, pkt); got != 0 {
			t.Errorf("ComputeICRC(%d bytes) = %#x, want 0", n, got)
		}
		wire.SetICRC(&e, pkt)
		if !bytes.Equal(pkt, filled(n, 0xAB)) {
			t.Errorf("SetICRC(%d bytes) wrote % x", n, pkt)
		}
		if n < wire.ICRCLen {
			if got := wire.StoredICRC(pkt); got != 0 {
				t.Errorf("StoredICRC(%d bytes) = %#x, want 0", n, got)
			}
		}
	}
	if got, want := wire.StoredICRC([]byte{9, 0x42, 0x8B, 0x00, 0x9F}), uint32(0x9F008B42); got != want {
		t.Errorf("StoredICRC = %#08x, want %#08x (little-endian)", got, want)
	}
}

// icrcCases returns built packets covering every header layout, with a pad.
func icrcCases(t *testing.T) []struct {
	name string
	e    wire.Encap
	pkt  []byte
} {
	var cs []struct {
		name string
		e    wire.Encap
		pkt  []byte
	}
	for _, op := range validOpcodes() {
		for _, e := range []wire.Encap{testEncap4(), testEncap6()} {
			h := maxHeaders(op)
			n := smallPayloadSize(op)
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i + 1)
			}
			name := fmt.Sprintf("%v/IPv4=%v", op, e.IsIPv4())
			cs = append(cs, struct {
				name string
				e    wire.Encap
				pkt  []byte
			}{name, e, build(t, &e, &h, payload)})
		}
	}
	return cs
}

// TestICRCEncapFields changes each Encap field and checks the ICRC covers
// exactly the unmasked ones.
func TestICRCEncapFields(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(e *wire.Encap)
		covered bool
		v4, v6  bool
	}{
		{"traffic class", func(e *wire.Encap) { e.TrafficClass ^= 0xFF }, false, true, true},
		{"traffic class ECN", func(e *wire.Encap) { e.TrafficClass ^= 0x03 }, false, true, true},
		{"hop limit", func(e *wire.Encap) { e.HopLimit ^= 0xFF }, false, true, true},
		{"flow label", func(e *wire.Encap) { e.FlowLabel ^= 0xFFFFF }, false, false, true},
		{"UDP checksum", func(e *wire.Encap) { e.UDPChecksum ^= 0xFFFF }, false, true, true},
		{"UDP checksum to 0", func(e *wire.Encap) { e.UDPChecksum = 0 }, false, true, true},
		{"IPv4 ID", func(e *wire.Encap) { e.ID++ }, true, true, false},
		{"IPv4 DF", func(e *wire.Encap) { e.FragOff ^= wire.IPv4DF }, true, true, false},
		{"IPv4 reserved flag", func(e *wire.Encap) { e.FragOff ^= 0x8000 }, true, true, false},
		{"source address", func(e *wire.Encap) { e.Src = e.Src.Next() }, true, true, true},
		{"destination address", func(e *wire.Encap) { e.Dst = e.Dst.Prev() }, true, true, true},
		{"source port", func(e *wire.Encap) { e.SrcPort ^= 1 }, true, true, true},
		{"destination port", func(e *wire.Encap) { e.DstPort ^= 0x8000 }, true, true, true},
		{"addresses swapped", func(e *wire.Encap) { e.Src, e.Dst = e.Dst, e.Src }, true, true, true},
	}
	for _, c := range icrcCases(t) {
		for _, tt := range tests {
			if c.e.IsIPv4() && !tt.v4 || !c.e.IsIPv4() && !tt.v6 {
				continue
			}
			e := c.e
			tt.mod(&e)
			err := wire.CheckICRC(&e, c.pkt)
			if tt.covered && !errors.Is(err, wire.ErrBadICRC) {
				t.Errorf("%s: %s changed: CheckICRC = %v, want ErrBadICRC", c.name, tt.name, err)
			}
			if !tt.covered && err != nil {
				t.Errorf("%s: %s changed (masked): CheckICRC = %v, want nil", c.name, tt.name, err)
			}
		}
	}
}

// TestICRCBitFlips builds the whole IP datagram of each packet, flips every
// bit in turn, and parses it back as a receiver would (ParseEncap, then
// CheckICRC): a flip of a masked bit must still verify, a flip of any
// other bit must be refused.
func TestICRCBitFlips(t *testing.T) {
	for _, c := range icrcCases(t) {
		d := datagram(&c.e, c.pkt)
		masked := maskedBits(d, c.e.IsIPv4())
		var maskedOK, coveredRefused, encapRefused int
		for i := range d {
			for bit := range 8 {
				flip := byte(1) << bit
				d[i] ^= flip
				e, pkt, err := wire.ParseEncap(d)
				if err == nil {
					err = wire.CheckICRC(&e, pkt)
				} else {
					encapRefused++
				}
				d[i] ^= flip
				if masked[i]&flip != 0 {
					if err != nil {
						t.Errorf("%s: flipping masked bit %d of byte %d: %v, want nil", c.name, bit, i, err)
					}
					maskedOK++
					continue
				}
				if err == nil {
					t.Errorf("%s: flipping covered bit %d of byte %d went unnoticed", c.name, bit, i)
					continue
				}
				if !errors.Is(err, wire.ErrMalformed) {
					t.Errorf("%s: flipping bit %d of byte %d: %v does not wrap ErrMalformed", c.name, bit, i, err)
				}
				coveredRefused++
			}
		}
		// Masked bits: IPv4 8+8+16, IPv6 4+24+8; UDP 16; BTH 8.
		wantMasked := 56
		if !c.e.IsIPv4() {
			wantMasked = 60
		}
		if maskedOK != wantMasked || coveredRefused != 8*len(d)-wantMasked {
			t.Errorf("%s: %d masked bits verified, %d covered bits refused; want %d and %d",
				c.name, maskedOK, coveredRefused, wantMasked, 8*len(d)-wantMasked)
		}
		// Most flips must reach CheckICRC, not stop at ParseEncap.
		if encapRefused > 8*c.e.HeaderLen() {
			t.Errorf("%s: ParseEncap refused %d flips, more than the IP/UDP header bits", c.name, encapRefused)
		}
	}
}

// TestICRCMaskedFieldsAllValues sets each masked byte to every value.
func TestICRCMaskedFieldsAllValues(t *testing.T) {
	for _, c := range icrcCases(t) {
		d := datagram(&c.e, c.pkt)
		masked := maskedBits(d, c.e.IsIPv4())
		for i := range d {
			if masked[i] != 0xFF {
				continue
			}
			orig := d[i]
			for v := range 256 {
				d[i] = byte(v)
				e, pkt, err := wire.ParseEncap(d)
				if err == nil {
					err = wire.CheckICRC(&e, pkt)
				}
				if err != nil {
					t.Fatalf("%s: byte %d = %#02x: %v, want nil", c.name, i, v, err)
				}
			}
			d[i] = orig
		}
	}
}

// TestICRCIPv6MappedEncap checks an Encap built from IPv4-mapped GIDs
// yields the same ICRC as plain IPv4 addresses.
func TestICRCIPv6MappedEncap(t *testing.T) {
	plain := testEncap4()
	mapped := plain
	mapped.Src = netip.AddrFrom16(plain.Src.As16())
	mapped.Dst = netip.AddrFrom16(plain.Dst.As16())
	h := maxHeaders(wire.RCSendOnly)
	pkt := build(t, &plain, &h, []byte{1, 2, 3})
	if err := wire.CheckICRC(&mapped, pkt); err != nil {
		t.Errorf("CheckICRC with mapped addresses: %v, want nil", err)
	}
}
