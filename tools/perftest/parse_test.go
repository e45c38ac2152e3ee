package perftest

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestParseText reads back what the look-alikes print: the test info
// block, the column titles and rows of FormatBW and FormatLat, a -H
// histogram with its repeated titles, --report_gbits, a duration run.
// tools/bench's tests read the real outputs of perftest's ib_* tools
// on rxe.
func TestParseText(t *testing.T) {
	c := Defaults(Write, BW)
	info := FormatTestInfo(&c, TestInfo{Device: "softnic0", MTU: 1024, GIDIndex: 0})
	bw := BWResult{Size: 65536, Iters: 300, BWPeak: 45.17, BWAvg: 44.5, MsgRate: 0.000712}
	out := info + " local address: LID 0000 QPN 0x0011 PSN 0x5670ac\n" + Header(&c) + FormatBW(&c, bw) + resultLine +
		" warning: on standard error, merged\n"
	r, err := ParseText([]byte(out))
	if err != nil || r.MTU != 1024 || len(r.BW) != 1 || r.BW[0] != bw || r.Lat != nil {
		t.Errorf("bw: got %+v, %v", r, err)
	}

	g := c
	g.ReportGbit = true
	r, err = ParseText([]byte(Header(&g) + FormatBW(&g, BWResult{Size: 65536, Iters: 300, BWAvg: 1, Gbits: true}) + resultLine))
	if err != nil || len(r.BW) != 1 || r.BW[0].Gbits || math.Abs(r.BW[0].BWAvg-125000000.0/(1<<20)) > 1e-9 {
		t.Errorf("--report_gbits: got %+v, %v, want MB/sec", r, err)
	}

	l := Defaults(Write, Lat)
	lat := LatResult{Size: 8, Iters: 500, Min: 100.5, Max: 4000, Typical: 300.25, Avg: 350, Stdev: 20, P99: 900, P999: 4000}
	h := lat
	h.Histogram = "#, latency\n1, 100.50\n"
	out = Header(&l) + FormatLat(&l, h) + resultLine
	r, err = ParseText([]byte(out))
	if err != nil || len(r.Lat) != 1 || !reflect.DeepEqual(r.Lat[0], lat) || r.MTU != 0 {
		t.Errorf("lat with -H: got %+v, %v, want %+v", r, err, lat)
	}
	if strings.Count(out, strings.TrimSpace(resultFmtLat)) != 2 {
		t.Fatalf("the -H output should repeat the column titles:\n%s", out)
	}

	l.Duration = 5e9
	r, err = ParseText([]byte(Header(&l) + FormatLat(&l, ComputeLatDuration(&l, 1000, 4e9, 2)) + resultLine))
	if err != nil || len(r.Lat) != 1 || !r.Lat[0].Duration || r.Lat[0].Avg != 2000 || r.Lat[0].TPS != 250 {
		t.Errorf("duration: got %+v, %v", r, err)
	}

	for name, bad := range map[string]string{
		"nothing":       "",
		"no table":      info,
		"titles only":   Header(&c) + resultLine,
		"cut short":     Header(&c),
		"unparsed row":  Header(&c) + " 65536 300 fast 44.50 0.000712\n" + resultLine,
		"pingpong line": "8192000 bytes in 0.08 seconds = 819.20 Mbit/sec\n",
	} {
		if r, err := ParseText([]byte(bad)); err == nil {
			t.Errorf("%s: got %+v, want an error", name, r)
		}
	}
}
