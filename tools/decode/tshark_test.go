package decode_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/softnic/softnic/tools/decode"
)

// tsharkCMFields are the tshark fields TestTsharkCM reads for each MAD,
// in order; a field the message has not is empty.
var tsharkCMFields = []string{
	"frame.number", "infiniband.mad.mgmtclass", "infiniband.mad.method", "infiniband.mad.transactionid",
	"infiniband.mad.attributeid", "_ws.col.Info",
	"infiniband.cm.req", "infiniband.cm.req.serviceid", "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn",
	"infiniband.cm.rep", "infiniband.cm.rep.remotecommid", "infiniband.cm.rep.localqpn", "infiniband.cm.rep.startpsn",
	"infiniband.cm.rej.reason",
}

// tsharkCM returns tshark's dissection of the MADs of pcap, one line of
// tsharkCMFields per MAD, tab-separated. Wireshark dissects UDP port 4791
// as RoCEv2 ("RRoCE") by default, and QP 1 payloads as MADs.
func tsharkCM(t *testing.T, pcap string) []string {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (apt-get install tshark): ", err)
	}
	args := []string{"-n", "-r", pcap, "-Y", "infiniband.mad", "-T", "fields", "-E", "separator=/t"}
	for _, f := range tsharkCMFields {
		args = append(args, "-e", f)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(tshark, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}

// madLine is what softnic decode's JSON says about a MAD, in tsharkCM's
// form.
func madLine(r decode.Record) string {
	m := r.MAD
	x := func(w int, v uint64) string { return fmt.Sprintf("0x%0*x", w, v) }
	f := []string{strconv.Itoa(r.Index), x(2, uint64(m.ClassValue)), x(2, uint64(m.MethodValue)), x(16, uint64(m.TID)),
		x(4, uint64(m.AttrID)), "CM: " + m.Attr, "", "", "", "", "", "", "", "", ""}
	if q := m.REQ; q != nil {
		f[6], f[7], f[8], f[9] = x(8, uint64(q.LocalCommID)), x(16, uint64(q.ServiceID)), x(6, uint64(q.LocalQPN)), x(6, uint64(q.StartingPSN))
	}
	if p := m.REP; p != nil {
		f[10], f[11], f[12], f[13] = x(8, uint64(p.LocalCommID)), x(8, uint64(p.RemoteCommID)), x(6, uint64(p.LocalQPN)), x(6, uint64(p.StartingPSN))
	}
	if j := m.REJ; j != nil {
		f[14] = x(4, uint64(j.Reason))
	}
	return strings.Join(f, "\t")
}

// checkTsharkCM asserts that tshark dissects the MADs of pcap as
// InfiniBand CM messages with the attributes wantAttrs, in order, and
// with the header and REQ/REP/REJ fields softnic decode prints.
func checkTsharkCM(t *testing.T, pcap string, wantAttrs []string) {
	t.Helper()
	lines := tsharkCM(t, pcap)
	var out bytes.Buffer
	if _, err := decode.Run(&out, []string{pcap}, decode.Options{JSON: true}); err != nil {
		t.Fatal(err)
	}
	recs, _ := parseJSON(t, out.Bytes())
	var ours []string
	for _, r := range recs {
		if r.Packet != nil && r.MAD != nil {
			ours = append(ours, madLine(r))
		}
	}
	if len(lines) != len(ours) || len(lines) != len(wantAttrs) {
		t.Fatalf("tshark dissected %d MADs, softnic decode %d, want %d:\n%s", len(lines), len(ours), len(wantAttrs), strings.Join(lines, "\n"))
	}
	for i, l := range lines {
		if !strings.Contains(l, "\tCM: "+wantAttrs[i]+"\t") {
			t.Errorf("MAD %d: tshark %q, want CM %s", i+1, l, wantAttrs[i])
		}
		if l != ours[i] {
			t.Errorf("MAD %d:\ntshark        %q\nsoftnic decode %q", i+1, l, ours[i])
		}
	}
}

// TestTsharkCM: Wireshark reads rxe's rping CM exchange as InfiniBand CM
// and agrees with softnic decode on every field both print.
func TestTsharkCM(t *testing.T) {
	checkTsharkCM(t, rxeFile("rping_cm.pcap"),
		[]string{"ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"})
}

// TestTsharkCMSamples: the same for the synthesized CM messages that
// parse, REJ and MRA among them (the broken ones are left out of the
// comparison: tshark has its own view of them).
func TestTsharkCMSamples(t *testing.T) {
	ss := cmSamples()[:9] // REQ (IPv6), REJ ×2, MRA, SIDR_REQ, SIDR_REP ×2, LAP, APR
	path := writeSamples(t, 101, ss)
	checkTsharkCM(t, path, []string{"ConnectRequest", "ConnectReject", "ConnectReject", "MsgRcptAck",
		"ServiceIDResReq", "ServiceIDResReqResp", "ServiceIDResReqResp", "LoadAlternatePath", "AlternatePathResponse"})
}

// TestTsharkUdaddySIDR: Wireshark names the SIDR messages of rxe's udaddy
// as softnic decode does.
func TestTsharkUdaddySIDR(t *testing.T) {
	want := []string{"ServiceIDResReq", "ServiceIDResReq", "ServiceIDResReqResp"}
	for range 13 {
		want = append(want, "ServiceIDResReq")
	}
	checkTsharkCM(t, "testdata/rxe_udaddy_sidr.pcap", append(want, "ServiceIDResReqResp"))
}

// TestTsharkSoftnicCM: Wireshark dissects softnic's own CM MADs (captured
// against rxe) as InfiniBand CM, field by field as softnic decode.
func TestTsharkSoftnicCM(t *testing.T) {
	for _, c := range softnicCaptures {
		t.Run(c.file, func(t *testing.T) { checkTsharkCM(t, c.file, c.attrs) })
	}
}
