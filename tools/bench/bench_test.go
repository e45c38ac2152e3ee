package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/softnic/softnic/tools/perftest"
	"github.com/softnic/softnic/tools/tooljson"
)

// udpbenchOut is what cmd/udpbench printed on this machine.
const udpbenchOut = `udpbench: 4112-byte datagrams, batch 64, 200ms x 1 runs, GOMAXPROCS 2, 127.0.0.1 -> 127.0.0.2
mode               Gbit/s     kpkt/s    loss%
raw/plain            2.64         80     2.59
raw/gso+gro         18.26        555    24.06
link/gso+gro        10.00        304     0.00

ping-pong: 40-byte datagrams, 2000 round trips, half round trips in usec
mode              typical        p99
busy                 4.10      16.20
block               25.00      65.88
`

func TestParsePingPong(t *testing.T) {
	ps, err := ParsePingPong([]byte(udpbenchOut))
	if err != nil {
		t.Fatal(err)
	}
	if want := []PingPong{{"busy", 4.1, 16.2}, {"block", 25, 65.88}}; !reflect.DeepEqual(ps, want) {
		t.Errorf("got %+v, want %+v", ps, want)
	}
	// udpbench's note on standard error, between the table's lines in
	// the guests' output, is not a mode.
	noted := strings.Replace(udpbenchOut, "block ", "udpbench: ping-pong block: 1 round trips lost and made again\nblock ", 1)
	if ps, err := ParsePingPong([]byte(noted)); err != nil || len(ps) != 2 || ps[1].Mode != "block" {
		t.Errorf("with udpbench's note: got %+v, %v; want busy and block", ps, err)
	}
	table, _, _ := strings.Cut(udpbenchOut, "\n\n")
	if ps, err := ParsePingPong([]byte(table + "\n")); ps != nil || err != nil {
		t.Errorf("output without a ping-pong table: got %+v, %v; want none and no error", ps, err)
	}
	for _, bad := range []string{
		table + "\n\nping-pong busy: no answer\n",
		strings.Replace(udpbenchOut, "typical", "median", 1),
		strings.Replace(udpbenchOut, "16.20", "slow", 1),
		strings.Replace(udpbenchOut, "     65.88", "", 1),
		table + "\n\nping-pong: 40-byte datagrams\nmode typical p99\n",
	} {
		if ps, err := ParsePingPong([]byte(bad)); err == nil {
			t.Errorf("ParsePingPong(%q) = %+v, want an error", bad, ps)
		}
	}
}

func TestParseUDPBench(t *testing.T) {
	us, size, err := ParseUDPBench([]byte(udpbenchOut))
	if err != nil {
		t.Fatal(err)
	}
	want := []UDP{{"raw/plain", 2.64, 80, 2.59}, {"raw/gso+gro", 18.26, 555, 24.06}, {"link/gso+gro", 10, 304, 0}}
	if size != 4112 || !reflect.DeepEqual(us, want) {
		t.Errorf("got %d, %+v\nwant 4112, %+v", size, us, want)
	}
	for _, bad := range []string{
		"",
		"raw/plain: no free port\n",
		strings.Replace(udpbenchOut, "4112-byte", "4112", 1),
		strings.Replace(udpbenchOut, "loss%", "lost", 1),
		strings.Replace(udpbenchOut, "18.26", "fast", 1),
		strings.Replace(udpbenchOut, "   80", "", 1),
		strings.SplitAfterN(udpbenchOut, "\n", 3)[0] + strings.SplitAfterN(udpbenchOut, "\n", 3)[1],
	} {
		if us, _, err := ParseUDPBench([]byte(bad)); err == nil {
			t.Errorf("ParseUDPBench(%q) = %+v, want an error", bad, us)
		}
	}
}

// latJSON is a write_lat client's --json document with -H (cut short).
const latJSON = `{
  "tool": "write_lat",
  "side": "client",
  "device": "softnic0",
  "connection": "RC",
  "peer_version": "6.06",
  "local": [{"lid": 0, "qpn": 17, "psn": 1, "rkey": 2, "vaddr": "0x0000000000001000", "out_reads": 1, "gid": "::ffff:127.0.0.2"}],
  "remote": [{"lid": 0, "qpn": 17, "psn": 3, "rkey": 4, "vaddr": "0x0000000000002000", "out_reads": 1, "gid": "::ffff:127.0.0.1"}],
  "mtu": 4096,
  "latency": [{"size": 8, "iterations": 6, "t_min_usec": 20, "t_max_usec": 90, "t_typical_usec": 40,
    "t_avg_usec": 50, "t_stdev_usec": 10, "p99_usec": 90, "p99_9_usec": 90, "samples_usec": [20, 40, 40, 90]}],
  "checked": false
}
`

func TestParseResult(t *testing.T) {
	r, err := ParseResult([]byte(latJSON))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Lat) != 1 || r.Lat[0].Typical != 40 || !reflect.DeepEqual(r.Lat[0].Samples, []float64{20, 40, 40, 90}) {
		t.Errorf("got %+v", r.Lat)
	}
	for name, bad := range map[string]string{
		"unknown key":   strings.Replace(latJSON, `"checked"`, `"checkd"`, 1),
		"two documents": latJSON + "{}",
		"text output":   " #bytes #iterations    t_min[usec]\n",
		"check error":   strings.Replace(latJSON, `"checked": false`, `"checked": true, "check_error": "bad byte at 7"`, 1),
	} {
		if _, err := ParseResult([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func measured() Measurements {
	return Measurements{
		Machine:      Machine{CPUs: 2, CPUModel: "AMD EPYC", Kernel: "6.1.0", LoadBefore: [3]float64{3.5, 4, 5}, LoadAfter: [3]float64{4, 4, 5}},
		DatagramSize: 4112,
		UDP:          []UDP{{"raw/plain", 5, 150, 1}, {"raw/gso+gro", 40, 1200, 2}, {"link/gso+gro", 30, 900, 0}},
		// 2384.185791015625 MB/sec is exactly 20 Gbit/s: the goal, met.
		WriteBW:  &perftest.BWResult{Size: 65536, Iters: 100, BWAvg: 20e9 / 8 / (1 << 20)},
		ReadBW:   &perftest.BWResult{Size: 65536, Iters: 100, BWAvg: 1000},
		SendBW:   &perftest.BWResult{Size: 64, Iters: 100, MsgRate: 0.999},
		WriteLat: &perftest.LatResult{Size: 8, Typical: 25, P99: 75.5, Samples: []float64{0.5, 20, 25, 25, 75.5}},
		// busy-poll: exactly its goal, and exactly 3 × that typical
		WriteLatBusy: &perftest.LatResult{Size: 8, Typical: 10, P99: 30, Samples: []float64{9, 10, 10, 30}},
		ManyQP:       &perftest.BWResult{Size: 65536, BWAvg: 500},
		ManyQPs:      1000,
		PingPong:     []PingPong{{"busy", 4, 16}, {"block", 20, 50}},
	}
}

func row(t *testing.T, tb Table, name string) Row {
	t.Helper()
	for _, r := range tb.Rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no row %q", name)
	return Row{}
}

func val(r Row) float64 {
	if r.Value == nil {
		return math.NaN()
	}
	return *r.Value
}

func TestBuild(t *testing.T) {
	tb := Build(measured())
	for _, tt := range []struct {
		name, status string
		value        float64
	}{
		{RowUDPPlain, "", 5},
		{RowUDPGSOGRO, "", 40},
		{RowWriteBW, Pass, 20},
		{RowWriteRatio, Pass, 0.5},
		{RowReadBW, "", MBpsToGbits(1000)},
		{RowSendBW, Short, 0.999},
		{RowPingBlock, "", 20},
		{RowPingBusy, "", 4},
		{RowLatTyp, Pass, 25},
		{RowLatP99, Short, 75.5},
		{RowLatBusy, Pass, 10},
		{RowLatBusyP99, Pass, 30},
		{"write_bw 64 KiB, 1000 QPs", "", MBpsToGbits(500)},
	} {
		r := row(t, tb, tt.name)
		if r.Status != tt.status || math.Abs(val(r)-tt.value) > 1e-9 {
			t.Errorf("%s: got %v %q, want %v %q", tt.name, val(r), r.Status, tt.value, tt.status)
		}
	}
	if r := row(t, tb, RowWriteBW); r.OfGSOGRO == nil || math.Abs(*r.OfGSOGRO-0.5) > 1e-9 {
		t.Errorf("write_bw's share of gso+gro: got %v, want 0.5", r.OfGSOGRO)
	}
	if r := row(t, tb, RowLatP99); r.Goal != "≤ 3 × typical (75.0 µs)" {
		t.Errorf("p99 goal: got %q", r.Goal)
	}
	for name, want := range map[string]Row{
		RowLatTyp:     {Goal: "≤ 25 µs", Note: "blocking waits (no --busy-poll); t_typical_usec (1.2 × the ping-pong's)"},
		RowLatP99:     {Goal: "≤ 3 × typical (75.0 µs)", Note: "blocking waits (no --busy-poll); p99_usec (1.5 × the ping-pong's)"},
		RowLatBusy:    {Goal: "≤ 10 µs", Note: "busy-poll (--busy-poll on both sides); t_typical_usec (2.5 × the ping-pong's)"},
		RowLatBusyP99: {Goal: "≤ 3 × typical (30.0 µs)", Note: "busy-poll (--busy-poll on both sides); p99_usec (1.9 × the ping-pong's)"},
		RowPingBusy:   {Note: "the same, spinning on a non-blocking recvfrom, write_lat's floor; p99 16.00 µs"},
	} {
		if r := row(t, tb, name); r.Goal != want.Goal || r.Note != want.Note || r.Unit != "usec" {
			t.Errorf("%s: got goal %q, note %q, unit %q; want %q, %q, usec", name, r.Goal, r.Note, r.Unit, want.Goal, want.Note)
		}
	}
	for _, r := range tb.Rows {
		if r.Status == NotBuilt {
			t.Errorf("%s: still %q", r.Name, NotBuilt)
		}
	}
	if tb.NotBuilt == nil || len(tb.NotBuilt) != 0 {
		t.Errorf("not built: got %#v, want an empty list", tb.NotBuilt)
	}
	want := []Bucket{{0, 1, 1}, {1, 2, 0}, {2, 4, 0}, {4, 8, 0}, {8, 16, 0}, {16, 32, 3}, {32, 64, 0}, {64, 128, 1}}
	if !reflect.DeepEqual(tb.Histogram, want) || tb.Samples != 5 {
		t.Errorf("histogram: got %v (%d samples)\nwant %v", tb.Histogram, tb.Samples, want)
	}
	want = []Bucket{{8, 16, 3}, {16, 32, 1}}
	if !reflect.DeepEqual(tb.BusyHistogram, want) || tb.BusySamples != 4 {
		t.Errorf("busy-poll histogram: got %v (%d samples)\nwant %v", tb.BusyHistogram, tb.BusySamples, want)
	}

	// The other side of each goal.
	m := measured()
	m.WriteBW.BWAvg *= 0.99
	m.UDP[1].Gbits = 100
	m.SendBW.MsgRate = 1
	m.WriteLat = &perftest.LatResult{Typical: 25.01, P99: 75.03}
	m.WriteLatBusy = &perftest.LatResult{Typical: 10.01, P99: 30.04}
	tb = Build(m)
	for name, status := range map[string]string{RowWriteBW: Short, RowWriteRatio: Short, RowSendBW: Pass, RowLatTyp: Short, RowLatP99: Pass,
		RowLatBusy: Short, RowLatBusyP99: Short} {
		if r := row(t, tb, name); r.Status != status {
			t.Errorf("%s at %v: got %q, want %q", name, val(r), r.Status, status)
		}
	}
	if tb.Histogram != nil || tb.BusyHistogram != nil {
		t.Errorf("a latency without samples has a histogram: %v, %v", tb.Histogram, tb.BusyHistogram)
	}
	// the busy-poll p99 against its own typical, not the blocking one
	m.WriteLatBusy = &perftest.LatResult{Typical: 12, P99: 36}
	if r := row(t, Build(m), RowLatBusyP99); r.Status != Pass || r.Goal != "≤ 3 × typical (36.0 µs)" {
		t.Errorf("busy-poll p99 36 µs over a typical of 12 µs: got %+v", r)
	}
}

func TestBuildMissing(t *testing.T) {
	m := measured()
	m.UDP = m.UDP[:1] // no gso+gro line
	m.WriteLat = nil
	m.WriteLatBusy = nil
	m.ManyQP = nil
	m.Errors = map[string]string{RowLatTyp: "client: exit status 1: peer stopped answering",
		RowLatBusy: "server: exit status 1: --busy-poll: unknown option"}
	tb := Build(m)
	if r := row(t, tb, RowUDPGSOGRO); r.Status != Failed || r.Value != nil || !strings.Contains(r.Note, "raw/gso+gro") {
		t.Errorf("missing udpbench line: got %+v", r)
	}
	m2 := measured()
	m2.PingPong = m2.PingPong[:1] // no block line
	tb2 := Build(m2)
	if r := row(t, tb2, RowPingBlock); r.Status != Failed || r.Value != nil || !strings.Contains(r.Note, "ping-pong block") {
		t.Errorf("missing ping-pong line: got %+v", r)
	}
	if r := row(t, tb2, RowLatTyp); r.Note != "blocking waits (no --busy-poll); t_typical_usec" {
		t.Errorf("write_lat without its floor: note %q", r.Note)
	}
	if r := row(t, tb, RowWriteBW); r.Status != Pass || r.OfGSOGRO != nil {
		t.Errorf("write_bw without gso+gro: got %+v, want PASS and no share", r)
	}
	if r := row(t, tb, RowWriteRatio); r.Status != Failed || r.Value != nil {
		t.Errorf("ratio without gso+gro: got %+v", r)
	}
	for _, n := range []string{RowLatTyp, RowLatP99} {
		if r := row(t, tb, n); r.Status != Failed || r.Note != "client: exit status 1: peer stopped answering" {
			t.Errorf("%s: got %+v, want FAILED with the error", n, r)
		}
	}
	for _, n := range []string{RowLatBusy, RowLatBusyP99} {
		if r := row(t, tb, n); r.Status != Failed || r.Value != nil || r.Note != "server: exit status 1: --busy-poll: unknown option" {
			t.Errorf("%s: got %+v, want FAILED with the busy-poll run's error", n, r)
		}
	}
	if tb.Histogram != nil || tb.BusyHistogram != nil || tb.Samples != 0 || tb.BusySamples != 0 {
		t.Errorf("histograms without latencies: %v, %v", tb.Histogram, tb.BusyHistogram)
	}
	if got := tb.Format(); strings.Contains(got, "histogram") {
		t.Errorf("Format prints a histogram without latencies:\n%s", got)
	}
	if r := row(t, tb, "write_bw 64 KiB, 1000 QPs"); r.Status != Failed || r.Note != "not measured" {
		t.Errorf("many QPs: got %+v", r)
	}
	m.ManyQPs = 0
	for _, r := range Build(m).Rows {
		if strings.Contains(r.Name, "QPs") {
			t.Errorf("--qps 0 still has row %q", r.Name)
		}
	}
}

func TestFormat(t *testing.T) {
	got := Build(measured()).Format()
	for _, want := range []string{
		"softnic bench: 2 CPUs (AMD EPYC), Linux 6.1.0\n",
		"load average 3.50 4.00 5.00 before, 4.00 4.00 5.00 after\n",
		"UDP: 4112-byte datagrams, 127.0.0.1 → 127.0.0.2; softnic: two processes, 127.0.0.2 → 127.0.0.1, Go's default GOMAXPROCS\n",
		"measure                                 value unit      /gso+gro  goal                       status\n",
		"write_bw 64 KiB                         20.00 Gbit/s       50.0%  ≥ 20 Gbit/s                PASS\n",
		"UDP raw/gso+gro                         40.00 Gbit/s\n",
		"write_bw / raw gso+gro                   0.50 x                   ≥ 0.40                     PASS\n",
		"send_bw 64 B                             1.00 M msg/s             ≥ 1 M msg/s                SHORT\n",
		"write_lat 8 B p99                       75.50 usec                ≤ 3 × typical (75.0 µs)    SHORT\n",
		"write_lat 8 B typical                   25.00 usec                ≤ 25 µs                    PASS\n",
		"write_lat 8 B typical, busy-poll        10.00 usec                ≤ 10 µs                    PASS\n",
		"write_lat 8 B p99, busy-poll            30.00 usec                ≤ 3 × typical (30.0 µs)    PASS\n",
		"  UDP raw/gso+gro: UDP GSO → UDP GRO, the limit; 1200 kpkt/s, 2.00% lost\n",
		"  write_lat 8 B typical: blocking waits (no --busy-poll); t_typical_usec (1.2 × the ping-pong's)\n",
		"  write_lat 8 B p99, busy-poll: busy-poll (--busy-poll on both sides); p99_usec (1.9 × the ping-pong's)\n",
		"UDP ping-pong typical, busy              4.00 usec\n",
		"\nwrite_lat 8 B latency histogram, blocking waits (5 samples, half round trips, µs):\n" +
			"  [     0,      1)       1 " + strings.Repeat("#", 17) + "\n",
		"  [    16,     32)       3 " + strings.Repeat("#", 50) + "\n",
		"  [    32,     64)       0 \n",
		"  [    64,    128)       1 " + strings.Repeat("#", 17) + "\n" +
			"\nwrite_lat 8 B latency histogram, --busy-poll on both sides (4 samples, half round trips, µs):\n" +
			"  [     8,     16)       3 " + strings.Repeat("#", 50) + "\n" +
			"  [    16,     32)       1 " + strings.Repeat("#", 17) + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Format has no %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"not built", "n/a"} {
		if strings.Contains(got, bad) {
			t.Errorf("Format still says %q:\n%s", bad, got)
		}
	}
	// something not built yet gets its section back
	tb := Build(measured())
	tb.NotBuilt = []string{"a mode"}
	if got := tb.Format(); !strings.HasSuffix(got, "\nnot built:\n  a mode\n") {
		t.Errorf("Format with something not built ends:\n%s", got)
	}
	q := measured()
	q.Quick = true
	if got := Build(q).Format(); !strings.HasPrefix(got, "softnic bench --quick: ") {
		t.Errorf("quick run's first line: %q", strings.SplitN(got, "\n", 2)[0])
	}
	g := measured()
	g.GOMAXPROCS = 1
	if got := Build(g).Format(); !strings.Contains(got, "softnic: two processes, 127.0.0.2 → 127.0.0.1, GOMAXPROCS 1 each\n") {
		t.Errorf("with GOMAXPROCS 1 the header says:\n%s", got)
	}
}

func TestJSON(t *testing.T) {
	m := measured()
	m.GOMAXPROCS = 1
	tb := Build(m)
	b, err := tb.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Table
	if err := tooljson.Decode(b, &back); err != nil {
		t.Fatalf("strict decode: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, tb) {
		t.Errorf("round trip:\ngot  %+v\nwant %+v", back, tb)
	}
	s := string(b)
	for _, want := range []string{`"nproc": 2`, `"load_before": [`, `"gbit_per_sec": 40`, `"of_gso_gro": 0.5`,
		`"from_usec": 16`, `"write_lat_samples": 5`, `"udp_datagram_bytes": 4112`,
		`"write_lat_busy_poll_histogram": [`, `"write_lat_busy_poll_samples": 4`, `"not_built": []`, `"softnic_gomaxprocs": 1`} {
		if !strings.Contains(s, want) {
			t.Errorf("JSON has no %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, "not built)") {
		t.Errorf("JSON still has a row not built:\n%s", s)
	}
	var doc struct {
		Busy []Bucket `json:"write_lat_busy_poll_histogram"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || !reflect.DeepEqual(doc.Busy, []Bucket{{8, 16, 3}, {16, 32, 1}}) {
		t.Errorf("write_lat_busy_poll_histogram: got %v, %v", doc.Busy, err)
	}
	m = measured()
	m.WriteLatBusy = nil
	if b, err := Build(m).JSON(); err != nil || !strings.Contains(string(b), `"write_lat_busy_poll_histogram": null`) {
		t.Errorf("without the busy-poll run: %v\n%s", err, b)
	}
}

func TestMachine(t *testing.T) {
	if got := CPUModel([]byte("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n")); got != "AMD EPYC 7B13" {
		t.Errorf("CPUModel: got %q", got)
	}
	if got := CPUModel([]byte("processor\t: 0\nCPU part\t: 0xd0c\n")); got != "unknown" {
		t.Errorf("CPUModel without a model name: got %q", got)
	}
	if l, err := ParseLoad([]byte("2.91 5.35 6.90 3/412 12345\n")); err != nil || l != [3]float64{2.91, 5.35, 6.90} {
		t.Errorf("ParseLoad: got %v, %v", l, err)
	}
	for _, bad := range []string{"", "1.0 2.0", "1.0 x 3.0 1/2 3"} {
		if _, err := ParseLoad([]byte(bad)); err == nil {
			t.Errorf("ParseLoad(%q): no error", bad)
		}
	}
}

func TestPlanFor(t *testing.T) {
	full, quick := PlanFor(Config{ManyQPs: 1000}), PlanFor(Config{ManyQPs: 1000, Quick: true})
	for _, p := range []Plan{full, quick} {
		for name, args := range map[string][]string{"write_bw": p.WriteBW, "read_bw": p.ReadBW, "QPs": p.QP} {
			if !strings.Contains(strings.Join(args, " "), "-s 65536") {
				t.Errorf("%s: %q, want 64 KiB messages", name, args)
			}
		}
		if !strings.Contains(strings.Join(p.SendBW, " "), "-s 64 ") || !strings.Contains(strings.Join(p.WriteLat, " "), "-s 8 ") ||
			!strings.HasSuffix(strings.Join(p.WriteLat, " "), "-H") || !strings.Contains(strings.Join(p.QP, " "), "-q 1000") ||
			strings.Join(p.WriteLatBusy, " ") != strings.Join(p.WriteLat, " ")+" --busy-poll" {
			t.Errorf("plan %+v", p)
		}
	}
	if !strings.Contains(strings.Join(quick.UDPBench, " "), "-runs 1") || !strings.Contains(strings.Join(full.UDPBench, " "), "-runs 3") ||
		!strings.Contains(strings.Join(full.UDPBench, " "), "-pingpong 20000") {
		t.Errorf("udpbench: quick %q, full %q", quick.UDPBench, full.UDPBench)
	}
}

// TestRun runs Run against stand-in binaries: a udpbench that prints
// udpbenchOut and a softnic that prints latJSON for write_lat, a bandwidth
// document for the others, and fails read_bw's client. It checks the
// arguments each side got and that a failure is recorded, not fatal.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "args")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bw := strings.Replace(strings.Replace(latJSON, `"tool": "write_lat"`, `"tool": "write_bw"`, 1),
		strings.SplitAfter(strings.SplitN(latJSON, `"latency": `, 2)[1], "}],")[0],
		`[{"size": 65536, "iterations": 20, "bw_peak": 900, "bw_average": 800, "msg_rate_mpps": 0.0125}],`, 1)
	bw = strings.Replace(bw, `"latency":`, `"bw":`, 1)
	if _, err := ParseResult([]byte(bw)); err != nil {
		t.Fatalf("the stand-in's bandwidth document: %v\n%s", err, bw)
	}
	os.WriteFile(filepath.Join(dir, "lat.json"), []byte(latJSON), 0o644)
	os.WriteFile(filepath.Join(dir, "bw.json"), []byte(bw), 0o644)
	udp := write("udpbench", `echo "udpbench GOMAXPROCS=$GOMAXPROCS" >> `+log+"\ncat <<'EOF'\n"+udpbenchOut+"EOF\n")
	softnic := write("softnic", `echo "GOMAXPROCS=$GOMAXPROCS $*" >> `+log+`
case "$*" in
read_bw*127.0.0.2*) echo "softnic read_bw: peer stopped answering" >&2; exit 1;;
write_lat*) cat `+dir+`/lat.json;;
*) cat `+dir+`/bw.json;;
esac
`)
	m := Run(context.Background(), Config{Softnic: softnic, UDPBench: udp, Quick: true, TCPPort: 30000, ManyQPs: 7, CPUProfile: "/tmp/p", GOMAXPROCS: 3})
	if len(m.UDP) != 3 || m.DatagramSize != 4112 || len(m.PingPong) != 2 {
		t.Errorf("udpbench: got %+v, %+v, %d", m.UDP, m.PingPong, m.DatagramSize)
	}
	if m.WriteBW == nil || m.WriteBW.BWAvg != 800 || m.SendBW == nil || m.ManyQP == nil || m.WriteLat == nil || m.WriteLat.Typical != 40 ||
		m.WriteLatBusy == nil || m.WriteLatBusy.Typical != 40 {
		t.Errorf("results: %+v", m)
	}
	if m.ReadBW != nil || !strings.Contains(m.Errors[RowReadBW], "client: exit status 1: softnic read_bw: peer stopped answering") || len(m.Errors) != 1 {
		t.Errorf("read_bw: got %v, errors %q", m.ReadBW, m.Errors)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"write_bw --json -p 30000 --timeout 60s -s 65536 -n 2000 --addr 127.0.0.1 --accept-timeout 60s\n",
		"write_bw --json -p 30000 --timeout 60s -s 65536 -n 2000 --addr 127.0.0.2 --connect-timeout 30s 127.0.0.1\n",
		"read_bw --json -p 30001 ",
		"send_bw --json -p 30002 --timeout 60s -s 64 -n 100000 -N --addr 127.0.0.2",
		"write_lat --json -p 30003 --timeout 60s -s 8 -n 5000 -H --addr 127.0.0.1 --accept-timeout 60s\n",
		"write_lat --json -p 30003 --timeout 60s -s 8 -n 5000 -H --cpuprofile /tmp/p --addr 127.0.0.2",
		"write_lat --json -p 30004 --timeout 60s -s 8 -n 5000 -H --busy-poll --addr 127.0.0.1 --accept-timeout 60s\n",
		"write_lat --json -p 30004 --timeout 60s -s 8 -n 5000 -H --busy-poll --addr 127.0.0.2 --connect-timeout 30s 127.0.0.1\n",
		"write_bw --json -p 30005 --timeout 60s -s 65536 -q 7 -n 5 --addr 127.0.0.1",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no run with %q in:\n%s", want, b)
		}
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// 11 or 12 softnic processes: the failing read_bw client's cancel
	// may stop its server before it logs.
	if len(lines) < 12 || lines[0] != "udpbench GOMAXPROCS=" || m.GOMAXPROCS != 3 {
		t.Errorf("want udpbench with Go's default GOMAXPROCS, then the softnic processes, Measurements.GOMAXPROCS 3 (got %d):\n%s", m.GOMAXPROCS, b)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "GOMAXPROCS=3 ") {
			t.Errorf("a softnic process without GOMAXPROCS=3: %q", l)
		}
	}
	if strings.Count(string(b), "--cpuprofile") != 1 {
		t.Errorf("--cpuprofile given to more than the blocking write_lat client:\n%s", b)
	}
	if strings.Count(string(b), "--busy-poll") != 2 {
		t.Errorf("--busy-poll given to more than the second write_lat's two sides:\n%s", b)
	}
}

// perftest's own output (Debian's perftest 4.5 over softnic's libibverbs):
// a bandwidth table and a latency table.
const (
	debianBW = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 65536      2000             2600.00            2400.00   \t\t   0.038400\n" +
		"---------------------------------------------------------------------------------------\n"
	debianLat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 8       5000          11.94          523.73      29.90   \t       31.55     \t3.84\t\t75.79 \t\t523.73\n" +
		"---------------------------------------------------------------------------------------\n"
)

func TestBuildCLib(t *testing.T) {
	m := measured()
	if got := Build(m).Format(); strings.Contains(got, "libibverbs") {
		t.Fatalf("rows of the library without a run over it:\n%s", got)
	}
	m.CLib = true
	m.CWriteBW = &perftest.BWResult{Size: 65536, BWAvg: 0.9 * m.WriteBW.BWAvg} // exactly the goal
	m.CSendBW = &perftest.BWResult{Size: 64, MsgRate: 0.8}                     // 0.8 of 0.999
	m.CWriteLat = &perftest.LatResult{Size: 8, Typical: 30}                    // exactly 1.2 × 25
	tb := Build(m)
	for _, tt := range []struct {
		name, status, goal string
		value              float64
	}{
		{RowCWriteBW, Pass, "≥ 90% of write_bw", 18},
		{RowCSendBW, Short, "≥ 90% of send_bw", 0.8},
		{RowCWriteLat, Pass, "≤ 1.2 × write_lat", 30},
	} {
		r := row(t, tb, tt.name)
		if r.Status != tt.status || r.Goal != tt.goal || math.Abs(val(r)-tt.value) > 1e-9 || !strings.Contains(r.Note, "softnic exec") {
			t.Errorf("%s: got %v %q %q (%s), want %v %q %q", tt.name, val(r), r.Status, r.Goal, r.Note, tt.value, tt.status, tt.goal)
		}
	}
	if got := tb.Format(); !strings.Contains(got, "ib_write_lat 8 B typical, libibverbs        30.00 usec                ≤ 1.2 × write_lat          PASS\n") {
		t.Errorf("Format:\n%s", got)
	}

	m.CWriteLat.Typical = 30.1
	m.SendBW = nil
	m.CWriteBW = nil
	m.Errors = map[string]string{RowCWriteBW: "client: exit status 1: Couldn't connect"}
	tb = Build(m)
	if r := row(t, tb, RowCWriteLat); r.Status != Short {
		t.Errorf("ib_write_lat 30.1 µs over 25: got %q", r.Status)
	}
	if r := row(t, tb, RowCSendBW); r.Status != "" || r.Goal != "" || !strings.HasSuffix(r.Note, "; no send_bw to compare with") {
		t.Errorf("ib_send_bw without send_bw: got %+v", r)
	}
	if r := row(t, tb, RowCWriteBW); r.Status != Failed || r.Note != "client: exit status 1: Couldn't connect" {
		t.Errorf("failed ib_write_bw: got %+v", r)
	}
}

// TestRunCLib runs Run with a library directory against a stand-in softnic
// whose exec prints Debian perftest's tables: each program runs over
// softnic exec on both addresses, the client once the server's TCP port
// listens, with the look-alikes' arguments.
func TestRunCLib(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "args")
	os.WriteFile(filepath.Join(dir, "bw.txt"), []byte(debianBW), 0o644)
	os.WriteFile(filepath.Join(dir, "lat.txt"), []byte(debianLat), 0o644)
	softnic := filepath.Join(dir, "softnic")
	err := os.WriteFile(softnic, []byte(`#!/bin/sh
echo "$*" >> `+log+`
case "$*" in
exec*ib_write_lat*) cat `+dir+`/lat.txt;;
exec*ib_*) cat `+dir+`/bw.txt;;
*) exit 1;;
esac
`), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	// The servers' "listening" ports: the stand-in listens on none.
	for p := 30010; p < 30020; p++ {
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			defer l.Close()
		}
	}
	m := Run(context.Background(), Config{Softnic: softnic, UDPBench: "/bin/false", Quick: true, TCPPort: 30010, CLib: "/lib/dir"})
	if !m.CLib || m.CWriteBW == nil || m.CWriteBW.BWAvg != 2400 || m.CSendBW == nil || m.CSendBW.MsgRate != 0.0384 ||
		m.CWriteLat == nil || m.CWriteLat.Typical != 29.9 {
		t.Errorf("results: %+v, %+v, %+v (errors %q)", m.CWriteBW, m.CSendBW, m.CWriteLat, m.Errors)
	}
	for _, row := range []string{RowCWriteBW, RowCSendBW, RowCWriteLat} {
		if e, ok := m.Errors[row]; ok {
			t.Errorf("%s: %s", row, e)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"exec --addr 127.0.0.1 --lib /lib/dir -- ib_write_bw -d softnic0 -x 1 -F -p 30015 -s 65536 -n 2000\n",
		"exec --addr 127.0.0.2 --lib /lib/dir -- ib_write_bw -d softnic0 -x 1 -F -p 30015 -s 65536 -n 2000 127.0.0.1\n",
		"exec --addr 127.0.0.2 --lib /lib/dir -- ib_send_bw -d softnic0 -x 1 -F -p 30016 -s 64 -n 100000 -N 127.0.0.1\n",
		"exec --addr 127.0.0.2 --lib /lib/dir -- ib_write_lat -d softnic0 -x 1 -F -p 30017 -s 8 -n 5000 127.0.0.1\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no run with %q in:\n%s", want, b)
		}
	}
}
