//go:build interop

package interop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// cmCase is a connection-manager case: librdmacm's examples (rping,
// ucmatose, rdma_server/rdma_client, udaddy, mckey) and perftest's -R
// against softnic's, which connect through the RDMA CM (MADs on QP1) with
// no TCP exchange: the server cannot be seen listening, so the client is
// run again while the CM rejects it (nobody listens yet).
type cmCase struct {
	snServer, snClient   string   // softnic's commands for each role
	rxeServer, rxeClient string   // rxe's
	serverArgs           []string // both servers' arguments; "{S}" is the server's address
	clientArgs           []string // both clients'
	rxeArgs              []string // rxe's only (perftest: -d rxe0 -x GID)
	want                 *regexp.Regexp
}

// cmCases are the connection-manager cases, both roles each: IPv4, the
// bed's default MTU.
func cmCases(add func(tcase, ...role)) {
	for _, c := range []struct {
		tool, label string
		size        int
		cm          cmCase
	}{
		{"rping", "", 64, cmCase{snServer: "rping", snClient: "rping", rxeServer: "rping", rxeClient: "rping",
			serverArgs: []string{"-s", "-a", "{S}", "-v"}, clientArgs: []string{"-c", "-a", "{S}", "-C", "10", "-v", "-V"},
			want: regexp.MustCompile(`(?m)^(server )?ping data: rdma-ping-9: `)}},
		{"rping", "S5000", 5000, cmCase{snServer: "rping", snClient: "rping", rxeServer: "rping", rxeClient: "rping",
			// the server's buffer must hold the client's: -S on both
			serverArgs: []string{"-s", "-a", "{S}", "-S", "5000"}, clientArgs: []string{"-c", "-a", "{S}", "-C", "20", "-S", "5000", "-V"},
			want: regexp.MustCompile(`^`)}},
		{"ucmatose", "", 100, cmCase{snServer: "ucmatose", snClient: "ucmatose", rxeServer: "ucmatose", rxeClient: "ucmatose",
			serverArgs: []string{"-c", "2"}, clientArgs: []string{"-s", "{S}", "-c", "2"},
			want: regexp.MustCompile(`(?s)data transfers complete\n.*test complete\nreturn status 0\n`)}},
		{"rdma_server", "", 16, cmCase{snServer: "rdma_server", snClient: "rdma_client", rxeServer: "rdma_server", rxeClient: "rdma_client",
			clientArgs: []string{"-s", "{S}"}, want: regexp.MustCompile(`(?m)^rdma_(server|client): end 0$`)}},
		{"udaddy", "", 100, cmCase{snServer: "udaddy", snClient: "udaddy", rxeServer: "udaddy", rxeClient: "udaddy",
			clientArgs: []string{"-s", "{S}"},
			want:       regexp.MustCompile(`(?m)^data transfers complete\ntest complete\nreturn status 0$`)}},
		{"mckey", "", 100, cmCase{snServer: "mckey", snClient: "mckey", rxeServer: "mckey", rxeClient: "mckey",
			serverArgs: []string{"-m", "239.9.9.9", "-b", "{B}"}, clientArgs: []string{"-m", "239.9.9.9", "-s", "-b", "{B}"},
			want: regexp.MustCompile(`(?m)^data transfers complete\ntest complete\nreturn status 0$`)}},
		{"write_bw", "R", 65536, cmCase{snServer: "write_bw", snClient: "write_bw", rxeServer: "ib_write_bw", rxeClient: "ib_write_bw",
			serverArgs: []string{"-R", "-n", "100"}, clientArgs: []string{"-R", "-n", "100", "{S}"}, rxeArgs: []string{"-d", "rxe0", "-F"},
			want: perftestRow}},
		{"write_bw", "R-4qp", 4096, cmCase{snServer: "write_bw", snClient: "write_bw", rxeServer: "ib_write_bw", rxeClient: "ib_write_bw",
			serverArgs: []string{"-R", "-n", "100", "-s", "4096", "-q", "4"}, clientArgs: []string{"-R", "-n", "100", "-s", "4096", "-q", "4", "{S}"},
			rxeArgs: []string{"-d", "rxe0", "-F"}, want: perftestRow}},
		{"read_lat", "R", 2, cmCase{snServer: "read_lat", snClient: "read_lat", rxeServer: "ib_read_lat", rxeClient: "ib_read_lat",
			serverArgs: []string{"-R", "-n", "100"}, clientArgs: []string{"-R", "-n", "100", "{S}"}, rxeArgs: []string{"-d", "rxe0", "-F"},
			want: regexp.MustCompile(` rdma_cm QPs\s+: ON`)}},
		{"send_bw", "R", 4096, cmCase{snServer: "send_bw", snClient: "send_bw", rxeServer: "ib_send_bw", rxeClient: "ib_send_bw",
			serverArgs: []string{"-R", "-n", "100", "-s", "4096"}, clientArgs: []string{"-R", "-n", "100", "-s", "4096", "{S}"},
			rxeArgs: []string{"-d", "rxe0", "-F"}, want: regexp.MustCompile(` rdma_cm QPs\s+: ON`)}},
		{"send_bw", "R-ud", 1024, cmCase{snServer: "send_bw", snClient: "send_bw", rxeServer: "ib_send_bw", rxeClient: "ib_send_bw",
			serverArgs: []string{"-R", "-c", "UD", "-n", "100", "-s", "1024"}, clientArgs: []string{"-R", "-c", "UD", "-n", "100", "-s", "1024", "{S}"},
			rxeArgs: []string{"-d", "rxe0", "-F"}, want: regexp.MustCompile(` rdma_cm QPs\s+: ON`)}},
		{"send_lat", "R-ud", 512, cmCase{snServer: "send_lat", snClient: "send_lat", rxeServer: "ib_send_lat", rxeClient: "ib_send_lat",
			serverArgs: []string{"-R", "-c", "UD", "-n", "100", "-s", "512"}, clientArgs: []string{"-R", "-c", "UD", "-n", "100", "-s", "512", "{S}"},
			rxeArgs: []string{"-d", "rxe0", "-F"}, want: regexp.MustCompile(` rdma_cm QPs\s+: ON`)}},
	} {
		cm := c.cm
		add(tcase{tool: c.tool, kind: cmTool, mtu: 1024, size: c.size, iters: 1, label: c.label, cm: &cm}, roles...)
	}
}

// cmRejected matches what a client prints when the CM rejected it
// because its server does not listen yet.
var cmRejected = regexp.MustCompile(`REJECTED|UNREACHABLE|Unexpected CM event|rdma_connect: |error: 8|error 8`)

// args fills in the server's address ({S}) and the side's own ({B}).
func (m *cmCase) args(a []string, server, self netip.Addr) []string {
	out := make([]string, 0, len(a))
	for _, s := range a {
		s = strings.ReplaceAll(s, "{S}", server.String())
		out = append(out, strings.ReplaceAll(s, "{B}", self.String()))
	}
	return out
}

// runCMTool runs a connection-manager case: the server, then the client
// until it is not rejected, then the checks.
func (s *suite) runCMTool(ctx context.Context, c *tcase, dir string) error {
	m := c.cm
	env := &s.bed.env
	ns := env.NetNS
	host, guest := env.HostIP, env.GuestIP
	snOutFile := filepath.Join(dir, "softnic.out")
	var snCode, rxeCode int
	var rxeOut string
	const tries = 40
	switch c.role {
	case softnicServer:
		a := append([]string{m.snServer, "--addr=" + host.String()}, m.args(m.serverArgs, host, host)...)
		p, err := startInNetns(ctx, ns, snOutFile, s.softnic, a...)
		if err != nil {
			return err
		}
		defer p.stop()
		cmd := strings.Join(append(append([]string{m.rxeClient}, m.rxeArgs...), m.args(m.clientArgs, host, guest)...), " ")
		var log strings.Builder
		for try := 1; ; try++ {
			out, code, err := s.bed.guestExec(ctx, remaining(ctx), cmd)
			fmt.Fprintf(&log, "$ %s\n%s", cmd, out)
			if err != nil {
				writeFile(filepath.Join(dir, "rxe.out"), log.String())
				return fmt.Errorf("rxe client: %w", err)
			}
			rxeOut, rxeCode = out, code
			if code == 0 || !cmRejected.MatchString(out) || try == tries || p.exited() {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		writeFile(filepath.Join(dir, "rxe.out"), log.String())
		snCode = p.waitFor(ctx, rxeCode != 0)
	case softnicClient:
		cmd := strings.Join(append(append([]string{m.rxeServer}, m.rxeArgs...), m.args(m.serverArgs, guest, guest)...), " ")
		out, err := s.bed.run(ctx, "exec", s.bed.guest, "-t", secs(remaining(ctx)), "--bg", "--", cmd)
		if err != nil {
			return fmt.Errorf("rxe server: %w", err)
		}
		id := strings.TrimSpace(out)
		a := append([]string{m.snClient, "--addr=" + host.String()}, m.args(m.clientArgs, guest, host)...)
		var log strings.Builder
		for try := 1; ; try++ {
			p, err := startInNetns(ctx, ns, snOutFile, s.softnic, a...)
			if err != nil {
				s.bed.jobKill(context.Background(), id)
				return err
			}
			snCode = p.waitFor(ctx, false)
			b, _ := os.ReadFile(snOutFile)
			log.Write(b)
			if snCode == 0 || !cmRejected.Match(b) || try == tries || ctx.Err() != nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		writeFile(snOutFile, log.String())
		wait := remaining(ctx)
		if snCode != 0 {
			wait = min(wait, 10*time.Second)
		}
		out, code, err := s.bed.jobWait(ctx, id, wait)
		writeFile(filepath.Join(dir, "rxe.out"), "$ "+cmd+"\n"+out)
		if err != nil {
			return fmt.Errorf("rxe server: %w", err)
		}
		rxeOut, rxeCode = out, code
	}
	snOut := tail(snOutFile)
	if ctx.Err() != nil {
		return fmt.Errorf("%w\nsoftnic:\n%s\nrxe:\n%s", ctx.Err(), snOut, lastLines(rxeOut, 8))
	}
	var errs []error
	if snCode != 0 {
		errs = append(errs, fmt.Errorf("softnic %s exited %d:\n%s", c.tool, snCode, snOut))
	}
	if rxeCode != 0 {
		errs = append(errs, fmt.Errorf("rxe %s exited %d:\n%s", c.tool, rxeCode, lastLines(rxeOut, 8)))
	}
	if !m.want.MatchString(rxeOut) {
		errs = append(errs, fmt.Errorf("rxe %s printed no %q:\n%s", c.tool, m.want, lastLines(rxeOut, 8)))
	}
	return errors.Join(errs...)
}
