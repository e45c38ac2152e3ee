package exec

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Debian's perftest, unmodified, pairs over softnic with its common
// options. perftest checks no data; the tests check that both sides
// finish and report a result for every message size.
func TestPerftestPairs(t *testing.T) {
	needLibs(t)
	for _, tc := range []struct {
		prog, args string
		sizes      int // result lines (-a: 2 B to 8 MiB)
	}{
		{"ib_write_bw", "-n 200", 1},
		{"ib_write_bw", "-a -n 5", 23},
		{"ib_write_bw", "-b -n 200", 1},
		{"ib_write_bw", "-q 4 -n 100", 1},
		{"ib_write_bw", "-D 2", 1}, // a SIGALRM ends the run
		{"ib_write_bw", "--report_gbits -x 1 -n 200", 1},
		{"ib_write_bw", "-x 0 -n 200", 1}, // the link-local GID
		{"ib_write_bw", "-c UC -n 200", 1},
		{"ib_read_bw", "-n 200", 1},
		{"ib_read_bw", "-q 2 -o 4 -n 100", 1},
		{"ib_send_bw", "-n 200", 1},
		{"ib_send_bw", "-c UD -n 200", 1},
		{"ib_send_bw", "-e -n 200", 1}, // completion channel fds
		{"ib_send_bw", "--use-srq -n 200", 1},
		{"ib_atomic_bw", "-n 200", 1},
		{"ib_atomic_bw", "-A CMP_AND_SWAP -n 200", 1},
		{"ib_write_lat", "-n 200", 1},
		{"ib_write_lat", "-a -n 5", 23},
		{"ib_read_lat", "-n 200", 1},
		{"ib_send_lat", "-n 200", 1},
		{"ib_send_lat", "-c UD -n 200", 1},
		{"ib_atomic_lat", "-n 200", 1},
	} {
		t.Run(tc.prog+" "+tc.args, func(t *testing.T) {
			needTools(t, "perftest", tc.prog)
			port := freePort(t)
			args := append(strings.Fields(tc.args), "-p", strconv.Itoa(port))
			server := append([]string{tc.prog}, args...)
			client := append(append([]string{tc.prog}, args...), testAddr(0).String())
			_, cout := pair(t, port, server, client, Options{Addr: testAddr(0)}, Options{Addr: testAddr(1)})
			if n := len(perftestResults(cout)); n != tc.sizes {
				t.Errorf("%d result lines, want %d:\n%s", n, tc.sizes, cout)
			}
		})
	}
}

// perftestResults returns the result lines of a perftest report: those
// after the "#bytes" header that start with a message size.
func perftestResults(out string) []string {
	var res []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "#bytes":
			in = true
		case in && len(f) > 2:
			if _, err := strconv.Atoi(f[0]); err == nil {
				res = append(res, line)
			}
		}
	}
	return res
}

// perftest over softnic pairs with softnic's Go look-alikes (write_bw,
// ...) in both roles.
func TestPerftestWithGoTools(t *testing.T) {
	needLibs(t)
	tool := softnicTool(t)
	for _, test := range []string{"write_bw", "read_bw", "send_bw", "atomic_bw", "write_lat", "read_lat", "send_lat", "atomic_lat"} {
		prog := "ib_" + test
		needTools(t, "perftest", prog)
		for _, cServer := range []bool{true, false} {
			name := prog + " server"
			if !cServer {
				name = test + " server"
			}
			t.Run(name, func(t *testing.T) {
				port := strconv.Itoa(freePort(t))
				c := []string{prog, "-n", "200", "-x", "1", "-p", port}
				g := []string{tool, test, "-n", "200", "-p", port}
				var cout string
				if cServer {
					g = append(g, "--addr", testAddr(1).String(), testAddr(0).String())
					_, cout = pair(t, mustAtoi(port), c, g, Options{Addr: testAddr(0)}, Options{})
				} else {
					g = append(g, "--addr", testAddr(0).String())
					c = append(c, testAddr(0).String())
					_, cout = pair(t, mustAtoi(port), g, c, Options{}, Options{Addr: testAddr(1)})
				}
				if n := len(perftestResults(cout)); n != 1 {
					t.Errorf("%d result lines, want 1:\n%s", n, cout)
				}
			})
		}
	}
}

// ib_write_bw --run_infinitely prints a result every second from its
// SIGALRM handler, installed with plain signal(): each handler runs while
// the program's thread may be inside the engine (Go), and must not break
// it. The pair runs until stopped with SIGINT, which kills both as it
// does without softnic (perftest installs no SIGINT handler).
func TestPerftestRunInfinitely(t *testing.T) {
	needLibs(t)
	needTools(t, "perftest", "ib_write_bw")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	port := freePort(t)
	args := []string{"ib_write_bw", "--run_infinitely", "-D", "1", "-p", strconv.Itoa(port)}
	s := start(t, ctx, Options{Addr: testAddr(0)}, args...)
	waitListening(t, ctx, s, port)
	c := start(t, ctx, Options{Addr: testAddr(1)}, append(args, testAddr(0).String())...)
	for len(perftestResults(c.out.String())) < 4 {
		select {
		case err := <-c.done:
			t.Fatalf("the client ended: %v\n%s", err, c.out.String())
		case err := <-s.done:
			t.Fatalf("the server ended: %v\n%s", err, s.out.String())
		case <-ctx.Done():
			t.Fatalf("fewer than 4 results:\n%s", c.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The server first: the client never reads its socket while it
	// runs, but a server whose client is gone ends on its own.
	for _, p := range []*proc{s, c} {
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*proc{s, c} {
		err := <-p.done
		ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("%s: %v, want killed by SIGINT\n%s", strings.Join(p.cmd.Args, " "), err, p.out.String())
		}
	}
}
