//go:build interop

package interop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The clib cases (tcase.clib) run the same Debian program on both sides:
// over rxe in the guest, and over softnic's libibverbs on the host end
// (softnic exec --addr=HOST --lib=DIR -- PROGRAM -d softnic0 ...), so that
// unmodified C programs over softnic meet rxe on the wire. The library is
// built by scripts/clib into the results (or taken from INTEROP_CLIB, a
// directory holding libibverbs.so.1 and libsoftnic.so); a host without the
// program, or where the library cannot be built, reports the cases as
// expected-missing with the reason.

// clibDev and clibGID are the device and the GID index of softnic's
// address in its libibverbs, whose GID table is rxe's on a netdev of one
// address: 0 a link-local GID, 1 the address (IPv4 or IPv6).
const (
	clibDev = "softnic0"
	clibGID = 1
)

// buildCLib returns the directory of softnic's libibverbs, building it
// into the results unless INTEROP_CLIB names one.
func buildCLib(ctx context.Context, results string) (string, error) {
	if d := os.Getenv("INTEROP_CLIB"); d != "" {
		if !exists(filepath.Join(d, "libibverbs.so.1")) {
			return "", fmt.Errorf("INTEROP_CLIB=%s holds no libibverbs.so.1", d)
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
	if out, err := command(ctx, script, "-o", dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("scripts/clib: %v\n%s", err, out)
	}
	return dir, nil
}

// program is the Debian program a case runs: ibv_TOOL or ib_TOOL.
func (c *tcase) program() string {
	if c.kind == pingpong {
		return "ibv_" + c.tool
	}
	return "ib_" + c.tool
}

// clibMissing says why a clib case cannot run here, or "".
func (s *suite) clibMissing(c *tcase) string {
	switch {
	case s.clibErr != nil:
		return "softnic's libibverbs: " + gist(s.clibErr.Error())
	case !s.tools["exec"]["lib"]:
		return "softnic has no exec command with --lib"
	}
	if _, err := exec.LookPath(c.program()); err != nil {
		pkg := "perftest"
		if c.kind == pingpong {
			pkg = "ibverbs-utils"
		}
		return fmt.Sprintf("no %s on the host (apt-get install %s)", c.program(), pkg)
	}
	return ""
}

// clibArgs is softnic's side of a clib case: softnic exec running the
// program with rxe's options on softnic's device. perftest gets the local
// ACK timeout softnic's own perftest tools get (softnicArgs).
func (c *tcase) clibArgs(lib string, addr netip.Addr, port int, server netip.Addr) []string {
	a := []string{"exec", "--addr=" + addr.String(), "--lib=" + lib, "--"}
	a = append(a, c.toolArgs(clibDev, clibGID, port, netip.Addr{})...)
	if c.kind == perftest {
		a = append(a, "-u", "18")
	}
	if server.IsValid() {
		a = append(a, server.String())
	}
	return a
}

// checkCLib checks what the program printed on softnic's side, as rxe's
// side is checked: no error, a pingpong's "N iters" line, perftest's
// result row from its client.
func checkCLib(c *tcase, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "softnic.out"))
	if err != nil {
		return err
	}
	out := string(b)
	var errs []error
	if m := badOutput.FindString(out); m != "" {
		errs = append(errs, fmt.Errorf("%s over softnic printed %q", c.program(), m))
	}
	switch {
	case c.kind == pingpong && !pingpongDone.MatchString(out):
		errs = append(errs, fmt.Errorf("%s over softnic printed no \"N iters in S seconds\" line", c.program()))
	case c.kind == perftest && c.role == softnicClient && !perftestRow.MatchString(out):
		errs = append(errs, fmt.Errorf("%s over softnic printed no result row (%d iterations)", c.program(), c.iters))
	}
	return errors.Join(errs...)
}
