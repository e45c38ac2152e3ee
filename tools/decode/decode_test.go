package decode_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/tools/decode"
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const rxeTestdata = "../../wire/testdata"

// rxeCaptures are the real rxe captures and their RoCEv2 packet counts.
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

func rxeFile(name string) string { return filepath.Join(rxeTestdata, name) }

// lastLine returns the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestRunRxeCaptures(t *testing.T) {
	var all []string
	total := 0
	for _, c := range rxeCaptures {
		var out bytes.Buffer
		got, err := decode.Run(&out, []string{rxeFile(c.file)}, decode.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		want := decode.Summary{Type: "summary", Files: 1, Packets: c.n, ICRCOK: c.n}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", c.file, got, want)
		}
		if !got.OK() {
			t.Errorf("%s: got OK() false, want true", c.file)
		}
		if got, want := strings.Count(out.String(), " icrc ok\n"), c.n; got != want {
			t.Errorf("%s: got %d 'icrc ok' lines, want %d", c.file, got, want)
		}
		all = append(all, rxeFile(c.file))
		total += c.n
	}

	var out bytes.Buffer
	got, err := decode.Run(&out, all, decode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := decode.Summary{Type: "summary", Files: len(all), Packets: 341, ICRCOK: 341}
	if got != want || total != 341 {
		t.Errorf("all captures: got %+v, want %+v", got, want)
	}
	if got, want := lastLine(out.String()), "341 packets, 341 icrc ok, 0 icrc bad"; got != want {
		t.Errorf("got summary line %q, want %q", got, want)
	}
	if got, want := strings.Count(out.String(), "\n== "), len(all)-1; got != want {
		t.Errorf("got %d file headers after the first, want %d", got, want)
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestGoldenRxe(t *testing.T) {
	var out bytes.Buffer
	if _, err := decode.Run(&out, []string{rxeFile("rc_pingpong_64.pcap")}, decode.Options{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "rc_pingpong_64.golden", out.Bytes())
}

// TestGoldenSamples pins the text and JSON forms of every extension
// header, IPv4 and IPv6.
func TestGoldenSamples(t *testing.T) {
	path := writeSamples(t, layers.LinkTypeRaw, samples(t))
	for _, tt := range []struct {
		golden string
		opts   decode.Options
	}{
		{"samples.golden", decode.Options{}},
		{"samples.json.golden", decode.Options{JSON: true}},
	} {
		var out bytes.Buffer
		sum, err := decode.Run(&out, []string{path}, tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !sum.OK() {
			t.Errorf("%s: got %+v, want all ok", tt.golden, sum)
		}
		got := bytes.ReplaceAll(out.Bytes(), []byte(path), []byte("samples.pcap"))
		golden(t, tt.golden, got)
	}
}

// sample is one packet built with wire.Build.
type sample struct {
	encap   wire.Encap
	h       wire.Headers
	payload []byte
}

var (
	encap4 = wire.Encap{
		Src: netip.MustParseAddr("10.77.0.3"), Dst: netip.MustParseAddr("10.77.0.2"),
		SrcPort: 0xC123, DstPort: wire.UDPPort, HopLimit: 64, FragOff: wire.IPv4DF, ID: 7,
	}
	encap6 = wire.Encap{
		Src: netip.MustParseAddr("fd00:77::3"), Dst: netip.MustParseAddr("fd00:77::2"),
		SrcPort: 0xD00D, DstPort: wire.UDPPort, HopLimit: 64,
	}
)

// samples returns packets carrying every extension header, over IPv4 and
// then IPv6.
func samples(t testing.TB) []sample {
	bth := func(op wire.Opcode, psn wire.PSN) wire.BTHFields {
		return wire.BTHFields{Opcode: op, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: psn, AckReq: op.Is(wire.MaskRequest | wire.MaskEnd)}
	}
	hs := []struct {
		h wire.Headers
		n int
	}{
		{wire.Headers{BTH: bth(wire.RCSendOnly, 1)}, 61},
		{wire.Headers{BTH: bth(wire.RCSendOnlyImm, 2), Imm: 0xdeadbeef}, 8},
		{wire.Headers{BTH: bth(wire.RCSendOnlyInv, 3), InvRKey: 0x1234}, 4},
		{wire.Headers{BTH: bth(wire.RCWriteFirst, 4), RETH: wire.RETHFields{VA: 0x56310fb6b388, RKey: 0x6b2, DMALen: 5000}}, 256},
		{wire.Headers{BTH: bth(wire.RCReadRequest, 5), RETH: wire.RETHFields{VA: 0x1000, RKey: 0x85f, DMALen: 64}}, 0},
		{wire.Headers{BTH: bth(wire.RCAck, 6), AETH: wire.AETHFields{Syndrome: wire.RNRNAK(14), MSN: 3}}, 0},
		{wire.Headers{BTH: bth(wire.RCAck, 7), AETH: wire.AETHFields{Syndrome: wire.NakRemoteAccess, MSN: 4}}, 0},
		{wire.Headers{BTH: bth(wire.RCAtomicAck, 8), AETH: wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: 5},
			AtomicAckETH: wire.AtomicAckETHFields{Orig: 0x4e892ed93f5bb8a6}}, 0},
		{wire.Headers{BTH: bth(wire.RCCompareSwap, 9), AtomicETH: wire.AtomicETHFields{VA: 0x2000, RKey: 0xc80, SwapAdd: 5, Compare: 4}}, 0},
		{wire.Headers{BTH: bth(wire.RCFetchAdd, 10), AtomicETH: wire.AtomicETHFields{VA: 0x2008, RKey: 0xb78, SwapAdd: 1}}, 0},
		{wire.Headers{BTH: bth(wire.RCFlush, 11), FETH: wire.FETHFields{PlacementType: wire.FlushGlobal, Selectivity: wire.FlushRange},
			RETH: wire.RETHFields{VA: 0x3000, RKey: 0x77, DMALen: 4096}}, 0},
		{wire.Headers{BTH: bth(wire.UDSendOnly, 12), DETH: wire.DETHFields{QKey: 0x11111111, SrcQP: 0x14}}, 512},
		{wire.Headers{BTH: bth(wire.ClassXRC|wire.RCSendOnly.Op(), 13), XRCETH: wire.XRCETHFields{XRCSRQ: 0x42}}, 5},
		{wire.Headers{BTH: bth(wire.ClassRD|wire.RCSendOnly.Op(), 14), RDETH: wire.RDETHFields{EECnxt: 0x99},
			DETH: wire.DETHFields{QKey: 7, SrcQP: 0x32}}, 4},
	}
	var out []sample
	for _, e := range []wire.Encap{encap4, encap6} {
		for _, c := range hs {
			p := make([]byte, c.n)
			for i := range p {
				p[i] = byte(i)
			}
			out = append(out, sample{encap: e, h: c.h, payload: p})
		}
	}
	return out
}

// build returns the UDP payload of s.
func (s sample) build(t testing.TB) []byte {
	t.Helper()
	b := make([]byte, wire.PacketLen(s.h.BTH.Opcode, len(s.payload)))
	n, err := wire.Build(b, &s.encap, &s.h, s.payload)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

var sampleTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// writeSamples writes ss with the capture Writer to a temp file.
func writeSamples(t *testing.T, link layers.LinkType, ss []sample) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, link)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ss {
		if err := w.WriteDatagram(sampleTime.Add(time.Duration(i)*time.Millisecond), &s.encap, s.build(t)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "samples.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWriterRoundTrip writes packets built with wire.Build through the
// capture Writer (raw IP and Ethernet), decodes the file to JSON and
// expects exactly the headers, addresses and payload lengths written.
func TestWriterRoundTrip(t *testing.T) {
	ss := samples(t)
	for _, link := range []layers.LinkType{layers.LinkTypeRaw, layers.LinkTypeEthernet} {
		path := writeSamples(t, link, ss)
		var out bytes.Buffer
		sum, err := decode.Run(&out, []string{path}, decode.Options{JSON: true})
		if err != nil {
			t.Fatal(err)
		}
		recs, gotSum := parseJSON(t, out.Bytes())
		if gotSum != sum {
			t.Errorf("%v: JSON summary %+v, Run returned %+v", link, gotSum, sum)
		}
		if want := (decode.Summary{Type: "summary", Files: 1, Packets: len(ss), ICRCOK: len(ss)}); sum != want {
			t.Errorf("%v: got %+v, want %+v", link, sum, want)
		}
		if len(recs) != len(ss) {
			t.Fatalf("%v: got %d records, want %d", link, len(recs), len(ss))
		}
		for i, s := range ss {
			r := recs[i]
			if r.Packet == nil {
				t.Fatalf("%v #%d: no packet fields: %+v", link, i+1, r)
			}
			got := headersOf(r.Packet)
			want := s.h
			want.BTH.Pad = wire.PadFor(len(s.payload))
			if got != want {
				t.Errorf("%v #%d: got headers\n%+v\nwant\n%+v", link, i+1, got, want)
			}
			if r.Index != i+1 || !r.Time.Equal(sampleTime.Add(time.Duration(i)*time.Millisecond)) ||
				r.Src != s.encap.Src || r.Dst != s.encap.Dst ||
				r.SrcPort != s.encap.SrcPort || r.DstPort != s.encap.DstPort ||
				r.PayloadLen != len(s.payload) || !r.ICRCOK || r.Error != "" {
				t.Errorf("%v #%d: got %+v %+v", link, i+1, r, *r.Packet)
			}
		}
	}
}

// headersOf converts a JSON packet back to wire.Headers.
func headersOf(p *decode.Packet) wire.Headers {
	h := wire.Headers{BTH: wire.BTHFields{
		Opcode: wire.Opcode(p.OpcodeValue), SE: p.SE, MigReq: p.MigReq, Pad: p.Pad, PKey: p.PKey,
		FECN: p.FECN, BECN: p.BECN, DestQP: p.DestQP, AckReq: p.AckReq, PSN: wire.PSN(p.PSN),
	}}
	if v := p.RDETH; v != nil {
		h.RDETH.EECnxt = v.EEContext
	}
	if v := p.DETH; v != nil {
		h.DETH = wire.DETHFields{QKey: v.QKey, SrcQP: v.SrcQP}
	}
	if v := p.XRCETH; v != nil {
		h.XRCETH.XRCSRQ = v.XRCSRQ
	}
	if v := p.FETH; v != nil {
		h.FETH = wire.FETHFields{PlacementType: v.PlacementType, Selectivity: v.Selectivity}
	}
	if v := p.RETH; v != nil {
		h.RETH = wire.RETHFields{VA: uint64(v.VA), RKey: v.RKey, DMALen: v.DMALen}
	}
	if v := p.AtomicETH; v != nil {
		h.AtomicETH = wire.AtomicETHFields{VA: uint64(v.VA), RKey: v.RKey, SwapAdd: uint64(v.SwapAdd), Compare: uint64(v.Compare)}
	}
	if v := p.AETH; v != nil {
		h.AETH = wire.AETHFields{Syndrome: wire.Syndrome(v.SyndromeValue), MSN: v.MSN}
	}
	if v := p.AtomicAckETH; v != nil {
		h.AtomicAckETH.Orig = uint64(v.Orig)
	}
	if v := p.ImmDt; v != nil {
		h.Imm = *v
	}
	if v := p.IETH; v != nil {
		h.InvRKey = v.RKey
	}
	return h
}

var lowerSnake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// parseJSON splits --json output into records and the final summary,
// checking that every object is one line with lower_snake keys.
func parseJSON(t *testing.T, out []byte) ([]decode.Record, decode.Summary) {
	t.Helper()
	var recs []decode.Record
	var sum decode.Summary
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %d is not a JSON object: %v: %s", n+1, err, line)
		}
		checkKeys(t, m)
		if sum.Type != "" {
			t.Fatalf("line %d follows the summary: %s", n+1, line)
		}
		for _, k := range []string{"src", "dst"} {
			if v, ok := m[k]; ok {
				a, isStr := v.(string)
				if _, err := netip.ParseAddr(a); !isStr || err != nil {
					t.Errorf("line %d: %s is %#v, want an IP address string", n+1, k, v)
				}
			}
		}
		switch m["type"] {
		case "packet":
			var r decode.Record
			if err := tooljson.Decode(line, &r); err != nil {
				t.Fatalf("line %d is not a Record: %v", n+1, err)
			}
			recs = append(recs, r)
		case "summary":
			if err := tooljson.Decode(line, &sum); err != nil {
				t.Fatalf("line %d is not a Summary: %v", n+1, err)
			}
		default:
			t.Fatalf("line %d: got type %v, want packet or summary", n+1, m["type"])
		}
		n++
	}
	if sum.Type != "summary" {
		t.Fatal("no summary object at the end")
	}
	return recs, sum
}

func checkKeys(t *testing.T, m map[string]any) {
	t.Helper()
	for k, v := range m {
		if !lowerSnake.MatchString(k) {
			t.Errorf("JSON key %q is not lower_snake", k)
		}
		if sub, ok := v.(map[string]any); ok {
			checkKeys(t, sub)
		}
	}
}

// TestJSONRxeCaptures checks the JSON form over every real capture: it
// parses back, has one record per packet with the text form's facts, and
// ends with the summary Run returns.
func TestJSONRxeCaptures(t *testing.T) {
	var files []string
	for _, c := range rxeCaptures {
		files = append(files, rxeFile(c.file))
	}
	var out bytes.Buffer
	sum, err := decode.Run(&out, files, decode.Options{JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	recs, gotSum := parseJSON(t, out.Bytes())
	if gotSum != sum {
		t.Errorf("JSON summary %+v, Run returned %+v", gotSum, sum)
	}
	if len(recs) != 341 || sum.Packets != 341 || sum.ICRCOK != 341 {
		t.Errorf("got %d records and %+v, want 341 all ok", len(recs), sum)
	}
	perFile := map[string]int{}
	for _, r := range recs {
		perFile[filepath.Base(r.File)]++
		if r.Packet == nil || !r.ICRCOK || r.ICRC != r.ICRCWant || r.Error != "" {
			t.Errorf("%s #%d: got %+v", r.File, r.Index, r)
		}
		if r.Packet != nil && r.Opcode != wire.Opcode(r.OpcodeValue).String() {
			t.Errorf("%s #%d: opcode %q does not name %d", r.File, r.Index, r.Opcode, r.OpcodeValue)
		}
	}
	for _, c := range rxeCaptures {
		if got := perFile[c.file]; got != c.n {
			t.Errorf("%s: got %d records, want %d", c.file, got, c.n)
		}
	}
}

// rxeFrames returns the records of an rxe capture and their capture info.
func rxeFrames(t testing.TB, name string) ([]gopacket.CaptureInfo, [][]byte) {
	t.Helper()
	f, err := os.Open(rxeFile(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var cis []gopacket.CaptureInfo
	var data [][]byte
	for {
		d, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return cis, data
		}
		if err != nil {
			t.Fatal(err)
		}
		cis = append(cis, ci)
		data = append(data, d)
	}
}

// writeFrames writes Ethernet frames to a temp pcap.
func writeFrames(t *testing.T, cis []gopacket.CaptureInfo, frames [][]byte) string {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		if err := w.WritePacket(cis[i], f); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "frames.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCorruptedPayload flips one payload byte of a real packet: its ICRC
// no longer matches, the others still do, and Run's summary is not OK.
func TestCorruptedPayload(t *testing.T) {
	cis, frames := rxeFrames(t, "rc_pingpong_64.pcap")
	const eth, ip, udp, bth = 14, 20, 8, 12
	frames[2] = bytes.Clone(frames[2]) // frame 3: RC_SEND_ONLY, 64 payload bytes
	frames[2][eth+ip+udp+bth+10] ^= 0x01
	path := writeFrames(t, cis, frames)

	var out bytes.Buffer
	sum, err := decode.Run(&out, []string{path}, decode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (decode.Summary{Type: "summary", Files: 1, Packets: 20, ICRCOK: 19, ICRCBad: 1}); sum != want {
		t.Errorf("got %+v, want %+v", sum, want)
	}
	if sum.OK() {
		t.Error("got OK() true with a bad ICRC, want false")
	}
	lines := strings.Split(out.String(), "\n")
	bad := regexp.MustCompile(`^3 10\.77\.0\.2:49441 > 10\.77\.0\.3:4791 RC_SEND_ONLY .* payload=64 icrc BAD \(got 0x[0-9a-f]{8} want 0x[0-9a-f]{8}\)$`)
	if !bad.MatchString(lines[3]) {
		t.Errorf("got line %q, want one matching %v", lines[3], bad)
	}
	if got, want := lastLine(out.String()), "20 packets, 19 icrc ok, 1 icrc bad"; got != want {
		t.Errorf("got summary %q, want %q", got, want)
	}
}

// TestMalformed checks that RoCEv2 packets that do not parse are printed
// with the file, the packet number and the error, and counted.
func TestMalformed(t *testing.T) {
	cis, frames := rxeFrames(t, "ib_write_lat_64.pcap")
	frames, cis = frames[:4], cis[:4]
	const eth, ip, udp = 14, 20, 8

	// Frame 2: an RDMA WRITE ONLY cut inside its RETH, with IP and UDP
	// lengths fixed up, so only the RoCE parse fails.
	f := bytes.Clone(frames[0][:eth+ip+udp+20])
	binary.BigEndian.PutUint16(f[eth+2:], ip+udp+20)
	binary.BigEndian.PutUint16(f[eth+ip+4:], udp+20)
	binary.BigEndian.PutUint16(f[eth+10:], 0)
	frames = append(frames[:1], append([][]byte{f}, frames[1:]...)...)
	cis = append(cis[:1], append([]gopacket.CaptureInfo{{CaptureLength: len(f), Length: len(f)}}, cis[1:]...)...)

	// Frame 4: cut by a snap length of 60 bytes.
	cis[3].CaptureLength = 60
	frames[3] = frames[3][:60]
	path := writeFrames(t, cis, frames)

	var out bytes.Buffer
	sum, err := decode.Run(&out, []string{path}, decode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (decode.Summary{Type: "summary", Files: 1, Packets: 5, ICRCOK: 3, Malformed: 2}); sum != want {
		t.Errorf("got %+v, want %+v", sum, want)
	}
	wantLines := []string{
		"error: " + path + " packet 2 (10.77.0.2:49636 > 10.77.0.3:4791): malformed RoCEv2 packet: truncated: RC_RDMA_WRITE_ONLY needs 32 header bytes, packet has 20",
		"error: " + path + " packet 4: frame cut at 60 of 138 bytes by the capture: malformed RoCEv2 packet: truncated",
		"2 malformed, 0 other skipped, 0 unreadable files",
		"5 packets, 3 icrc ok, 0 icrc bad",
	}
	for _, want := range wantLines {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("output lacks line %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if _, err := decode.Run(&out, []string{path}, decode.Options{JSON: true}); err != nil {
		t.Fatal(err)
	}
	recs, _ := parseJSON(t, out.Bytes())
	for _, i := range []int{1, 3} {
		if r := recs[i]; r.Index != i+1 || r.Packet != nil || !strings.Contains(r.Error, "truncated") {
			t.Errorf("JSON record %d: got %+v, want a truncation error and no packet fields", i+1, r)
		}
	}
	// Frame 2 has its addresses; frame 4 broke off before them, and its
	// object leaves them out rather than carrying empty strings.
	if r := recs[1]; r.Src != netip.MustParseAddr("10.77.0.2") || r.Dst != netip.MustParseAddr("10.77.0.3") {
		t.Errorf("JSON record 2: got src %v dst %v", r.Src, r.Dst)
	}
	if line := bytes.Split(out.Bytes(), []byte("\n"))[3]; bytes.Contains(line, []byte(`"src"`)) || recs[3].Src.IsValid() {
		t.Errorf("JSON record 4 has a source address: %s", line)
	}
}

// TestSkipsOtherTraffic mixes ARP, TCP, DNS (also cut short) and
// malformed-but-not-RoCE frames with one RoCEv2 packet.
func TestSkipsOtherTraffic(t *testing.T) {
	cis, frames := rxeFrames(t, "rc_pingpong_64.pcap")
	roce := frames[0]
	const eth = 14
	arp := append(bytes.Clone(roce[:12]), 0x08, 0x06)
	arp = append(arp, make([]byte, 28)...)
	tcp := bytes.Clone(roce)
	tcp[eth+9] = 6
	dns := bytes.Clone(roce)
	binary.BigEndian.PutUint16(dns[eth+20+2:], 53)
	frames = [][]byte{arp, tcp, dns, dns[:50], roce}
	ci := func(f []byte) gopacket.CaptureInfo {
		return gopacket.CaptureInfo{Timestamp: cis[0].Timestamp, CaptureLength: len(f), Length: len(roce)}
	}
	cis = []gopacket.CaptureInfo{ci(arp), ci(tcp), ci(dns), ci(dns[:50]), ci(roce)}
	cis[0].Length, cis[1].Length = len(arp), len(tcp)
	path := writeFrames(t, cis, frames)

	var out bytes.Buffer
	sum, err := decode.Run(&out, []string{path}, decode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (decode.Summary{Type: "summary", Files: 1, Packets: 1, ICRCOK: 1, Skipped: 4}); sum != want {
		t.Errorf("got %+v, want %+v", sum, want)
	}
	if !strings.Contains(out.String(), "\n5 10.77.0.3:49441 > 10.77.0.2:4791 RC_SEND_ONLY") {
		t.Errorf("RoCE packet not printed as frame 5:\n%s", out.String())
	}
	if got, want := lastLine(out.String()), "1 packets, 1 icrc ok, 0 icrc bad"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestUnreadableFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pcap")
	os.WriteFile(garbage, []byte("not a capture"), 0o644)
	b, err := os.ReadFile(rxeFile("rc_pingpong_64.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.pcap")
	os.WriteFile(cut, b[:len(b)-10], 0o644)
	missing := filepath.Join(dir, "missing.pcap")

	var out bytes.Buffer
	sum, err := decode.Run(&out, []string{missing, garbage, rxeFile("rc_pingpong_64.pcap"), cut}, decode.Options{})
	if err == nil {
		t.Fatal("got nil error, want one per unreadable file")
	}
	for _, name := range []string{missing, garbage, cut} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v does not wrap os.ErrNotExist", err)
	}
	if want := (decode.Summary{Type: "summary", Files: 4, Packets: 39, ICRCOK: 39, UnreadableFiles: 3}); sum != want {
		t.Errorf("got %+v, want %+v", sum, want)
	}
	if sum.OK() {
		t.Error("got OK() true with unreadable files, want false")
	}
	if got, want := lastLine(out.String()), "39 packets, 39 icrc ok, 0 icrc bad"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, io.ErrClosedPipe
	}
	w.n--
	return len(p), nil
}

func TestWriteError(t *testing.T) {
	_, err := decode.Run(&failWriter{n: 3}, []string{rxeFile("rc_pingpong_64.pcap")}, decode.Options{})
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("got %v, want io.ErrClosedPipe", err)
	}
}

func TestSummaryJSONMatchesStruct(t *testing.T) {
	// The summary object's keys are the struct's: a renamed field would
	// break consumers, so pin them.
	b, err := json.Marshal(decode.Summary{Type: "summary"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	want := []string{"files", "icrc_bad", "icrc_ok", "malformed", "other_skipped", "packets", "type", "unreadable_files"}
	if !reflect.DeepEqual(sorted(keys), want) {
		t.Errorf("got summary keys %v, want %v", sorted(keys), want)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
