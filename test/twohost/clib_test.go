//go:build twohost

package twohost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The clib cases run Debian's own programs (rdma-core's ibv_rc_pingpong,
// perftest's ib_*) over softnic's libibverbs, unmodified, through softnic
// exec: against each other across the veth, and against softnic's Go
// look-alikes. The library is built by scripts/clib into the results (or
// taken from TWOHOST_CLIB, a directory holding libibverbs.so.1 and
// libsoftnic.so); a host without the program skips the case (MISSING).

// clibDev and clibGID are softnic's device and the GID index of its
// address in its libibverbs (rxe's GID table on an IPv4 netdev: 1).
const (
	clibDev = "softnic0"
	clibGID = "1"
)

// clibSide says what runs on one side of a clib case.
type clibSide int

const (
	goTool  clibSide = iota // softnic's look-alike (tcase.tool)
	libExec                 // the Debian program over softnic exec (tcase.program)
)

func (s clibSide) String() string {
	if s == libExec {
		return "exec"
	}
	return "go"
}

// clibCases adds the cases, once, at MTU 1500 over IPv4: each program
// over the library on both hosts, and a pingpong and a perftest with the
// library on one host and softnic's Go tool on the other, both ways.
func clibCases(add func(tcase)) {
	a := func(s ...string) []string { return s }
	both := func(program, label string, args []string) {
		add(tcase{kind: clibpair, tool: program, label: label, args: args, srv: libExec, cli: libExec})
	}
	both("ibv_rc_pingpong", "4KiB", a("-s", "4096", "-n", "500", "-c"))
	both("ibv_ud_pingpong", "1KiB", a("-s", "1024", "-n", "500", "-c"))
	both("ib_write_bw", "64KiB", a("-s", "65536", "-n", "1000"))
	both("ib_read_bw", "64KiB", a("-s", "65536", "-n", "500"))
	both("ib_send_bw", "64B", a("-s", "64", "-n", "1000"))
	both("ib_write_lat", "8B", a("-s", "8", "-n", "1000"))
	both("ib_atomic_bw", "FETCH_AND_ADD", a("-A", "FETCH_AND_ADD", "-n", "1000"))
	for _, sides := range [][2]clibSide{{libExec, goTool}, {goTool, libExec}} {
		add(tcase{kind: clibpair, tool: "ibv_rc_pingpong", label: "4KiB", args: a("-s", "4096", "-n", "500", "-c"),
			srv: sides[0], cli: sides[1]})
		add(tcase{kind: clibpair, tool: "ib_write_bw", label: "64KiB", args: a("-s", "65536", "-n", "1000"),
			srv: sides[0], cli: sides[1]})
	}
}

// goName is the Go look-alike of a Debian program: ibv_rc_pingpong's is
// rc_pingpong, ib_write_bw's write_bw.
func goName(program string) string {
	if n, ok := strings.CutPrefix(program, "ibv_"); ok {
		return n
	}
	return strings.TrimPrefix(program, "ib_")
}

// buildCLib returns the directory of softnic's libibverbs, building it
// into the results unless TWOHOST_CLIB names one.
func buildCLib(ctx context.Context, results string) (string, error) {
	if d := os.Getenv("TWOHOST_CLIB"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "libibverbs.so.1")); err != nil {
			return "", fmt.Errorf("TWOHOST_CLIB: %w", err)
		}
		return d, nil
	}
	script, err := filepath.Abs("../../scripts/clib")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(results, "lib")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // it may install gcc and libibverbs-dev
	defer cancel()
	if out, err := exec.CommandContext(ctx, script, "-o", dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("scripts/clib: %v\n%s", err, out)
	}
	return dir, nil
}

// clibMissing says why a clib case cannot run on this host, or "".
func clibMissing(c *tcase) string {
	if _, err := exec.LookPath(c.tool); err != nil {
		pkg := "perftest"
		if strings.HasPrefix(c.tool, "ibv_") {
			pkg = "ibverbs-utils"
		}
		return fmt.Sprintf("no %s on this host (apt-get install %s)", c.tool, pkg)
	}
	return ""
}

// clibArgs returns both sides' command lines (after the softnic binary):
// the Debian program over softnic exec, or softnic's look-alike with the
// same options, bounded as the other cases are.
func (s *suite) clibArgs(c *tcase, a, b string) (srv, cli []string) {
	port := strconv.Itoa(s.port)
	side := func(which clibSide, self, server string) []string {
		if which == goTool {
			r := append([]string{goName(c.tool)}, c.args...)
			r = append(r, "-p", port, "--timeout", "10s", "--addr", self)
			if server == "" {
				return append(r, "--accept-timeout", "30s")
			}
			return append(r, "--connect-timeout", "20s", server)
		}
		r := []string{"exec", "--addr", self, "--lib", s.clibDir, "--", c.tool, "-d", clibDev, "-p", port}
		if strings.HasPrefix(c.tool, "ibv_") {
			r = append(r, "-g", clibGID)
		} else {
			r = append(r, "-x", clibGID, "-F")
		}
		r = append(r, c.args...)
		if server != "" {
			r = append(r, server)
		}
		return r
	}
	return side(c.srv, a, ""), side(c.cli, b, a)
}

// waitTCPListen waits until a socket of the program's network namespace
// listens on this TCP port, as /proc/PID/net/tcp{,6} show it (state 0A),
// the program exits, or the limit passes: rdma-core's and perftest's
// clients try to connect once.
func waitTCPListen(ctx context.Context, p *proc, port int, limit time.Duration) {
	hex := fmt.Sprintf(":%04X", port)
	end := time.Now().Add(limit)
	for time.Now().Before(end) && ctx.Err() == nil && !p.exited() {
		for _, f := range []string{"tcp", "tcp6"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", p.cmd.Process.Pid, f))
			for _, l := range strings.Split(string(b), "\n") {
				// local_address is the second field (ADDR:PORT), st the fourth
				if fs := strings.Fields(l); len(fs) > 3 && strings.HasSuffix(fs[1], hex) && fs[3] == "0A" {
					return
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
