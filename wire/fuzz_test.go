package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/softnic/softnic/wire"
)

// reservedMask returns a mask over op's Info().Length header bytes with a 1
// for every bit the IBTA reserves, which the Encode methods write as zero:
// BTH byte 4 bits 5:0 and byte 8 bits 6:0, the byte before each 24-bit
// field of RDETH, DETH and XRCETH, all of FETH but its low six bits, and
// the CNP's 16 reserved bytes.
func reservedMask(op wire.Opcode) []byte {
	info := op.Info()
	m := make([]byte, info.Length)
	m[4] = 0x3F
	m[8] = 0x7F
	for _, h := range allHeaders {
		if !info.Has(h) {
			continue
		}
		off := int(info.Offset[h])
		switch h {
		case wire.HdrRDETH, wire.HdrXRCETH:
			m[off] = 0xFF
		case wire.HdrDETH:
			m[off+4] = 0xFF
		case wire.HdrFETH:
			m[off], m[off+1], m[off+2], m[off+3] = 0xFF, 0xFF, 0xFF, 0xC0
		case wire.HdrCNP:
			copy(m[off:off+h.Len()], bytes.Repeat([]byte{0xFF}, h.Len()))
		}
	}
	return m
}

// canonical returns the packet a conforming sender would have sent for
// what Parse decoded from pkt: reserved header bits cleared, pad bytes
// zero, and the ICRC computed for e.
func canonical(pkt []byte, p *wire.Packet, e *wire.Encap) []byte {
	c := bytes.Clone(pkt)
	for i, m := range reservedMask(p.Opcode) {
		c[i] &^= m
	}
	end := p.Info.Length + len(p.Payload)
	clear(c[end : end+p.Pad])
	wire.SetICRC(e, c)
	return c
}

// FuzzParse feeds Parse arbitrary UDP payloads. Properties:
//
//  1. Parse, CheckICRC and CheckPMTU never panic, and Parse's errors wrap
//     ErrMalformed.
//  2. When Parse succeeds, building Headers() and Payload again with Build
//     gives exactly canonical(input): the same length (the pad count is
//     determined by the payload length since the packet length is a
//     multiple of 4), the same header bytes except reserved bits (which
//     Encode zeroes), the same payload, zero pad bytes (Parse does not
//     check them) and the ICRC for the encapsulation. So whenever the input
//     was already canonical and its ICRC valid, Build reproduces it byte
//     for byte.
//  3. Parsing the rebuilt packet decodes the same headers and payload.
func FuzzParse(f *testing.F) {
	e := testEncap4()
	for _, op := range validOpcodes() {
		h := maxHeaders(op)
		f.Add(build(f, &e, &h, make([]byte, smallPayloadSize(op))))
		h = wire.Headers{BTH: wire.BTHFields{Opcode: op}}
		f.Add(build(f, &e, &h, nil))
	}
	for _, g := range loadGolden(f) {
		f.Add(g.pkt)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p wire.Packet
		err := wire.Parse(data, &p)
		_ = wire.CheckICRC(&e, data) // must not panic, whatever Parse says
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("Parse error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for _, pmtu := range []int{256, 1024, 4096} {
			if err := p.CheckPMTU(pmtu); err != nil && !errors.Is(err, wire.ErrBadLength) {
				t.Fatalf("CheckPMTU(%d) = %v, want nil or ErrBadLength", pmtu, err)
			}
		}
		if p.Pad != wire.PadFor(len(p.Payload)) {
			t.Fatalf("%v: pad %d with %d payload bytes in a %d-byte packet", p.Opcode, p.Pad, len(p.Payload), len(data))
		}

		h := p.Headers()
		out := make([]byte, len(data))
		n, err := wire.Build(out, &e, &h, p.Payload)
		if err != nil || n != len(data) {
			t.Fatalf("%v: Build = %d, %v; want %d, nil", p.Opcode, n, err, len(data))
		}
		want := canonical(data, &p, &e)
		if !bytes.Equal(out, want) {
			t.Fatalf("%v: Build(Parse(x)) =\n% x\nwant canonical(x) =\n% x", p.Opcode, out, want)
		}

		var q wire.Packet
		if err := wire.Parse(out, &q); err != nil {
			t.Fatalf("%v: Parse(Build(Parse(x))): %v", p.Opcode, err)
		}
		if q.Opcode != p.Opcode || q.Headers() != h || !bytes.Equal(q.Payload, p.Payload) {
			t.Fatalf("%v: reparse gave %v %+v, want %+v", p.Opcode, q.Opcode, q.Headers(), h)
		}
		if err := wire.CheckICRC(&e, out); err != nil {
			t.Fatalf("%v: CheckICRC(Build(...)) = %v", p.Opcode, err)
		}
	})
}

// FuzzParseEncap feeds ParseEncap arbitrary IP datagrams. Properties:
//
//  1. ParseEncap never panics and its errors wrap ErrMalformed; on success
//     CheckICRC and Parse on the returned UDP payload never panic.
//  2. When ParseEncap succeeds, PutHeaders plus the payload reproduces the
//     input's IP and UDP bytes, except the IPv4 header checksum (recomputed,
//     and it must verify) and, when the UDP length is shorter than the IP
//     payload (the rest is trimmed), the IP length field, which must then
//     state the trimmed length.
//  3. ParseEncap of the re-serialised datagram gives the same Encap and
//     payload.
func FuzzParseEncap(f *testing.F) {
	for _, e := range []wire.Encap{testEncap4(), testEncap6()} {
		for _, op := range []wire.Opcode{wire.RCSendOnly, wire.RCAck, wire.UDSendOnlyImm, wire.RCWriteOnlyImm} {
			h := maxHeaders(op)
			f.Add(datagram(&e, build(f, &e, &h, make([]byte, smallPayloadSize(op)))))
		}
		f.Add(datagram(&e, nil))
	}
	gs := loadGolden(f)
	for i := 0; i < len(gs); i += 7 {
		f.Add(gs[i].ip)
	}
	e6 := testEncap6()
	mapped := datagram(&e6, make([]byte, 16))
	copy(mapped[8:24], v4mapped(10, 0, 0, 1))
	f.Add(mapped)

	f.Fuzz(func(t *testing.T, data []byte) {
		e, payload, err := wire.ParseEncap(data)
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("ParseEncap error %v does not wrap ErrMalformed", err)
			}
			return
		}
		_ = wire.CheckICRC(&e, payload)
		var p wire.Packet
		_ = wire.Parse(payload, &p)

		v4 := data[0]>>4 == 4
		if e.IsIPv4() != v4 {
			t.Fatalf("IP version %d parsed as IsIPv4 %v: %+v", data[0]>>4, e.IsIPv4(), e)
		}
		hl := e.HeaderLen()
		out := make([]byte, hl+len(payload))
		if n := e.PutHeaders(out, len(payload)); n != hl {
			t.Fatalf("PutHeaders = %d, want HeaderLen %d", n, hl)
		}
		copy(out[hl:], payload)
		if len(out) > len(data) {
			t.Fatalf("re-serialised %d bytes from a %d-byte input", len(out), len(data))
		}
		in := bytes.Clone(data[:len(out)])
		ignore := func(b []byte, from, to int) { clear(b[from:to]) }
		got := bytes.Clone(out)
		if v4 {
			if !ipv4HeaderChecksumOK(out[:wire.IPv4HeaderLen]) {
				t.Fatalf("re-serialised IPv4 header checksum does not verify: % x", out[:wire.IPv4HeaderLen])
			}
			ignore(in, 10, 12)
			ignore(got, 10, 12)
			if total := int(binary.BigEndian.Uint16(data[2:])); total != len(out) {
				if n := int(binary.BigEndian.Uint16(out[2:])); n != len(out) {
					t.Fatalf("IPv4 total length %d, want %d", n, len(out))
				}
				ignore(in, 2, 4)
				ignore(got, 2, 4)
			}
		} else if plen := int(binary.BigEndian.Uint16(data[4:])); plen != len(out)-wire.IPv6HeaderLen {
			if n := int(binary.BigEndian.Uint16(out[4:])); n != len(out)-wire.IPv6HeaderLen {
				t.Fatalf("IPv6 payload length %d, want %d", n, len(out)-wire.IPv6HeaderLen)
			}
			ignore(in, 4, 6)
			ignore(got, 4, 6)
		}
		if !bytes.Equal(got, in) {
			t.Fatalf("re-serialised\n% x\nwant\n% x", got, in)
		}

		e2, payload2, err := wire.ParseEncap(out)
		if err != nil || e2 != e || !bytes.Equal(payload2, payload) {
			t.Fatalf("ParseEncap(re-serialised) = %+v, %d bytes, %v; want %+v, %d bytes", e2, len(payload2), err, e, len(payload))
		}
	})
}

// FuzzParseMAD feeds ParseMAD and ParseCM arbitrary bytes, seeded with the
// CM MADs of the rping capture. Properties:
//
//  1. Neither panics; their errors wrap ErrBadMAD.
//  2. A parsed MAD's header, written again with PutMADHdr over its class
//     data, gives back the input's first MADLen bytes.
//  3. For a CM message this package lays out, rebuilding it from its
//     fields (rebuild: PutCM, then every field set from the parsed view)
//     parses again with the same header and equal fields, and rebuilding
//     that gives the same bytes (parse→build→parse is stable). The rebuilt
//     message differs from the input at most in reserved bits.
func FuzzParseMAD(f *testing.F) {
	mads, _, _ := cmMADs(f)
	for _, m := range mads {
		f.Add(m)
	}
	for _, a := range cmAttrs {
		f.Add([]byte(wire.PutCM(make([]byte, wire.MADLen), a, 1)))
	}
	f.Add([]byte{1, 7, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wire.ParseMAD(b)
		if err != nil {
			if !errors.Is(err, wire.ErrBadMAD) {
				t.Fatalf("ParseMAD error %v does not wrap ErrBadMAD", err)
			}
			return
		}
		again := make([]byte, wire.MADLen)
		copy(again[wire.MADHdrLen:], m.Data())
		if wire.PutMADHdr(again, m.Hdr()); !bytes.Equal(again, b[:wire.MADLen]) {
			t.Fatalf("PutMADHdr(Hdr()) differs from the input")
		}
		cm, err := wire.ParseCM(b)
		if err != nil {
			if !errors.Is(err, wire.ErrBadMAD) {
				t.Fatalf("ParseCM error %v does not wrap ErrBadMAD", err)
			}
			return
		}
		layout := wire.CMLayout(cm.AttrID())
		if layout == nil {
			return
		}
		r1 := rebuild(cm)
		m1, err := wire.ParseCM(r1)
		if err != nil {
			t.Fatalf("ParseCM(rebuilt): %v", err)
		}
		if h1, h := m1.Hdr(), cm.Hdr(); h1.TID != h.TID || h1.AttrID != h.AttrID {
			t.Fatalf("rebuilt header %+v, parsed %+v", h1, h)
		}
		for _, fl := range layout {
			if fl.IsBytes() {
				if !bytes.Equal(fl.Bytes(m1), fl.Bytes(cm)) {
					t.Fatalf("%s differs after rebuild", fl.Name)
				}
			} else if fl.Get(m1) != fl.Get(cm) {
				t.Fatalf("%s: %#x after rebuild, %#x before", fl.Name, fl.Get(m1), fl.Get(cm))
			}
		}
		if r2 := rebuild(m1); !bytes.Equal(r2, r1) {
			t.Fatalf("rebuild is not stable")
		}
	})
}

// FuzzParseCMAHeader feeds ParseCMAHeader arbitrary bytes, seeded with the
// rping REQ's private data. Properties: it never panics, its errors wrap
// ErrBadMAD, and a parsed header written with PutCMAHeader parses to the
// same header and reproduces the input's 36 bytes but for the bytes the
// format leaves zero (byte 1's low nibble; for IPv4, the 12 bytes before
// each address).
func FuzzParseCMAHeader(f *testing.F) {
	mads, _, _ := cmMADs(f)
	f.Add(wire.CMReq(mads[0]).PrivateData())
	f.Add(append([]byte{0, 0x60}, make([]byte, 34)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := wire.ParseCMAHeader(b)
		if err != nil {
			if !errors.Is(err, wire.ErrBadMAD) {
				t.Fatalf("error %v does not wrap ErrBadMAD", err)
			}
			return
		}
		out := make([]byte, wire.CMAHdrLen)
		wire.PutCMAHeader(out, h)
		if h2, err := wire.ParseCMAHeader(out); err != nil || h2 != h {
			t.Fatalf("PutCMAHeader(%+v) parses as %+v, %v", h, h2, err)
		}
		want := bytes.Clone(b[:wire.CMAHdrLen])
		want[1] &= 0xF0
		if h.IPVersion == 4 {
			clear(want[4:16])
			clear(want[20:32])
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("PutCMAHeader\n% x\nwant\n% x", out, want)
		}
	})
}
