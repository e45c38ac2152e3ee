package wire_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/softnic/softnic/wire"
)

// The golden packets are every RoCEv2 packet of the real rxe captures in
// testdata (rxe of Debian 12's kernel 6.1 between two guests, plus a host
// program as a UD peer; see the rxe-peer captures' FACTS.md).

// readPcap reads a classic pcap file (either byte order, micro- or
// nanosecond timestamps) and returns its link type and frames. It refuses
// frames cut short by the snap length.
func readPcap(path string) (linkType uint32, frames [][]byte, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	if len(b) < 24 {
		return 0, nil, fmt.Errorf("%s: %d bytes, too short for a pcap header", path, len(b))
	}
	var order binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xA1B2C3D4, 0xA1B23C4D:
		order = binary.LittleEndian
	case 0xD4C3B2A1, 0x4D3CB2A1:
		order = binary.BigEndian
	default:
		return 0, nil, fmt.Errorf("%s: not a pcap file (magic % x)", path, b[:4])
	}
	linkType = order.Uint32(b[20:])
	for off := 24; off < len(b); {
		if len(b)-off < 16 {
			return 0, nil, fmt.Errorf("%s: truncated record header at %d", path, off)
		}
		incl, orig := int(order.Uint32(b[off+8:])), int(order.Uint32(b[off+12:]))
		off += 16
		if incl > len(b)-off {
			return 0, nil, fmt.Errorf("%s: truncated record at %d", path, off)
		}
		if incl != orig {
			return 0, nil, fmt.Errorf("%s: frame %d captured %d of %d bytes", path, len(frames)+1, incl, orig)
		}
		frames = append(frames, b[off:off+incl])
		off += incl
	}
	return linkType, frames, nil
}

// etherPayload returns the IP datagram of an Ethernet frame, skipping
// 802.1Q/802.1ad tags, or nil if it carries neither IPv4 nor IPv6.
func etherPayload(f []byte) []byte {
	if len(f) < 14 {
		return nil
	}
	typ, off := binary.BigEndian.Uint16(f[12:]), 14
	for typ == 0x8100 || typ == 0x88A8 {
		if len(f) < off+4 {
			return nil
		}
		typ, off = binary.BigEndian.Uint16(f[off+2:]), off+4
	}
	if typ != 0x0800 && typ != 0x86DD {
		return nil
	}
	return f[off:]
}

// golden is one RoCEv2 packet of a capture.
type golden struct {
	file  string // capture file name
	index int    // 1-based frame number, as in packets.txt
	ip    []byte // the IP datagram (Ethernet padding trimmed)
	e     wire.Encap
	pkt   []byte // UDP payload: BTH through ICRC
}

func (g *golden) String() string { return fmt.Sprintf("%s #%d", g.file, g.index) }

// loadGolden returns every UDP/4791 packet of testdata/*.pcap.
func loadGolden(t testing.TB) []golden {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	var gs []golden
	for _, path := range files {
		lt, frames, err := readPcap(path)
		if err != nil {
			t.Fatal(err)
		}
		if lt != 1 {
			t.Fatalf("%s: link type %d, want 1 (Ethernet)", path, lt)
		}
		for i, f := range frames {
			ip := etherPayload(f)
			if ip == nil {
				continue
			}
			e, pkt, err := wire.ParseEncap(ip)
			if err != nil {
				t.Errorf("%s #%d: ParseEncap: %v", path, i+1, err)
				continue
			}
			if e.DstPort != wire.UDPPort {
				continue
			}
			ip = ip[:e.HeaderLen()+len(pkt)]
			gs = append(gs, golden{filepath.Base(path), i + 1, ip, e, pkt})
		}
	}
	return gs
}

// TestGoldenCaptures parses and ICRC-checks every packet of the captures,
// and checks that re-encoding what Parse and ParseEncap decoded reproduces
// rxe's bytes exactly.
func TestGoldenCaptures(t *testing.T) {
	wantCounts := map[string]int{
		"host_ud_peer_raw.pcap":     10,
		"host_ud_peer_udp.pcap":     10,
		"ib_atomic_bw_cas.pcap":     10,
		"ib_atomic_bw_fadd.pcap":    10,
		"ib_read_bw_5000.pcap":      30,
		"ib_send_bw_5000.pcap":      30,
		"ib_send_bw_tclass106.pcap": 10,
		"ib_write_bw_5000.pcap":     30,
		"ib_write_lat_64.pcap":      20,
		"rc_pingpong_5000.pcap":     60,
		"rc_pingpong_64.pcap":       20,
		"rping_cm.pcap":             41,
		"uc_pingpong_5000.pcap":     50,
		"ud_pingpong_512.pcap":      10,
	}
	const wantTotal = 341

	gs := loadGolden(t)
	counts := map[string]int{}
	opcodes := map[wire.Opcode]int{}
	for i := range gs {
		g := &gs[i]
		counts[g.file]++
		var p wire.Packet
		if err := wire.Parse(g.pkt, &p); err != nil {
			t.Errorf("%v: Parse: %v", g, err)
			continue
		}
		opcodes[p.Opcode]++
		if err := wire.CheckICRC(&g.e, g.pkt); err != nil {
			t.Errorf("%v: CheckICRC: %v (stored %#08x, computed %#08x)", g, err, p.ICRC(), wire.ComputeICRC(&g.e, g.pkt))
		}
		if err := p.CheckPMTU(1024); err != nil { // rxe's active MTU on a 1500-byte netdev
			t.Errorf("%v: CheckPMTU(1024): %v", g, err)
		}

		// rxe writes reserved bits and pad as zero, so Build reproduces
		// its packet byte for byte, and PutHeaders its IP/UDP headers
		// (IPv4 checksum included).
		h := p.Headers()
		if got := build(t, &g.e, &h, p.Payload); !bytes.Equal(got, g.pkt) {
			t.Errorf("%v: Build(Headers(), Payload) =\n% x\nwant\n% x", g, got, g.pkt)
		}
		if got := datagram(&g.e, g.pkt); !bytes.Equal(got, g.ip) {
			t.Errorf("%v: PutHeaders =\n% x\nwant\n% x", g, got[:g.e.HeaderLen()], g.ip[:g.e.HeaderLen()])
		}

		// What every rxe packet has in common (captures/FACTS.md).
		bth := h.BTH
		if bth.TVer != 0 || bth.PKey != wire.DefaultPKey || bth.MigReq || bth.FECN || bth.BECN {
			t.Errorf("%v: BTH %+v, want TVer 0, P_Key 0xFFFF, M/FECN/BECN clear", g, bth)
		}
		if !g.e.IsIPv4() || g.e.FragOff != wire.IPv4DF || g.e.HopLimit != 64 {
			t.Errorf("%v: %+v, want IPv4, DF, TTL 64", g, g.e)
		}
		checkSrcPort(t, g, &p)
	}
	total := 0
	for file, want := range wantCounts {
		if got := counts[file]; got != want {
			t.Errorf("%s: %d RoCEv2 packets, want %d", file, got, want)
		}
		total += counts[file]
	}
	if len(counts) != len(wantCounts) {
		t.Errorf("captures %v, want the %d files %v", counts, len(wantCounts), wantCounts)
	}
	if total != wantTotal || len(gs) != wantTotal {
		t.Errorf("%d golden packets (%d in the listed files), want %d", len(gs), total, wantTotal)
	}
	t.Logf("golden packets per file: %v", counts)
	t.Logf("golden packets per opcode: %v", opcodes)
}

// checkSrcPort checks a captured packet's UDP source port against the rule
// that made it (captures/FACTS.md, "Source port"). In these captures both
// ends of every connection have the same QPN, so the BTH DestQP is also
// the sender's QPN.
func checkSrcPort(t *testing.T, g *golden, p *wire.Packet) {
	t.Helper()
	host := netip.MustParseAddr("10.77.0.1") // host-ud-peer.py, not rxe
	var want uint16
	switch {
	case g.e.Src == host:
		return
	case p.Opcode.Class() == wire.ClassUD:
		want = wire.RxeSrcPort(p.DETH().SrcQP()) // QP1 included
	case g.file == "rping_cm.pcap":
		want = wire.FlowLabelSrcPort(0x68F03) // the CM REQ's flow label
	default:
		want = wire.ConnectedSrcPort(p.DestQP(), p.DestQP())
	}
	if g.e.SrcPort != want {
		t.Errorf("%v: %v source port %#04x, want %#04x", g, p.Opcode, g.e.SrcPort, want)
	}
}

// TestGoldenFields spot-checks decoded fields against the analyzer's
// listing (rxe-peer/captures/packets.txt), copied here as literals.
func TestGoldenFields(t *testing.T) {
	type spot struct {
		file    string
		index   int
		src     string // "ip:port"
		id      uint16
		tos     uint8
		udpSum  uint16
		op      wire.Opcode
		destQP  uint32
		psn     wire.PSN
		ackReq  bool
		payload int
		icrc    uint32
		check   func(t *testing.T, p *wire.Packet)
	}
	tests := []spot{
		{"host_ud_peer_raw.pcap", 1, "10.77.0.1:58688", 42575, 0, 0, wire.UDSendOnly, 0x1D, 0xEAB0BA, false, 64, 0x9F008B42,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.DETH().Fields(), (wire.DETHFields{QKey: 0x11111111, SrcQP: 0xE41E2}); got != want {
					t.Errorf("DETH %+v, want %+v", got, want)
				}
			}},
		{"host_ud_peer_udp.pcap", 1, "10.77.0.1:50666", 0, 0, 0x150E, wire.UDSendOnly, 0x1E, 0x13726C, false, 64, 0x1D4F9B96,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.DETH().Fields(), (wire.DETHFields{QKey: 0x11111111, SrcQP: 0x3F266}); got != want {
					t.Errorf("DETH %+v, want %+v", got, want)
				}
			}},
		{"ib_read_bw_5000.pcap", 1, "10.77.0.3:49681", 4911, 0, 0, wire.RCReadRequest, 0x17, 0x17E92C, true, 0, 0x4DBCB125,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.RETH().Fields(), (wire.RETHFields{VA: 0x56474224E388, RKey: 0x85F, DMALen: 5000}); got != want {
					t.Errorf("RETH %+v, want %+v", got, want)
				}
			}},
		{"ib_read_bw_5000.pcap", 2, "10.77.0.2:49681", 62909, 0, 0, wire.RCReadResponseFirst, 0x17, 0x17E92C, false, 1024, 0x3593B093,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AETH().Fields(), (wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: 1}); got != want {
					t.Errorf("AETH %+v, want %+v", got, want)
				}
			}},
		{"ib_read_bw_5000.pcap", 3, "10.77.0.2:49681", 62910, 0, 0, wire.RCReadResponseMiddle, 0x17, 0x17E92D, false, 1024, 0x6100A434,
			func(t *testing.T, p *wire.Packet) {
				if p.AETH() != nil {
					t.Errorf("READ_RESPONSE_MIDDLE has an AETH")
				}
			}},
		{"ib_read_bw_5000.pcap", 6, "10.77.0.2:49681", 62913, 0, 0, wire.RCReadResponseLast, 0x17, 0x17E930, false, 904, 0x2F9A3ADB,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AETH().Fields(), (wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: 1}); got != want {
					t.Errorf("AETH %+v, want %+v", got, want)
				}
			}},
		{"ib_atomic_bw_cas.pcap", 1, "10.77.0.3:49881", 6158, 0, 0, wire.RCCompareSwap, 0x1B, 0xB2437B, true, 0, 0x11C22A0B,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AtomicETH().Fields(), (wire.AtomicETHFields{VA: 0x55642471B000, RKey: 0xC80}); got != want {
					t.Errorf("AtomicETH %+v, want %+v", got, want)
				}
			}},
		{"ib_atomic_bw_cas.pcap", 3, "10.77.0.2:49881", 63561, 0, 0, wire.RCAtomicAck, 0x1B, 0xB2437B, false, 0, 0x145D3970,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AETH().Fields(), (wire.AETHFields{Syndrome: 0x1F, MSN: 1}); got != want {
					t.Errorf("AETH %+v, want %+v", got, want)
				}
				if got, want := p.AtomicAckETH().Orig(), uint64(0x4E892ED93F5BB8A6); got != want {
					t.Errorf("AtomicAckETH orig %#x, want %#x", got, want)
				}
			}},
		{"ib_atomic_bw_fadd.pcap", 1, "10.77.0.3:49828", 5887, 0, 0, wire.RCFetchAdd, 0x1A, 0x75C528, true, 0, 0x8A792924,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AtomicETH().Fields(), (wire.AtomicETHFields{VA: 0x5652F7FA5000, RKey: 0xB78, SwapAdd: 1}); got != want {
					t.Errorf("AtomicETH %+v, want %+v", got, want)
				}
			}},
		{"ib_atomic_bw_fadd.pcap", 10, "10.77.0.2:49828", 63382, 0, 0, wire.RCAtomicAck, 0x1A, 0x75C52C, false, 0, 0x90A964FE,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AtomicAckETH().Orig(), uint64(0x9FB1FC77D810646); got != want {
					t.Errorf("AtomicAckETH orig %#x, want %#x", got, want)
				}
				if got, want := p.AETH().MSN(), uint32(5); got != want {
					t.Errorf("AETH MSN %d, want %d", got, want)
				}
			}},
		{"ib_write_bw_5000.pcap", 1, "10.77.0.3:49593", 4243, 0, 0, wire.RCWriteFirst, 0x15, 0xB8F5BE, false, 1024, 0x5387CEE4,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.RETH().Fields(), (wire.RETHFields{VA: 0x56310FB6B388, RKey: 0x6B2, DMALen: 5000}); got != want {
					t.Errorf("RETH %+v, want %+v", got, want)
				}
			}},
		{"ib_send_bw_tclass106.pcap", 1, "10.77.0.3:49777", 5414, 0x6A, 0, wire.RCSendOnly, 0x19, 0x20150A, true, 64, 0x243E135A, nil},
		{"rc_pingpong_64.pcap", 2, "10.77.0.2:49441", 61599, 0, 0, wire.RCAck, 0x11, 0x87C0AC, false, 0, 0xD4EE413A,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AETH().Syndrome(), wire.AckUnlimited; got != want {
					t.Errorf("AETH syndrome %v, want %v", got, want)
				}
			}},
		{"rping_cm.pcap", 1, "10.77.0.3:55410", 6803, 0, 0, wire.UDSendOnly, 1, 0, true, 256, 0xCA7F88A9,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.DETH().Fields(), (wire.DETHFields{QKey: 0x80010000, SrcQP: 1}); got != want {
					t.Errorf("DETH %+v, want %+v", got, want)
				}
			}},
		{"rping_cm.pcap", 7, "10.77.0.3:53017", 6809, 0, 0, wire.RCReadResponseOnly, 0x1C, 0x61EBE5, false, 64, 0x8B843D9D,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AETH().MSN(), uint32(1); got != want {
					t.Errorf("AETH MSN %d, want %d", got, want)
				}
			}},
		{"rping_cm.pcap", 33, "10.77.0.3:53017", 6823, 0, 0, wire.RCAck, 0x1C, 0x61EBEE, false, 0, 0x157FFD90,
			func(t *testing.T, p *wire.Packet) {
				if got, want := p.AETH().Fields(), (wire.AETHFields{Syndrome: 0x1F, MSN: 10}); got != want {
					t.Errorf("AETH %+v, want %+v", got, want)
				}
			}},
		{"uc_pingpong_5000.pcap", 1, "10.77.0.3:49513", 3484, 0, 0, wire.UCSendFirst, 0x13, 0x6D7E92, false, 1024, 0x23B65083, nil},
		{"ud_pingpong_512.pcap", 2, "10.77.0.2:59626", 61847, 0, 0, wire.UDSendOnly, 0x14, 0x0020E6, false, 512, 0xDF9207C0, nil},
	}
	byKey := map[string]*golden{}
	gs := loadGolden(t)
	for i := range gs {
		byKey[gs[i].String()] = &gs[i]
	}
	for _, tt := range tests {
		key := fmt.Sprintf("%s #%d", tt.file, tt.index)
		t.Run(key, func(t *testing.T) {
			g := byKey[key]
			if g == nil {
				t.Fatalf("no RoCEv2 packet %s", key)
			}
			var p wire.Packet
			if err := wire.Parse(g.pkt, &p); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := netip.AddrPortFrom(g.e.Src, g.e.SrcPort).String(); got != tt.src {
				t.Errorf("source %s, want %s", got, tt.src)
			}
			if g.e.ID != tt.id || g.e.TrafficClass != tt.tos || g.e.UDPChecksum != tt.udpSum {
				t.Errorf("IP id %d TOS %#x UDP checksum %#x, want %d %#x %#x", g.e.ID, g.e.TrafficClass, g.e.UDPChecksum, tt.id, tt.tos, tt.udpSum)
			}
			if p.Opcode != tt.op {
				t.Errorf("opcode %v, want %v", p.Opcode, tt.op)
			}
			if p.DestQP() != tt.destQP || p.PSN() != tt.psn || p.AckReq() != tt.ackReq {
				t.Errorf("dqpn %#x psn %#x ackreq %v, want %#x %#x %v", p.DestQP(), uint32(p.PSN()), p.AckReq(), tt.destQP, uint32(tt.psn), tt.ackReq)
			}
			if len(p.Payload) != tt.payload || p.Pad != 0 {
				t.Errorf("payload %d bytes pad %d, want %d, 0", len(p.Payload), p.Pad, tt.payload)
			}
			if p.ICRC() != tt.icrc {
				t.Errorf("ICRC %#08x, want %#08x", p.ICRC(), tt.icrc)
			}
			if tt.check != nil {
				tt.check(t, &p)
			}
		})
	}
}

func TestReadPcapErrors(t *testing.T) {
	dir := t.TempDir()
	hdr := func(magic uint32) []byte {
		b := make([]byte, 24)
		binary.LittleEndian.PutUint32(b, magic)
		binary.LittleEndian.PutUint32(b[20:], 1)
		return b
	}
	rec := func(incl, orig int) []byte {
		b := make([]byte, 16+incl)
		binary.LittleEndian.PutUint32(b[8:], uint32(incl))
		binary.LittleEndian.PutUint32(b[12:], uint32(orig))
		return b
	}
	tests := []struct {
		name   string
		data   []byte
		frames int
		ok     bool
	}{
		{"short", make([]byte, 10), 0, false},
		{"bad magic", hdr(0x12345678), 0, false},
		{"empty", hdr(0xA1B2C3D4), 0, true},
		{"nanosecond", append(hdr(0xA1B23C4D), rec(60, 60)...), 1, true},
		{"two frames", append(append(hdr(0xA1B2C3D4), rec(60, 60)...), rec(14, 14)...), 2, true},
		{"snapped frame", append(hdr(0xA1B2C3D4), rec(60, 70)...), 0, false},
		{"cut record", append(hdr(0xA1B2C3D4), rec(60, 60)[:40]...), 0, false},
		{"cut record header", append(hdr(0xA1B2C3D4), 1, 2, 3), 0, false},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, "x.pcap")
		if err := os.WriteFile(path, tt.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, frames, err := readPcap(path)
		if (err == nil) != tt.ok || len(frames) != tt.frames {
			t.Errorf("%s: readPcap = %d frames, %v; want %d frames, ok %v", tt.name, len(frames), err, tt.frames, tt.ok)
		}
	}
	vlan := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x00, 0x00, 0x05, 0x08, 0x00, 0x45}
	if got := etherPayload(vlan); !bytes.Equal(got, []byte{0x45}) {
		t.Errorf("etherPayload(VLAN frame) = % x, want 45", got)
	}
	arp := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x06, 0}
	if got := etherPayload(arp); got != nil {
		t.Errorf("etherPayload(ARP frame) = % x, want nil", got)
	}
}
