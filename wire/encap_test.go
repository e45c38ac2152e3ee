package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/wire"
)

// ipv4HeaderChecksumOK reports whether an IPv4 header's checksum verifies
// (RFC 1071: the ones' complement sum over the header is 0xFFFF).
func ipv4HeaderChecksumOK(h []byte) bool {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xFFFF {
		sum = sum>>16 + sum&0xFFFF
	}
	return sum == 0xFFFF
}

// TestPutHeadersLayout checks the IP and UDP header bytes PutHeaders writes.
func TestPutHeadersLayout(t *testing.T) {
	e4 := testEncap4()
	want4 := []byte{
		0x45, 0x6A, 0x00, 0x2C, 0x12, 0x34, 0x40, 0x00, 64, 17, 0x00, 0x00, // checksum patched below
		10, 77, 0, 3, 10, 77, 0, 2,
		0xC1, 0x21, 0x12, 0xB7, 0x00, 0x18, 0xBE, 0xEF,
	}
	e6 := testEncap6()
	want6 := []byte{
		0x6A, 0x5A, 0xBC, 0xDE, 0x00, 0x18, 17, 1,
		0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xFF, 0xFE, 0x4D, 0x77, 0x03,
		0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		0xD8, 0x72, 0x12, 0xB7, 0x00, 0x18, 0x13, 0x57,
	}
	for _, tt := range []struct {
		name string
		e    wire.Encap
		want []byte
	}{{"IPv4", e4, want4}, {"IPv6", e6, want6}} {
		if got := tt.e.HeaderLen(); got != len(tt.want) {
			t.Errorf("%s: HeaderLen() = %d, want %d", tt.name, got, len(tt.want))
		}
		b := filled(len(tt.want)+4, 0xCC)
		if n := tt.e.PutHeaders(b, 16); n != len(tt.want) {
			t.Errorf("%s: PutHeaders = %d, want %d", tt.name, n, len(tt.want))
		}
		got := b[:len(tt.want)]
		if tt.e.IsIPv4() {
			if !ipv4HeaderChecksumOK(got[:wire.IPv4HeaderLen]) {
				t.Errorf("%s: IPv4 header checksum %#04x does not verify", tt.name, binary.BigEndian.Uint16(got[10:]))
			}
			copy(tt.want[10:12], got[10:12])
		}
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%s: PutHeaders wrote\n% x\nwant\n% x", tt.name, got, tt.want)
		}
		if !bytes.Equal(b[len(tt.want):], filled(4, 0xCC)) {
			t.Errorf("%s: PutHeaders wrote past the headers", tt.name)
		}
	}
}

func TestEncapIsIPv4(t *testing.T) {
	tests := []struct {
		src  string
		v4   bool
		hlen int
	}{
		{"10.0.0.1", true, 28},
		{"::ffff:10.0.0.1", true, 28}, // IPv4-mapped GIDs are IPv4 on the wire
		{"fe80::1", false, 48},
		{"::1", false, 48},
	}
	for _, tt := range tests {
		e := wire.Encap{Src: netip.MustParseAddr(tt.src)}
		if got := e.IsIPv4(); got != tt.v4 {
			t.Errorf("Encap{Src: %s}.IsIPv4() = %v, want %v", tt.src, got, tt.v4)
		}
		if got := e.HeaderLen(); got != tt.hlen {
			t.Errorf("Encap{Src: %s}.HeaderLen() = %d, want %d", tt.src, got, tt.hlen)
		}
	}

	// A mapped encapsulation builds the same packet as the plain IPv4 one.
	plain := testEncap4()
	mapped := plain
	mapped.Src = netip.AddrFrom16(plain.Src.As16())
	mapped.Dst = netip.AddrFrom16(plain.Dst.As16())
	a, b := make([]byte, 28), make([]byte, 28)
	plain.PutHeaders(a, 16)
	mapped.PutHeaders(b, 16)
	if !bytes.Equal(a, b) {
		t.Errorf("mapped Encap headers\n% x\nwant\n% x", b, a)
	}
	h := maxHeaders(wire.RCSendOnly)
	pa := build(t, &plain, &h, []byte{1, 2, 3, 4})
	pb := build(t, &mapped, &h, []byte{1, 2, 3, 4})
	if !bytes.Equal(pa, pb) {
		t.Errorf("mapped Encap packet\n% x\nwant\n% x", pb, pa)
	}
}

// TestParseEncapRoundTrip parses what PutHeaders writes for random
// encapsulations and UDP payload sizes.
func TestParseEncapRoundTrip(t *testing.T) {
	r := newRand(t)
	for i := range 2000 {
		e := randEncap(r, i%2 == 1)
		payload := randBytes(r, r.IntN(300))
		d := datagram(&e, payload)
		if e.IsIPv4() && !ipv4HeaderChecksumOK(d[:wire.IPv4HeaderLen]) {
			t.Fatalf("IPv4 header checksum does not verify: % x", d[:wire.IPv4HeaderLen])
		}
		// Link-layer padding after the datagram is dropped.
		padded := append(bytes.Clone(d), make([]byte, r.IntN(40))...)
		got, gotPayload, err := wire.ParseEncap(padded)
		if err != nil {
			t.Fatalf("ParseEncap(%+v, %d bytes): %v", e, len(payload), err)
		}
		if got != e {
			t.Fatalf("ParseEncap =\n%+v\nwant\n%+v", got, e)
		}
		if !bytes.Equal(gotPayload, payload) {
			t.Fatalf("ParseEncap payload %d bytes, want %d", len(gotPayload), len(payload))
		}
	}
}

// TestParseEncapShortUDP checks that a UDP length shorter than the IP
// payload bounds the returned payload.
func TestParseEncapShortUDP(t *testing.T) {
	for _, e := range []wire.Encap{testEncap4(), testEncap6()} {
		d := datagram(&e, make([]byte, 32))
		udp := e.HeaderLen() - wire.UDPHeaderLen
		binary.BigEndian.PutUint16(d[udp+4:], wire.UDPHeaderLen+20)
		_, payload, err := wire.ParseEncap(d)
		if err != nil || len(payload) != 20 {
			t.Errorf("IPv4 %v: ParseEncap with UDP length 28 = %d bytes, %v; want 20 bytes, nil", e.IsIPv4(), len(payload), err)
		}
	}
}

func TestParseEncapErrors(t *testing.T) {
	e4, e6 := testEncap4(), testEncap6()
	v4 := func(mod func(d []byte)) []byte {
		d := datagram(&e4, make([]byte, 32))
		mod(d)
		return d
	}
	v6 := func(mod func(d []byte)) []byte {
		d := datagram(&e6, make([]byte, 32))
		mod(d)
		return d
	}
	put16 := binary.BigEndian.PutUint16
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, wire.ErrTruncated},
		{"IPv4 1 byte", []byte{0x45}, wire.ErrTruncated},
		{"IPv4 19 bytes", v4(func([]byte) {})[:19], wire.ErrTruncated},
		{"IPv4 header only", v4(func([]byte) {})[:20], wire.ErrTruncated},
		{"IPv4 total length beyond the data", v4(func([]byte) {})[:50], wire.ErrTruncated},
		{"IPv4 total length 19", v4(func(d []byte) { put16(d[2:], 19) }), wire.ErrTruncated},
		{"IPv4 total length 27", v4(func(d []byte) { put16(d[2:], 27) }), wire.ErrTruncated},
		{"IPv4 options (IHL 6)", v4(func(d []byte) { d[0] = 0x46 }), wire.ErrNotRoCE},
		{"IPv4 options (IHL 15)", v4(func(d []byte) { d[0] = 0x4F }), wire.ErrNotRoCE},
		{"IPv4 IHL 4", v4(func(d []byte) { d[0] = 0x44 }), wire.ErrNotRoCE},
		{"IPv4 more fragments", v4(func(d []byte) { put16(d[6:], 0x2000) }), wire.ErrNotRoCE},
		{"IPv4 fragment offset", v4(func(d []byte) { put16(d[6:], wire.IPv4DF|1) }), wire.ErrNotRoCE},
		{"IPv4 last fragment", v4(func(d []byte) { put16(d[6:], 0x1FFF) }), wire.ErrNotRoCE},
		{"IPv4 TCP", v4(func(d []byte) { d[9] = 6 }), wire.ErrNotRoCE},
		{"IPv4 ICMP", v4(func(d []byte) { d[9] = 1 }), wire.ErrNotRoCE},
		{"IPv4 UDP length 7", v4(func(d []byte) { put16(d[24:], 7) }), wire.ErrBadLength},
		{"IPv4 UDP length 0", v4(func(d []byte) { put16(d[24:], 0) }), wire.ErrBadLength},
		{"IPv4 UDP length beyond IP", v4(func(d []byte) { put16(d[24:], 41) }), wire.ErrBadLength},
		{"IPv4 UDP length beyond IP total", v4(func(d []byte) { put16(d[2:], 40) }), wire.ErrBadLength},
		{"IPv6 1 byte", []byte{0x60}, wire.ErrTruncated},
		{"IPv6 39 bytes", v6(func([]byte) {})[:39], wire.ErrTruncated},
		{"IPv6 header only", v6(func(d []byte) { put16(d[4:], 0) })[:40], wire.ErrTruncated},
		{"IPv6 payload length beyond the data", v6(func([]byte) {})[:60], wire.ErrTruncated},
		{"IPv6 payload length 7", v6(func(d []byte) { put16(d[4:], 7) }), wire.ErrTruncated},
		{"IPv6 hop-by-hop header", v6(func(d []byte) { d[6] = 0 }), wire.ErrNotRoCE},
		{"IPv6 fragment header", v6(func(d []byte) { d[6] = 44 }), wire.ErrNotRoCE},
		{"IPv6 TCP", v6(func(d []byte) { d[6] = 6 }), wire.ErrNotRoCE},
		{"IPv6 UDP length 7", v6(func(d []byte) { put16(d[44:], 7) }), wire.ErrBadLength},
		{"IPv6 UDP length beyond IP", v6(func(d []byte) { put16(d[44:], 41) }), wire.ErrBadLength},
		{"IPv6 IPv4-mapped source", v6(func(d []byte) { copy(d[8:24], v4mapped(192, 0, 2, 1)) }), wire.ErrNotRoCE},
		{"IPv6 IPv4-mapped destination", v6(func(d []byte) { copy(d[24:40], v4mapped(192, 0, 2, 1)) }), wire.ErrNotRoCE},
		{"IPv6 both IPv4-mapped", v6(func(d []byte) {
			copy(d[8:24], v4mapped(192, 0, 2, 1))
			copy(d[24:40], v4mapped(192, 0, 2, 2))
		}), wire.ErrNotRoCE},
		{"version 0", v4(func(d []byte) { d[0] = 0x05 }), wire.ErrNotRoCE},
		{"version 5", v4(func(d []byte) { d[0] = 0x55 }), wire.ErrNotRoCE},
		{"version 7", v6(func(d []byte) { d[0] = 0x70 }), wire.ErrNotRoCE},
		{"version 15", []byte{0xF0}, wire.ErrNotRoCE},
	}
	for _, tt := range tests {
		_, payload, err := wire.ParseEncap(tt.b)
		if !errors.Is(err, wire.ErrMalformed) || !errors.Is(err, tt.want) {
			t.Errorf("%s: ParseEncap = %v, want %v", tt.name, err, tt.want)
		}
		if payload != nil {
			t.Errorf("%s: ParseEncap returned %d payload bytes with an error", tt.name, len(payload))
		}
	}
}

func v4mapped(a, b, c, d byte) []byte {
	return []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d}
}

// TestParseEncapMappedNoPanic is the regression test for IPv6 datagrams
// with IPv4-mapped addresses: ParseEncap once accepted them and returned
// an Encap that IsIPv4, so CheckICRC computed an IPv4 pseudo-header for an
// IPv6 packet, and panicked (netip As4 on an IPv6 address) when only the
// source was mapped.
func TestParseEncapMappedNoPanic(t *testing.T) {
	e := testEncap6()
	h := maxHeaders(wire.UDSendOnly)
	d := datagram(&e, build(t, &e, &h, make([]byte, 16)))
	copy(d[8:24], v4mapped(10, 0, 0, 1))
	got, pkt, err := wire.ParseEncap(d)
	if err == nil {
		_ = wire.CheckICRC(&got, pkt) // panicked before the fix
		t.Errorf("ParseEncap accepted an IPv6 datagram from an IPv4-mapped source: %+v", got)
	}
}

func TestSourcePorts(t *testing.T) {
	tests := []struct {
		name string
		got  uint16
		want uint16
	}{
		// captures/FACTS.md: connected RC/UC QPs.
		{"ConnectedSrcPort(0x11, 0x11)", wire.ConnectedSrcPort(0x11, 0x11), 0xC121},
		{"ConnectedSrcPort(0x12, 0x12)", wire.ConnectedSrcPort(0x12, 0x12), 0xC144},
		{"ConnectedSrcPort(0x1b, 0x1b)", wire.ConnectedSrcPort(0x1B, 0x1B), 49881},
		{"ConnectedSrcPort(0x13, 0x13)", wire.ConnectedSrcPort(0x13, 0x13), 49513},
		// UD QPs: 0xC000 + hash_32(qpn, 14).
		{"RxeSrcPort(1)", wire.RxeSrcPort(1), 0xD872},
		{"RxeSrcPort(0x14)", wire.RxeSrcPort(0x14), 0xE8EA},
		{"RxeSrcPort(0)", wire.RxeSrcPort(0), 0xC000},
		// rping's RDMA CM flow label 0x68f03.
		{"FlowLabelSrcPort(0x68f03)", wire.FlowLabelSrcPort(0x68F03), 0xCF19},
		{"FlowLabelSrcPort(0)", wire.FlowLabelSrcPort(0), 0xC000},
		{"FlowLabelSrcPort(wide)", wire.FlowLabelSrcPort(0xFFF68F03), 0xCF19},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %#04x, want %#04x", tt.name, tt.got, tt.want)
		}
	}
	r := newRand(t)
	for range 10000 {
		a, b := r.Uint32()&wire.QPNMask, r.Uint32()&wire.QPNMask
		p := wire.ConnectedSrcPort(a, b)
		if p != wire.ConnectedSrcPort(b, a) {
			t.Fatalf("ConnectedSrcPort(%#x, %#x) = %#x is not symmetric", a, b, p)
		}
		for _, port := range []uint16{p, wire.RxeSrcPort(a), wire.FlowLabelSrcPort(b)} {
			if port < wire.SrcPortBase {
				t.Fatalf("source port %#x below %#x (QPNs %#x, %#x)", port, wire.SrcPortBase, a, b)
			}
		}
	}
}

// TestPutHeadersMixedFamily checks that a mixed-family Encap (a caller's
// bug) builds an IPv4 header with zeros for the non-IPv4 address instead
// of panicking.
func TestPutHeadersMixedFamily(t *testing.T) {
	tests := []struct {
		name     string
		src, dst netip.Addr
		want     []byte // IPv4 bytes 12..19
	}{
		{"IPv6 destination", netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fe80::1"), []byte{10, 0, 0, 1, 0, 0, 0, 0}},
		{"zero destination", netip.MustParseAddr("10.0.0.1"), netip.Addr{}, []byte{10, 0, 0, 1, 0, 0, 0, 0}},
		{"mapped source", netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("10.0.0.2"), []byte{10, 0, 0, 1, 10, 0, 0, 2}},
	}
	for _, tt := range tests {
		e := wire.Encap{Src: tt.src, Dst: tt.dst, SrcPort: 0xC000, DstPort: wire.UDPPort}
		b := make([]byte, e.HeaderLen())
		if n := e.PutHeaders(b, 16); n != wire.IPv4HeaderLen+wire.UDPHeaderLen {
			t.Errorf("%s: PutHeaders = %d, want %d", tt.name, n, wire.IPv4HeaderLen+wire.UDPHeaderLen)
		}
		if got := b[12:20]; !bytes.Equal(got, tt.want) {
			t.Errorf("%s: addresses % x, want % x", tt.name, got, tt.want)
		}
		pkt := make([]byte, 16)
		wire.SetICRC(&e, pkt) // must not panic either
	}
}
