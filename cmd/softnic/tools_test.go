package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/link"
)

// useFabric makes every tool of this process open its NIC on an in-memory
// fabric for the rest of the test.
func useFabric(t *testing.T) *fabric.Fabric {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 1})
	testLink = func(a netip.Addr, _ uint16) (link.Link, error) { return f.Attach(a) }
	t.Cleanup(func() {
		testLink = nil
		f.Close()
	})
	return f
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// runToolPair runs "softnic <tool> <server args>" and "softnic <tool>
// <client args> 127.0.0.1" concurrently, in-process, on the fabric, with
// the out-of-band exchange on a free port.
func runToolPair(t *testing.T, tool string, server, client []string) (srv, cli procResult) {
	t.Helper()
	useFabric(t)
	port := freePort(t)
	sargs := append([]string{tool, "-p", port, "--addr", "10.0.0.1", "--timeout", "20s", "--accept-timeout", "30s"}, server...)
	cargs := append([]string{tool, "-p", port, "--addr", "10.0.0.2", "--timeout", "20s", "--connect-timeout", "20s"}, client...)
	cargs = append(cargs, "127.0.0.1")
	var wg sync.WaitGroup
	wg.Add(2)
	do := func(args []string, r *procResult) {
		defer wg.Done()
		var o, e bytes.Buffer
		r.status = run(args, &o, &e)
		r.out, r.errOut = o.String(), e.String()
	}
	go do(sargs, &srv)
	go do(cargs, &cli)
	wg.Wait()
	return srv, cli
}

func TestPingpongCommands(t *testing.T) {
	lines := regexp.MustCompile(`^  local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}[,:] GID ::ffff:10\.0\.0\.[12]
  remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:10\.0\.0\.[12]
(\d+) bytes in \d+\.\d\d seconds = (\d+\.\d\d|inf) Mbit/sec
(\d+) iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter
$`)
	for _, tt := range []struct {
		tool  string
		args  []string
		bytes string
	}{
		{"rc_pingpong", []string{"-n", "5", "-s", "5000", "-m", "1024", "-g", "1", "-c"}, "50000"},
		{"rc_pingpong", []string{"--iters=3", "--size", "64", "-ec"}, "384"},
		{"uc_pingpong", []string{"-n", "4", "-s", "2048", "-m", "512"}, "16384"},
		{"ud_pingpong", []string{"-n", "5", "-s", "512", "-g", "1", "-c"}, "5120"},
	} {
		t.Run(tt.tool+strings.Join(tt.args, ""), func(t *testing.T) {
			srv, cli := runToolPair(t, tt.tool, tt.args, tt.args)
			eachSide(t, srv, cli, func(who string, r procResult) {
				m := lines.FindStringSubmatch(r.out)
				if m == nil {
					t.Errorf("%s: output does not match:\n%s", who, r.out)
				} else if m[1] != tt.bytes {
					t.Errorf("%s: got %s bytes, want %s", who, m[1], tt.bytes)
				}
			})
		})
	}
}

func TestPingpongCommandErrors(t *testing.T) {
	useFabric(t)
	port := freePort(t)
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"rc_pingpong", "-m", "1000"}, "invalid --mtu"},
		{[]string{"rc_pingpong", "-n", "abc"}, `invalid --iters "abc"`},
		{[]string{"rc_pingpong", "-s"}, "option requires an argument -- 's'"},
		{[]string{"ud_pingpong", "-m", "1024"}, "invalid option -- 'm'"},
		{[]string{"rc_pingpong", "--addr", "nope"}, "--addr \"nope\": not an IP address"},
		{[]string{"rc_pingpong", "a", "b"}, "more than one host"},
		{[]string{"rc_pingpong", "-o"}, "The device isn't ODP capable"},
		{[]string{"rc_pingpong", "-t"}, "completion timestamp"},
		{[]string{"rc_pingpong", "-P"}, "prefetch is valid only with on-demand memory region"},
		{[]string{"srq_pingpong", "-q", "600"}, "invalid --num-qp"},
		{[]string{"srq_pingpong", "-q", "20", "-r", "10"}, "rx_depth 10 is too small for 20 QPs"},
		{[]string{"ud_pingpong", "-s", "5000", "--addr", "10.0.0.9"}, "Requested size larger than port MTU (4096)"},
		{[]string{"rc_pingpong", "--addr", "10.0.0.3", "-p", port, "127.0.0.1"}, "Couldn't connect to 127.0.0.1:" + port},
		{[]string{"rc_pingpong", "--timeout", "-3s"}, "not a positive duration"},
	} {
		var o, e bytes.Buffer
		if got := run(tt.args, &o, &e); got != exitFail {
			t.Errorf("%q: got status %d, want %d", tt.args, got, exitFail)
		}
		if !strings.Contains(e.String(), tt.wantErr) {
			t.Errorf("%q: stderr %q lacks %q", tt.args, e.String(), tt.wantErr)
		}
	}
}

func TestPerftestCommands(t *testing.T) {
	table := regexp.MustCompile(`(?m)^ #bytes .*\n( \d+ .*\n)+-{87}\n`)
	for _, tt := range []struct {
		tool string
		args []string
	}{
		{"write_bw", []string{"-n", "20", "-s", "5000", "-m", "1024", "-F", "-x", "1", "--check"}},
		{"write_bw", []string{"-n", "5", "-a"}},
		{"write_bw", []string{"-n", "10", "-q", "3", "-s", "1000", "--check"}},
		{"read_bw", []string{"-n", "10", "-s", "64K", "--report_gbits", "--check"}},
		{"send_bw", []string{"-n", "30", "-s", "1000", "-c", "UC"}},
		{"send_bw", []string{"-n", "30", "-s", "1000", "-c", "UD"}},
		{"atomic_bw", []string{"-n", "50", "-A", "CMP_AND_SWAP", "--check"}},
		{"write_lat", []string{"-n", "20", "-s", "64"}},
		{"read_lat", []string{"-n", "20", "-s", "10000", "--check"}},
		{"send_lat", []string{"-n", "20"}},
		{"atomic_lat", []string{"-n", "20", "--check"}},
	} {
		t.Run(tt.tool+strings.Join(tt.args, ""), func(t *testing.T) {
			srv, cli := runToolPair(t, tt.tool, tt.args, tt.args)
			eachSide(t, srv, cli, func(who string, r procResult) {
				if !strings.Contains(r.out, " Data ex. method : Ethernet\n") {
					t.Errorf("%s: no test information:\n%s", who, r.out)
				}
			})
			// read_lat and atomic_lat servers print no table.
			if !table.MatchString(cli.out) {
				t.Errorf("client: no result table:\n%s", cli.out)
			}
		})
	}
}

func TestPerftestCommandErrors(t *testing.T) {
	useFabric(t)
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"write_bw", "-e"}, "invalid option -- 'e'"},
		{[]string{"write_bw", "-n", "3"}, "Iteration num should be between 5 and 100000000"},
		{[]string{"write_bw", "-m", "1000"}, "Invalid MTU - 1000"},
		{[]string{"write_bw", "-b"}, "-b is not supported by softnic"},
		{[]string{"write_bw", "--run_infinitely"}, "--run_infinitely is not supported by softnic"},
		{[]string{"write_bw", "-c", "UD"}, "UD connection only possible in SEND verb"},
		{[]string{"read_bw", "-c", "XRC"}, "XRC connection is not supported"},
		{[]string{"atomic_bw", "-A", "SWAP"}, "Invalid Atomic type"},
		{[]string{"atomic_bw", "-s", "16", "--addr", "10.0.0.7"}, "Message size cannot be changed for Atomic tests"},
		{[]string{"write_lat", "-q", "2"}, "invalid option -- 'q'"},
		{[]string{"write_bw", "-s", "0"}, "Message Size should be between 1"},
		{[]string{"send_bw", "--output", "latency"}, "Output verbosity level for BW"},
		{[]string{"write_lat", "--check", "--addr", "10.0.0.8"}, "--check is for"},
	} {
		var o, e bytes.Buffer
		if got := run(tt.args, &o, &e); got != exitFail {
			t.Errorf("%q: got status %d, want %d", tt.args, got, exitFail)
		}
		if !strings.Contains(e.String(), tt.wantErr) {
			t.Errorf("%q: stderr %q lacks %q", tt.args, e.String(), tt.wantErr)
		}
	}
	var o, e bytes.Buffer
	if got := run([]string{"write_bw", "-V"}, &o, &e); got != exitOK || o.String() != "Version: 6.06\n" {
		t.Errorf("-V: got %d %q", got, o.String())
	}
}

func TestInfoCommand(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"info", "--addr", "10.1.2.3"}, exitOK, "\t\t\tGID[  0]:\t\t::ffff:10.1.2.3, RoCE v2\n"},
		{[]string{"info", "-d", "rxe0", "-v"}, exitOK, "hca_id:\trxe0\n"},
		{[]string{"info", "--short"}, exitOK, "\t\t\tactive_mtu:\t\t4096 (5)\n"},
		{[]string{"info", "-l"}, exitOK, "1 HCA found:\n\tsoftnic0\n"},
		{[]string{"info", "-i", "2"}, exitFail, ""},
		{[]string{"info", "--addr", "x"}, exitFail, ""},
		{[]string{"info", "extra"}, exitFail, ""},
	} {
		var o, e bytes.Buffer
		if got := run(tt.args, &o, &e); got != tt.status || !strings.Contains(o.String(), tt.want) {
			t.Errorf("%q: got status %d, want %d; stdout lacks %q?\n%s%s", tt.args, got, tt.status, tt.want, o.String(), e.String())
		}
	}
}

// TestPerftestProfiles runs write_lat with --cpuprofile, --blockprofile,
// --mutexprofile and --trace on the client: each profile is a gzipped
// pprof profile of its kind, the block profile with the client's waits
// in it, and the trace one runtime/trace reads back with the run's
// system calls in it.
func TestPerftestProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, block, mutex, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "block.pprof"), filepath.Join(dir, "mutex.pprof"), filepath.Join(dir, "run.trace")
	args := []string{"-n", "2000", "-s", "8"}
	srv, cli := runToolPair(t, "write_lat", args, append([]string{"--cpuprofile", cpu, "--blockprofile", block, "--mutexprofile", mutex, "--trace", tr}, args...))
	if srv.status != 0 || cli.status != 0 {
		t.Fatalf("status server %d client %d\nserver:\n%s\nclient:\n%s", srv.status, cli.status, srv.errOut, cli.errOut)
	}
	checkTrace(t, tr)
	for _, c := range []struct {
		path  string
		names []string // in the profile's string table
	}{
		{cpu, []string{"samples", "cpu", "nanoseconds"}},
		// The client's waits for the server's WRITE and its ACKs.
		{block, []string{"contentions", "delay", "GetEventTimeout"}},
		{mutex, []string{"contentions", "delay"}},
	} {
		b, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s is not gzipped: %v", c.path, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		// A pprof profile is a protobuf whose string table names the
		// sample types and, when it has samples, their functions.
		for _, s := range c.names {
			if !bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s (%d bytes) does not name %q", filepath.Base(c.path), len(raw), s)
			}
		}
	}
}

func TestPerftestProfileBadPath(t *testing.T) {
	var o, e bytes.Buffer
	for _, flag := range []string{"--cpuprofile", "--blockprofile", "--mutexprofile", "--trace"} {
		o.Reset()
		e.Reset()
		if st := run([]string{"write_lat", flag, filepath.Join(t.TempDir(), "no", "such", "dir"), "-n", "5"}, &o, &e); st == 0 {
			t.Fatalf("%s: status 0 with an unwritable profile path", flag)
		}
		if !strings.Contains(e.String(), flag) {
			t.Errorf("stderr does not name %s:\n%s", flag, e.String())
		}
	}
}

// checkTrace checks that path holds a runtime execution trace of this
// Go's format: its header ("go 1.N trace" and NUL padding, 16 bytes)
// followed by the run's events.
func checkTrace(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := runtime.Version() // "go1.26.0", or a devel string
	want := "go 1."
	if n, ok := strings.CutPrefix(v, "go1."); ok {
		want += strings.SplitN(n, ".", 2)[0] + " trace\x00"
	}
	if len(b) < 16<<10 || !bytes.HasPrefix(b, []byte(want)) {
		t.Errorf("%s: %d bytes starting %q, want a trace starting %q", filepath.Base(path), len(b), b[:min(len(b), 16)], want)
	}
}
