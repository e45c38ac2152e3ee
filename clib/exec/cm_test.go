package exec

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The RDMA CM through softnic's librdmacm: Debian's rdmacm-utils and
// perftest's -R, unmodified, in pairs over softnic and against softnic's
// Go tools, each pair on loopback addresses of its own (127.0.0.20 and
// up, clear of the other suites'), so the pairs run in parallel, and the
// CM's tests with each other once the package's sequential tests are
// done.

// cmAddrs hands each pair its addresses.
var cmAddrs atomic.Int32

// cmPairAddrs returns two addresses no other pair of this run uses.
func cmPairAddrs() (netip.Addr, netip.Addr) {
	n := cmAddrs.Add(2)
	if n > 200 {
		panic("clib/exec: more CM pairs than loopback addresses from 127.0.0.20")
	}
	a := func(i int32) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(18 + i)}) }
	return a(n), a(n + 1)
}

// udpBound reports whether a UDP socket is bound to addr:port (the NIC of
// a program over softnic), in this network namespace's table of sockets.
func udpBound(addr netip.Addr, port int) bool {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return false
	}
	a := addr.As4()
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], port)
	for _, line := range strings.Split(string(b), "\n") {
		if fs := strings.Fields(line); len(fs) > 1 && fs[1] == want {
			return true
		}
	}
	return false
}

// cmProc is a CM program started in the background, its standard output
// kept apart (the programs' stdout is block-buffered and their stderr
// not: in one buffer their lines would cut each other).
type cmProc struct {
	*proc
	stdout syncBuffer
}

// cmStart starts argv over softnic; its proc's out has both outputs.
func cmStart(t *testing.T, ctx context.Context, opts Options, argv ...string) *cmProc {
	t.Helper()
	p := &cmProc{proc: &proc{cmd: command(ctx, opts, argv...), done: make(chan error, 1)}}
	p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(&p.out, &p.stdout), &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// waitNIC waits until the server s has its NIC at addr.
func waitNIC(t *testing.T, ctx context.Context, s *cmProc, addr netip.Addr) {
	t.Helper()
	for !udpBound(addr, 4791) {
		select {
		case err := <-s.done:
			t.Fatalf("%s ended before its NIC opened: %v\n%s", strings.Join(s.cmd.Args, " "), err, s.out.String())
		case <-ctx.Done():
			t.Fatalf("%s never opened its NIC at %v", strings.Join(s.cmd.Args, " "), addr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitOutput waits until s has printed text.
func waitOutput(t *testing.T, ctx context.Context, s *cmProc, text string) {
	t.Helper()
	for !strings.Contains(s.out.String(), text) {
		select {
		case err := <-s.done:
			t.Fatalf("%s ended before it printed %q: %v\n%s", strings.Join(s.cmd.Args, " "), text, err, s.out.String())
		case <-ctx.Done():
			t.Fatalf("%s never printed %q:\n%s", strings.Join(s.cmd.Args, " "), text, s.out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// notListening is how each client says that its server did not listen
// yet (REJ reason 8, a SIDR_REP of status 1): the server's NIC is up
// before it listens, and nothing else says when it does.
var notListening = regexp.MustCompile(`REJECTED|UNREACHABLE|Unexpected CM event|rdma_connect: Connection refused|rejected, reason 8`)

// cmPair is one pair: the server's command and NIC options, the client's,
// the server's NIC address, and a string the server prints once it is
// ready (for mckey, which joins instead of listening), "" to start the
// client once the server's NIC is up and again while it is refused.
type cmPair struct {
	server, client []string
	sopts, copts   Options
	saddr          netip.Addr
	ready          string
	keepServer     bool // the server runs until stopped (cmtime): stop it after the client
	// again, when set, makes the pair anew on fresh addresses, for a
	// client refused by a server that cannot take another client:
	// perftest's, whose client with -R connects its test's QPs as soon
	// as the out-of-band exchange's last message is in, and may come
	// before the server listens again (create_rdma_cm_connection; over
	// rxe too): its client then crashes (perftest 4.5 retries with IDs it
	// has destroyed) and its server waits for ever; and a client of
	// several connections (ucmatose -c 4), some refused before the server
	// listened and others taken after, whose exit then fails the server.
	again func() cmPair
}

// cmRestarts bounds how many times a pair is made anew.
const cmRestarts = 5

// run runs the pair and returns the server's and the client's standard
// outputs, failing t when either fails.
func (p cmPair) run(t *testing.T) (string, string) {
	t.Helper()
	for i := 0; ; i++ {
		sout, cout, ok := p.try(t, p.again != nil && i < cmRestarts)
		if ok {
			return sout, cout
		}
		t.Logf("the client came before the server listened: the pair again (%d)", i+1)
		p = p.again()
	}
}

// try runs the pair once; with restart, it reports false when the client
// was refused (the server stopped) instead of starting it again.
func (p cmPair) try(t *testing.T, restart bool) (string, string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := cmStart(t, ctx, p.sopts, p.server...)
	waitNIC(t, ctx, s, p.saddr)
	if p.ready != "" {
		waitOutput(t, ctx, s, p.ready)
	}
	var c *cmProc
	t0 := time.Now()
	for i := 1; ; i++ {
		c = cmStart(t, ctx, p.copts, p.client...)
		err := <-c.done
		if err == nil {
			break
		}
		if p.ready != "" || ctx.Err() != nil || !notListening.MatchString(c.out.String()) {
			t.Fatalf("%s (attempt %d, %v after the first): %v\n%s\nserver:\n%s", strings.Join(p.client, " "),
				i, time.Since(t0).Round(time.Millisecond), err, c.out.String(), s.out.String())
		}
		if restart {
			s.cmd.Process.Kill()
			<-s.done
			return "", "", false
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p.keepServer {
		s.cmd.Process.Signal(os.Interrupt)
		<-s.done
	} else {
		s.wait(t)
	}
	return s.stdout.String(), c.stdout.String(), true
}

// rpingData checks rping -v's lines: n pings of size bytes, each with
// its data (rping.c: "rdma-ping-%d: " then the pattern that starts one
// character further each ping), after prefix.
func rpingData(out, prefix string, n, size int) error {
	for i := range n {
		if !strings.Contains(out, prefix+rpingLine(i, size)+"\n") {
			return fmt.Errorf("no line for ping %d:\n%s", i, out)
		}
	}
	return nil
}

// rpingLine is what rping -v prints for ping i of a size-byte buffer
// after "ping data: " (rping.c rping_test_client: "rdma-ping-%d: " then
// printable ASCII from 'A'+i, each next character one more, 'z' followed
// by 'A', to the buffer's last byte, which is the string's NUL).
func rpingLine(i, size int) string {
	b := []byte(fmt.Sprintf("rdma-ping-%d: ", i))
	c := byte(65 + i%58)
	for len(b) < size-1 {
		b = append(b, c)
		if c++; c > 122 {
			c = 65
		}
	}
	return string(b[:max(size-1, 0)])
}

// TestCMPairs runs Debian's CM programs in pairs, both over softnic's
// libraries, checking the data where the program prints it.
func TestCMPairs(t *testing.T) {
	needLibs(t)
	t.Parallel()
	tests := []struct {
		name           string
		pkg            string
		server, client string // %s: the server's address, %c the client's
		ready          string
		keepServer     bool
		check          func(sout, cout string) error
	}{
		{name: "rping", pkg: "rdmacm-utils",
			server: "rping -s -a %s -v -V -C 100 -S 200", client: "rping -c -a %s -v -V -C 100 -S 200",
			check: func(sout, cout string) error {
				if err := rpingData(sout, "server ping data: ", 100, 200); err != nil {
					return err
				}
				return rpingData(cout, "ping data: ", 100, 200)
			}},
		{name: "rping -I", pkg: "rdmacm-utils",
			server: "rping -s -a %s -C 10", client: "rping -c -a %s -I %c -v -C 10",
			check: func(sout, cout string) error { return rpingData(cout, "ping data: ", 10, 64) }},
		{name: "ucmatose", pkg: "rdmacm-utils",
			server: "ucmatose -b %s -c 4 -C 20", client: "ucmatose -s %s -c 4 -C 20", check: cmatoseDone},
		{name: "ucmatose -m", pkg: "rdmacm-utils",
			server: "ucmatose -b %s -m -c 2 -C 10", client: "ucmatose -s %s -m -c 2 -C 10",
			check: func(sout, cout string) error {
				if !strings.Contains(sout, "migrating to new event channel") {
					return fmt.Errorf("the server did not migrate:\n%s", sout)
				}
				return cmatoseDone(sout, cout)
			}},
		{name: "ucmatose -S 4096 -t", pkg: "rdmacm-utils",
			server: "ucmatose -b %s -S 4096 -C 5", client: "ucmatose -s %s -S 4096 -t 0x20 -C 5", check: cmatoseDone},
		{name: "udaddy", pkg: "rdmacm-utils",
			server: "udaddy -b %s -c 2 -C 10", client: "udaddy -s %s -c 2 -C 10", check: cmatoseDone},
		{name: "mckey", pkg: "rdmacm-utils",
			server: "stdbuf -oL mckey -m 239.20.0.1 -b %s -C 20", client: "mckey -m 239.20.0.1 -b %c -s -C 20",
			ready: "mckey: joined", check: cmatoseDone},
		{name: "rdma_server", pkg: "rdmacm-utils",
			server: "rdma_server -s %s", client: "rdma_client -s %s",
			check: func(sout, cout string) error {
				if !strings.Contains(sout, "rdma_server: end 0") || !strings.Contains(cout, "rdma_client: end 0") {
					return fmt.Errorf("server:\n%s\nclient:\n%s", sout, cout)
				}
				return nil
			}},
		{name: "rdma_xserver", pkg: "rdmacm-utils",
			server: "rdma_xserver", client: "rdma_xclient -s %s", check: xDone},
		{name: "rdma_xserver -c x", pkg: "rdmacm-utils",
			server: "rdma_xserver -c x", client: "rdma_xclient -c x -s %s", check: xDone},
		{name: "cmtime", pkg: "rdmacm-utils", keepServer: true,
			server: "cmtime -b %s", client: "cmtime -s %s -c 20",
			check: func(sout, cout string) error {
				for _, step := range []string{"resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"} {
					if !regexp.MustCompile(`(?m)^` + step + ` *:`).MatchString(cout) {
						return fmt.Errorf("no %q line:\n%s", step, cout)
					}
				}
				return nil
			}},
	}
	for _, prog := range []string{"ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat", "ib_write_lat", "ib_read_lat"} {
		tests = append(tests, struct {
			name, pkg, server, client, ready string
			keepServer                       bool
			check                            func(sout, cout string) error
		}{name: prog + " -R", pkg: "perftest", server: prog + " -R -n 200 -x 1", client: prog + " -R -n 200 -x 1 %s", check: perftestCM})
	}
	tests = append(tests, struct {
		name, pkg, server, client, ready string
		keepServer                       bool
		check                            func(sout, cout string) error
	}{name: "ib_send_bw -R -c UD", pkg: "perftest", server: "ib_send_bw -R -c UD -n 200", client: "ib_send_bw -R -c UD -n 200 %s", check: perftestCM})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := func(s string, a, b netip.Addr) []string {
				f := strings.Fields(s)
				for i := range f {
					f[i] = strings.ReplaceAll(strings.ReplaceAll(f[i], "%s", a.String()), "%c", b.String())
				}
				return f
			}
			needTools(t, tc.pkg, strings.Fields(strings.TrimPrefix(tc.server, "stdbuf -oL "))[0])
			var mk func() cmPair
			mk = func() cmPair {
				sa, ca := cmPairAddrs()
				p := cmPair{server: args(tc.server, sa, ca), client: args(tc.client, sa, ca),
					sopts: Options{Addr: sa}, copts: Options{Addr: ca}, saddr: sa, ready: tc.ready, keepServer: tc.keepServer}
				p.again = mk
				return p
			}
			sout, cout := mk().run(t)
			if err := tc.check(sout, cout); err != nil {
				t.Error(err)
			}
		})
	}
}

// xDone checks the end rdma_xserver.c and rdma_xclient.c print when the
// client's SEND (to the server's XRC SRQ, whose number came in the REP's
// private data, with -c x) completed on both sides.
func xDone(sout, cout string) error {
	if !strings.Contains(sout, "rdma_xserver: end 0") || !strings.Contains(cout, "rdma_xclient: end 0") {
		return fmt.Errorf("server:\n%s\nclient:\n%s", sout, cout)
	}
	return nil
}

// cmatoseDone checks the end that cmatose.c, udaddy.c and mckey.c print
// when every transfer completed.
func cmatoseDone(sout, cout string) error {
	for _, out := range []string{sout, cout} {
		if !strings.Contains(out, "test complete") || !strings.Contains(out, "return status 0") {
			return fmt.Errorf("server:\n%s\nclient:\n%s", sout, cout)
		}
	}
	return nil
}

// perftestCM checks that the client connected through the CM and reported
// its result.
func perftestCM(sout, cout string) error {
	if !strings.Contains(cout, "rdma_cm QPs\t : ON") || len(perftestResults(cout)) != 1 {
		return fmt.Errorf("client:\n%s", cout)
	}
	return nil
}

// TestCMWithGoTools pairs Debian's CM programs over softnic with
// softnic's Go look-alikes, in both roles.
func TestCMWithGoTools(t *testing.T) {
	needLibs(t)
	t.Parallel()
	tool := softnicTool(t)
	for _, tc := range []struct {
		name           string
		c              string // the C program's name
		server, client string // %s the server's address, %c the client's
		ready          string
		check          func(sout, cout string) error
	}{
		{name: "rping", c: "rping",
			server: "rping -s -a %s -v -V -C 50", client: "rping -c -a %s -I %c -v -V -C 50",
			check: func(sout, cout string) error {
				if err := rpingData(sout, "server ping data: ", 50, 64); err != nil {
					return err
				}
				return rpingData(cout, "ping data: ", 50, 64)
			}},
		{name: "ucmatose", c: "ucmatose",
			server: "ucmatose -b %s -c 2 -C 10", client: "ucmatose -s %s -b %c -c 2 -C 10", check: cmatoseDone},
		{name: "udaddy", c: "udaddy",
			server: "udaddy -b %s -c 2 -C 10", client: "udaddy -s %s -b %c -c 2 -C 10", check: cmatoseDone},
		{name: "mckey", c: "mckey",
			server: "stdbuf -oL mckey -m 239.20.0.2 -b %s -C 10", client: "mckey -m 239.20.0.2 -b %c -s -C 10",
			ready: "mckey: joined", check: cmatoseDone},
		{name: "rdma_server", c: "rdma_server",
			server: "rdma_server -s %s", client: "rdma_client -s %s",
			check: func(sout, cout string) error {
				if !strings.Contains(sout, "rdma_server: end 0") || !strings.Contains(cout, "rdma_client: end 0") {
					return fmt.Errorf("server:\n%s\nclient:\n%s", sout, cout)
				}
				return nil
			}},
		{name: "ib_write_bw -R", c: "ib_write_bw",
			server: "ib_write_bw -R -n 200 -x 1", client: "ib_write_bw -R -n 200 -x 1 %s", check: perftestCM},
		{name: "ib_send_lat -R", c: "ib_send_lat",
			server: "ib_send_lat -R -n 200 -x 1", client: "ib_send_lat -R -n 200 -x 1 %s", check: perftestCM},
		{name: "ib_read_bw -R", c: "ib_read_bw",
			server: "ib_read_bw -R -n 200 -x 1", client: "ib_read_bw -R -n 200 -x 1 %s", check: perftestCM},
	} {
		for _, cServer := range []bool{true, false} {
			name := tc.name + " C server"
			if !cServer {
				name = tc.name + " Go server"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				perftest := strings.HasPrefix(tc.c, "ib_")
				if perftest {
					needTools(t, "perftest", tc.c)
				} else {
					needTools(t, "rdmacm-utils", tc.c)
				}
				var mk func() cmPair
				mk = func() cmPair {
					sa, ca := cmPairAddrs()
					p := cmPair{server: goToolArgs(tool, tc.server, sa, ca, !cServer), client: goToolArgs(tool, tc.client, sa, ca, cServer),
						saddr: sa, ready: tc.ready}
					if cServer {
						p.sopts = Options{Addr: sa}
					} else {
						p.copts = Options{Addr: ca}
					}
					if perftest {
						p.again = mk
					}
					return p
				}
				sout, cout := mk().run(t)
				if err := tc.check(sout, cout); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// goToolArgs makes a command line of a pair from s (%s the server's
// address, %c the client's): the C program's over softnic exec, or with
// goTool softnic's look-alike's, whose NIC address is --addr (the C
// programs' NIC is SOFTNIC_ADDR): rdma_server's -s names the NIC's
// address there, and perftest's server, which binds no
// address, takes the server's and its client the client's (rdma_client
// binds no address either).
func goToolArgs(tool, s string, sa, ca netip.Addr, goTool bool) []string {
	f := strings.Fields(strings.ReplaceAll(strings.ReplaceAll(s, "%s", sa.String()), "%c", ca.String()))
	if !goTool {
		return f
	}
	if f[0] == "stdbuf" {
		f = f[2:] // softnic's tools write their lines as they go
	}
	switch {
	case f[0] == "rdma_server":
		for i := range f {
			if f[i] == "-s" {
				f[i] = "--addr"
			}
		}
	case f[0] == "rdma_client":
		f = append(f, "--addr", ca.String())
	case strings.HasPrefix(f[0], "ib_"):
		f[0] = strings.TrimPrefix(f[0], "ib_")
		addr := sa
		if f[len(f)-1] == sa.String() {
			addr = ca
		}
		f = append([]string{f[0], "--addr", addr.String()}, f[1:]...)
	}
	return append([]string{tool}, f...)
}

// TestCMPeerDies: a connected rping whose peer is killed (SIGKILL, no
// chance to disconnect) ends at once with the peer's DREQ, which the
// killed process's watcher sends as the kernel's rdma_cm sends it for a
// process over rxe: the survivor in either role sees DISCONNECTED and
// exits as rping does on a disconnect, where without it a server waiting
// for its client's next SEND would wait for ever. The server exits 0;
// the client exits 0 or, when the disconnect wakes it in the middle of a
// ping (its DISCONNECTED overwritten by the next ping's RDMA_READ_ADV,
// rping.c rping_test_client), fails with "wait for RDMA_WRITE_ADV" as it
// does over rxe (a CI run met it). A pair started again at once on the
// same addresses runs.
func TestCMPeerDies(t *testing.T) {
	needLibs(t)
	t.Parallel()
	needTools(t, "rdmacm-utils", "rping")
	for _, killServer := range []bool{false, true} {
		name := "client killed"
		if killServer {
			name = "server killed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sa, ca := cmPairAddrs()
			s := cmStart(t, ctx, Options{Addr: sa}, "rping", "-s", "-a", sa.String(), "-v", "-C", "100000000")
			waitNIC(t, ctx, s, sa)
			var c *cmProc
			for i := 0; ; i++ {
				c = cmStart(t, ctx, Options{Addr: ca}, "rping", "-c", "-a", sa.String(), "-v", "-C", "100000000")
				// rping's stdout is block-buffered: the server's
				// first lines show once it has a buffer's worth.
				if !waitPings(ctx, c, s) {
					if i == 100 || !notListening.MatchString(c.out.String()) {
						t.Fatalf("no pings:\nclient:\n%s\nserver:\n%s", c.out.String(), s.out.String())
					}
					continue
				}
				break
			}
			victim, peer := c, s
			if killServer {
				victim, peer = s, c
			}
			if err := victim.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-victim.done
			t0 := time.Now()
			select {
			case err := <-peer.done:
				took := time.Since(t0)
				t.Logf("the peer ended %v after the kill: %v", took.Round(time.Millisecond), err)
				out := peer.out.String()
				midPing := killServer && err != nil && strings.Contains(out, "wait for RDMA_WRITE_ADV")
				if err != nil && !midPing || !strings.Contains(out, "DISCONNECT EVENT") {
					t.Errorf("the peer: %v, want exit 0 on DISCONNECTED (the client: or rping's failure mid-ping)\n%s", err, out)
				}
			case <-ctx.Done():
				t.Fatalf("the peer never ended:\n%s", peer.out.String())
			}
			// The killed program started again at once at its address
			// finds its UDP port free: the watcher holds it only while
			// it sends.
			argv := func(role string) []string { return []string{"rping", role, "-a", sa.String(), "-C", "1"} }
			p := cmPair{server: argv("-s"), client: argv("-c"), sopts: Options{Addr: sa}, copts: Options{Addr: ca}, saddr: sa}
			p.run(t)
		})
	}
}

// waitPings waits until both rpings have exchanged pings (the client's
// output grows past its first buffer), and reports false when the client
// ended first (refused: the server did not listen yet).
func waitPings(ctx context.Context, c, s *cmProc) bool {
	for len(c.out.String()) < 8192 {
		select {
		case <-c.done:
			return false
		case <-s.done:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}

// TestCMNobodyListens: a client that connects where nothing listens ends
// as over rxe, or sooner. Where a NIC is but no listener, its CM rejects
// the REQ (reason 8, invalid service ID, cm.c cm_req_handler) and rping
// ends at once. Where no NIC is, the host answers the REQ with an ICMP
// port unreachable, and softnic's CM ends the connect at once with
// UNREACHABLE, ECONNREFUSED (verbs/cm: Connect ends at a port
// unreachable), where the kernel's, which never sees it, sends 16 REQs,
// each waiting 2 × 2^(18-8) + 2^(20-8) ms (cm_convert_to_ms of the path's
// packet life time and the response timeout), about 98 s, and ends with
// ETIMEDOUT; a host that answers nothing gets the same from softnic.
func TestCMNobodyListens(t *testing.T) {
	needLibs(t)
	t.Parallel()
	needTools(t, "rdmacm-utils", "rping")
	t.Run("rejected", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		sa, ca := cmPairAddrs()
		// A NIC at sa listening on another port.
		s := cmStart(t, ctx, Options{Addr: sa}, "rping", "-s", "-a", sa.String(), "-p", "9999")
		defer func() {
			s.cmd.Process.Kill()
			<-s.done
		}()
		waitNIC(t, ctx, s, sa)
		t0 := time.Now()
		c := cmStart(t, ctx, Options{Addr: ca}, "rping", "-c", "-a", sa.String(), "-C", "1")
		err := <-c.done
		t.Logf("rping ended after %v: %v", time.Since(t0).Round(time.Millisecond), err)
		if code := c.cmd.ProcessState.ExitCode(); code != 255 || !strings.Contains(c.out.String(), "RDMA_CM_EVENT_REJECTED, error 8") {
			t.Errorf("rping: exit %d, want 255 on RDMA_CM_EVENT_REJECTED, error 8\n%s", code, c.out.String())
		}
	})
	t.Run("no NIC", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
		defer cancel()
		nobody, ca := cmPairAddrs()
		t0 := time.Now()
		c := cmStart(t, ctx, Options{Addr: ca}, "rping", "-c", "-a", nobody.String(), "-C", "1")
		err := <-c.done
		took := time.Since(t0)
		t.Logf("rping ended after %v: %v", took.Round(time.Millisecond), err)
		out := c.out.String()
		refused := strings.Contains(out, "RDMA_CM_EVENT_UNREACHABLE, error -111")
		if code := c.cmd.ProcessState.ExitCode(); code != 255 ||
			!refused && !strings.Contains(out, "RDMA_CM_EVENT_UNREACHABLE, error -110") {
			t.Errorf("rping: exit %d, want 255 on RDMA_CM_EVENT_UNREACHABLE, error -111 (ECONNREFUSED) or -110 (ETIMEDOUT)\n%s", code, out)
		}
		if took > 110*time.Second || refused && took > 10*time.Second {
			t.Errorf("rping took %v, over rxe about 98 s, and at once when refused", took)
		}
	})
}

// TestCMAddrErrorSaysWhy: an address softnic cannot resolve ends as in
// librdmacm, with RDMA_CM_EVENT_ADDR_ERROR and a negative errno, and with
// SOFTNIC_DEBUG=1 (softnic exec --debug) the library says why on stderr:
// here an IPv6 destination from a NIC with only an IPv4 address.
func TestCMAddrErrorSaysWhy(t *testing.T) {
	needLibs(t)
	t.Parallel()
	needTools(t, "rdmacm-utils", "rping")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, ca := cmPairAddrs()
	c := cmStart(t, ctx, Options{Addr: ca, Debug: true}, "rping", "-c", "-a", "fd00::1", "-C", "1")
	<-c.done
	out := c.out.String()
	if code := c.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(out, "RDMA_CM_EVENT_ADDR_ERROR") {
		t.Errorf("rping: exit %d, want an RDMA_CM_EVENT_ADDR_ERROR\n%s", code, out)
	}
	if want := "softnic: RDMA_CM_EVENT_ADDR_ERROR, status -101: cm: no device in the subnet of fd00::1"; !strings.Contains(out, want) {
		t.Errorf("rping's stderr lacks %q:\n%s", want, out)
	}
}

// TestCMLibrary checks what softnic exec puts in front of a CM program:
// librdmacm.so.1 beside libibverbs.so.1, with the symbol versions of
// rdma-core 44's, which every CM program of Debian's links.
func TestCMLibrary(t *testing.T) {
	needLibs(t)
	for _, f := range []string{"librdmacm.so.1", "softnic-cm-reaper"} {
		if _, err := os.Stat(libDir + "/" + f); err != nil {
			t.Errorf("scripts/clib did not build %s: %v", f, err)
		}
	}
	out := run(t, Options{}, "sh", "-c", "ldd $(command -v rping || echo /bin/true) | grep rdmacm || true")
	if strings.Contains(out, "librdmacm") && !strings.Contains(out, libDir) {
		t.Errorf("rping does not load softnic's librdmacm:\n%s", out)
	}
}
