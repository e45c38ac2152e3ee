package perftest

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/softnic/softnic/tools/tooljson"
)

// TestJSONOutput runs write_bw with --json and options that make perftest
// warn (an inline size on a device it does not know, a large message with
// CQ moderation) and expects standard output to hold exactly one Result,
// with string GIDs, and every warning and banner on standard error.
func TestJSONOutput(t *testing.T) {
	cfg := Defaults(Write, BW)
	cfg.Iters, cfg.Size, cfg.SizeSet, cfg.Inline, cfg.CQMod, cfg.CQModSet = 20, 16384, true, 64, 4, true
	srv, cli := runPairEnv(t, cfg, nil, func(e *Env) { e.JSON = true })
	for _, r := range []struct {
		who  string
		s    *side
		addr string
		peer string
	}{{"server", srv, "10.0.0.1", "10.0.0.2"}, {"client", cli, "10.0.0.2", "10.0.0.1"}} {
		if r.s.err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", r.who, r.s.err, r.s.out.String(), r.s.errOut.String())
		}
		var got Result
		if err := tooljson.Decode(r.s.out.Bytes(), &got); err != nil {
			t.Fatalf("%s: stdout is not one Result: %v\n%s", r.who, err, r.s.out.String())
		}
		if got.Tool != "write_bw" || got.Side != r.who || got.Connection != "RC" || got.Device == "" ||
			got.MTU != 4096 || len(got.BW) != 1 || got.BW[0].Size != 16384 || got.BW[0].Iters != 20 {
			t.Errorf("%s: got %+v", r.who, got)
		}
		if len(got.Local) != 1 || len(got.Remote) != 1 || got.Local[0].QPN != r.s.res.Local[0].QPN ||
			got.Local[0].VAddr == 0 || got.Remote[0].RKey == 0 {
			t.Errorf("%s: QPs: got local %+v remote %+v", r.who, got.Local, got.Remote)
		}
		// The raw document: GIDs and virtual addresses are strings.
		var raw struct {
			Local, Remote []map[string]any
		}
		if err := json.Unmarshal(r.s.out.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		for _, q := range []struct {
			m    map[string]any
			want string
		}{{raw.Local[0], r.addr}, {raw.Remote[0], r.peer}} {
			g, ok := q.m["gid"].(string)
			a, err := netip.ParseAddr(g)
			if !ok || err != nil || a.Unmap() != netip.MustParseAddr(q.want) || g != "::ffff:"+q.want {
				t.Errorf("%s: gid %#v, want the string ::ffff:%s", r.who, q.m["gid"], q.want)
			}
			if v, ok := q.m["vaddr"].(string); !ok || !strings.HasPrefix(v, "0x") || len(v) != 18 {
				t.Errorf("%s: vaddr %#v, want a 0x string of 16 hex digits", r.who, q.m["vaddr"])
			}
		}
		for _, w := range []string{
			"Device not recognized to implement inline feature. Disabling it\n",
			"Warning: Large message requested and CQ moderation enabled\n",
		} {
			if !strings.Contains(r.s.errOut.String(), w) {
				t.Errorf("%s: stderr lacks %q:\n%s", r.who, w, r.s.errOut.String())
			}
		}
	}
	if !strings.Contains(srv.errOut.String(), "* Waiting for client to connect... *") {
		t.Errorf("server: stderr lacks the waiting banner:\n%s", srv.errOut.String())
	}
}

// TestJSONUnits checks that Result's bandwidths are MB/sec whatever
// --report_gbits says and its latencies microseconds whatever -C says.
func TestJSONUnits(t *testing.T) {
	bw := BWResult{Size: 65536, Iters: 10, BWPeak: 8.388608, BWAvg: 4.194304, MsgRate: 0.5, Gbits: true}.inMBps()
	if want := (BWResult{Size: 65536, Iters: 10, BWPeak: 1000, BWAvg: 500, MsgRate: 0.5}); !near(bw.BWPeak, want.BWPeak) ||
		!near(bw.BWAvg, want.BWAvg) || bw.MsgRate != want.MsgRate || bw.Gbits {
		t.Errorf("Gb/sec to MB/sec: got %+v, want %+v", bw, want)
	}
	mb := BWResult{BWPeak: 3, BWAvg: 2}
	if got := mb.inMBps(); got != mb {
		t.Errorf("MB/sec: got %+v, want it unchanged", got)
	}
	c := Defaults(Read, Lat)
	ns := LatResult{Size: 2, Iters: 100, Min: 1500, Max: 9000, Typical: 2000, Avg: 2500, Stdev: 300, P99: 8000, P999: 8500}
	if got := ns.inUsec(&c); !reflect.DeepEqual(got, ns) {
		t.Errorf("without -C: got %+v, want it unchanged", got)
	}
	c.Cycles = true
	want := LatResult{Size: 2, Iters: 100, Min: 1.5, Max: 9, Typical: 2, Avg: 2.5, Stdev: 0.3, P99: 8, P999: 8.5}
	if got := ns.inUsec(&c); !reflect.DeepEqual(got, want) {
		t.Errorf("-C: got %+v, want %+v", got, want)
	}
	d := LatResult{Iters: 100, Avg: 3, TPS: 1e5, Duration: true}
	if got := d.inUsec(&c); !reflect.DeepEqual(got, d) {
		t.Errorf("-C -D: got %+v, want it unchanged (duration runs report microseconds)", got)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
