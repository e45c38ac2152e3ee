package capture_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/wire"
)

const testdata = "../wire/testdata"

// rxeCaptures are the real rxe captures in wire/testdata and how many
// RoCEv2 packets each holds (every frame is one).
var rxeCaptures = []struct {
	file string
	n    int
}{
	{"host_ud_peer_raw.pcap", 10},
	{"host_ud_peer_udp.pcap", 10},
	{"ib_atomic_bw_cas.pcap", 10},
	{"ib_atomic_bw_fadd.pcap", 10},
	{"ib_read_bw_5000.pcap", 30},
	{"ib_send_bw_5000.pcap", 30},
	{"ib_send_bw_tclass106.pcap", 10},
	{"ib_write_bw_5000.pcap", 30},
	{"ib_write_lat_64.pcap", 20},
	{"rc_pingpong_5000.pcap", 60},
	{"rc_pingpong_64.pcap", 20},
	{"rping_cm.pcap", 41},
	{"uc_pingpong_5000.pcap", 50},
	{"ud_pingpong_512.pcap", 10},
}

func TestReaderRxeCaptures(t *testing.T) {
	total := 0
	for _, c := range rxeCaptures {
		ds, err := capture.ReadFile(filepath.Join(testdata, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(ds); got != c.n {
			t.Errorf("%s: got %d datagrams, want %d", c.file, got, c.n)
		}
		for i, d := range ds {
			if got, want := d.Index, i+1; got != want {
				t.Errorf("%s: datagram %d: got index %d, want %d", c.file, i, got, want)
			}
			if d.Encap.DstPort != wire.UDPPort {
				t.Errorf("%s #%d: got UDP dst port %d, want %d", c.file, d.Index, d.Encap.DstPort, wire.UDPPort)
			}
			if err := wire.CheckICRC(&d.Encap, d.Payload); err != nil {
				t.Errorf("%s #%d: %v", c.file, d.Index, err)
			}
		}
		total += len(ds)
	}
	if total != 341 {
		t.Errorf("got %d RoCE packets in all captures, want 341", total)
	}
}

// frames returns the raw records of a pcap file and its link type.
func frames(t *testing.T, name string) ([][]byte, layers.LinkType) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return out, r.LinkType()
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
}

// TestGopacketDecodesRxeCaptures decodes every real frame through
// gopacket, both with NewPacket and a DecodingLayerParser, and compares
// the RoCE layer with wire.Parse.
func TestGopacketDecodesRxeCaptures(t *testing.T) {
	var (
		eth  layers.Ethernet
		ip4  layers.IPv4
		ip6  layers.IPv6
		udp  layers.UDP
		roce capture.RoCE
		pl   gopacket.Payload
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &udp, &roce, &pl)
	var decoded []gopacket.LayerType
	for _, c := range rxeCaptures {
		fs, lt := frames(t, filepath.Join(testdata, c.file))
		for i, data := range fs {
			name := fmt.Sprintf("%s #%d", c.file, i+1)
			pkt := gopacket.NewPacket(data, lt, gopacket.Default)
			if el := pkt.ErrorLayer(); el != nil {
				t.Fatalf("%s: gopacket: %v", name, el.Error())
			}
			l, ok := pkt.Layer(capture.LayerTypeRoCE).(*capture.RoCE)
			if !ok {
				t.Fatalf("%s: no RoCEv2 layer in %v", name, pkt)
			}
			if err := capture.CheckICRC(pkt); err != nil {
				t.Errorf("%s: CheckICRC: %v", name, err)
			}
			udpL := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
			var p wire.Packet
			if err := wire.Parse(udpL.Payload, &p); err != nil {
				t.Fatalf("%s: wire.Parse: %v", name, err)
			}
			if got, want := l.Packet.Headers(), p.Headers(); got != want {
				t.Errorf("%s: got headers %+v, want %+v", name, got, want)
			}
			if !bytes.Equal(l.LayerContents(), p.Hdr) || !bytes.Equal(l.LayerPayload(), p.Payload) {
				t.Errorf("%s: layer contents/payload differ from wire.Parse", name)
			}
			if len(p.Payload) > 0 {
				if app := pkt.ApplicationLayer(); app == nil || !bytes.Equal(app.Payload(), p.Payload) {
					t.Errorf("%s: application layer is not the RoCE payload", name)
				}
			}

			if err := parser.DecodeLayers(data, &decoded); err != nil {
				t.Fatalf("%s: DecodeLayers: %v", name, err)
			}
			if !containsLayer(decoded, capture.LayerTypeRoCE) {
				t.Fatalf("%s: DecodeLayers got %v, want a RoCEv2 layer", name, decoded)
			}
			if got, want := roce.String(), l.String(); got != want {
				t.Errorf("%s: DecodingLayerParser got %q, NewPacket got %q", name, got, want)
			}
		}
	}
}

func containsLayer(ls []gopacket.LayerType, want gopacket.LayerType) bool {
	for _, l := range ls {
		if l == want {
			return true
		}
	}
	return false
}

func TestLayerString(t *testing.T) {
	for _, s := range samplePackets(t, encap4) {
		var r capture.RoCE
		if err := r.DecodeFromBytes(s.payload, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := r.String(); got != s.want {
			t.Errorf("%s:\n got %q\nwant %q", s.name, got, s.want)
		}
		if got, want := r.ICRC, wire.StoredICRC(s.payload); got != want {
			t.Errorf("%s: got ICRC %#x, want %#x", s.name, got, want)
		}
	}
}

type truncFeedback struct{ truncated bool }

func (f *truncFeedback) SetTruncated() { f.truncated = true }

func TestLayerErrors(t *testing.T) {
	good := samplePackets(t, encap4)[3].payload // RC_RDMA_WRITE_FIRST
	tests := []struct {
		name      string
		data      []byte
		wantErr   error
		truncated bool
	}{
		{"empty", nil, wire.ErrTruncated, true},
		{"short bth", good[:10], wire.ErrTruncated, true},
		{"no reth", good[:20], wire.ErrTruncated, true},
		{"bad version", append([]byte{4, 0x01}, good[2:]...), wire.ErrBadVersion, false},
		{"reserved opcode", append([]byte{0x1F}, good[1:]...), wire.ErrUnknownOpcode, false},
		{"odd length", good[:len(good)-1], wire.ErrBadLength, false},
	}
	for _, tt := range tests {
		var r capture.RoCE
		var fb truncFeedback
		err := r.DecodeFromBytes(tt.data, &fb)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: got error %v, want %v", tt.name, err, tt.wantErr)
		}
		if fb.truncated != tt.truncated {
			t.Errorf("%s: got truncated %v, want %v", tt.name, fb.truncated, tt.truncated)
		}
		if got, want := r.String(), "RoCEv2(undecoded)"; got != want {
			t.Errorf("%s: got String %q, want %q", tt.name, got, want)
		}
		if r.BTH != nil || r.RETH != nil || r.Opcode != 0 {
			t.Errorf("%s: fields not cleared after an error: %+v", tt.name, r)
		}
	}

	// Through gopacket, a broken RoCE payload becomes an error layer.
	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, layers.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteDatagram(time.Unix(0, 0), &encap4, good[:20]); err != nil {
		t.Fatal(err)
	}
	fs := readFrames(t, buf.Bytes())
	pkt := gopacket.NewPacket(fs[0], layers.LinkTypeRaw, gopacket.Default)
	if pkt.ErrorLayer() == nil || !errors.Is(pkt.ErrorLayer().Error(), wire.ErrTruncated) {
		t.Errorf("got error layer %v, want one wrapping wire.ErrTruncated", pkt.ErrorLayer())
	}
	if !pkt.Metadata().Truncated {
		t.Error("truncated RoCE packet: got Metadata().Truncated false, want true")
	}
	if err := capture.CheckICRC(pkt); !errors.Is(err, wire.ErrNotRoCE) {
		t.Errorf("CheckICRC without a RoCE layer: got %v, want ErrNotRoCE", err)
	}
}

// readFrames returns the records of an in-memory pcap.
func readFrames(t *testing.T, pcap []byte) [][]byte {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(pcap))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
}

// TestWriterRoundTrip writes packets of every extension header, IPv4 and
// IPv6, on both link types, reads them back with the Reader and with
// gopacket, and expects identical datagrams.
func TestWriterRoundTrip(t *testing.T) {
	for _, link := range []layers.LinkType{layers.LinkTypeRaw, layers.LinkTypeEthernet} {
		for _, e := range []wire.Encap{encap4, encap6} {
			name := fmt.Sprintf("%v/%v", link, e.Src)
			samples := samplePackets(t, e)
			var buf bytes.Buffer
			w, err := capture.NewWriter(&buf, link)
			if err != nil {
				t.Fatal(err)
			}
			base := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
			for i, s := range samples {
				if err := w.WriteDatagram(base.Add(time.Duration(i)*time.Microsecond+1), &s.encap, s.payload); err != nil {
					t.Fatalf("%s %s: %v", name, s.name, err)
				}
			}
			r, err := capture.NewReader(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range samples {
				d, err := r.Next()
				if err != nil {
					t.Fatalf("%s %s: %v", name, s.name, err)
				}
				if got, want := d.Index, i+1; got != want {
					t.Errorf("%s %s: got index %d, want %d", name, s.name, got, want)
				}
				if got, want := d.Time, base.Add(time.Duration(i)*time.Microsecond+1); !got.Equal(want) {
					t.Errorf("%s %s: got time %v, want %v", name, s.name, got, want)
				}
				if d.Encap != s.encap {
					t.Errorf("%s %s: got encap %+v, want %+v", name, s.name, d.Encap, s.encap)
				}
				if !bytes.Equal(d.Payload, s.payload) {
					t.Errorf("%s %s: got payload % x, want % x", name, s.name, d.Payload, s.payload)
				}
				var r1, r2 capture.RoCE
				if err := r1.DecodeFromBytes(d.Payload, gopacket.NilDecodeFeedback); err != nil {
					t.Fatalf("%s %s: %v", name, s.name, err)
				}
				if err := r2.DecodeFromBytes(s.payload, gopacket.NilDecodeFeedback); err != nil {
					t.Fatal(err)
				}
				if r1.Packet.Headers() != r2.Packet.Headers() || !bytes.Equal(r1.LayerPayload(), r2.LayerPayload()) {
					t.Errorf("%s %s: decoded packets differ", name, s.name)
				}
			}
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("%s: after the last packet got %v, want io.EOF", name, err)
			}

			for i, data := range readFrames(t, buf.Bytes()) {
				pkt := gopacket.NewPacket(data, link, gopacket.Default)
				l, ok := pkt.Layer(capture.LayerTypeRoCE).(*capture.RoCE)
				if !ok {
					t.Fatalf("%s %s: gopacket found no RoCE layer: %v", name, samples[i].name, pkt)
				}
				if got, want := l.String(), samples[i].want; got != want {
					t.Errorf("%s: got %q, want %q", name, got, want)
				}
				if err := capture.CheckICRC(pkt); err != nil {
					t.Errorf("%s %s: CheckICRC: %v", name, samples[i].name, err)
				}
				if ip4, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
					want := ip4.Checksum
					ip4.Checksum = 0
					b := gopacket.NewSerializeBuffer()
					if err := ip4.SerializeTo(b, gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
						t.Fatal(err)
					}
					if ip4.Checksum != want {
						t.Errorf("%s %s: got IPv4 checksum %#04x, want %#04x", name, samples[i].name, want, ip4.Checksum)
					}
				}
			}
		}
	}
}

func TestWriterConcurrent(t *testing.T) {
	const writers, each = 8, 50
	samples := append(samplePackets(t, encap4), samplePackets(t, encap6)...)
	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				s := samples[(g+i)%len(samples)]
				if err := w.WriteDatagram(time.Unix(int64(g), int64(i)), &s.encap, s.payload); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	r, err := capture.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		d, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.CheckICRC(&d.Encap, d.Payload); err != nil {
			t.Errorf("record %d: %v", d.Index, err)
		}
		n++
	}
	if n != writers*each {
		t.Errorf("got %d records, want %d", n, writers*each)
	}
}

func TestWriterErrors(t *testing.T) {
	pkt := samplePackets(t, encap4)[0].payload
	mixed := encap4
	mixed.Dst = encap6.Dst
	invalid := encap4
	invalid.Src = netip.Addr{}
	mapped := encap4
	mapped.Src = netip.AddrFrom16(encap4.Src.As16())
	tests := []struct {
		name    string
		e       wire.Encap
		payload []byte
		wantErr bool
	}{
		{"ok", encap4, pkt, false},
		{"mapped source", mapped, pkt, false},
		{"mixed families", mixed, pkt, true},
		{"invalid address", invalid, pkt, true},
		{"ipv4 max", encap4, make([]byte, 0xFFFF-28), false},
		{"ipv4 too big", encap4, make([]byte, 0xFFFF-27), true},
		{"ipv6 max", encap6, make([]byte, 0xFFFF-8), false},
		{"ipv6 too big", encap6, make([]byte, 0xFFFF-7), true},
	}
	w, err := capture.NewWriter(io.Discard, layers.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		err := w.WriteDatagram(time.Time{}, &tt.e, tt.payload)
		if got := err != nil; got != tt.wantErr {
			t.Errorf("%s: got error %v, want error %v", tt.name, err, tt.wantErr)
		}
	}
	if _, err := capture.NewWriter(io.Discard, layers.LinkTypeLinuxSLL); err == nil {
		t.Error("NewWriter(LinuxSLL): got nil error, want one")
	}
}

// ipDatagram returns the IP datagram of e carrying payload.
func ipDatagram(e wire.Encap, payload []byte) []byte {
	b := make([]byte, e.HeaderLen()+len(payload))
	n := e.PutHeaders(b, len(payload))
	copy(b[n:], payload)
	return b
}

// tcpDatagram returns an IPv4 TCP segment header (not UDP).
func tcpDatagram() []byte {
	b := ipDatagram(encap4, make([]byte, 12))
	b[9] = 6 // TCP
	return b
}

func ethFrame(etherType uint16, tags []uint16, l3 []byte) []byte {
	b := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	for _, tpid := range tags {
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, 100) // VLAN ID
	}
	b = binary.BigEndian.AppendUint16(b, etherType)
	return append(b, l3...)
}

func sllFrame(proto uint16, l3 []byte) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint16(b[2:], 1) // ARPHRD_ETHER
	binary.BigEndian.PutUint16(b[4:], 6)
	binary.BigEndian.PutUint16(b[14:], proto)
	return append(b, l3...)
}

func sll2Frame(proto uint16, l3 []byte) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b[0:], proto)
	binary.BigEndian.PutUint32(b[4:], 2) // ifindex
	binary.BigEndian.PutUint16(b[8:], 1)
	b[11] = 6
	return append(b, l3...)
}

// TestReaderLinkTypes writes, for each link type, a RoCEv2 packet over
// IPv4 and IPv6, a non-RoCE UDP datagram, a TCP segment and a non-IP frame,
// and expects the three UDP datagrams back and two frames skipped.
func TestReaderLinkTypes(t *testing.T) {
	roce4 := samplePackets(t, encap4)[1]
	roce6 := samplePackets(t, encap6)[2]
	dns := encap4
	dns.SrcPort, dns.DstPort = 5353, 53
	dnsPayload := []byte("not RoCE at all")
	ip := [][]byte{
		ipDatagram(roce4.encap, roce4.payload),
		ipDatagram(roce6.encap, roce6.payload),
		ipDatagram(dns, dnsPayload),
		tcpDatagram(),
	}
	wantEncap := []wire.Encap{roce4.encap, roce6.encap, dns}
	wantPayload := [][]byte{roce4.payload, roce6.payload, dnsPayload}
	etherType := func(b []byte) uint16 {
		if b[0]>>4 == 6 {
			return 0x86DD
		}
		return 0x0800
	}
	each := func(f func([]byte) []byte) [][]byte {
		var out [][]byte
		for _, b := range ip {
			out = append(out, f(b))
		}
		return out
	}
	raw := func(nonIP []byte) [][]byte { return append(each(func(b []byte) []byte { return b }), nonIP) }
	garbage := []byte{0x00, 0x01, 0x02, 0x03} // IP version 0
	null := func(order binary.AppendByteOrder, af6 uint32) [][]byte {
		return append(each(func(b []byte) []byte {
			af := uint32(2)
			if b[0]>>4 == 6 {
				af = af6
			}
			return append(order.AppendUint32(nil, af), b...)
		}), order.AppendUint32(nil, 7))
	}
	tests := []struct {
		name   string
		link   layers.LinkType
		frames [][]byte
	}{
		{"ethernet", layers.LinkTypeEthernet, append(each(func(b []byte) []byte { return ethFrame(etherType(b), nil, b) }), ethFrame(0x0806, nil, make([]byte, 28)))},
		{"802.1Q", layers.LinkTypeEthernet, append(each(func(b []byte) []byte { return ethFrame(etherType(b), []uint16{0x8100}, b) }), ethFrame(0x0806, []uint16{0x8100}, make([]byte, 28)))},
		{"QinQ", layers.LinkTypeEthernet, append(each(func(b []byte) []byte { return ethFrame(etherType(b), []uint16{0x88A8, 0x8100}, b) }), ethFrame(0x88CC, []uint16{0x9100}, make([]byte, 28)))},
		{"padded ethernet", layers.LinkTypeEthernet, append(each(func(b []byte) []byte { return append(ethFrame(etherType(b), nil, b), 0, 0, 0, 0) }), ethFrame(0x0806, nil, nil))},
		{"raw 101", layers.LinkTypeRaw, raw(garbage)},
		{"raw 12", 12, raw(garbage)},
		{"raw 14", 14, raw(garbage)},
		{"ipv4 228", layers.LinkTypeIPv4, raw(garbage)},
		{"ipv6 229", layers.LinkTypeIPv6, raw(garbage)},
		{"sll", layers.LinkTypeLinuxSLL, append(each(func(b []byte) []byte { return sllFrame(etherType(b), b) }), sllFrame(0x0806, make([]byte, 28)))},
		{"sll2", layers.LinkTypeLinuxSLL2, append(each(func(b []byte) []byte { return sll2Frame(etherType(b), b) }), sll2Frame(0x0806, make([]byte, 28)))},
		{"null", layers.LinkTypeNull, null(binary.LittleEndian, 30)},
		{"loop", layers.LinkTypeLoop, null(binary.BigEndian, 24)},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		pw := pcapgo.NewWriter(&buf)
		if err := pw.WriteFileHeader(65536, tt.link); err != nil {
			t.Fatal(err)
		}
		for _, f := range tt.frames {
			if err := pw.WritePacket(gopacket.CaptureInfo{CaptureLength: len(f), Length: len(f)}, f); err != nil {
				t.Fatal(err)
			}
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(buf.Bytes())
		zw.Close()

		var ng bytes.Buffer
		nw, err := pcapgo.NewNgWriter(&ng, tt.link)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tt.frames {
			if err := nw.WritePacket(gopacket.CaptureInfo{CaptureLength: len(f), Length: len(f)}, f); err != nil {
				t.Fatal(err)
			}
		}
		nw.Flush()

		for _, form := range []struct {
			name string
			b    []byte
		}{{"pcap", buf.Bytes()}, {"pcap.gz", gz.Bytes()}, {"pcapng", ng.Bytes()}} {
			name := tt.name + " " + form.name
			r, err := capture.NewReader(bytes.NewReader(form.b))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i := range wantEncap {
				d, err := r.Next()
				if err != nil {
					t.Fatalf("%s: datagram %d: %v", name, i, err)
				}
				if d.Index != i+1 || d.Encap != wantEncap[i] || !bytes.Equal(d.Payload, wantPayload[i]) {
					t.Errorf("%s: got #%d %+v % x, want #%d %+v % x", name, d.Index, d.Encap, d.Payload, i+1, wantEncap[i], wantPayload[i])
				}
			}
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("%s: got %v after the datagrams, want io.EOF", name, err)
			}
			if got, want := r.Frames(), len(tt.frames); got != want {
				t.Errorf("%s: got %d frames, want %d", name, got, want)
			}
			if got, want := r.Skipped(), 2; got != want {
				t.Errorf("%s: got %d skipped, want %d", name, got, want)
			}
		}
	}
}

// TestReaderFrameErrors checks that frames cut short give a FrameError
// naming the frame, and that reading goes on after one.
func TestReaderFrameErrors(t *testing.T) {
	roce := samplePackets(t, encap4)[3]
	roceFrame := ethFrame(0x0800, nil, ipDatagram(roce.encap, roce.payload))
	dns := encap4
	dns.DstPort = 53
	dnsFrame := ethFrame(0x0800, nil, ipDatagram(dns, make([]byte, 100)))
	type rec struct {
		data []byte
		wire int
	}
	recs := []rec{
		{roceFrame[:80], len(roceFrame)}, // cut by the snap length inside the RETH
		{roceFrame[:10], len(roceFrame)}, // cut inside the Ethernet header
		{dnsFrame[:60], len(dnsFrame)},   // other UDP, cut
		{roceFrame[:30], len(roceFrame)}, // cut inside the IP header
		{roceFrame, len(roceFrame)},      // whole
	}
	var buf bytes.Buffer
	pw := pcapgo.NewWriter(&buf)
	pw.WriteFileHeader(65536, layers.LinkTypeEthernet)
	for _, r := range recs {
		if err := pw.WritePacket(gopacket.CaptureInfo{CaptureLength: len(r.data), Length: r.wire}, r.data); err != nil {
			t.Fatal(err)
		}
	}
	r, err := capture.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	wantPorts := []uint16{wire.UDPPort, 0, 53, 0}
	for i, want := range wantPorts {
		_, err := r.Next()
		var fe *capture.FrameError
		if !errors.As(err, &fe) {
			t.Fatalf("record %d: got %v, want a *FrameError", i+1, err)
		}
		if fe.Index != i+1 || fe.DstPort != want {
			t.Errorf("record %d: got FrameError index %d port %d, want index %d port %d", i+1, fe.Index, fe.DstPort, i+1, want)
		}
		if got, want := fe.Error(), fmt.Sprintf("packet %d: ", i+1); len(got) < len(want) || got[:len(want)] != want {
			t.Errorf("record %d: got message %q, want it to start with %q", i+1, got, want)
		}
	}
	d, err := r.Next()
	if err != nil || d.Index != 5 || !bytes.Equal(d.Payload, roce.payload) {
		t.Errorf("after the errors: got %+v, %v; want record 5", d, err)
	}
}

func TestReaderBadFiles(t *testing.T) {
	var good bytes.Buffer
	w, err := capture.NewWriter(&good, layers.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	s := samplePackets(t, encap4)[0]
	w.WriteDatagram(time.Unix(1, 0), &s.encap, s.payload)
	w.WriteDatagram(time.Unix(2, 0), &s.encap, s.payload)
	wifi := bytes.Clone(good.Bytes()[:24])
	binary.LittleEndian.PutUint32(wifi[20:], uint32(layers.LinkTypeIEEE802_11))

	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short", []byte{0xD4, 0xC3}},
		{"text", []byte("this is not a capture file at all")},
		{"802.11", wifi},
	} {
		if _, err := capture.NewReader(bytes.NewReader(tt.b)); err == nil {
			t.Errorf("%s: NewReader got nil error, want one", tt.name)
		}
	}

	// A last record cut short is an error for the file, not a FrameError.
	cut := good.Bytes()[:good.Len()-5]
	r, err := capture.NewReader(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatalf("first record: %v", err)
	}
	_, err = r.Next()
	var fe *capture.FrameError
	if err == nil || err == io.EOF || errors.As(err, &fe) {
		t.Errorf("cut last record: got %v, want a file error", err)
	}
}
