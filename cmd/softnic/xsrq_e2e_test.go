package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var xsrqLine = regexp.MustCompile(`(?m)^ *(local|remote): LID 0000, QPN RECV ([0-9a-f]{6}) SEND ([0-9a-f]{6}), PSN ([0-9a-f]{6}), SRQN ([0-9a-f]{6}), GID (\S+)$`)

// Two softnic xsrq_pingpong processes on loopback, the server capturing
// its traffic: both print their address lines and "success"; softnic
// decode reads the capture with every ICRC right, every request an XRC
// SEND whose XRCETH names the SRQ number its receiver printed, every
// response an XRC ACK without one; tshark dissects every frame as
// InfiniBand with the opcodes softnic decode shows.
func TestE2EXSRQPingpong(t *testing.T) {
	skipE2E(t)
	pcap := filepath.Join(t.TempDir(), "xsrq.pcap")
	const n, size = 10, 3000 // three packets a message at MTU 1024
	args := []string{"-n", strconv.Itoa(n), "-s", strconv.Itoa(size)}
	// On UDP port 4791, so that softnic decode and tshark take the
	// capture as RoCEv2 (the loopback's addresses are the test's own).
	l := newLoopback(t, false)
	l.portA, l.portB = 4791, 4791
	srv, cli := runProcPair(t, "xsrq_pingpong", l, append([]string{"--pcap", pcap}, args...), args)
	if srv.status != 0 || cli.status != 0 {
		t.Fatalf("server: exit %d\n%s%s\nclient: exit %d\n%s%s", srv.status, srv.out, srv.errOut, cli.status, cli.out, cli.errOut)
	}
	srqn := map[string]uint64{} // "server"/"client" -> its own SRQ number
	for who, out := range map[string]string{"server": srv.out, "client": cli.out} {
		if !strings.HasSuffix(out, "success\n") {
			t.Errorf("%s: no success line:\n%s", who, out)
		}
		m := xsrqLine.FindAllStringSubmatch(out, -1)
		if len(m) != 2 {
			t.Fatalf("%s: want a local and a remote line:\n%s", who, out)
		}
		for _, l := range m {
			if l[1] == "local" {
				srqn[who], _ = strconv.ParseUint(l[5], 16, 32)
			}
		}
	}

	var stdout, stderr bytes.Buffer
	if got := run([]string{"decode", "--json", pcap}, &stdout, &stderr); got != exitOK {
		t.Fatalf("decode: exit %d: %s", got, stderr.String())
	}
	var opcodes []string
	reqs := map[bool]map[uint32]bool{true: {}, false: {}} // PSNs by direction (true: to the server); a retransmission repeats one
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var r struct {
			Type    string          `json:"type"`
			Opcode  string          `json:"opcode"`
			Value   uint8           `json:"opcode_value"`
			Dst     string          `json:"dst"`
			PSN     uint32          `json:"psn"`
			ICRCOK  json.RawMessage `json:"icrc_ok"` // a bool, a count in the summary
			Packets int             `json:"packets"`
			Bad     int             `json:"icrc_bad"`
			XRCETH  *struct {
				SRQ uint64 `json:"xrc_srq"`
			} `json:"xrceth"`
			AETH *json.RawMessage `json:"aeth"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type == "summary" {
			if r.Packets == 0 || r.Bad != 0 || r.Packets != len(opcodes) {
				t.Errorf("summary %s", sc.Text())
			}
			continue
		}
		opcodes = append(opcodes, strconv.Itoa(int(r.Value)))
		toServer := strings.HasSuffix(r.Dst, ".1")
		switch {
		case string(r.ICRCOK) != "true":
			t.Errorf("ICRC wrong: %s", sc.Text())
		case strings.HasPrefix(r.Opcode, "XRC_SEND_"):
			want := srqn["client"]
			if toServer {
				want = srqn["server"]
			}
			if r.XRCETH == nil || r.XRCETH.SRQ != want {
				t.Errorf("request without the XRCETH of SRQ %#x: %s", want, sc.Text())
			}
			reqs[toServer][r.PSN] = true
		case r.Opcode == "XRC_ACKNOWLEDGE":
			if r.XRCETH != nil || r.AETH == nil {
				t.Errorf("ACK with an XRCETH or without an AETH: %s", sc.Text())
			}
		default:
			t.Errorf("opcode %s", sc.Text())
		}
	}
	if len(reqs[true]) != 3*n || len(reqs[false]) != 3*n {
		t.Errorf("%d request PSNs to the server, %d to the client; want %d each", len(reqs[true]), len(reqs[false]), 3*n)
	}

	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (apt-get install tshark): ", err)
	}
	out, err := exec.Command(tshark, "-n", "-r", pcap, "-T", "fields", "-E", "separator=/t",
		"-e", "frame.protocols", "-e", "infiniband.bth.opcode").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(opcodes) {
		t.Fatalf("tshark printed %d frames, softnic decode %d:\n%s", len(lines), len(opcodes), out)
	}
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if !strings.Contains(f[0], ":udp:infiniband") || len(f) < 2 || f[1] != opcodes[i] {
			t.Errorf("frame %d: tshark %q, softnic decode opcode %s", i+1, l, opcodes[i])
		}
	}
}
