package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The end-to-end tests run two softnic processes against each other over
// real UDP on loopback, as a person would: the binary is built once in
// TestMain.

var binary string // the softnic binary under test; "" when it did not build

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "softnic-e2e")
	if err == nil {
		binary = filepath.Join(dir, "softnic")
		cmd := exec.Command("go", "build", "-o", binary, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building softnic: %v\n%s", err, out)
			binary = ""
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// procResult is one process's outcome (or one in-process run's).
type procResult struct {
	status      int
	out, errOut string
}

// eachSide reports a side of a pair that failed (a status not 0) and
// hands each side that succeeded to check, when not nil.
func eachSide(t *testing.T, srv, cli procResult, check func(who string, r procResult)) {
	t.Helper()
	for _, s := range []struct {
		who string
		r   procResult
	}{{"server", srv}, {"client", cli}} {
		if s.r.status != 0 {
			t.Errorf("%s: status %d\nstdout:\n%s\nstderr:\n%s", s.who, s.r.status, s.r.out, s.r.errOut)
		} else if check != nil {
			check(s.who, s.r)
		}
	}
}

// loopback picks the NICs' addresses and ports for one test: two IPv4
// loopback addresses and one UDP port (or, for IPv6, ::1 twice with two
// ports), at random so that concurrent test runs do not collide.
type loopback struct {
	a, b         string
	portA, portB int
	ipv6         bool
}

func newLoopback(t *testing.T, ipv6 bool) loopback {
	t.Helper()
	if ipv6 {
		c, err := net.ListenPacket("udp6", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		c.Close()
		p := 20000 + rand.IntN(20000)
		return loopback{a: "::1", b: "::1", portA: p, portB: p + 1, ipv6: true}
	}
	n := 2 + rand.IntN(200)
	p := 20000 + rand.IntN(20000)
	return loopback{a: fmt.Sprintf("127.0.%d.1", n), b: fmt.Sprintf("127.0.%d.2", n), portA: p, portB: p}
}

func (l loopback) server() []string {
	return []string{"--addr", l.a, "--port-udp", strconv.Itoa(l.portA), "--peer-port-udp", strconv.Itoa(l.portB)}
}

func (l loopback) client() []string {
	return []string{"--addr", l.b, "--port-udp", strconv.Itoa(l.portB), "--peer-port-udp", strconv.Itoa(l.portA)}
}

// runProc runs the softnic binary with args, bounded by ctx.
func runProc(ctx context.Context, args []string) procResult {
	return runCmd(exec.CommandContext(ctx, binary, args...))
}

// runCmd runs cmd and returns its exit status (-1 when it did not exit)
// and its output.
func runCmd(cmd *exec.Cmd) procResult {
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := procResult{out: o.String(), errOut: e.String()}
	if err != nil {
		r.status = -1
		if ee, ok := err.(*exec.ExitError); ok {
			r.status = ee.ExitCode()
		}
	}
	return r
}

// runProcPair runs a server and a client process of tool with the given
// arguments and returns their results.
func runProcPair(t *testing.T, tool string, l loopback, sargs, cargs []string) (srv, cli procResult) {
	t.Helper()
	if binary == "" {
		t.Fatal("the softnic binary did not build")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	port := freePort(t)
	host := l.a
	s := append(append(append([]string{tool, "-p", port}, l.server()...), "--timeout", "30s", "--accept-timeout", "60s"), sargs...)
	c := append(append(append([]string{tool, "-p", port}, l.client()...), "--timeout", "30s", "--connect-timeout", "30s"), cargs...)
	c = append(c, host)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); srv = runProc(ctx, s) }()
	go func() { defer wg.Done(); cli = runProc(ctx, c) }()
	wg.Wait()
	return srv, cli
}

func skipE2E(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test over UDP: not with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the UDP link needs Linux")
	}
}

var (
	ppResult = regexp.MustCompile(`(?m)^(\d+) bytes in \d+\.\d\d seconds = (\d+\.\d\d|inf) Mbit/sec\n(\d+) iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter\n`)
	bwLine   = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +(\d+\.\d\d|inf) +(\d+\.\d\d|inf) *\t\t   \d+\.\d{6}\n`)
	latLine  = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d *  \t +\d+\.\d\d +\t\d+\.\d\d *\t\t\d+\.\d\d *\t\t\d+\.\d\d *\n`)
)

func TestE2EPingpong(t *testing.T) {
	skipE2E(t)
	for _, tt := range []struct {
		tool  string
		args  []string
		ipv6  bool
		bytes int
	}{
		{"rc_pingpong", []string{"-n", "3", "-s", "1", "-m", "256"}, false, 6},
		{"rc_pingpong", []string{"-n", "5", "-s", "5000", "-m", "1024", "-g", "1", "-c"}, false, 50000},
		{"rc_pingpong", []string{"-n", "2", "-s", "8388608", "-m", "4096", "-r", "4", "-c"}, false, 2 * 8388608 * 2},
		{"rc_pingpong", []string{"-n", "4", "-s", "70000", "-m", "2048", "-e"}, true, 560000},
		{"uc_pingpong", []string{"-n", "5", "-s", "3000", "-m", "512", "-c"}, false, 30000},
		{"ud_pingpong", []string{"-n", "5", "-s", "1"}, false, 10},
		{"ud_pingpong", []string{"-n", "5", "-s", "4096", "-c"}, true, 40960},
		{"srq_pingpong", []string{"-n", "20", "-q", "4", "-s", "2000", "-c"}, false, 80000},
	} {
		t.Run(fmt.Sprintf("%s%s/ipv6=%v", tt.tool, strings.Join(tt.args, ""), tt.ipv6), func(t *testing.T) {
			srv, cli := runProcPair(t, tt.tool, newLoopback(t, tt.ipv6), tt.args, tt.args)
			eachSide(t, srv, cli, func(who string, r procResult) {
				m := ppResult.FindStringSubmatch(r.out)
				if m == nil || m[1] != strconv.Itoa(tt.bytes) {
					t.Errorf("%s: result lines missing or wrong (want %d bytes):\n%s", who, tt.bytes, r.out)
				}
				if strings.Contains(r.out, "invalid data") {
					t.Errorf("%s: %s", who, r.out)
				}
			})
		})
	}
}

func TestE2EPerftest(t *testing.T) {
	skipE2E(t)
	for _, tt := range []struct {
		tool string
		args []string
		ipv6 bool
	}{
		{"write_bw", []string{"-n", "5", "-s", "1", "-m", "256"}, false},
		{"write_bw", []string{"-n", "5", "-s", "8388608", "-m", "4096", "--check"}, false},
		{"write_bw", []string{"-n", "20", "-s", "65536", "-q", "2", "--check", "--ipv6"}, true},
		{"write_lat", []string{"-n", "10", "-s", "2"}, false},
		{"write_lat", []string{"-n", "10", "-s", "4096", "-m", "1024"}, false},
		{"read_bw", []string{"-n", "10", "-s", "1M", "-m", "2048", "--check"}, false},
		{"read_lat", []string{"-n", "10", "-s", "64", "--check"}, false},
		{"send_bw", []string{"-n", "20", "-s", "8192", "-m", "512", "--check"}, false},
		{"send_bw", []string{"-n", "20", "-s", "4096", "-c", "UD"}, false},
		{"send_lat", []string{"-n", "10", "-s", "1"}, false},
		{"atomic_bw", []string{"-n", "50", "-A", "CMP_AND_SWAP", "--check"}, false},
		{"atomic_lat", []string{"-n", "10", "--check"}, false},
	} {
		t.Run(fmt.Sprintf("%s%s", tt.tool, strings.Join(tt.args, "")), func(t *testing.T) {
			srv, cli := runProcPair(t, tt.tool, newLoopback(t, tt.ipv6), tt.args, tt.args)
			eachSide(t, srv, cli, nil)
			re := bwLine
			if strings.HasSuffix(tt.tool, "_lat") {
				re = latLine
			}
			if !re.MatchString(cli.out) {
				t.Errorf("client: no result line matching %v:\n%s", re, cli.out)
			}
			if strings.Contains(strings.Join(tt.args, " "), "--check") && !strings.Contains(srv.errOut+cli.errOut, "every byte checked out") {
				t.Errorf("--check did not check:\n%s\n%s", srv.errOut, cli.errOut)
			}
		})
	}
}

func TestE2EDemo(t *testing.T) {
	skipE2E(t)
	l := newLoopback(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := runProc(ctx, []string{"demo", "--addr-a", l.a, "--addr-b", l.b, "--port-udp", strconv.Itoa(l.portA)})
	if r.status != 0 || !strings.Contains(r.out, "every byte checked out") {
		t.Fatalf("demo: exit %d\n%s%s", r.status, r.out, r.errOut)
	}
	t.Log("\n" + r.out)
}

// TestE2EDemoHalves runs a demo across "two hosts" as two processes, one
// half each (--role server and --role client), as on two machines.
func TestE2EDemoHalves(t *testing.T) {
	skipE2E(t)
	l := newLoopback(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port, err := strconv.Atoi(freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"demo", "--addr-a", l.a, "--addr-b", l.b, "--port-udp", strconv.Itoa(l.portA), "--port", strconv.Itoa(port)}
	var srv, cli procResult
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); srv = runProc(ctx, append(common, "--role", "server")) }()
	go func() { defer wg.Done(); cli = runProc(ctx, append(common, "--role", "client")) }()
	wg.Wait()
	for _, h := range []struct {
		who, want string
		r         procResult
	}{{"server", "served the RDMA WRITEs of 64 KiB; every byte that arrived here checked out", srv},
		{"client", "RDMA READs of 16 KiB: ", cli}} {
		if h.r.status != 0 || !strings.Contains(h.r.out, "All 4 runs passed on this half") || !strings.Contains(h.r.out, h.want) {
			t.Errorf("%s half: exit %d, want %q in\n%s%s", h.who, h.r.status, h.want, h.r.out, h.r.errOut)
		}
	}
}

// TestE2EErrors checks that failures say what went wrong and exit 1.
func TestE2EErrors(t *testing.T) {
	skipE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newLoopback(t, false)

	// The NIC's UDP port is taken.
	taken, err := net.ListenPacket("udp4", net.JoinHostPort(l.a, strconv.Itoa(l.portA)))
	if err != nil {
		t.Fatal(err)
	}
	r := runProc(ctx, append([]string{"rc_pingpong", "-p", freePort(t)}, l.server()...))
	taken.Close()
	if r.status != 1 || !strings.Contains(r.errOut, fmt.Sprintf("UDP port %d on %s is already in use", l.portA, l.a)) {
		t.Errorf("UDP port in use: exit %d, stderr %q", r.status, r.errOut)
	}

	// The out-of-band TCP port is taken.
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	tport := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	r = runProc(ctx, append([]string{"write_bw", "-p", tport}, l.server()...))
	ln.Close()
	if r.status != 1 || !strings.Contains(r.errOut, "Couldn't listen to port "+tport) || !strings.Contains(r.errOut, "in use") {
		t.Errorf("TCP port in use: exit %d, stderr %q", r.status, r.errOut)
	}

	// Nobody listens.
	r = runProc(ctx, append(append([]string{"rc_pingpong", "-p", freePort(t)}, l.client()...), l.a))
	if r.status != 1 || !strings.Contains(r.errOut, "Couldn't connect to "+l.a) || !strings.Contains(r.errOut, "is the server running") {
		t.Errorf("unreachable: exit %d, stderr %q", r.status, r.errOut)
	}

	// No client comes.
	r = runProc(ctx, append([]string{"send_lat", "-p", freePort(t), "--accept-timeout", "300ms"}, l.server()...))
	if r.status != 1 || !strings.Contains(r.errOut, "no client connected within 300ms") {
		t.Errorf("accept timeout: exit %d, stderr %q", r.status, r.errOut)
	}

	// A pingpong client meets a perftest server, and the reverse.
	srv, cli := runPairMixed(ctx, t, l, "write_bw", "rc_pingpong")
	if srv.status != 1 || cli.status != 1 || !strings.Contains(srv.errOut, "pingpong") {
		t.Errorf("rc_pingpong client, write_bw server: exits %d/%d\nserver: %s\nclient: %s", srv.status, cli.status, srv.errOut, cli.errOut)
	}
	srv, cli = runPairMixed(ctx, t, newLoopback(t, false), "rc_pingpong", "read_bw")
	if srv.status != 1 || cli.status != 1 || !strings.Contains(srv.errOut, "perftest") {
		t.Errorf("read_bw client, rc_pingpong server: exits %d/%d\nserver: %s\nclient: %s", srv.status, cli.status, srv.errOut, cli.errOut)
	}
}

// runPairMixed runs a server of one tool and a client of another.
func runPairMixed(ctx context.Context, t *testing.T, l loopback, server, client string) (srv, cli procResult) {
	port := freePort(t)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		srv = runProc(ctx, append([]string{server, "-p", port, "--accept-timeout", "20s", "--timeout", "3s"}, l.server()...))
	}()
	go func() {
		defer wg.Done()
		cli = runProc(ctx, append(append([]string{client, "-p", port, "--connect-timeout", "20s", "--timeout", "3s"}, l.client()...), l.a))
	}()
	wg.Wait()
	return srv, cli
}
