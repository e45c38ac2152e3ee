package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/decode"
	"github.com/softnic/softnic/tools/devinfo"
	"github.com/softnic/softnic/tools/perftest"
	"github.com/softnic/softnic/tools/tooljson"
)

// Every tool with --json prints its documented object on standard output
// and nothing else: these tests read that output strictly (no unknown
// keys, nothing before or after the document) and look for the warnings
// on standard error.

// gidStrings checks that every "gid" key in the JSON document doc holds a
// string that parses as an IP address, and returns those addresses.
func gidStrings(t *testing.T, who string, doc []byte) []netip.Addr {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	var addrs []netip.Addr
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k != "gid" {
					walk(x)
					continue
				}
				s, ok := x.(string)
				a, err := netip.ParseAddr(s)
				if !ok || err != nil {
					t.Errorf("%s: gid %#v is not an address string", who, x)
					continue
				}
				addrs = append(addrs, a)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return addrs
}

func TestPerftestJSON(t *testing.T) {
	for _, tt := range []struct {
		tool     string
		args     []string
		warnings []string // on both sides' stderr
		cliWarn  []string // on the client's
		lat      bool
	}{
		{"write_bw", []string{"-n", "20", "-s", "16384", "-Q", "4", "-I", "64"}, []string{
			"Device not recognized to implement inline feature. Disabling it\n",
			"Warning: Large message requested and CQ moderation enabled\n"}, nil, false},
		{"send_bw", []string{"-n", "20", "-c", "UD"}, []string{" Max msg size in UD is MTU 4096\n Changing to this MTU\n"}, nil, false},
		{"atomic_bw", []string{"-n", "20", "--check"}, nil, []string{"softnic: --check: every byte checked out\n"}, false},
		{"read_lat", []string{"-n", "20", "-s", "64", "-C", "--check"}, nil, []string{"softnic: --check: every byte checked out\n"}, true},
		{"write_lat", []string{"-n", "20", "-s", "8", "-x", "3"}, []string{"softnic: GID index 3 is not in "}, nil, true},
	} {
		t.Run(tt.tool+strings.Join(tt.args, ""), func(t *testing.T) {
			args := append(tt.args, "--json")
			srv, cli := runToolPair(t, tt.tool, args, args)
			for _, r := range []struct {
				who  string
				r    procResult
				self string
			}{{"server", srv, "10.0.0.1"}, {"client", cli, "10.0.0.2"}} {
				if r.r.status != 0 {
					t.Errorf("%s: status %d\nstdout:\n%s\nstderr:\n%s", r.who, r.r.status, r.r.out, r.r.errOut)
					continue
				}
				var res perftest.Result
				if err := tooljson.Decode([]byte(r.r.out), &res); err != nil {
					t.Errorf("%s: stdout is not one perftest.Result: %v\n%s", r.who, err, r.r.out)
					continue
				}
				if res.Tool != tt.tool || res.Side != r.who || len(res.Local) != 1 || len(res.Remote) != 1 {
					t.Errorf("%s: got %+v", r.who, res)
				}
				gids := gidStrings(t, r.who, []byte(r.r.out))
				if len(gids) != 2 || gids[0].Unmap().String() == gids[1].Unmap().String() ||
					res.Local[0].GID.Addr() != netip.MustParseAddr(r.self) {
					t.Errorf("%s: GIDs %v, local %v; want this side's %s and the peer's", r.who, gids, res.Local[0].GID, r.self)
				}
				warn := tt.warnings
				if r.who == "client" {
					warn = append(warn, tt.cliWarn...)
				}
				for _, w := range warn {
					if !strings.Contains(r.r.errOut, w) {
						t.Errorf("%s: stderr lacks %q:\n%s", r.who, w, r.r.errOut)
					}
				}
			}
			if !strings.Contains(srv.errOut, "Waiting for client to connect") {
				t.Errorf("server: the waiting banner is not on stderr:\n%s", srv.errOut)
			}
			var res perftest.Result
			if tooljson.Decode([]byte(cli.out), &res) == nil {
				if tt.lat && (len(res.Lat) != 1 || res.Lat[0].Avg <= 0 || res.Lat[0].Avg > 1e6) {
					t.Errorf("client: latency %+v, want one line in microseconds", res.Lat)
				}
				if !tt.lat && (len(res.BW) != 1 || res.BW[0].BWAvg <= 0) {
					t.Errorf("client: bandwidth %+v, want one line", res.BW)
				}
			}
		})
	}
}

func TestInfoJSON(t *testing.T) {
	for _, tt := range []struct {
		args []string
		gid  string
	}{
		{[]string{"info", "--json", "--addr", "10.1.2.3"}, "::ffff:10.1.2.3"},
		{[]string{"info", "--addr", "fd00::5", "--json", "-i", "1", "--short"}, "fd00::5"},
	} {
		var o, e bytes.Buffer
		if got := run(tt.args, &o, &e); got != exitOK || e.Len() != 0 {
			t.Errorf("%q: status %d, stderr %q", tt.args, got, e.String())
			continue
		}
		var d devinfo.Device
		if err := tooljson.Decode(o.Bytes(), &d); err != nil {
			t.Errorf("%q: stdout is not one devinfo.Device: %v\n%s", tt.args, err, o.String())
			continue
		}
		gids := gidStrings(t, "info", o.Bytes())
		if len(gids) != 1 || gids[0] != netip.MustParseAddr(tt.gid) || d.HCAID != "softnic0" ||
			len(d.Ports) != 1 || d.Ports[0].ActiveMTU != 4096 {
			t.Errorf("%q: got GIDs %v, device %+v", tt.args, gids, d)
		}
	}
	var o, e bytes.Buffer
	if got := run([]string{"info", "--json", "-l"}, &o, &e); got != exitFail || o.Len() != 0 || !strings.Contains(e.String(), "-l and --json") {
		t.Errorf("-l --json: status %d, stdout %q, stderr %q", got, o.String(), e.String())
	}
}

func TestDecodeJSONStrict(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if got := run([]string{"decode", "--json", rc64}, &stdout, &stderr); got != exitOK || stderr.Len() != 0 {
		t.Fatalf("status %d, stderr %q", got, stderr.String())
	}
	// JSON Lines: a Record per line, then the Summary, then nothing.
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	for i, l := range lines[:len(lines)-1] {
		var r decode.Record
		if err := tooljson.Decode([]byte(l), &r); err != nil || r.Type != "packet" || r.Packet == nil {
			t.Fatalf("line %d is not a packet Record: %v\n%s", i+1, err, l)
		}
		for _, k := range []string{`"src":"`, `"dst":"`} {
			if !strings.Contains(l, k) {
				t.Errorf("line %d: no %s string", i+1, k)
			}
		}
		if !r.Src.IsValid() || !r.Dst.IsValid() {
			t.Errorf("line %d: addresses %v %v", i+1, r.Src, r.Dst)
		}
	}
	var sum decode.Summary
	if err := tooljson.Decode([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Type != "summary" || sum.Packets != len(lines)-1 {
		t.Errorf("last line: got %+v, %v; want the summary of %d packets", sum, err, len(lines)-1)
	}

	// A file that cannot be read: the error is on stderr, stdout still
	// ends with the summary.
	stdout.Reset()
	stderr.Reset()
	if got := run([]string{"decode", "--json", "/nonexistent.pcap"}, &stdout, &stderr); got != exitFail || stderr.Len() == 0 {
		t.Errorf("missing file: status %d, stderr %q", got, stderr.String())
	}
	if err := tooljson.Decode(stdout.Bytes(), &sum); err != nil || sum.UnreadableFiles != 1 {
		t.Errorf("missing file: stdout %q: %v", stdout.String(), err)
	}
}

// TestE2EJSON runs write_bw --json as two processes over UDP and info
// --json as one, and reads their standard output strictly: nothing the
// process writes outside the tool's code may reach it either.
func TestE2EJSON(t *testing.T) {
	skipE2E(t)
	l := newLoopback(t, false)
	args := []string{"-n", "20", "-s", "4096", "-I", "64", "--json"}
	srv, cli := runProcPair(t, "write_bw", l, args, args)
	for _, r := range []struct {
		who  string
		r    procResult
		self string
	}{{"server", srv, l.a}, {"client", cli, l.b}} {
		var res perftest.Result
		if err := tooljson.Decode([]byte(r.r.out), &res); r.r.status != 0 || err != nil {
			t.Errorf("%s: exit %d, %v\nstdout:\n%s\nstderr:\n%s", r.who, r.r.status, err, r.r.out, r.r.errOut)
			continue
		}
		if res.Local[0].GID.String() != "::ffff:"+r.self || len(gidStrings(t, r.who, []byte(r.r.out))) != 2 {
			t.Errorf("%s: local GID %v, want ::ffff:%s", r.who, res.Local[0].GID, r.self)
		}
		if !strings.Contains(r.r.errOut, "Device not recognized to implement inline feature") {
			t.Errorf("%s: the inline warning is not on stderr:\n%s", r.who, r.r.errOut)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := runProc(ctx, []string{"info", "--json", "--addr", l.a})
	var d devinfo.Device
	if err := tooljson.Decode([]byte(r.out), &d); r.status != 0 || err != nil || d.Ports[0].GIDs[0].GID.String() != "::ffff:"+l.a {
		t.Errorf("info: exit %d, %v\n%s%s", r.status, err, r.out, r.errOut)
	}
}
