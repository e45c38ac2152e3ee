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
	"time"

	"github.com/softnic/softnic/tools/perftest"
	"github.com/softnic/softnic/tools/tooljson"
)

// udpbenchOut is what cmd/udpbench printed on this machine.
const udpbenchOut = `udpbench: 4112-byte datagrams, batch 64, 200ms x 1 runs, GOMAXPROCS 2, 127.0.0.1 -> 127.0.0.2
mode               Gbit/s     kpkt/s    loss%  cpu_s/GB
raw/plain            2.64         80     2.59     0.900
raw/gso+gro         18.26        555    24.06     0.200
link/gso+gro        10.00        304     0.00     0.250

ping-pong: 40-byte datagrams, 2000 round trips, half round trips in usec
mode              typical        p99
busy                 4.10      16.20
block               25.00      65.88
`

// udpbenchSmallOut is udpbench -size 80's output, without link/gso+gro.
const udpbenchSmallOut = `udpbench: 80-byte datagrams, batch 64, 500ms x 1 runs, GOMAXPROCS 2, 127.0.0.1 -> 127.0.0.2
mode               Gbit/s     kpkt/s    loss%  cpu_s/GB
raw/plain           0.640     1000.0     0.00    10.000
raw/gso+gro         5.760     9000.0     0.10     1.250
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
	want := []UDP{{"raw/plain", 2.64, 80, 2.59, ptr(0.9)}, {"raw/gso+gro", 18.26, 555, 24.06, ptr(0.2)}, {"link/gso+gro", 10, 304, 0, ptr(0.25)}}
	if size != 4112 || !reflect.DeepEqual(us, want) {
		t.Errorf("got %d, %+v\nwant 4112, %+v", size, us, want)
	}
	// udpbench -peer has no CPU figure (the receiver is on the other
	// host), and an output kept from before the column has no column.
	peer := strings.Replace(udpbenchOut, "0.200", "    -", 1)
	if us, _, err := ParseUDPBench([]byte(peer)); err != nil || us[1].CPUPerGB != nil || *us[2].CPUPerGB != 0.25 {
		t.Errorf("with a CPU figure of -: got %+v, %v", us, err)
	}
	old := `udpbench: 1040-byte datagrams, batch 64, 3s x 1 runs, GOMAXPROCS 1, 10.77.0.3 -> 10.77.0.2:18700
mode               Gbit/s     kpkt/s    loss%
raw/plain           0.100       12.0     1.50
`
	if us, size, err := ParseUDPBench([]byte(old)); err != nil || size != 1040 || !reflect.DeepEqual(us, []UDP{{"raw/plain", 0.1, 12, 1.5, nil}}) {
		t.Errorf("without the CPU column: got %d, %+v, %v", size, us, err)
	}
	for _, bad := range []string{
		"",
		"raw/plain: no free port\n",
		strings.Replace(udpbenchOut, "4112-byte", "4112", 1),
		strings.Replace(udpbenchOut, "loss%", "lost", 1),
		strings.Replace(udpbenchOut, "18.26", "fast", 1),
		strings.Replace(udpbenchOut, "   80", "", 1),
		strings.Replace(udpbenchOut, "0.900", "", 1),
		strings.Replace(udpbenchOut, "0.900", "slow", 1),
		strings.Replace(udpbenchOut, "cpu_s/GB", "cpu", 1),
		strings.Replace(old, "loss%", "loss% cpu_s/GB", 1),
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

// measured is a run with every figure: at the goal exactly where a goal
// can be met exactly (write_bw's 20 Gbit/s, read_bw's 0.75 of gso+gro,
// write_bw's CPU 1.5 × the link's, send_bw's 2 M msg/s and 0.5 of the
// small datagrams' gso+gro, both p99s 3 × their typical), on either side
// of it elsewhere.
func measured() Measurements {
	return Measurements{
		Machine:      Machine{CPUs: 2, CPUModel: "AMD EPYC", Kernel: "6.1.0", LoadBefore: [3]float64{3.5, 4, 5}, LoadAfter: [3]float64{4, 4, 5}},
		DatagramSize: 4112,
		UDP: []UDP{{"raw/plain", 5, 150, 1, ptr(1)}, {"raw/gso+gro", 40, 1200, 2, ptr(0.2)},
			{"link/gso+gro", 30, 900, 0, ptr(0.25)}},
		SmallDatagramSize: 80,
		UDPSmall: []UDP{{"raw/plain", 0.64, 1000, 0, ptr(10)}, {"raw/gso+gro", 2.56, 4000, 0.5, ptr(1.5)},
			{"link/gso+gro", 1.6, 2500, 0, ptr(3)}},
		// 2384.185791015625 MB/sec is exactly 20 Gbit/s: the goal, met;
		// 10^9 bytes in 0.375 s of CPU, 1.5 × the link's 0.25 s/GB.
		WriteBW: withSetup(perftest.BWResult{Size: 1e6, Iters: 1000, BWAvg: 20e9 / 8 / (1 << 20)}, 375*time.Millisecond),
		// 30 Gbit/s, 0.75 × gso+gro; 2 s/GB
		ReadBW: withSetup(perftest.BWResult{Size: 65536, Iters: 100, BWAvg: 30e9 / 8 / (1 << 20)}, 13107200*time.Nanosecond),
		SendBW: withSetup(perftest.BWResult{Size: 64, Iters: 1e6, MsgRate: 2}, 2*time.Second),
		// blocking: exactly its goal
		WriteLat: &perftest.LatResult{Size: 8, Typical: 25, P99: 75.5, Samples: []float64{0.5, 20, 25, 25, 75.5}},
		// busy-poll: exactly its goal of issue 13, and exactly 3 × that
		// typical; 2.5 × the busy floor, 0.4 × blocking
		WriteLatBusy: &perftest.LatResult{Size: 8, Typical: 10, P99: 30, Samples: []float64{9, 10, 10, 30}},
		ManyQP:       &BW{BWResult: perftest.BWResult{Size: 65536, BWAvg: 500}},
		ManyQPs:      1000,
		PingPong:     []PingPong{{"busy", 4, 16}, {"block", 20, 50}},
	}
}

// withSetup returns a run that moved r's messages on cpu beyond its setup
// run (SetupIters messages, 0.1 s of CPU).
func withSetup(r perftest.BWResult, cpu time.Duration) *BW {
	setup := &BW{BWResult: perftest.BWResult{Size: r.Size, Iters: SetupIters, BWAvg: r.BWAvg / 2}, CPU: 100 * time.Millisecond}
	r.Iters += setup.Iters
	return &BW{BWResult: r, CPU: cpu + setup.CPU, Setup: setup}
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
		{RowUDPLink, "", 30},
		{RowWriteBW, Pass, 20},
		{RowWriteRatio, Short, 0.5},
		{RowWriteCPU, Pass, 1.5},
		{RowReadBW, "", 30},
		{RowReadRatio, Pass, 0.75},
		{RowReadCPU, Short, 8},
		{RowSmallPlain, "", 1},
		{RowSmallGSOGRO, "", 4},
		{RowSmallLink, "", 2.5},
		{RowSendBW, Pass, 2},
		{RowSendRatio, Pass, 0.5},
		{RowPingBlock, "", 20},
		{RowPingBusy, "", 4},
		{RowLatTyp, Pass, 25},
		{RowLatP99, Short, 75.5},
		{RowLatBusy, Pass, 10},
		{RowLatBusyFloor, Short, 2.5},
		{RowLatBusyBlock, Pass, 0.4},
		{RowLatBusyP99, Pass, 30},
		{"write_bw 64 KiB, 1000 QPs", "", MBpsToGbits(500)},
		{"write_bw 1000 QPs / 1 QP", Short, MBpsToGbits(500) / 20},
	} {
		r := row(t, tb, tt.name)
		if r.Status != tt.status || math.Abs(val(r)-tt.value) > 1e-9 {
			t.Errorf("%s: got %v %q, want %v %q", tt.name, val(r), r.Status, tt.value, tt.status)
		}
	}
	var names []string
	for _, r := range tb.Rows {
		names = append(names, r.Name)
	}
	if want := []string{RowUDPPlain, RowUDPGSOGRO, RowUDPLink, RowWriteBW, RowWriteRatio, RowWriteCPU, RowReadBW, RowReadRatio, RowReadCPU,
		RowSmallPlain, RowSmallGSOGRO, RowSmallLink, RowSendBW, RowSendRatio, RowPingBlock, RowPingBusy,
		RowLatTyp, RowLatP99, RowLatBusy, RowLatBusyFloor, RowLatBusyBlock, RowLatBusyP99,
		"write_bw 64 KiB, 1000 QPs", "write_bw 1000 QPs / 1 QP"}; !reflect.DeepEqual(names, want) {
		t.Errorf("rows:\ngot  %q\nwant %q", names, want)
	}
	// Each figure's share of its GSO→GRO limit (the 80-byte datagrams'
	// rate for send_bw and the 80-byte modes) and its CPU per GB; none
	// for the limit itself and for the rows that move nothing.
	for name, want := range map[string][2]float64{
		RowUDPPlain:                 {0.125, 1},
		RowUDPGSOGRO:                {math.NaN(), 0.2},
		RowUDPLink:                  {0.75, 0.25},
		RowWriteBW:                  {0.5, 0.375},
		RowReadBW:                   {0.75, 2},
		RowSmallPlain:               {0.25, 10},
		RowSmallGSOGRO:              {math.NaN(), 1.5},
		RowSmallLink:                {0.625, 3},
		RowSendBW:                   {0.5, 31.25},
		"write_bw 64 KiB, 1000 QPs": {MBpsToGbits(500) / 40, math.NaN()}, // no CPU time
		RowWriteRatio:               {math.NaN(), math.NaN()},
		RowLatTyp:                   {math.NaN(), math.NaN()},
		RowPingBusy:                 {math.NaN(), math.NaN()},
	} {
		r := row(t, tb, name)
		for i, got := range []*float64{r.OfGSOGRO, r.CPUPerGB} {
			switch {
			case math.IsNaN(want[i]) && got != nil:
				t.Errorf("%s: %s %v, want none", name, [2]string{"of gso+gro", "CPU s/GB"}[i], *got)
			case !math.IsNaN(want[i]) && (got == nil || math.Abs(*got-want[i]) > 1e-9):
				t.Errorf("%s: %s %v, want %v", name, [2]string{"of gso+gro", "CPU s/GB"}[i], got, want[i])
			}
		}
	}
	for name, want := range map[string]Row{
		RowLatTyp:       {Unit: "usec", Goal: "≤ 25 µs", Note: "blocking waits (no --busy-poll); t_typical_usec (1.2 × the ping-pong's)"},
		RowLatP99:       {Unit: "usec", Goal: "≤ 3 × typical (75.0 µs)", Note: "blocking waits (no --busy-poll); p99_usec (1.5 × the ping-pong's)"},
		RowLatBusy:      {Unit: "usec", Goal: "≤ 10 µs", Note: "busy-poll (--busy-poll on both sides); t_typical_usec (2.5 × the ping-pong's)"},
		RowLatBusyP99:   {Unit: "usec", Goal: "≤ 3 × typical (30.0 µs)", Note: "busy-poll (--busy-poll on both sides); p99_usec (1.9 × the ping-pong's)"},
		RowPingBusy:     {Unit: "usec", Note: "the same, spinning on a non-blocking recvfrom, write_lat's floor; p99 16.00 µs"},
		RowWriteBW:      {Unit: "Gbit/s", Goal: "≥ 20 Gbit/s", Note: "bw_average"},
		RowWriteRatio:   {Unit: "x", Goal: "≥ 0.75"},
		RowWriteCPU:     {Unit: "x", Goal: "≤ 1.50"},
		RowReadRatio:    {Unit: "x", Goal: "≥ 0.75"},
		RowReadCPU:      {Unit: "x", Goal: "≤ 1.50"},
		RowSendBW:       {Unit: "M msg/s", Goal: "≥ 2 M msg/s", Note: "msg_rate_mpps; CPU 2.000 µs a message (both processes)"},
		RowSendRatio:    {Unit: "x", Goal: "≥ 0.50"},
		RowLatBusyFloor: {Unit: "x", Goal: "≤ 1.50"},
		RowLatBusyBlock: {Unit: "x", Goal: "≤ 1.00"},
		RowSmallPlain: {Unit: "M pkt/s",
			Note: "sendmmsg → recvmmsg, 80-byte datagrams (a 64-byte SEND's packet); 0.64 Gbit/s, 0.00% lost, CPU 0.800 µs a datagram"},
		RowSmallGSOGRO: {Unit: "M pkt/s",
			Note: "UDP GSO → UDP GRO, the limit, 80-byte datagrams (a 64-byte SEND's packet); 2.56 Gbit/s, 0.50% lost, CPU 0.120 µs a datagram"},
		"write_bw 1000 QPs / 1 QP": {Unit: "x", Goal: "≥ 0.85"},
	} {
		if r := row(t, tb, name); r.Goal != want.Goal || r.Note != want.Note || r.Unit != want.Unit {
			t.Errorf("%s: got goal %q, note %q, unit %q; want %q, %q, %q", name, r.Goal, r.Note, r.Unit, want.Goal, want.Note, want.Unit)
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
	if tb.SmallDatagramSize != 80 || len(tb.UDPSmall) != 3 || tb.DatagramSize != 4112 || len(tb.UDP) != 3 {
		t.Errorf("udpbench's tables: %d bytes %v, %d bytes %v", tb.DatagramSize, tb.UDP, tb.SmallDatagramSize, tb.UDPSmall)
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
	m.ReadBW.BWAvg *= 0.99
	m.WriteBW.CPU += time.Millisecond
	m.ReadBW.CPU = m.ReadBW.Setup.CPU + 1 // 1 ns beyond the setup run
	m.SendBW.MsgRate = 1.99
	m.UDPSmall[1].Kpps = 3000
	m.WriteLat = &perftest.LatResult{Typical: 25.01, P99: 75.03}
	m.WriteLatBusy = &perftest.LatResult{Typical: 10.01, P99: 30.04}
	m.PingPong[0].Typical = 8
	m.ManyQP.BWAvg = m.WriteBW.BWAvg
	tb = Build(m)
	for name, status := range map[string]string{RowWriteBW: Short, RowWriteRatio: Short, RowWriteCPU: Short, RowReadRatio: Short, RowReadCPU: Pass,
		RowSendBW: Short, RowSendRatio: Pass, RowLatTyp: Short, RowLatP99: Pass, RowLatBusy: Short, RowLatBusyFloor: Pass, RowLatBusyBlock: Pass,
		RowLatBusyP99: Short, "write_bw 1000 QPs / 1 QP": Pass} {
		if r := row(t, tb, name); r.Status != status {
			t.Errorf("%s at %v: got %q, want %q", name, val(r), r.Status, status)
		}
	}
	if tb.Histogram != nil || tb.BusyHistogram != nil {
		t.Errorf("a latency without samples has a histogram: %v, %v", tb.Histogram, tb.BusyHistogram)
	}
	// busy polling slower than blocking
	m.WriteLatBusy = &perftest.LatResult{Typical: 25.02, P99: 30}
	if r := row(t, Build(m), RowLatBusyBlock); r.Status != Short || math.Abs(val(r)-25.02/25.01) > 1e-9 {
		t.Errorf("busy-poll 25.02 µs over blocking 25.01 µs: got %+v", r)
	}
	// the send_bw share under half of the small datagrams' GSO→GRO
	m.UDPSmall[1].Kpps = 3981
	if r := row(t, Build(m), RowSendRatio); r.Status != Short {
		t.Errorf("send_bw 1.99 M msg/s over 3.981 M pkt/s: got %+v", r)
	}
	// the busy-poll p99 against its own typical, not the blocking one
	m.WriteLatBusy = &perftest.LatResult{Typical: 12, P99: 36}
	if r := row(t, Build(m), RowLatBusyP99); r.Status != Pass || r.Goal != "≤ 3 × typical (36.0 µs)" {
		t.Errorf("busy-poll p99 36 µs over a typical of 12 µs: got %+v", r)
	}
}

// A BW's bytes are its messages (Size × Iters), its CPU per GB the CPU
// time beyond its setup run's over the bytes beyond the setup run's;
// nothing without a setup run or more than it.
func TestBWCPUPerGB(t *testing.T) {
	setup := &BW{BWResult: perftest.BWResult{Size: 65536, Iters: 5}, CPU: 200 * time.Millisecond}
	b := &BW{BWResult: perftest.BWResult{Size: 65536, Iters: 20005}, CPU: 2200 * time.Millisecond, Setup: setup}
	if got := b.Bytes(); got != 1311047680 {
		t.Errorf("bytes: got %v", got)
	}
	if got := b.CPUPerGB(); got == nil || math.Abs(*got-2/1.31072) > 1e-12 {
		t.Errorf("CPU per GB: got %v, want %v", got, 2/1.31072)
	}
	for name, b := range map[string]*BW{
		"no setup run":              {BWResult: b.BWResult, CPU: b.CPU},
		"no more CPU than setup":    {BWResult: b.BWResult, CPU: setup.CPU, Setup: setup},
		"no more bytes than setup":  {BWResult: setup.BWResult, CPU: b.CPU, Setup: setup},
		"setup run of another size": {BWResult: perftest.BWResult{Size: 64, Iters: 5}, CPU: b.CPU, Setup: setup},
	} {
		if got := b.CPUPerGB(); got != nil {
			t.Errorf("%s: CPU per GB %v, want none", name, *got)
		}
	}
}

func TestSetupArgs(t *testing.T) {
	for _, tt := range []struct {
		args, want string
		ok         bool
	}{
		{"-s 65536 -n 20000", "-s 65536 -n 5", true},
		{"-s 64 -n 1000000 -N", "-s 64 -n 5 -N", true},
		{"-s 65536 -q 1000 -n 10", "-s 65536 -q 1000 -n 5", true},
		{"-s 65536 -q 1000 -n 5", "", false}, // no longer than its setup run
		{"-s 65536", "", false},
		{"-s 65536 -n", "", false},
	} {
		args := strings.Fields(tt.args)
		got, ok := setupArgs(args)
		if strings.Join(got, " ") != tt.want || ok != tt.ok {
			t.Errorf("setupArgs(%q) = %q, %v; want %q, %v", tt.args, got, ok, tt.want, tt.ok)
		}
		if strings.Join(args, " ") != tt.args {
			t.Errorf("setupArgs changed its argument: %q", args)
		}
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
	for _, n := range []string{RowWriteRatio, RowReadRatio} {
		if r := row(t, tb, n); r.Status != Failed || r.Value != nil || !strings.HasSuffix(r.Note, " and raw gso+gro") {
			t.Errorf("%s without gso+gro: got %+v", n, r)
		}
	}
	if r := row(t, tb, RowUDPPlain); r.OfGSOGRO != nil || r.CPUPerGB == nil {
		t.Errorf("raw/plain without gso+gro: got %+v, want its CPU and no share", r)
	}
	if r := row(t, tb, RowLatBusyFloor); r.Status != Failed || r.Note != "needs the busy-poll write_lat and the busy ping-pong" {
		t.Errorf("busy-poll over its floor without the busy-poll run: got %+v", r)
	}
	if r := row(t, tb, RowLatBusyBlock); r.Status != Failed || r.Note != "needs both write_lat runs" {
		t.Errorf("busy-poll over blocking without either run: got %+v", r)
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
	if r := row(t, tb, "write_bw 1000 QPs / 1 QP"); r.Status != Failed || r.Note != "needs both write_bw runs" {
		t.Errorf("many QPs over one: got %+v", r)
	}
	m.ManyQPs = 0
	for _, r := range Build(m).Rows {
		if strings.Contains(r.Name, "QP") {
			t.Errorf("--qps 0 still has row %q", r.Name)
		}
	}

	// The CPU goals without the link's CPU (udpbench -peer, or an
	// udpbench before its CPU column) or without a run's.
	m3 := measured()
	m3.UDP[2].CPUPerGB = nil
	m3.ReadBW.CPU = 0
	tb3 := Build(m3)
	for n, note := range map[string]string{RowWriteCPU: "needs write_bw's CPU and link/gso+gro's", RowReadCPU: "needs read_bw's CPU and link/gso+gro's"} {
		if r := row(t, tb3, n); r.Status != Failed || r.Value != nil || r.Note != note {
			t.Errorf("%s: got %+v, want FAILED: %s", n, r, note)
		}
	}
	if r := row(t, tb3, RowUDPLink); r.CPUPerGB != nil || r.Value == nil {
		t.Errorf("link/gso+gro without its CPU: got %+v", r)
	}

	// The small datagrams' run failed: its rows say why, send_bw has no
	// share and its ratio no figure.
	m4 := measured()
	m4.UDPSmall = nil
	m4.Errors = map[string]string{RowSmallPlain: "udpbench: exit status 1: raw/plain: no free port",
		RowSmallGSOGRO: "udpbench: exit status 1: raw/plain: no free port", RowSmallLink: "udpbench: exit status 1: raw/plain: no free port"}
	tb4 := Build(m4)
	for _, n := range []string{RowSmallPlain, RowSmallGSOGRO, RowSmallLink} {
		if r := row(t, tb4, n); r.Status != Failed || r.Value != nil || r.Note != "udpbench: exit status 1: raw/plain: no free port" {
			t.Errorf("%s: got %+v", n, r)
		}
	}
	if r := row(t, tb4, RowSendBW); r.Status != Pass || r.OfGSOGRO != nil || r.CPUPerGB == nil {
		t.Errorf("send_bw without the small datagrams: got %+v", r)
	}
	if r := row(t, tb4, RowSendRatio); r.Status != Failed || r.Note != "needs send_bw and raw gso+gro 80 B" {
		t.Errorf("send_bw's ratio without the small datagrams: got %+v", r)
	}
	// send_bw failed: its ratio has no figure either
	m4 = measured()
	m4.SendBW = nil
	m4.Errors = map[string]string{RowSendBW: "client: exit status 1: peer stopped answering"}
	tb4 = Build(m4)
	if r := row(t, tb4, RowSendBW); r.Status != Failed || r.Note != "client: exit status 1: peer stopped answering" {
		t.Errorf("send_bw failed: got %+v", r)
	}
	if r := row(t, tb4, RowSendRatio); r.Status != Failed || r.Value != nil {
		t.Errorf("send_bw's ratio when send_bw failed: got %+v", r)
	}
}

func TestFormat(t *testing.T) {
	got := Build(measured()).Format()
	for _, want := range []string{
		"softnic bench: 2 CPUs (AMD EPYC), Linux 6.1.0\n",
		"load average 3.50 4.00 5.00 before, 4.00 4.00 5.00 after\n",
		"UDP: 4112-byte datagrams (80-byte for the message rate), 127.0.0.1 → 127.0.0.2; softnic: two processes, 127.0.0.2 → 127.0.0.1, Go's default GOMAXPROCS\n",
		"CPU s/GB: user + system seconds per 10^9 bytes moved, udpbench's process over its run, softnic's two from start to exit less a 5-iteration run's\n\n",
		"measure                                     value unit      /gso+gro  CPU s/GB  goal                       status\n",
		"UDP raw/plain                                5.00 Gbit/s       12.5%     1.000\n",
		"UDP raw/gso+gro                             40.00 Gbit/s                 0.200\n",
		"write_bw 64 KiB                             20.00 Gbit/s       50.0%     0.375  ≥ 20 Gbit/s                PASS\n",
		"write_bw / raw gso+gro                       0.50 x                             ≥ 0.75                     SHORT\n",
		"write_bw CPU / link's                        1.50 x                             ≤ 1.50                     PASS\n",
		"read_bw CPU / link's                         8.00 x                             ≤ 1.50                     SHORT\n",
		"UDP raw/gso+gro 80 B                         4.00 M pkt/s                1.500\n",
		"UDP link/gso+gro 80 B                        2.50 M pkt/s      62.5%     3.000\n",
		"send_bw 64 B                                 2.00 M msg/s      50.0%    31.250  ≥ 2 M msg/s                PASS\n",
		"send_bw / raw gso+gro 80 B                   0.50 x                             ≥ 0.50                     PASS\n",
		"write_lat 8 B p99                           75.50 usec                          ≤ 3 × typical (75.0 µs)    SHORT\n",
		"write_lat 8 B typical                       25.00 usec                          ≤ 25 µs                    PASS\n",
		"write_lat 8 B typical, busy-poll            10.00 usec                          ≤ 10 µs                    PASS\n",
		"write_lat busy-poll / busy ping-pong         2.50 x                             ≤ 1.50                     SHORT\n",
		"write_lat busy-poll / blocking               0.40 x                             ≤ 1.00                     PASS\n",
		"write_lat 8 B p99, busy-poll                30.00 usec                          ≤ 3 × typical (30.0 µs)    PASS\n",
		"write_bw 1000 QPs / 1 QP                     0.21 x                             ≥ 0.85                     SHORT\n",
		"  UDP raw/gso+gro 80 B: UDP GSO → UDP GRO, the limit, 80-byte datagrams (a 64-byte SEND's packet); 2.56 Gbit/s, 0.50% lost, CPU 0.120 µs a datagram\n",
		"  send_bw 64 B: msg_rate_mpps; CPU 2.000 µs a message (both processes)\n",
		"  UDP raw/gso+gro: UDP GSO → UDP GRO, the limit; 1200 kpkt/s, 2.00% lost\n",
		"  write_lat 8 B typical: blocking waits (no --busy-poll); t_typical_usec (1.2 × the ping-pong's)\n",
		"  write_lat 8 B p99, busy-poll: busy-poll (--busy-poll on both sides); p99_usec (1.9 × the ping-pong's)\n",
		"UDP ping-pong typical, busy                  4.00 usec\n",
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
		`"write_lat_busy_poll_histogram": [`, `"write_lat_busy_poll_samples": 4`, `"not_built": []`, `"softnic_gomaxprocs": 1`,
		`"udp_small_datagram_bytes": 80`, `"udp_small": [`, `"kpkt_per_sec": 4000`, `"cpu_sec_per_gb": 0.375`, `"cpu_sec_per_gb": 31.25`,
		`"cpu_sec_per_gb": null`, `"name": "write_bw CPU / link's"`, `"goal": "≤ 1.50"`} {
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
	// the message-rate limit: a 64-byte SEND's packet, BTH + 64 + ICRC,
	// plain and GSO→GRO, no ping-pong
	if SmallDatagram != 80 || !strings.HasPrefix(RowSmallPlain, "UDP raw/plain 80 B") {
		t.Errorf("SmallDatagram %d, rows %q", SmallDatagram, RowSmallPlain)
	}
	for _, args := range [][]string{full.UDPSmall, quick.UDPSmall} {
		a := strings.Join(args, " ")
		if !strings.HasPrefix(a, "-size 80 -modes raw/plain,raw/gso+gro,link/gso+gro ") || strings.Contains(a, "pingpong") {
			t.Errorf("udpbench's small datagrams: %q", a)
		}
	}
	if !strings.Contains(strings.Join(quick.UDPSmall, " "), "-runs 1") || !strings.Contains(strings.Join(full.UDPSmall, " "), "-runs 3") {
		t.Errorf("udpbench's small datagrams: quick %q, full %q", quick.UDPSmall, full.UDPSmall)
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
	udp := write("udpbench", `echo "udpbench GOMAXPROCS=$GOMAXPROCS $*" >> `+log+`
case "$*" in
-size\ 80*) cat <<'EOF'
`+udpbenchSmallOut+`EOF
;;
*) cat <<'EOF'
`+udpbenchOut+`EOF
;;
esac
`)
	softnic := write("softnic", `echo "GOMAXPROCS=$GOMAXPROCS $*" >> `+log+`
case "$*" in
read_bw*127.0.0.2*) echo "softnic read_bw: peer stopped answering" >&2; exit 1;;
send_bw*-n\ 5\ *127.0.0.2*) echo "softnic send_bw: no memory" >&2; exit 1;;
write_lat*) cat `+dir+`/lat.json;;
*) cat `+dir+`/bw.json;;
esac
`)
	m := Run(context.Background(), Config{Softnic: softnic, UDPBench: udp, Quick: true, TCPPort: 30000, ManyQPs: 7, CPUProfile: "/tmp/p", GOMAXPROCS: 3})
	if len(m.UDP) != 3 || m.DatagramSize != 4112 || len(m.PingPong) != 2 {
		t.Errorf("udpbench: got %+v, %+v, %d", m.UDP, m.PingPong, m.DatagramSize)
	}
	if len(m.UDPSmall) != 2 || m.SmallDatagramSize != 80 || m.UDPSmall[1].Kpps != 9000 || *m.UDPSmall[1].CPUPerGB != 1.25 {
		t.Errorf("udpbench's small datagrams: got %+v, %d", m.UDPSmall, m.SmallDatagramSize)
	}
	if m.WriteBW == nil || m.WriteBW.BWAvg != 800 || m.SendBW == nil || m.ManyQP == nil || m.WriteLat == nil || m.WriteLat.Typical != 40 ||
		m.WriteLatBusy == nil || m.WriteLatBusy.Typical != 40 {
		t.Errorf("results: %+v", m)
	}
	// each pair's CPU time: the stand-ins' own, both processes'
	for name, b := range map[string]*BW{"write_bw": m.WriteBW, "send_bw": m.SendBW, "many QPs": m.ManyQP} {
		if b != nil && b.CPU <= 0 {
			t.Errorf("%s: no CPU time", name)
		}
	}
	if m.ReadBW != nil || !strings.Contains(m.Errors[RowReadBW], "client: exit status 1: softnic read_bw: peer stopped answering") || len(m.Errors) != 2 {
		t.Errorf("read_bw: got %v, errors %q", m.ReadBW, m.Errors)
	}
	// write_bw's setup run; send_bw's failed, recorded; none for the
	// many-QP run of -n 5, as short as a setup run
	if m.WriteBW == nil || m.WriteBW.Setup == nil || m.WriteBW.Setup.CPU <= 0 {
		t.Errorf("write_bw's setup run: %+v", m.WriteBW)
	}
	if m.SendBW == nil || m.SendBW.Setup != nil || m.Errors[RowSendBW+SetupRun] != "client: exit status 1: softnic send_bw: no memory" {
		t.Errorf("send_bw's failed setup run: %+v, errors %q", m.SendBW, m.Errors)
	}
	if r := row(t, Build(m), RowSendBW); r.Value == nil || r.CPUPerGB != nil ||
		!strings.HasSuffix(r.Note, "; no CPU figure, the setup run failed: client: exit status 1: softnic send_bw: no memory") {
		t.Errorf("send_bw's row after its setup run failed: %+v", r)
	}
	if m.ManyQP == nil || m.ManyQP.Setup != nil {
		t.Errorf("many QPs: %+v", m.ManyQP)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"write_bw --json -p 30000 --timeout 60s -s 65536 -n 2000 --addr 127.0.0.1 --accept-timeout 60s\n",
		"write_bw --json -p 30000 --timeout 60s -s 65536 -n 2000 --addr 127.0.0.2 --connect-timeout 30s 127.0.0.1\n",
		"write_bw --json -p 30001 --timeout 60s -s 65536 -n 5 --addr 127.0.0.1 --accept-timeout 60s\n",
		"write_bw --json -p 30001 --timeout 60s -s 65536 -n 5 --addr 127.0.0.2 --connect-timeout 30s 127.0.0.1\n",
		"read_bw --json -p 30002 ",
		"send_bw --json -p 30003 --timeout 60s -s 64 -n 100000 -N --addr 127.0.0.2",
		"send_bw --json -p 30004 --timeout 60s -s 64 -n 5 -N --addr 127.0.0.2",
		"write_lat --json -p 30005 --timeout 60s -s 8 -n 5000 -H --addr 127.0.0.1 --accept-timeout 60s\n",
		"write_lat --json -p 30005 --timeout 60s -s 8 -n 5000 -H --cpuprofile /tmp/p --addr 127.0.0.2",
		"write_lat --json -p 30006 --timeout 60s -s 8 -n 5000 -H --busy-poll --addr 127.0.0.1 --accept-timeout 60s\n",
		"write_lat --json -p 30006 --timeout 60s -s 8 -n 5000 -H --busy-poll --addr 127.0.0.2 --connect-timeout 30s 127.0.0.1\n",
		"write_bw --json -p 30007 --timeout 60s -s 65536 -q 7 -n 5 --addr 127.0.0.1",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no run with %q in:\n%s", want, b)
		}
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// 14 to 16 softnic processes: the failing clients' cancel may stop
	// their servers before they log.
	if len(lines) < 15 || strings.Contains(string(b), "-p 30008") || lines[0] != "udpbench GOMAXPROCS= "+strings.Join(PlanFor(Config{Quick: true}).UDPBench, " ") ||
		lines[1] != "udpbench GOMAXPROCS= "+strings.Join(PlanFor(Config{Quick: true}).UDPSmall, " ") || m.GOMAXPROCS != 3 {
		t.Errorf("want udpbench twice with Go's default GOMAXPROCS, then the softnic processes, Measurements.GOMAXPROCS 3 (got %d):\n%s", m.GOMAXPROCS, b)
	}
	for _, l := range lines[2:] {
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
	if got := tb.Format(); !strings.Contains(got, "ib_write_lat 8 B typical, libibverbs        30.00 usec                          ≤ 1.2 × write_lat          PASS\n") {
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
