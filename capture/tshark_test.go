package capture_test

import (
	"bytes"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/wire"
)

// TestTsharkDissectsWriter checks that Wireshark's dissector reads the
// Writer's pcaps (raw IP and Ethernet, IPv4 and IPv6) as RoCEv2: every
// frame is IP/UDP/InfiniBand, with the BTH fields and ICRC we wrote, and
// none is malformed. tshark comes from the Debian package tshark.
func TestTsharkDissectsWriter(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (apt-get install tshark): ", err)
	}
	// Heuristic dissectors of InfiniBand payloads (RPC-over-RDMA, SMB
	// Direct, ...) would read the samples' made-up payload bytes as their
	// protocol (RPC-over-RDMA calls a 3-byte SEND_ONLY_WITH_INVALIDATE
	// malformed); turn those protocols off so only the RoCE headers are
	// judged. Ethertype stays: the Ethernet records need it.
	args := []string{"-n"}
	protos := map[string]bool{}
	for _, f := range tsharkTable(t, tshark, "protocols") {
		if len(f) >= 3 {
			protos[f[2]] = true
		}
	}
	for _, f := range tsharkTable(t, tshark, "heuristic-decodes") {
		if len(f) >= 2 && f[0] == "infiniband.payload" && f[1] != "ethertype" && protos[f[1]] {
			args = append(args, "--disable-protocol", f[1])
		}
	}

	samples := append(samplePackets(t, encap4), samplePackets(t, encap6)...)
	for _, link := range []layers.LinkType{layers.LinkTypeRaw, layers.LinkTypeEthernet} {
		name := filepath.Join(t.TempDir(), fmt.Sprintf("%v.pcap", link))
		var buf bytes.Buffer
		w, err := capture.NewWriter(&buf, link)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range samples {
			if err := w.WriteDatagram(time.Unix(1700000000, int64(i)*1000), &s.encap, s.payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}

		cmd := exec.Command(tshark, append(args, "-r", name, "-T", "fields", "-E", "separator=/t",
			"-e", "frame.protocols", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp",
			"-e", "infiniband.bth.psn", "-e", "infiniband.bth.a", "-e", "infiniband.invariant.crc",
			"-e", "_ws.malformed")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, stderr.String())
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(lines) != len(samples) {
			t.Fatalf("%v: tshark printed %d frames, want %d:\n%s", link, len(lines), len(samples), out)
		}
		for i, line := range lines {
			s := samples[i]
			var r capture.RoCE
			if err := r.DecodeFromBytes(s.payload, gopacket.NilDecodeFeedback); err != nil {
				t.Fatal(err)
			}
			f := strings.Split(line, "\t")
			for len(f) < 7 {
				f = append(f, "")
			}
			where := fmt.Sprintf("%v frame %d (%s over %v)", link, i+1, s.name, s.encap.Src)
			if !strings.Contains(f[0], ":udp:infiniband") {
				t.Errorf("%s: got protocols %q, want ...:udp:infiniband...", where, f[0])
			}
			if f[6] != "" {
				t.Errorf("%s: tshark says malformed: %q", where, line)
			}
			// tshark prints the ICRC bytes as a big-endian number; rxe stores
			// it least significant byte first.
			want := []string{
				strconv.Itoa(int(r.Opcode)),
				fmt.Sprintf("0x%06x", r.BTH.DestQP()),
				strconv.Itoa(int(r.BTH.PSN())),
				strconv.Itoa(b2i(r.BTH.AckReq())),
				fmt.Sprintf("0x%08x", bits.ReverseBytes32(wire.StoredICRC(s.payload))),
			}
			got := f[1:6]
			if r.Opcode.Op() >= 0x1C || r.Opcode.Class() >= wire.ClassCNP {
				// Wireshark 4.0 knows neither FLUSH, ATOMIC WRITE, CNP nor
				// XRC, and so cannot find their ICRC.
				got, want = got[:4], want[:4]
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s: tshark got opcode/qp/psn/ackreq/icrc %q, want %q", where, got, want)
			}
		}
	}
}

// tsharkTable returns the tab-separated rows of "tshark -G report".
func tsharkTable(t *testing.T, tshark, report string) [][]string {
	t.Helper()
	out, err := exec.Command(tshark, "-G", report).Output()
	if err != nil {
		t.Fatalf("tshark -G %s: %v", report, err)
	}
	var rows [][]string
	for _, line := range strings.Split(string(out), "\n") {
		rows = append(rows, strings.Split(line, "\t"))
	}
	return rows
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}
