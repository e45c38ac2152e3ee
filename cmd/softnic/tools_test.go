package main

import (
	"bytes"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/nic"
)

// useFabric makes every tool of this process open its NIC on an in-memory
// fabric for the rest of the test.
func useFabric(t *testing.T) *fabric.Fabric {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 1})
	testLink = func(a netip.Addr, _ uint16) (nic.Link, error) { return f.Attach(a) }
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

type toolRun struct {
	status      int
	out, errOut string
}

// runToolPair runs "softnic <tool> <server args>" and "softnic <tool>
// <client args> 127.0.0.1" concurrently, in-process, on the fabric, with
// the out-of-band exchange on a free port.
func runToolPair(t *testing.T, tool string, server, client []string) (srv, cli toolRun) {
	t.Helper()
	useFabric(t)
	port := freePort(t)
	sargs := append([]string{tool, "-p", port, "--addr", "10.0.0.1", "--timeout", "20s", "--accept-timeout", "30s"}, server...)
	cargs := append([]string{tool, "-p", port, "--addr", "10.0.0.2", "--timeout", "20s", "--connect-timeout", "20s"}, client...)
	cargs = append(cargs, "127.0.0.1")
	var wg sync.WaitGroup
	wg.Add(2)
	do := func(args []string, r *toolRun) {
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
			for _, r := range []struct {
				who string
				r   toolRun
			}{{"server", srv}, {"client", cli}} {
				if r.r.status != 0 {
					t.Errorf("%s: status %d\nstdout:\n%s\nstderr:\n%s", r.who, r.r.status, r.r.out, r.r.errOut)
					continue
				}
				m := lines.FindStringSubmatch(r.r.out)
				if m == nil {
					t.Errorf("%s: output does not match:\n%s", r.who, r.r.out)
					continue
				}
				if m[1] != tt.bytes {
					t.Errorf("%s: got %s bytes, want %s", r.who, m[1], tt.bytes)
				}
			}
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
		if got := run(tt.args, &o, &e); got != exitTool {
			t.Errorf("%q: got status %d, want %d", tt.args, got, exitTool)
		}
		if !strings.Contains(e.String(), tt.wantErr) {
			t.Errorf("%q: stderr %q lacks %q", tt.args, e.String(), tt.wantErr)
		}
	}
}
