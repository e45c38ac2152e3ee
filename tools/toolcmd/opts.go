package toolcmd

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
)

// Opt is one option of a look-alike tool and its line of usage text.
type Opt struct {
	getopt.Option
	Arg  string // the argument's name in usage text, e.g. "<port>"
	Help string
}

// NewOpt makes a look-alike's option: short and long name, argument
// kind, the argument's name and the help line, as WriteOpts prints them.
func NewOpt(short rune, long string, kind getopt.ArgKind, arg, help string) Opt {
	return Opt{getopt.Option{Short: short, Long: long, Arg: kind}, arg, help}
}

// Options returns the getopt options of opts.
func Options(opts ...[]Opt) []getopt.Option {
	var all []getopt.Option
	for _, l := range opts {
		for _, o := range l {
			all = append(all, o.Option)
		}
	}
	return all
}

// WriteOpts prints option lines in rdma-core's usage style.
func WriteOpts(w io.Writer, opts []Opt) {
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
			if o.Arg != "" {
				b.WriteString("=" + o.Arg)
			}
		} else if o.Arg != "" {
			b.WriteString(" " + o.Arg)
		}
		s := b.String()
		if len(s) < 26 {
			s += strings.Repeat(" ", 26-len(s))
		} else {
			s += " "
		}
		fmt.Fprintln(w, s+o.Help)
	}
}

// NICOpts are the options every NIC tool adds to its C counterpart's.
var NICOpts = []Opt{
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
	{getopt.Option{Long: "cc", Arg: getopt.RequiredArg}, "<algorithm>",
		"congestion control: dcqcn (ECN marks and CNPs, with mlx5's parameters; only answers peers that send ECN-capable packets) or none (the default)"},
	{getopt.Option{Long: "cc-param", Arg: getopt.RequiredArg}, "<name>=<value>",
		"set a congestion control parameter by its mlx5 name in mlx5's unit, e.g. rp_ai_rate=10 (repeatable; softnic info --cc dcqcn lists them)"},
}

// DefaultBusyPoll is --busy-poll's time when none is given: the kernel
// documentation's suggested net.core.busy_read (50 µs).
const DefaultBusyPoll = 50 * time.Microsecond

// ParseNICOpts sets env's NIC options from those on the command line
// (NICOpts, or the part of them a tool takes).
func ParseNICOpts(r *getopt.Result, env *toolnic.Env) error {
	nic := &env.NIC
	if m, ok := r.Last("addr"); ok {
		a, err := netip.ParseAddr(m.Value)
		if err != nil {
			return fmt.Errorf("--addr %q: not an IP address", m.Value)
		}
		nic.Addr = a.Unmap()
	}
	for _, p := range []struct {
		name string
		dst  *uint16
	}{{"port-udp", &nic.Port}, {"peer-port-udp", &nic.PeerPort}} {
		if m, ok := r.Last(p.name); ok {
			v, err := getopt.Uint(m.Value)
			if err != nil || v == 0 || v > 65535 {
				return fmt.Errorf("--%s %q: not a port number (1-65535)", p.name, m.Value)
			}
			*p.dst = uint16(v)
		}
	}
	for _, s := range []struct {
		name string
		dst  *string
	}{{"pcap", &nic.Pcap}, {"metrics", &nic.Metrics}, {"metrics-file", &nic.MetricsFile}} {
		if m, ok := r.Last(s.name); ok {
			*s.dst = m.Value
		}
	}
	if m, ok := r.Last("busy-poll"); ok {
		nic.BusyPoll = DefaultBusyPoll
		if m.Value != "" {
			v, err := time.ParseDuration(m.Value)
			if err != nil || v <= 0 {
				return fmt.Errorf("--busy-poll=%q: not a positive duration (e.g. 50us)", m.Value)
			}
			nic.BusyPoll = v
		}
	}
	if err := parseCC(r, nic); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"timeout", &env.Stall}, {"accept-timeout", &env.AcceptTimeout}, {"connect-timeout", &env.ConnectRetry}} {
		if m, ok := r.Last(d.name); ok {
			v, err := time.ParseDuration(m.Value)
			if err != nil || v <= 0 {
				return fmt.Errorf("--%s %q: not a positive duration (e.g. 30s)", d.name, m.Value)
			}
			*d.dst = v
		}
	}
	return nil
}

// Parse parses a look-alike's command line: its options and the NIC
// options. It prints usage to env.Out for -h (status ExitOK) and the
// error for a bad command line (BadUsage); ok is false then.
func Parse(env *toolnic.Env, name string, opts []Opt, args []string, usage func(io.Writer)) (r *getopt.Result, status int, ok bool) {
	r, err := getopt.Parse(Options(opts, NICOpts), args)
	if errors.Is(err, getopt.ErrHelp) {
		usage(env.Out)
		return nil, ExitOK, false
	}
	if err != nil {
		return nil, BadUsage(env, name, err), false
	}
	return r, 0, true
}

// IntOpt is an integer option a tool's config takes, within [lo, hi].
type IntOpt struct {
	name   string
	lo, hi int64
	dst    *int
}

// Int is the integer option name, within [lo, hi], read into *dst.
func Int(name string, lo, hi int64, dst *int) IntOpt { return IntOpt{name, lo, hi, dst} }

// ParseInts sets the options given on the command line, refusing a
// value that is not a number or is out of its bounds.
func ParseInts(r *getopt.Result, opts ...IntOpt) error {
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

// parseCC sets the NIC's congestion control from --cc and --cc-param.
func parseCC(r *getopt.Result, nic *toolnic.Config) error {
	if m, ok := r.Last("cc"); ok {
		switch m.Value {
		case "dcqcn":
			p := ibv.DefaultCCParams()
			nic.CC = &p
		case "none":
			nic.CC = nil
		default:
			return fmt.Errorf("--cc %q: not dcqcn or none", m.Value)
		}
	}
	for _, m := range r.Matches {
		if m.Opt.Name() != "cc-param" {
			continue
		}
		if nic.CC == nil {
			return fmt.Errorf("--cc-param %s without --cc dcqcn", m.Value)
		}
		name, val, ok := strings.Cut(m.Value, "=")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			return fmt.Errorf("--cc-param %q: not <name>=<number>", m.Value)
		}
		if err := nic.CC.Set(name, v); err != nil {
			return fmt.Errorf("--cc-param %s: %v", m.Value, err)
		}
	}
	return nil
}
