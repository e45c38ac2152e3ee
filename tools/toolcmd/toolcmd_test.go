package toolcmd

import (
	"errors"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
)

// TestWriteOpts: rdma-core's usage layout, the help at column 27 or one
// space after a longer spelling.
func TestWriteOpts(t *testing.T) {
	var b strings.Builder
	WriteOpts(&b, []Opt{
		NewOpt('p', "port", getopt.RequiredArg, "<port>", "the port"),
		NewOpt('e', "", getopt.NoArg, "", "events"),
		NewOpt('S', "", getopt.RequiredArg, "size", "the size"),
		NewOpt(0, "report-unsorted-histogram", getopt.NoArg, "", "long"),
	})
	want := "  -p, --port=<port>       the port\n" +
		"  -e                      events\n" +
		"  -S size                 the size\n" +
		"  --report-unsorted-histogram long\n"
	if b.String() != want {
		t.Errorf("WriteOpts:\n%s\nwant:\n%s", b.String(), want)
	}
}

func parse(t *testing.T, args ...string) *getopt.Result {
	t.Helper()
	r, err := getopt.Parse(Options(NICOpts), args)
	if err != nil {
		t.Fatalf("getopt.Parse(%q): %v", args, err)
	}
	return r
}

// TestParseNICOpts: each NIC option lands in the environment; a bad value
// is refused with its option's name.
func TestParseNICOpts(t *testing.T) {
	var env toolnic.Env
	r := parse(t, "--addr", "::ffff:10.0.0.1", "--port-udp", "4792", "--peer-port-udp=4793", "--pcap", "x.pcap",
		"--metrics", ":9100", "--metrics-file", "m.txt", "--timeout", "5s", "--busy-poll", "--accept-timeout", "1m",
		"--connect-timeout", "2s")
	if err := ParseNICOpts(r, &env); err != nil {
		t.Fatal(err)
	}
	want := toolnic.Config{Addr: netip.MustParseAddr("10.0.0.1"), Port: 4792, PeerPort: 4793, Pcap: "x.pcap",
		Metrics: ":9100", MetricsFile: "m.txt", BusyPoll: DefaultBusyPoll}
	if got := env.NIC; got.Link != nil || got.Addr != want.Addr || got.Port != want.Port || got.PeerPort != want.PeerPort ||
		got.Pcap != want.Pcap || got.Metrics != want.Metrics || got.MetricsFile != want.MetricsFile || got.BusyPoll != want.BusyPoll ||
		env.Stall != 5*time.Second || env.AcceptTimeout != time.Minute || env.ConnectRetry != 2*time.Second {
		t.Errorf("got %+v, stall %v, accept %v, retry %v; want %+v, 5s, 1m, 2s", env.NIC, env.Stall, env.AcceptTimeout, env.ConnectRetry, want)
	}
	if err := ParseNICOpts(parse(t, "--busy-poll=10us"), &env); err != nil || env.NIC.BusyPoll != 10*time.Microsecond {
		t.Errorf("--busy-poll=10us: %v, %v", err, env.NIC.BusyPoll)
	}
	for _, tt := range []struct{ args, want string }{
		{"--addr 1.2.3", `--addr "1.2.3": not an IP address`},
		{"--port-udp 0", `--port-udp "0": not a port number (1-65535)`},
		{"--peer-port-udp 65536", `--peer-port-udp "65536": not a port number (1-65535)`},
		{"--busy-poll=-1s", `--busy-poll="-1s": not a positive duration (e.g. 50us)`},
		{"--timeout 0", `--timeout "0": not a positive duration (e.g. 30s)`},
		{"--connect-timeout x", `--connect-timeout "x": not a positive duration (e.g. 30s)`},
	} {
		err := ParseNICOpts(parse(t, strings.Fields(tt.args)...), &toolnic.Env{})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestParse: -h prints the usage on standard output and exits 0; a bad
// command line prints its error and where the usage is, and exits 1.
func TestParse(t *testing.T) {
	opts := []Opt{NewOpt('n', "iters", getopt.RequiredArg, "<n>", "iterations")}
	usage := func(w io.Writer) { w.Write([]byte("usage: softnic x\n")) }
	var out, errOut strings.Builder
	env := &toolnic.Env{Out: &out, Err: &errOut}
	if _, st, ok := Parse(env, "x", opts, []string{"-h"}, usage); ok || st != ExitOK || out.String() != "usage: softnic x\n" || errOut.Len() != 0 {
		t.Errorf("-h: ok %v, status %d, stdout %q, stderr %q", ok, st, out.String(), errOut.String())
	}
	out.Reset()
	if _, st, ok := Parse(env, "x", opts, []string{"--nope"}, usage); ok || st != ExitFail || out.Len() != 0 ||
		errOut.String() != "softnic x: unrecognized option '--nope'\nRun 'softnic help x' for usage.\n" {
		t.Errorf("--nope: ok %v, status %d, stdout %q, stderr %q", ok, st, out.String(), errOut.String())
	}
	r, _, ok := Parse(env, "x", opts, []string{"-n", "5", "--addr", "10.0.0.1", "host"}, usage)
	if !ok || !r.Has("iters") || !r.Has("addr") || !slices.Equal(r.Operands, []string{"host"}) {
		t.Errorf("a good command line: %+v, %v", r, ok)
	}
}

func TestParseInts(t *testing.T) {
	opts := Options([]Opt{NewOpt('n', "iters", getopt.RequiredArg, "", "")})
	r, _ := getopt.Parse(opts, []string{"-n", "0x10"})
	n, other := 1, 7
	if err := ParseInts(r, Int("iters", 1, 100, &n), Int("missing", 0, 1, &other)); err != nil || n != 16 || other != 7 {
		t.Errorf("ParseInts: %v, iters %d, missing %d; want 16 and 7 untouched", err, n, other)
	}
	r, _ = getopt.Parse(opts, []string{"-n", "101"})
	if err := ParseInts(r, Int("iters", 1, 100, &n)); err == nil || err.Error() != `invalid --iters "101" (1..100)` {
		t.Errorf("out of bounds: %v", err)
	}
}

// TestServerHost: the tool's own error comes first, then more than one
// host, then a bad NIC option.
func TestServerHost(t *testing.T) {
	for _, tt := range []struct {
		args    string
		own     error
		host    string
		wantErr string
	}{
		{"", nil, "", ""},
		{"server", nil, "server", ""},
		{"a b", nil, "", `two: ["a" "b"]`},
		{"a b --addr x", errBad, "", "bad"},
		{"a --addr x", nil, "", `--addr "x": not an IP address`},
	} {
		host, err := ServerHost(&toolnic.Env{}, parse(t, strings.Fields(tt.args)...), tt.own, "two: %q")
		if host != tt.host || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("%q: %q, %v; want %q, %q", tt.args, host, err, tt.host, tt.wantErr)
		}
	}
}

var errBad = errors.New("bad")

// TestParseArgs: flags after operands, and "--" ending the flags.
func TestParseArgs(t *testing.T) {
	fs := NewFlagSet("x", "x [--json] FILE...", new(strings.Builder))
	j := fs.Bool("json", false, "")
	pos, _, ok := ParseArgs(fs, []string{"a.pcap", "--json", "--", "--b.pcap"})
	if !ok || !*j || !slices.Equal(pos, []string{"a.pcap", "--b.pcap"}) {
		t.Errorf("got %q, json %v, ok %v", pos, *j, ok)
	}
	var usage strings.Builder
	fs = NewFlagSet("x", "x [--json] FILE...", &usage)
	fs.Bool("json", false, "print JSON")
	if _, st, ok := ParseArgs(fs, []string{"-h"}); ok || st != ExitOK || !strings.HasPrefix(usage.String(), "usage: softnic x [--json] FILE...\n\nFlags:\n") {
		t.Errorf("-h: status %d, ok %v, usage %q", st, ok, usage.String())
	}
	fs = NewFlagSet("x", "x", new(strings.Builder))
	if _, st, ok := ParseArgs(fs, []string{"--nope"}); ok || st != ExitUsage {
		t.Errorf("--nope: status %d, ok %v", st, ok)
	}
}

// TestParseCC: --cc dcqcn turns congestion control on with mlx5's
// defaults, --cc-param sets one by its mlx5 name; bad ones are refused.
func TestParseCC(t *testing.T) {
	var env toolnic.Env
	if err := ParseNICOpts(parse(t, "--cc", "dcqcn", "--cc-param", "rp_ai_rate=10", "--cc-param=np_min_time_between_cnps=50"), &env); err != nil {
		t.Fatal(err)
	}
	want := ibv.DefaultCCParams()
	want.RPAIRate = 10
	want.NPMinTimeBetweenCNPs = 50 * time.Microsecond
	if env.NIC.CC == nil || *env.NIC.CC != want {
		t.Errorf("got %+v, want %+v", env.NIC.CC, want)
	}
	var off toolnic.Env
	if err := ParseNICOpts(parse(t, "--cc", "none"), &off); err != nil || off.NIC.CC != nil {
		t.Errorf("--cc none: %v, %+v", err, off.NIC.CC)
	}
	for _, tt := range []struct{ args, want string }{
		{"--cc reno", `--cc "reno": not dcqcn or none`},
		{"--cc-param rp_ai_rate=1", `--cc-param rp_ai_rate=1 without --cc dcqcn`},
		{"--cc dcqcn --cc-param rp_ai_rate", `--cc-param "rp_ai_rate": not <name>=<number>`},
		{"--cc dcqcn --cc-param rp_bogus=1", `--cc-param rp_bogus=1: no congestion control parameter "rp_bogus"`},
		{"--cc dcqcn --cc-param rp_gd=0", `--cc-param rp_gd=0: rp_gd 0 not in 1..20`},
	} {
		err := ParseNICOpts(parse(t, strings.Fields(tt.args)...), &toolnic.Env{})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v, want %q", tt.args, err, tt.want)
		}
	}
}
