// Package demo is the logic of "softnic demo": it runs two softnic
// processes, each with its own NIC, and has them talk RoCEv2 over UDP
// with the rdma-core and perftest look-alikes (an RC ping-pong, an RDMA
// WRITE bandwidth run, READs and atomics), every run checking its data,
// and sums up what happened in a few lines.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/internal/tooljson"
)

// Config says how to run the demo.
type Config struct {
	// Exe is the softnic binary to run (the running one).
	Exe string
	// A and B are the two NICs' addresses: the server's and the client's.
	A, B netip.Addr
	// UDPPort is the RoCEv2 port both NICs use (0: 4791).
	UDPPort uint16
	// Verbose copies every tool's output to the demo's.
	Verbose bool
	// Timeout bounds each run (0: one minute).
	Timeout time.Duration
}

// Step is one run of the demo.
type Step struct {
	Tool    string
	Args    []string
	Summary func(cli, srv []byte) (string, error)
}

// Steps are the demo's runs.
var Steps = []Step{
	{"rc_pingpong", []string{"-n", "200", "-s", "4096", "-c"}, pingpongSummary},
	{"write_bw", []string{"-n", "2000", "-s", "65536", "--check", "--json"}, bwSummary("RDMA WRITEs of 64 KiB")},
	{"read_bw", []string{"-n", "1000", "-s", "16384", "--check", "--json"}, bwSummary("RDMA READs of 16 KiB")},
	{"atomic_bw", []string{"-n", "2000", "-A", "FETCH_AND_ADD", "--check", "--json"}, bwSummary("atomic FETCH_AND_ADDs")},
}

// ErrFailed is returned (wrapped) when a step failed.
var ErrFailed = errors.New("the demo failed")

// Run runs the steps and prints their summaries to out.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	if cfg.UDPPort == 0 {
		cfg.UDPPort = 4791
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	fmt.Fprintf(out, "softnic demo: two softnic processes with a NIC each, at %v and %v, talking RoCEv2 over UDP port %d\n",
		cfg.A, cfg.B, cfg.UDPPort)
	failed := 0
	for _, st := range Steps {
		line, err := runStep(ctx, cfg, st, out)
		if err != nil {
			failed++
			fmt.Fprintf(out, "  %-12s FAILED: %v\n", st.Tool, err)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		fmt.Fprintf(out, "  %-12s %s\n", st.Tool, line)
	}
	if failed > 0 {
		fmt.Fprintf(out, "%d of %d runs failed.\n", failed, len(Steps))
		return fmt.Errorf("%w: %d of %d runs", ErrFailed, failed, len(Steps))
	}
	fmt.Fprintf(out, "All %d runs passed and every byte checked out.\n", len(Steps))
	return nil
}

// freePort returns a TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// runStep runs a server at A and a client at B and summarizes them.
func runStep(ctx context.Context, cfg Config, st Step, out io.Writer) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	common := func(addr netip.Addr) []string {
		return append(append([]string{st.Tool}, st.Args...), "-p", strconv.Itoa(port), "--addr", addr.String(),
			"--port-udp", strconv.Itoa(int(cfg.UDPPort)), "--timeout", "30s")
	}
	host := cfg.A.String()
	srvCmd := exec.CommandContext(ctx, cfg.Exe, append(common(cfg.A), "--accept-timeout", "30s")...)
	cliCmd := exec.CommandContext(ctx, cfg.Exe, append(common(cfg.B), "--connect-timeout", "20s", host)...)
	var srvOut, srvErr, cliOut, cliErr bytes.Buffer
	srvCmd.Stdout, srvCmd.Stderr = &srvOut, &srvErr
	cliCmd.Stdout, cliCmd.Stderr = &cliOut, &cliErr
	if err := srvCmd.Start(); err != nil {
		return "", err
	}
	cerr := cliCmd.Run()
	if cerr != nil {
		// A client that never connected leaves the server waiting.
		if cliOut.Len() == 0 {
			srvCmd.Process.Kill()
		}
	}
	serr := srvCmd.Wait()
	if cfg.Verbose {
		fmt.Fprintf(out, "---- %s server (%v):\n%s%s---- %s client (%v):\n%s%s", st.Tool, cfg.A, srvOut.String(), srvErr.String(),
			st.Tool, cfg.B, cliOut.String(), cliErr.String())
	}
	switch {
	case cerr != nil:
		return "", fmt.Errorf("client: %v: %s", cerr, lastLine(cliErr.String()))
	case serr != nil:
		return "", fmt.Errorf("server: %v: %s", serr, lastLine(srvErr.String()))
	}
	return st.Summary(cliOut.Bytes(), srvOut.Bytes())
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

var (
	ppBytes = regexp.MustCompile(`(?m)^(\d+) bytes in ([\d.]+) seconds = ([\d.]+|inf) Mbit/sec$`)
	ppIters = regexp.MustCompile(`(?m)^(\d+) iters in [\d.]+ seconds = ([\d.]+) usec/iter$`)
)

// pingpongSummary reads rc_pingpong's result lines; the server checked
// every byte (-c), or it would have failed.
func pingpongSummary(cli, srv []byte) (string, error) {
	b, i := ppBytes.FindSubmatch(cli), ppIters.FindSubmatch(cli)
	if b == nil || i == nil {
		return "", fmt.Errorf("unexpected client output %q", cli)
	}
	if bytes.Contains(srv, []byte("invalid data")) {
		return "", errors.New("the server found invalid data")
	}
	return fmt.Sprintf("%s SEND ping-pongs of 4 KiB: %s bytes in %s s = %s Mbit/s, %s µs per round trip; every byte checked",
		i[1], b[1], b[2], b[3], i[2]), nil
}

// bwSummary reads a perftest look-alike's --json result, strictly: its
// standard output must be one perftest.Result and nothing else.
func bwSummary(what string) func(cli, srv []byte) (string, error) {
	return func(cli, srv []byte) (string, error) {
		var c, s perftest.Result
		if err := tooljson.Decode(cli, &c); err != nil {
			return "", fmt.Errorf("client output: %v", err)
		}
		if err := tooljson.Decode(srv, &s); err != nil {
			return "", fmt.Errorf("server output: %v", err)
		}
		if len(c.BW) == 0 {
			return "", errors.New("no result")
		}
		if !c.Checked && !s.Checked {
			return "", errors.New("nothing was checked")
		}
		r := c.BW[len(c.BW)-1]
		return fmt.Sprintf("%d %s: %.2f MB/s average, %.2f MB/s peak, %.4f million/s; every byte checked",
			r.Iters, what, r.BWAvg, r.BWPeak, r.MsgRate), nil
	}
}
