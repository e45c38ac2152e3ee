package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
)

// The rdma-core and perftest look-alikes exit as the C tools do: 0 when
// the run succeeded, 1 for anything else, bad command lines included.
const exitTool = 1

// optSpec is one option of a look-alike tool and its line of usage text.
type optSpec struct {
	getopt.Option
	arg  string // the argument's name in usage text, e.g. "<port>"
	help string
}

// nicOpts are the options every NIC tool adds to its C counterpart's.
var nicOpts = []optSpec{
	{getopt.Option{Long: "addr", Arg: getopt.RequiredArg}, "<ip>",
		"the NIC's IP address (server: 127.0.0.1; client: 127.0.0.2 when the server is on this host, else the address that reaches it)"},
	{getopt.Option{Long: "port-udp", Arg: getopt.RequiredArg}, "<port>", "UDP port the NIC receives on (default 4791)"},
	{getopt.Option{Long: "peer-port-udp", Arg: getopt.RequiredArg}, "<port>", "UDP port the NIC sends to (default: --port-udp)"},
	{getopt.Option{Long: "pcap", Arg: getopt.RequiredArg}, "<file>", "write every RoCEv2 packet the NIC sends or receives to a pcap file"},
	{getopt.Option{Long: "metrics", Arg: getopt.RequiredArg}, "<addr>", "serve the NIC's counters as Prometheus metrics on <addr> (host:port)"},
	{getopt.Option{Long: "metrics-file", Arg: getopt.RequiredArg}, "<file>", "write the NIC's counters as Prometheus metrics (text format) to <file> when the tool ends"},
	{getopt.Option{Long: "timeout", Arg: getopt.RequiredArg}, "<duration>", "give up when the peer is silent this long once connected: no out-of-band message and no packet to the NIC (default 30s)"},
	{getopt.Option{Long: "busy-poll", Arg: getopt.OptionalArg}, "[=<duration>]",
		"poll the link for this long (default 50us) before a wait for the peer sleeps, like SO_BUSY_POLL: lower latency for a spinning CPU (default: sleep at once)"},
	{getopt.Option{Long: "accept-timeout", Arg: getopt.RequiredArg}, "<duration>", "server: give up when no client connects within this (default: wait forever)"},
	{getopt.Option{Long: "connect-timeout", Arg: getopt.RequiredArg}, "<duration>", "client: keep trying a server that is not listening yet for this long (default: one try)"},
}

// testLink, when set, replaces the UDP link of every tool: cmd tests run
// the tools in-process over the in-memory fabric with it.
var testLink toolnic.LinkFunc

// nicFlags are the parsed nicOpts.
type nicFlags struct {
	addr           netip.Addr
	port, peerPort uint16
	pcap, metrics  string
	metricsFile    string
	stall, accept  time.Duration
	retry          time.Duration
	busyPoll       time.Duration
}

// DefaultBusyPoll is --busy-poll's time when none is given: the kernel
// documentation's suggested net.core.busy_read (50 µs).
const DefaultBusyPoll = 50 * time.Microsecond

func parseNICFlags(r *getopt.Result) (nicFlags, error) {
	var f nicFlags
	if m, ok := r.Last("addr"); ok {
		a, err := netip.ParseAddr(m.Value)
		if err != nil {
			return f, fmt.Errorf("--addr %q: not an IP address", m.Value)
		}
		f.addr = a.Unmap()
	}
	for _, p := range []struct {
		name string
		dst  *uint16
	}{{"port-udp", &f.port}, {"peer-port-udp", &f.peerPort}} {
		if m, ok := r.Last(p.name); ok {
			v, err := getopt.Uint(m.Value)
			if err != nil || v == 0 || v > 65535 {
				return f, fmt.Errorf("--%s %q: not a port number (1-65535)", p.name, m.Value)
			}
			*p.dst = uint16(v)
		}
	}
	if m, ok := r.Last("pcap"); ok {
		f.pcap = m.Value
	}
	if m, ok := r.Last("metrics"); ok {
		f.metrics = m.Value
	}
	if m, ok := r.Last("metrics-file"); ok {
		f.metricsFile = m.Value
	}
	if m, ok := r.Last("busy-poll"); ok {
		f.busyPoll = DefaultBusyPoll
		if m.Value != "" {
			v, err := time.ParseDuration(m.Value)
			if err != nil || v <= 0 {
				return f, fmt.Errorf("--busy-poll=%q: not a positive duration (e.g. 50us)", m.Value)
			}
			f.busyPoll = v
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"timeout", &f.stall}, {"accept-timeout", &f.accept}, {"connect-timeout", &f.retry}} {
		if m, ok := r.Last(d.name); ok {
			v, err := time.ParseDuration(m.Value)
			if err != nil || v <= 0 {
				return f, fmt.Errorf("--%s %q: not a positive duration (e.g. 30s)", d.name, m.Value)
			}
			*d.dst = v
		}
	}
	return f, nil
}

// open opens the NIC: at --addr, or at the default address of a server
// (serverHost "") or of a client of serverHost.
func (f nicFlags) open(name, serverHost string) (*toolnic.NIC, error) {
	addr := f.addr
	if !addr.IsValid() {
		if serverHost == "" {
			addr = toolnic.DefaultServerAddr
		} else {
			a, err := toolnic.ClientAddr(serverHost)
			if err != nil {
				return nil, fmt.Errorf("choosing the NIC address (give one with --addr): %w", err)
			}
			addr = a
		}
	}
	return toolnic.Open(toolnic.Config{Addr: addr, Port: f.port, PeerPort: f.peerPort, Link: testLink,
		Pcap: f.pcap, Metrics: f.metrics, MetricsFile: f.metricsFile, Name: name, BusyPoll: f.busyPoll})
}

// toolContext is cancelled by SIGINT and SIGTERM.
func toolContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// parseTool parses a look-alike's command line. It prints usage for -h
// (status 0) and an error for a bad command line (status 1); ok is false
// then.
func parseTool(name string, opts []optSpec, args []string, stdout, stderr io.Writer, usage func(io.Writer)) (*getopt.Result, int, bool) {
	all := make([]getopt.Option, 0, len(opts)+len(nicOpts))
	for _, o := range opts {
		all = append(all, o.Option)
	}
	for _, o := range nicOpts {
		all = append(all, o.Option)
	}
	r, err := getopt.Parse(all, args)
	if errors.Is(err, getopt.ErrHelp) {
		usage(stdout)
		return nil, exitOK, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\nRun 'softnic help %s' for usage.\n", name, err, name)
		return nil, exitTool, false
	}
	return r, 0, true
}

// writeOpts prints option lines in rdma-core's usage style.
func writeOpts(w io.Writer, opts []optSpec) {
	for _, o := range opts {
		var b strings.Builder
		b.WriteString("  ")
		if o.Short != 0 {
			fmt.Fprintf(&b, "-%c", o.Short)
			if o.Long != "" {
				b.WriteString(", ")
			}
		}
		if o.Long != "" {
			b.WriteString("--" + o.Long)
			if o.arg != "" {
				b.WriteString("=" + o.arg)
			}
		} else if o.arg != "" {
			b.WriteString(" " + o.arg)
		}
		s := b.String()
		if len(s) < 26 {
			s += strings.Repeat(" ", 26-len(s))
		} else {
			s += " "
		}
		fmt.Fprintln(w, s+o.help)
	}
}

// failTool prints a tool's error and returns its exit status.
func failTool(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
	return exitTool
}

// runPingpongLike runs a tool of the rdma-core pingpongs' kind once its
// options are parsed and its config made (cfgErr is the config's error):
// at most one host operand (written to *server), the NIC opened for
// device ibdev and that host, run called with the pingpongs' Env on a
// context SIGINT and SIGTERM cancel, the NIC closed. out is where the
// tool's text goes (stderr when stdout carries --json). It returns the
// exit status; done, when not nil, runs after a successful run (the JSON
// output).
func runPingpongLike(name string, r *getopt.Result, cfgErr error, server *string, ibdev string,
	out, stderr io.Writer, run func(context.Context, toolnic.Env) error, done func() error) int {
	err := cfgErr
	if err == nil && len(r.Operands) > 1 {
		err = fmt.Errorf("more than one host: %q", r.Operands)
	}
	nf, ferr := parseNICFlags(r)
	if err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\nRun 'softnic help %s' for usage.\n", name, err, name)
		return exitTool
	}
	if len(r.Operands) == 1 {
		*server = r.Operands[0]
	}
	n, err := nf.open(ibdev, *server)
	if err != nil {
		return failTool(stderr, name, err)
	}
	ctx, cancel := toolContext()
	defer cancel()
	err = run(ctx, toolnic.Env{Dev: n.Dev, Out: out, Err: stderr,
		Stall: nf.stall, AcceptTimeout: nf.accept, ConnectRetry: nf.retry})
	if cerr := n.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil && done != nil {
		err = done()
	}
	if err != nil {
		return failTool(stderr, name, err)
	}
	return exitOK
}

// intOpt is an integer option a tool's config takes, within [lo, hi].
type intOpt struct {
	name   string
	lo, hi int64
	dst    *int
}

// parseIntOpts sets the options given on the command line, refusing a
// value that is not a number or is out of its bounds.
func parseIntOpts(r *getopt.Result, opts []intOpt) error {
	for _, o := range opts {
		m, ok := r.Last(o.name)
		if !ok {
			continue
		}
		v, err := getopt.Int(m.Value)
		if err != nil || v < o.lo || v > o.hi {
			return fmt.Errorf("invalid --%s %q (%d..%d)", o.name, m.Value, o.lo, o.hi)
		}
		*o.dst = int(v)
	}
	return nil
}

// parseMTUOpt sets *dst from --mtu when it is given: 256 to 4096 bytes.
func parseMTUOpt(r *getopt.Result, dst *ibv.MTU) error {
	m, ok := r.Last("mtu")
	if !ok {
		return nil
	}
	v, err := getopt.Int(m.Value)
	*dst = 0
	if err == nil {
		*dst = mtuEnum(int(v))
	}
	if *dst == 0 {
		return fmt.Errorf("invalid --mtu %q (256, 512, 1024, 2048 or 4096)", m.Value)
	}
	return nil
}

// newOpt makes a look-alike's option: short and long name, argument kind,
// the argument's name and the help line, as writeOpts prints them.
func newOpt(s rune, l string, a getopt.ArgKind, arg, help string) optSpec {
	return optSpec{getopt.Option{Short: s, Long: l, Arg: a}, arg, help}
}
