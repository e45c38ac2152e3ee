package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/softnic/softnic/tools/perftest"
)

func TestParseEnvAndFacts(t *testing.T) {
	env := ParseEnv("NETNS=softnic-interop\nMTU=1500\nACCEL=tcg,thread=multi\nGUEST_IP=10.77.0.2\nGUEST_GID_INDEX=1\n")
	if env["GUEST_IP"] != "10.77.0.2" || env["ACCEL"] != "tcg,thread=multi" || env["GUEST_GID_INDEX"] != "1" {
		t.Errorf("ParseEnv: got %v", env)
	}
	g, err := ParseGuestFacts("1\n492040\n6.1.0-41-amd64\n")
	if err != nil || g.CPUs != 1 || g.MemKiB != 492040 || g.Kernel != "6.1.0-41-amd64" {
		t.Errorf("ParseGuestFacts: got %+v, %v", g, err)
	}
	for _, bad := range []string{"", "1\n492040\n", "one\n492040\n6.1.0\n", "1\n\n6.1.0\n"} {
		if g, err := ParseGuestFacts(bad); err == nil {
			t.Errorf("ParseGuestFacts(%q) = %+v, want an error", bad, g)
		}
	}
}

func TestCheckGuests(t *testing.T) {
	a := Guest{Name: "bench-a", CPUs: 1, MemKiB: 492040, Kernel: "6.1.0-41-amd64", Accel: "tcg,thread=multi"}
	b := a
	b.Name = "bench-b"
	if err := CheckGuests([2]Guest{a, b}); err != nil {
		t.Errorf("identical guests: %v", err)
	}
	for name, f := range map[string]func(*Guest){
		"two CPUs": func(g *Guest) { g.CPUs = 2 },
		"memory":   func(g *Guest) { g.MemKiB += 4 },
		"kernel":   func(g *Guest) { g.Kernel = "6.1.0-40-amd64" },
		"KVM":      func(g *Guest) { g.Accel = "kvm" },
	} {
		c := b
		f(&c)
		if err := CheckGuests([2]Guest{a, c}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The command lines the guests run: perftest's with rxe0's IPv4 GID, the
// look-alikes' with --json into the share; the same test arguments.
func TestGuestCommands(t *testing.T) {
	g := &guestRun{envs: [2]map[string]string{
		{"GUEST_IP": "10.77.0.2", "GUEST_GID_INDEX": "1"},
		{"GUEST_IP": "10.77.0.3", "GUEST_GID_INDEX": "1"},
	}}
	test := GuestPlanFor(false)[GuestRowWriteBW]
	r := g.rxeCommand(test, 18515)
	if want := "ib_write_bw -d rxe0 -x 1 -F -p 18515 -s 65536 -n 5000"; r[0].cmd != want || r[0].json != "" {
		t.Errorf("rxe server: got %+v, want %q", r[0], want)
	}
	if want := "ib_write_bw -d rxe0 -x 1 -F -p 18515 -s 65536 -n 5000 10.77.0.2"; r[1].cmd != want {
		t.Errorf("rxe client: got %q, want %q", r[1].cmd, want)
	}
	s := g.softnicCommand(test, 18519)
	if want := "/host/softnic write_bw --json --addr 10.77.0.2 -F -p 18519 --timeout 60s -s 65536 -n 5000 --accept-timeout 120s >/host/write_bw-18519.json"; s[0].cmd != want {
		t.Errorf("softnic server: got %q, want %q", s[0].cmd, want)
	}
	if want := "/host/softnic write_bw --json --addr 10.77.0.3 -F -p 18519 --timeout 60s -s 65536 -n 5000 --connect-timeout 60s 10.77.0.2 >/host/write_bw-18519.json"; s[1].cmd != want || s[1].json != "write_bw-18519.json" {
		t.Errorf("softnic client: got %+v, want %q", s[1], want)
	}
	q := GuestPlanFor(true)
	for _, row := range guestOrder {
		full, quick := GuestPlanFor(false)[row], q[row]
		if full.Tool != quick.Tool || len(full.Args) != len(quick.Args) || full.SoftnicOnly != quick.SoftnicOnly {
			t.Errorf("%s: --quick runs %+v, the full run %+v", row, quick, full)
		}
	}

	// the busy-poll write_lat: softnic's, --busy-poll on both sides, and
	// otherwise the arguments of the blocking one; rxe does not run it
	plan := GuestPlanFor(false)
	busy, lat := plan[GuestRowLatBusy], plan[GuestRowLatTyp]
	if !busy.SoftnicOnly || lat.SoftnicOnly || busy.Tool != "write_lat" ||
		strings.Join(busy.Args, " ") != strings.Join(lat.Args, " ")+" --busy-poll" {
		t.Errorf("busy-poll test %+v, write_lat %+v", busy, lat)
	}
	s = g.softnicCommand(busy, 18520)
	for i, want := range []string{
		"/host/softnic write_lat --json --addr 10.77.0.2 -F -p 18520 --timeout 60s -s 8 -n 2000 --busy-poll --accept-timeout 120s >/host/write_lat-18520.json",
		"/host/softnic write_lat --json --addr 10.77.0.3 -F -p 18520 --timeout 60s -s 8 -n 2000 --busy-poll --connect-timeout 60s 10.77.0.2 >/host/write_lat-18520.json",
	} {
		if s[i].cmd != want {
			t.Errorf("busy-poll side %d: got %q, want %q", i, s[i].cmd, want)
		}
	}
}

func guestMeasured() GuestMeasurements {
	g := Guest{Name: "bench-a", IP: "10.77.0.2", CPUs: 1, MemKiB: 492040, Kernel: "6.1.0-41-amd64", Accel: "tcg,thread=multi"}
	h := g
	h.Name, h.IP = "bench-b", "10.77.0.3"
	return GuestMeasurements{
		Machine: Machine{CPUs: 2, CPUModel: "AMD EPYC", Kernel: "6.18.44"},
		Guests:  [2]Guest{g, h},
		Plan:    GuestPlanFor(false),
		RXE: Pair{Results: map[string]perftest.Result{
			GuestRowWriteBW: {MTU: 1024, BW: []perftest.BWResult{{Size: 65536, BWAvg: 40}}},
			GuestRowReadBW:  {MTU: 1024, BW: []perftest.BWResult{{Size: 65536, BWAvg: 30}}},
			GuestRowSendBW:  {MTU: 1024, BW: []perftest.BWResult{{Size: 64, MsgRate: 0.02}}},
			GuestRowLatTyp:  {MTU: 1024, Lat: []perftest.LatResult{{Size: 8, Typical: 300, P99: 900}}},
		}, Seconds: 100},
		Softnic: Pair{Results: map[string]perftest.Result{
			GuestRowWriteBW: {MTU: 1024, BW: []perftest.BWResult{{Size: 65536, BWAvg: 80}}},
			GuestRowReadBW:  {MTU: 1024, BW: []perftest.BWResult{{Size: 65536, BWAvg: 20}}},
			GuestRowSendBW:  {MTU: 1024, BW: []perftest.BWResult{{Size: 64, MsgRate: 0.05}}},
			GuestRowLatTyp:  {MTU: 1024, Lat: []perftest.LatResult{{Size: 8, Typical: 300, P99: 4000}}},
			GuestRowLatBusy: {MTU: 1024, Lat: []perftest.LatResult{{Size: 8, Typical: 240, P99: 3000}}},
		}, Seconds: 200},
		BedUpSeconds: 10, TotalSeconds: 320,
	}
}

func guestRow(t *testing.T, tb GuestTable, name string) GuestRow {
	t.Helper()
	for _, r := range tb.Rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no row %q", name)
	return GuestRow{}
}

func TestBuildGuests(t *testing.T) {
	tb := BuildGuests(guestMeasured())
	for _, tt := range []struct {
		name, goal, status  string
		rxe, softnic, ratio float64
	}{
		{GuestRowWriteBW, "≥ 2×", Pass, 40, 80, 2}, // exactly the goal
		{GuestRowReadBW, "≥ 2×", Short, 30, 20, 2.0 / 3},
		{GuestRowSendBW, "≥ 2×", Pass, 20, 50, 2.5}, // k msg/s
		{GuestRowLatTyp, "≤ 1×", Pass, 300, 300, 1}, // exactly the goal: lower is better
		{GuestRowLatP99, "", "", 900, 4000, 4000.0 / 900},
		{GuestRowLatBusy, "≤ 1×", Pass, 300, 240, 0.8}, // softnic busy-poll over rxe's one write_lat
	} {
		r := guestRow(t, tb, tt.name)
		if r.Goal != tt.goal || r.Status != tt.status || r.RXE == nil || r.Softnic == nil || r.Ratio == nil ||
			math.Abs(*r.RXE-tt.rxe) > 1e-9 || math.Abs(*r.Softnic-tt.softnic) > 1e-9 || math.Abs(*r.Ratio-tt.ratio) > 1e-9 {
			t.Errorf("%s: got %+v", tt.name, r)
		}
	}
	if tb.MTU.RXE != 1024 || tb.MTU.Softnic != 1024 || tb.Failed() {
		t.Errorf("path MTUs %+v, failed %v", tb.MTU, tb.Failed())
	}
	if got := tb.Rows[len(tb.Rows)-1].Name; got != GuestRowLatBusy {
		t.Errorf("last row %q, want the busy-poll row after write_lat's", got)
	}

	// the other side of the busy-poll row's goal
	m := guestMeasured()
	m.Softnic.Results[GuestRowLatBusy] = perftest.Result{MTU: 1024, Lat: []perftest.LatResult{{Size: 8, Typical: 300.01}}}
	if r := guestRow(t, BuildGuests(m), GuestRowLatBusy); r.Status != Short || r.Ratio == nil || *r.Ratio <= 1 {
		t.Errorf("busy-poll slower than rxe: got %+v", r)
	}
	// rxe's write_lat missing: the busy-poll row has nothing to compare with
	m = guestMeasured()
	delete(m.RXE.Results, GuestRowLatTyp)
	m.RXE.Errors = map[string]string{GuestRowLatTyp: "client: exit status 1"}
	if r := guestRow(t, BuildGuests(m), GuestRowLatBusy); r.Status != Failed || r.RXE != nil || r.Softnic == nil || r.Note != "rxe: client: exit status 1" {
		t.Errorf("busy-poll row without rxe's write_lat: got %+v", r)
	}
	// a plan without the busy-poll test (an older run's) has no such row
	m = guestMeasured()
	delete(m.Plan, GuestRowLatBusy)
	for _, r := range BuildGuests(m).Rows {
		if r.Name == GuestRowLatBusy {
			t.Errorf("a plan without the busy-poll test has its row: %+v", r)
		}
	}

	m = guestMeasured()
	delete(m.Softnic.Results, GuestRowLatTyp)
	m.Softnic.Errors = map[string]string{GuestRowLatTyp: "client: bed exec: exit status 124"}
	m.RXE.Results[GuestRowWriteBW] = perftest.Result{MTU: 4096, BW: m.RXE.Results[GuestRowWriteBW].BW}
	tb = BuildGuests(m)
	for _, n := range []string{GuestRowLatTyp, GuestRowLatP99} {
		if r := guestRow(t, tb, n); r.Status != Failed || r.Ratio != nil || r.Softnic != nil || r.Note != "softnic: client: bed exec: exit status 124" {
			t.Errorf("%s without softnic's figure: got %+v", n, r)
		}
	}
	if r := guestRow(t, tb, GuestRowLatBusy); r.Status != Pass {
		t.Errorf("the busy-poll row depends on softnic's blocking write_lat: %+v", r)
	}
	if !tb.Failed() || tb.MTU.RXE != 0 {
		t.Errorf("failed %v, rxe path MTU %d (want 0: the results differ)", tb.Failed(), tb.MTU.RXE)
	}

	m = GuestMeasurements{Plan: GuestPlanFor(false), Err: "the interop bed is up already"}
	tb = BuildGuests(m)
	if !tb.Failed() || len(tb.Rows) != 6 || guestRow(t, tb, GuestRowWriteBW).Note != "rxe: not measured; softnic: not measured" {
		t.Errorf("a run that never started: %+v", tb)
	}
	if got := tb.Format(); !strings.Contains(got, "stopped early: the interop bed is up already\n") {
		t.Errorf("Format does not say why it stopped:\n%s", got)
	}
}

func TestFormatGuests(t *testing.T) {
	got := BuildGuests(guestMeasured()).Format()
	for _, want := range []string{
		"softnic bench --guests: host 2 CPUs (AMD EPYC), Linux 6.18.44; load average",
		"guests bench-b 10.77.0.3 → bench-a 10.77.0.2: qemu tcg,thread=multi, 1 vCPU, 480 MiB each, Linux 6.1.0-41-amd64\n",
		"path MTU: rxe 1024, softnic 1024\n",
		"  write_bw  -s 65536 -n 5000 (rxe: ib_write_bw)\n",
		"write_bw 64 KiB                       40.00            80.00 MB/s            2.00×  ≥ 2×   PASS\n",
		"read_bw 64 KiB                        30.00            20.00 MB/s            0.67×  ≥ 2×   SHORT\n",
		"send_bw 64 B msg rate                 20.00            50.00 k msg/s         2.50×  ≥ 2×   PASS\n",
		"write_lat 8 B typical                300.00           300.00 usec            1.00×  ≤ 1×   PASS\n",
		"  write_lat -s 8 -n 2000 (rxe: ib_write_lat)\n  write_lat -s 8 -n 2000 --busy-poll (softnic only)\n",
		"measure                             rxe↔rxe  softnic↔softnic unit      softnic/rxe  goal   status\n",
		"write_lat 8 B p99                    900.00          4000.00 usec            4.44×\n",
		"write_lat 8 B typical, busy-poll     300.00           240.00 usec            0.80×  ≤ 1×   PASS\n",
		"  write_lat 8 B typical, busy-poll: t_typical; softnic with --busy-poll on both sides, over rxe's one write_lat (rxe has no busy-poll)\n",
		"time: guests up 10 s, rxe ↔ rxe 100 s, softnic ↔ softnic 200 s, total 320 s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Format has no %q:\n%s", want, got)
		}
	}
	if i, j := strings.Index(got, "write_bw  "), strings.Index(got, "write_lat -s 8"); i < 0 || j < i {
		t.Errorf("the tests are not listed in the order they run:\n%s", got)
	}
}

func TestGuestJSON(t *testing.T) {
	b, err := BuildGuests(guestMeasured()).JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"machine", "guests", "quick", "path_mtu", "tests", "rows", "bed_up_seconds", "rxe_seconds", "softnic_seconds", "total_seconds"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("no %q in %s", k, b)
		}
	}
	rows := doc["rows"].([]any)
	row := rows[0].(map[string]any)
	if row["name"] != GuestRowWriteBW || row["rxe"] != 40.0 || row["softnic"] != 80.0 || row["softnic_over_rxe"] != 2.0 || row["status"] != Pass {
		t.Errorf("first row: %v", row)
	}
	row = rows[len(rows)-1].(map[string]any)
	if row["name"] != GuestRowLatBusy || row["rxe"] != 300.0 || row["softnic"] != 240.0 || row["softnic_over_rxe"] != 0.8 || row["goal"] != "≤ 1×" || row["status"] != Pass {
		t.Errorf("busy-poll row: %v", row)
	}
	tests := doc["tests"].(map[string]any)
	if busy := tests[GuestRowLatBusy].(map[string]any); busy["softnic_only"] != true || busy["tool"] != "write_lat" {
		t.Errorf("busy-poll test: %v", busy)
	}
	if lat := tests[GuestRowLatTyp].(map[string]any); lat["softnic_only"] != nil {
		t.Errorf("write_lat test: %v", lat)
	}
}

// The outputs of one real run of scripts/bench --guests on the project's
// 2-core machine (testdata/guests): the rxe clients' perftest tables
// (ib_*, read with perftest.ParseText), the softnic clients' --json, and
// the table that run printed.
func readGuestTestdata(t *testing.T) GuestMeasurements {
	t.Helper()
	m := GuestMeasurements{
		Machine: Machine{CPUs: 2, CPUModel: "AMD EPYC", Kernel: "6.18.44-fc-v595",
			LoadBefore: [3]float64{3.51, 3.91, 3.45}, LoadAfter: [3]float64{4.22, 4.42, 3.76}},
		Plan:         GuestPlanFor(false),
		RXE:          Pair{Results: map[string]perftest.Result{}, Seconds: 90},
		Softnic:      Pair{Results: map[string]perftest.Result{}, Seconds: 81},
		BedUpSeconds: 9, TotalSeconds: 182,
	}
	// that run predates softnic's busy-poll write_lat: its plan had no such
	// test, and its table no such row
	delete(m.Plan, GuestRowLatBusy)
	for i, ip := range []string{"10.77.0.2", "10.77.0.3"} {
		m.Guests[i] = Guest{Name: GuestNames[i], IP: ip, CPUs: 1, MemKiB: 457 * 1024, Kernel: "6.1.0-48-amd64", Accel: "tcg,thread=multi"}
	}
	for row, test := range m.Plan {
		b, err := os.ReadFile(filepath.Join("testdata", "guests", "rxe-"+test.Tool+"-client.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if m.RXE.Results[row], err = perftest.ParseText(b); err != nil {
			t.Fatalf("rxe %s: %v", test.Tool, err)
		}
		if b, err = os.ReadFile(filepath.Join("testdata", "guests", "softnic-"+test.Tool+"-client.json")); err != nil {
			t.Fatal(err)
		}
		if m.Softnic.Results[row], err = ParseResult(b); err != nil {
			t.Fatalf("softnic %s: %v", test.Tool, err)
		}
	}
	return m
}

func TestGuestTestdata(t *testing.T) {
	m := readGuestTestdata(t)
	for _, tt := range []struct {
		row           string
		iters         uint64
		rxeFig, snFig float64
		fig           func(perftest.Result) float64
	}{
		{GuestRowWriteBW, 5000, 6.58, 13.61606975503002, func(r perftest.Result) float64 { return r.BW[0].BWAvg }},
		{GuestRowReadBW, 5000, 15.28, 11.225226039012773, func(r perftest.Result) float64 { return r.BW[0].BWAvg }},
		{GuestRowSendBW, 50000, 0.003715, 0.014673965825573836, func(r perftest.Result) float64 { return r.BW[0].MsgRate }},
		{GuestRowLatTyp, 2000, 282.56, 1949.845, func(r perftest.Result) float64 { return r.Lat[0].Typical }},
	} {
		for _, p := range []struct {
			name string
			r    perftest.Result
			want float64
		}{{"rxe", m.RXE.Results[tt.row], tt.rxeFig}, {"softnic", m.Softnic.Results[tt.row], tt.snFig}} {
			if len(p.r.BW)+len(p.r.Lat) != 1 || p.r.MTU != 1024 {
				t.Errorf("%s %s: got %+v, want one result line at path MTU 1024", p.name, tt.row, p.r)
				continue
			}
			iters := uint64(0)
			if len(p.r.BW) == 1 {
				iters = p.r.BW[0].Iters
			} else {
				iters = p.r.Lat[0].Iters
			}
			if got := tt.fig(p.r); got != p.want || iters != tt.iters {
				t.Errorf("%s %s: got %v over %d iterations, want %v over %d", p.name, tt.row, got, iters, p.want, tt.iters)
			}
		}
	}
	if l := m.RXE.Results[GuestRowLatTyp].Lat[0]; l.Min != 179.52 || l.Max != 5049.22 || l.Avg != 507.34 || l.Stdev != 544.4 || l.P99 != 3076.35 || l.P999 != 4549.86 {
		t.Errorf("ib_write_lat's row: got %+v", l)
	}
	// ib_send_bw's server reports its own table, after perftest's
	// "Waiting for client" banner
	b, err := os.ReadFile(filepath.Join("testdata", "guests", "rxe-send_bw-server.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := perftest.ParseText(b); err != nil || len(r.BW) != 1 || r.BW[0].MsgRate != 0.003716 || r.BW[0].BWPeak != 0 {
		t.Errorf("ib_send_bw server: got %+v, %v", r, err)
	}

	// the table of that run, as it printed it
	want, err := os.ReadFile(filepath.Join("testdata", "guests", "table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := BuildGuests(m).Format(); got != string(want) {
		t.Errorf("Format:\n%s\nwant (testdata/guests/table.txt):\n%s", got, want)
	}
}

// The floor between the guests: each row has its own (bandwidth against
// raw/gso+gro in perftest's MiB/s, message rate against raw/plain's
// datagrams, latency against the ping-pong of the same mode), both pairs
// over it in the notes, and the table a column and the floors' lines.
func TestGuestFloor(t *testing.T) {
	m := guestMeasured()
	m.Floor = &GuestFloor{Size: 1040, Args: floorArgs(floorSize(1024), false), Seconds: 21,
		UDP: []UDP{
			{Mode: "raw/plain", Gbits: 0.1, Kpps: 12, LossPct: 1.5},
			{Mode: "raw/gso+gro", Gbits: 8 * 80 * (1 << 20) / 1e9, Kpps: 77, LossPct: 20}, // 80 MiB/s
		},
		PingPong: []PingPong{{Mode: "busy", Typical: 600, P99: 6000}, {Mode: "block", Typical: 400, P99: 2000}},
	}
	tb := BuildGuests(m)
	checkFloors(t, "", tb, []floorCase{
		{GuestRowWriteBW, 80, "BW average; floor: UDP raw/gso+gro, rxe 0.50× and softnic 1.00× it"},
		{GuestRowReadBW, 80, "BW average; floor: UDP raw/gso+gro, rxe 0.38× and softnic 0.25× it"},
		{GuestRowSendBW, 12, "MsgRate; floor: UDP raw/plain's datagrams, rxe 1.67× and softnic 4.17× it"},
		{GuestRowLatTyp, 400, "t_typical, half round trips; floor: UDP ping-pong block typical, rxe 0.75× and softnic 0.75× it"},
		{GuestRowLatP99, 2000, "99% percentile; floor: UDP ping-pong block p99, rxe 0.45× and softnic 2.00× it"},
		{GuestRowLatBusy, 600, "floor: UDP ping-pong busy typical, rxe 0.50× and softnic 0.40× it"},
	})
	got := tb.Format()
	for _, want := range []string{
		"UDP floor: udpbench bench-b → bench-a, 1040-byte datagrams (-size 1040 -runs 1 -d 3s -modes raw/plain,raw/gso+gro -pingpong 2000)\n",
		"  raw/plain       11.92 MB/s    12.00 k datagrams/s, 1.50% lost\n",
		"  ping-pong block typical 400.00 µs, p99 2000.00 µs (half round trips)\n",
		"measure                             rxe↔rxe  softnic↔softnic  UDP floor unit      softnic/rxe  goal   status\n",
		"write_bw 64 KiB                       40.00            80.00      80.00 MB/s            2.00×  ≥ 2×   PASS\n",
		"time: guests up 10 s, UDP floor 21 s, rxe ↔ rxe 100 s, softnic ↔ softnic 200 s, total 320 s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Format has no %q:\n%s", want, got)
		}
	}
	b, err := tb.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Floor GuestFloor `json:"udp_floor"`
		Rows  []GuestRow `json:"rows"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// With udpbench's turn mode, the latency rows are over it.
	m.Floor.PingPong = append(m.Floor.PingPong, PingPong{Mode: "turn", Typical: 500, P99: 2500})
	tb = BuildGuests(m)
	checkFloors(t, "with a turn floor, ", tb, []floorCase{
		{GuestRowLatTyp, 500, "t_typical, half round trips; floor: UDP ping-pong turn typical, rxe 0.60× and softnic 0.60× it"},
		{GuestRowLatP99, 2500, "99% percentile; floor: UDP ping-pong turn p99, rxe 0.36× and softnic 1.60× it"},
		{GuestRowLatBusy, 600, "floor: UDP ping-pong busy typical, rxe 0.50× and softnic 0.40× it"},
	})
	if got := tb.Format(); !strings.Contains(got, "  ping-pong turn  typical 500.00 µs, p99 2500.00 µs (half round trips)\n") {
		t.Errorf("Format has no turn line:\n%s", got)
	}
	if doc.Floor.Size != 1040 || len(doc.Floor.UDP) != 2 || len(doc.Floor.PingPong) != 2 || doc.Rows[0].Floor == nil || *doc.Rows[0].Floor != 80 {
		t.Errorf("JSON: %s", b)
	}

	// a floor that failed: said so, and no figures to compare with
	m.Floor = &GuestFloor{Size: 1040, Args: floorArgs(floorSize(0), true), Error: "client: bed exec: exit status 1"}
	tb = BuildGuests(m)
	if r := guestRow(t, tb, GuestRowWriteBW); r.Floor != nil || r.Note != "BW average" || tb.Failed() {
		t.Errorf("a failed floor: %+v (failed %v)", r, tb.Failed())
	}
	if got := tb.Format(); !strings.Contains(got, "-d 1s -modes raw/plain,raw/gso+gro -pingpong 100): not measured: client: bed exec: exit status 1\n") {
		t.Errorf("Format does not say the floor failed:\n%s", got)
	}
	// without a floor (an older run's), no column
	if got := BuildGuests(guestMeasured()).Format(); strings.Contains(got, "UDP floor") {
		t.Errorf("a run without a floor has its column:\n%s", got)
	}
}

// floorCase is a row's expected floor and the end of its note.
type floorCase struct {
	row   string
	floor float64
	note  string
}

// checkFloors checks each case's row in tb; what prefixes the errors.
func checkFloors(t *testing.T, what string, tb GuestTable, cases []floorCase) {
	t.Helper()
	for _, tt := range cases {
		r := guestRow(t, tb, tt.row)
		if r.Floor == nil || math.Abs(*r.Floor-tt.floor) > 1e-9 || !strings.HasSuffix(r.Note, tt.note) {
			t.Errorf("%s%s: floor %v, note %q; want %v, %q", what, tt.row, r.Floor, r.Note, tt.floor, tt.note)
		}
	}
}

// RunGuests against a stand-in bed (testdata/fakebed/bed, answering from
// testdata/guests): the floor first, then each test on rxe and softnic
// back to back, rxe removed before softnic's run and added again before
// rxe's next; softnic's busy-poll write_lat needs no rxe.
func TestRunGuests(t *testing.T) {
	m, log, dir := runFakeGuests(t, 0)
	want := "up bench-a\nstart bench-b\n" +
		"serve bench-a /host/udpbench -serve\nexec bench-b udpbench\njobkill bench-a job1\n" +
		fakeRound + "down \n"
	if log != want {
		t.Errorf("the bed was asked:\n%s\nwant:\n%s", log, want)
	}
	if len(m.RXE.Results) != 4 || len(m.Softnic.Results) != 5 || m.Guests[1].IP != "10.77.0.3" || m.Guests[0].CPUs != 1 || m.RXE.Rounds != nil {
		t.Errorf("results: rxe %d, softnic %d, rounds %v; guests %+v", len(m.RXE.Results), len(m.Softnic.Results), m.RXE.Rounds, m.Guests)
	}
	if f := m.Floor; f == nil || f.Error != "" || f.Size != 1040 || len(f.UDP) != 2 || len(f.PingPong) != 2 {
		t.Errorf("floor: %+v", f)
	}
	for _, name := range []string{"softnic", "udpbench"} {
		if b, err := os.ReadFile(filepath.Join(dir, "guests", "bench-b", "share", name)); err != nil || string(b) != "a static binary" {
			t.Errorf("%s in bench-b's share: %q, %v", name, b, err)
		}
	}
}

// With rounds, RunGuests runs every test that many times, rxe added again
// before each round's first, and keeps each round's result; the table
// has each pair's median and the rounds' own ratios.
func TestRunGuestsRounds(t *testing.T) {
	m, log, _ := runFakeGuests(t, 2)
	want := "up bench-a\nstart bench-b\n" +
		"serve bench-a /host/udpbench -serve\nexec bench-b udpbench\njobkill bench-a job1\n" +
		fakeRound + fakeAdded + fakeRound + "down \n"
	if log != want {
		t.Errorf("the bed was asked:\n%s\nwant:\n%s", log, want)
	}
	for _, p := range []struct {
		name string
		p    Pair
		n    int
	}{{"rxe", m.RXE, 4}, {"softnic", m.Softnic, 5}} {
		if len(p.p.Results) != p.n || len(p.p.Rounds) != p.n {
			t.Fatalf("%s: %d results, %d rows of rounds; want %d", p.name, len(p.p.Results), len(p.p.Rounds), p.n)
		}
		for row, rs := range p.p.Rounds {
			if len(rs) != 2 || rs[0].N != 1 || rs[1].N != 2 || rs[1].Result == nil || rs[1].Err != "" {
				t.Errorf("%s %s: rounds %+v", p.name, row, rs)
			}
		}
	}
	tb := BuildGuests(m)
	r := guestRow(t, tb, GuestRowWriteBW)
	if tb.Rounds != 2 || len(r.Rounds) != 2 || r.Ratio == nil || *r.Ratio != r.Rounds[0] || *r.Softnic / *r.RXE != r.Rounds[1] {
		t.Errorf("rounds %d, write_bw row %+v", tb.Rounds, r)
	}
	if got := tb.Format(); !strings.Contains(got, "2 rounds, each running every test with rxe and then softnic") {
		t.Errorf("Format does not say the rounds:\n%s", got)
	}
}

// fakeRound is what one round asks the stand-in bed, from rxe's first
// test (rxe present) to softnic's last.
const fakeRound = "serve bench-a ib_write_bw -d\nexec bench-b ib_write_bw\n" + fakeRemoved +
	"serve bench-a /host/softnic write_bw\nexec bench-b softnic write_bw\n" + fakeAdded +
	"serve bench-a ib_read_bw -d\nexec bench-b ib_read_bw\n" + fakeRemoved +
	"serve bench-a /host/softnic read_bw\nexec bench-b softnic read_bw\n" + fakeAdded +
	"serve bench-a ib_send_bw -d\nexec bench-b ib_send_bw\n" + fakeRemoved +
	"serve bench-a /host/softnic send_bw\nexec bench-b softnic send_bw\n" + fakeAdded +
	"serve bench-a ib_write_lat -d\nexec bench-b ib_write_lat\n" + fakeRemoved +
	"serve bench-a /host/softnic write_lat\nexec bench-b softnic write_lat\n" +
	"serve bench-a /host/softnic write_lat\nexec bench-b softnic write_lat --busy-poll\n"

const (
	fakeRemoved = "exec bench-a rxe removed\nexec bench-b rxe removed\n"
	fakeAdded   = "exec bench-a rxe added\nexec bench-b rxe added\n"
)

// runFakeGuests runs RunGuests with rounds against the stand-in bed and
// returns what it measured, what the bed was asked, and its state
// directory.
func runFakeGuests(t *testing.T, rounds int) (GuestMeasurements, string, string) {
	t.Helper()
	dir := t.TempDir()
	logf := filepath.Join(dir, "log")
	t.Setenv("FAKE_LOG", logf)
	for _, g := range GuestNames {
		if err := os.MkdirAll(filepath.Join(dir, "guests", g, "share"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("a static binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	bed, err := filepath.Abs(filepath.Join("testdata", "fakebed", "bed"))
	if err != nil {
		t.Fatal(err)
	}
	m := RunGuests(context.Background(), GuestConfig{Bed: bed, Softnic: bin, UDPBench: bin, State: dir, Rounds: rounds})
	if m.Err != "" || len(m.RXE.Errors)+len(m.Softnic.Errors) != 0 {
		t.Fatalf("error %q; rxe %v; softnic %v", m.Err, m.RXE.Errors, m.Softnic.Errors)
	}
	log, err := os.ReadFile(logf)
	if err != nil {
		t.Fatal(err)
	}
	return m, string(log), dir
}

// Over rounds, each pair's figure is its median and softnic/rxe the
// median of the rounds' own ratios, over the rounds both pairs measured;
// a row whose pair has no figure in any round is FAILED.
func TestGuestRoundsMedians(t *testing.T) {
	bw := func(v float64) *perftest.Result {
		return &perftest.Result{BW: []perftest.BWResult{{BWAvg: v, MsgRate: v / 1000}}}
	}
	m := guestMeasured()
	m.Rounds = 3
	m.RXE.Rounds = map[string][]Round{
		GuestRowWriteBW: {{N: 1, Result: bw(10)}, {N: 2, Result: bw(20)}, {N: 3, Result: bw(30)}},
		GuestRowReadBW:  {{N: 1, Err: "client: exit status 1"}, {N: 2, Err: "client: exit status 1"}, {N: 3, Err: "x"}},
	}
	m.Softnic.Rounds = map[string][]Round{
		// round 2 failed: softnic's median is over 1 and 3, the ratio's
		// over rounds 1 and 3 (60/10 and 45/30)
		GuestRowWriteBW: {{N: 1, Result: bw(60)}, {N: 2, Err: "server: exit status 1"}, {N: 3, Result: bw(45)}},
		GuestRowReadBW:  {{N: 1, Result: bw(50)}, {N: 2, Result: bw(50)}, {N: 3, Result: bw(50)}},
	}
	tb := BuildGuests(m)
	r := guestRow(t, tb, GuestRowWriteBW)
	if r.RXE == nil || *r.RXE != 20 || r.Softnic == nil || *r.Softnic != 52.5 || !slices.Equal(r.Rounds, []float64{6, 1.5}) ||
		r.Ratio == nil || *r.Ratio != 3.75 || r.Status != Pass || !strings.Contains(r.Note, "medians of 2 rounds, softnic/rxe in each: 6.00×, 1.50×") {
		t.Errorf("write_bw: %+v", r)
	}
	if r := guestRow(t, tb, GuestRowReadBW); r.Status != Failed || r.Ratio != nil || !strings.Contains(r.Note, "no figure in any round") {
		t.Errorf("read_bw, rxe failing every round: %+v", r)
	}
	if got, want := median([]float64{3, 1, 2}), 2.0; got != want {
		t.Errorf("median of 3, 1, 2 = %v", got)
	}
	if got, want := median([]float64{4, 1, 2, 3}), 2.5; got != want {
		t.Errorf("median of 4, 1, 2, 3 = %v", got)
	}
}
