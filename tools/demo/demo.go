// Package demo is the logic of "softnic demo": it runs two softnic
// processes, each with its own NIC, and has them talk RoCEv2 over UDP
// with the rdma-core and perftest look-alikes (an RC ping-pong, an RDMA
// WRITE bandwidth run, READs and atomics), every run checking its data,
// and sums up what happened in a few lines.
//
// By default one demo starts both processes of every run on this host.
// Across two hosts, each host runs one half: the servers (RoleServer, on
// the host at A) or the clients (RoleClient, on the host at B, which
// connects to A). The halves run the steps in the same order, step i on
// TCP port Port+i, so either half may start first.
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

	"github.com/softnic/softnic/tools/perftest"
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/tools/toolnic"
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
	// Timeout bounds each run (0: one minute; a split demo's server half
	// waits this long for each step's client too).
	Timeout time.Duration
	// Role says which processes this demo runs: both (the default), or
	// one half of a demo across two hosts.
	Role Role
	// Port is the tools' TCP port of the first step; step i uses Port+i.
	// 0 means a free port per step when the demo runs both halves, and
	// DefaultPort otherwise (both halves must agree).
	Port int
	// GOMAXPROCS, when above 0 and both processes run here (RoleBoth),
	// is each process's GOMAXPROCS (its environment variable). Two Go
	// runtimes that each take every CPU of a small machine preempt each
	// other at every goroutine hand-off; softnic demo gives each half the
	// CPUs, as scripts/bench does.
	GOMAXPROCS int
}

// Role is the part of the demo a process runs.
type Role int

const (
	// RoleBoth runs the server at A and the client at B of every step.
	RoleBoth Role = iota
	// RoleServer runs only the servers, at A: one half of a demo across
	// two hosts.
	RoleServer
	// RoleClient runs only the clients, at B, against the servers at A.
	RoleClient
)

// DefaultPort is the first step's TCP port of a demo across two hosts:
// the tools' own default.
const DefaultPort = 18515

// ParseRole reads a role's name: both, server or client.
func ParseRole(s string) (Role, error) {
	switch s {
	case "both", "":
		return RoleBoth, nil
	case "server":
		return RoleServer, nil
	case "client":
		return RoleClient, nil
	}
	return 0, fmt.Errorf("unknown role %q (both, server or client)", s)
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
	if cfg.Role != RoleBoth && cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	switch cfg.Role {
	case RoleServer:
		fmt.Fprintf(out, "softnic demo: the servers' half, a NIC at %v, waiting for the clients' half (softnic demo --role client) on TCP ports %d-%d, RoCEv2 over UDP port %d\n",
			cfg.A, cfg.Port, cfg.Port+len(Steps)-1, cfg.UDPPort)
	case RoleClient:
		fmt.Fprintf(out, "softnic demo: the clients' half, a NIC at %v, against the servers' half at %v (softnic demo --role server), RoCEv2 over UDP port %d\n",
			cfg.B, cfg.A, cfg.UDPPort)
	default:
		fmt.Fprintf(out, "softnic demo: two softnic processes with a NIC each, at %v and %v, talking RoCEv2 over UDP port %d\n",
			cfg.A, cfg.B, cfg.UDPPort)
	}
	failed := 0
	for i, st := range Steps {
		line, err := runStep(ctx, cfg, i, st, out)
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
	if cfg.Role != RoleBoth {
		fmt.Fprintf(out, "All %d runs passed on this half, and every byte it checked checked out.\n", len(Steps))
		return nil
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

// runStep runs step i: a server at A and a client at B, or the half of
// them that cfg.Role says, and summarizes them.
func runStep(ctx context.Context, cfg Config, i int, st Step, out io.Writer) (string, error) {
	port := cfg.Port + i
	if cfg.Port == 0 {
		p, err := freePort()
		if err != nil {
			return "", err
		}
		port = p
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	common := func(addr netip.Addr) []string {
		args := append(append([]string{st.Tool}, st.Args...), "-p", strconv.Itoa(port), "--addr", addr.String(),
			"--port-udp", strconv.Itoa(int(cfg.UDPPort)), "--timeout", "30s")
		if cfg.A.Is6() && st.Tool != "rc_pingpong" {
			args = append(args, "--ipv6") // perftest's out-of-band socket over IPv6
		}
		return args
	}
	host := cfg.A.String()
	// a half waits longer for the other host, which may start later
	accept, connect := "30s", "20s"
	if cfg.Role != RoleBoth {
		accept, connect = "45s", "45s"
	}
	srvCmd := exec.CommandContext(ctx, cfg.Exe, append(common(cfg.A), "--accept-timeout", accept)...)
	cliCmd := exec.CommandContext(ctx, cfg.Exe, append(common(cfg.B), "--connect-timeout", connect, host)...)
	if cfg.Role == RoleBoth {
		env := toolnic.GOMAXPROCSEnv(cfg.GOMAXPROCS)
		srvCmd.Env, cliCmd.Env = env, env
	}
	switch cfg.Role {
	case RoleServer:
		return runHalf(srvCmd, "server", cfg.A, st, cfg.Verbose, out)
	case RoleClient:
		return runHalf(cliCmd, "client", cfg.B, st, cfg.Verbose, out)
	}
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

// runHalf runs one side of a step (the other runs on another host) and
// summarizes what this side saw.
func runHalf(cmd *exec.Cmd, side string, addr netip.Addr, st Step, verbose bool, out io.Writer) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if verbose {
		fmt.Fprintf(out, "---- %s %s (%v):\n%s%s", st.Tool, side, addr, stdout.String(), stderr.String())
	}
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", side, err, lastLine(stderr.String()))
	}
	if side == "server" {
		return st.Summary(nil, stdout.Bytes())
	}
	return st.Summary(stdout.Bytes(), nil)
}

// lastLine returns the line of a tool's error output that says why it
// failed: its last, or the first line of a Go panic (whose last lines are
// a stack trace).
func lastLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return l
		}
	}
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

// pingpongSummary reads rc_pingpong's result lines: the client's, or the
// server's in the servers' half of a split demo (cli nil); both sides
// checked every byte they received (-c), or they would have failed.
func pingpongSummary(cli, srv []byte) (string, error) {
	res, who := cli, "client"
	if cli == nil {
		res, who = srv, "server"
	}
	b, i := ppBytes.FindSubmatch(res), ppIters.FindSubmatch(res)
	if b == nil || i == nil {
		return "", fmt.Errorf("unexpected %s output %q", who, res)
	}
	if bytes.Contains(srv, []byte("invalid data")) {
		return "", errors.New("the server found invalid data")
	}
	return fmt.Sprintf("%s SEND ping-pongs of 4 KiB: %s bytes in %s s = %s Mbit/s, %s µs per round trip; every byte checked",
		i[1], b[1], b[2], b[3], i[2]), nil
}

// bwSummary reads a perftest look-alike's --json results, strictly: its
// standard output must be one perftest.Result and nothing else. In one half of a
// split demo the other side's output is on the other host (nil here): the
// servers' half says whether it checked the data, the clients' half gives
// the figures and whether it checked.
func bwSummary(what string) func(cli, srv []byte) (string, error) {
	return func(cli, srv []byte) (string, error) {
		var c, s perftest.Result
		if cli != nil {
			if err := tooljson.Decode(cli, &c); err != nil {
				return "", fmt.Errorf("client output: %v", err)
			}
		}
		if srv != nil {
			if err := tooljson.Decode(srv, &s); err != nil {
				return "", fmt.Errorf("server output: %v", err)
			}
		}
		switch {
		case cli == nil && s.Checked:
			return fmt.Sprintf("served the %s; every byte that arrived here checked out", what), nil
		case cli == nil:
			return fmt.Sprintf("served the %s; the clients' half checks the data", what), nil
		case srv == nil && len(c.BW) > 0:
			r := c.BW[len(c.BW)-1]
			checked := "every byte checked here"
			if !c.Checked {
				checked = "the servers' half checks the data"
			}
			return fmt.Sprintf("%d %s: %.2f MB/s average, %.2f MB/s peak, %.4f million/s; %s",
				r.Iters, what, r.BWAvg, r.BWPeak, r.MsgRate, checked), nil
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
