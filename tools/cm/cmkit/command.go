package cmkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// The commands of the librdmacm example look-alikes (rping, ucmatose,
// rdma_server, rdma_client, udaddy, mckey) connect through the connection
// manager (package verbs/cm) on the NIC they open; they take the NIC
// options of the other tools (--addr, --pcap, --metrics, ...) beside
// their C counterparts' flags, which name the CM addresses.

// NICOpts are the NIC options that make sense for a CM tool: the
// out-of-band TCP timeouts do not apply.
func NICOpts() []toolcmd.Opt {
	var o []toolcmd.Opt
	for _, s := range toolcmd.NICOpts {
		switch s.Long {
		case "accept-timeout", "connect-timeout":
			continue
		}
		o = append(o, s)
	}
	return o
}

// Parse parses a CM tool's command line: -h prints usage (status 0); a
// bad command line prints the error and usage and returns badStatus, as
// the C tools' getopt loops do.
func Parse(env *toolnic.Env, name string, opts []toolcmd.Opt, args []string, usage func(io.Writer), badStatus int) (*getopt.Result, int, bool) {
	r, err := getopt.Parse(toolcmd.Options(opts, NICOpts()), args)
	if errors.Is(err, getopt.ErrHelp) {
		usage(env.Out)
		return nil, toolcmd.ExitOK, false
	}
	if err != nil {
		fmt.Fprintf(env.Err, "softnic %s: %v\n", name, err)
		usage(env.Out)
		return nil, badStatus, false
	}
	return r, 0, true
}

// WriteUsage writes a CM tool's usage: head, its options, the NIC
// options, tail.
func WriteUsage(w io.Writer, head string, opts []toolcmd.Opt, tail string) {
	fmt.Fprint(w, head)
	toolcmd.WriteOpts(w, opts)
	fmt.Fprintln(w, "\nsoftnic options:")
	toolcmd.WriteOpts(w, NICOpts())
	fmt.Fprintln(w, tail)
}

// Matches walks a CM tool's options in order: a numeric one in ints is
// read into its int (Int), -f is checked (AddrFormat), the others go to
// each. false: the error is printed, exit 1.
func Matches(env *toolnic.Env, name string, r *getopt.Result, ints map[rune]*int, each func(m getopt.Match) bool) bool {
	for _, m := range r.Matches {
		if p, ok := ints[m.Opt.Short]; ok {
			v, ok := Int(env, name, m)
			if !ok {
				return false
			}
			*p = v
			continue
		}
		if m.Opt.Short == 'f' {
			if !AddrFormat(env, name, m.Value) {
				return false
			}
			continue
		}
		if !each(m) {
			return false
		}
	}
	return true
}

// Int reads a CM tool's numeric option (0 to 2^31-1); false: the error
// is printed, exit 1.
func Int(env *toolnic.Env, name string, m getopt.Match) (int, bool) {
	v, err := getopt.Int(m.Value)
	if err != nil || v < 0 || v > 1<<31-1 {
		fmt.Fprintf(env.Err, "softnic %s: -%c %q: not a number\n", name, m.Opt.Short, m.Value)
		return 0, false
	}
	return int(v), true
}

// AddrFormat checks a CM tool's -f address_format as cmatose.c and
// udaddy.c do: ip and name are taken, gid (AF_IB) is refused (false:
// exit 1), anything else is warned about.
func AddrFormat(env *toolnic.Env, name, v string) bool {
	v = strings.ToLower(v)
	switch {
	case strings.HasPrefix(v, "gid"):
		fmt.Fprintf(env.Err, "softnic %s: -f gid: AF_IB addresses are not supported by softnic\n", name)
		return false
	case strings.HasPrefix(v, "ip"), strings.HasPrefix(v, "name"):
	default:
		fmt.Fprintln(env.Err, "Warning: unknown address format")
	}
	return true
}

// PortSpace reads a CM tool's -P: other (ib, ipoib) picks ps, def (tcp,
// udp) leaves *dst, anything else is warned about.
func PortSpace(env *toolnic.Env, v, other, def string, ps cm.PortSpace, dst *cm.PortSpace) {
	v = strings.ToLower(v)
	switch {
	case strings.HasPrefix(v, other):
		*dst = ps
	case strings.HasPrefix(v, def):
	default:
		fmt.Fprintln(env.Err, "Warning: unknown port space format")
	}
}

// NICFlags ends a CM tool's command line: operands print the usage, a
// bad NIC option its error; false means exit 1.
func NICFlags(env *toolnic.Env, name string, r *getopt.Result, usage func(io.Writer)) bool {
	if len(r.Operands) > 0 {
		usage(env.Out)
		return false
	}
	if err := toolcmd.ParseNICOpts(r, env); err != nil {
		fmt.Fprintf(env.Err, "softnic %s: %v\n", name, err)
		return false
	}
	return true
}

// LookupHost resolves a host as the C tools' getaddrinfo does: an
// address as it is, a name through the resolver, IPv4 first.
func LookupHost(host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("%s: no address", host)
	}
	for _, a := range ips {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	return ips[0].Unmap(), nil
}

// Host is a host named on a CM tool's command line and where its address
// goes.
type Host struct {
	Name string
	Dst  *netip.Addr
}

// ResolveHosts resolves each named host (LookupHost); false at the first
// that does not resolve.
func ResolveHosts(hosts ...Host) bool {
	for _, h := range hosts {
		if h.Name == "" {
			continue
		}
		a, err := LookupHost(h.Name)
		if err != nil {
			return false
		}
		*h.Dst = a
	}
	return true
}

// NICAddr picks the NIC address of a CM tool when --addr is not given: a
// server's bound address (bind, when it is a specific one) or 127.0.0.1;
// a client's source address (src, when given) or the one that reaches
// the server at dst.
func NICAddr(server bool, bind, src, dst netip.Addr) (netip.Addr, error) {
	if server {
		if bind.IsValid() && !bind.IsUnspecified() {
			return bind, nil
		}
		return toolnic.DefaultServerAddr, nil
	}
	if src.IsValid() && !src.IsUnspecified() {
		return src, nil
	}
	if !dst.IsValid() || dst.IsUnspecified() {
		return toolnic.DefaultClientAddr, nil
	}
	return toolnic.ClientAddr(dst.String())
}

// An Exit is the error of a run that printed its own lines, as the C
// tool's main does before it returns: the command exits with ExitStatus
// and prints nothing more.
type Exit interface {
	error
	ExitStatus() int
}

// ExitStatus is the C tools' exit status, main's return value & 0xff.
func (s *Status) ExitStatus() int { return s.Code & 0xff }

// RunCommand is the end of every CM tool's command: unless addrErr
// (choosing the NIC address) stops it, it opens the NIC at addr (at
// --addr when given) and a CM on it (env.Dev, env.CM), calls run on a
// context that SIGINT and SIGTERM cancel, closes both and returns the
// exit status: an Exit's, else fail for an error (printed) of the run or
// of the closing, else 0.
func RunCommand(env *toolnic.Env, name string, addr netip.Addr, addrErr error, fail int,
	run func(ctx context.Context, env toolnic.Env) error) int {
	if addrErr != nil && !env.NIC.Addr.IsValid() {
		fmt.Fprintf(env.Err, "softnic %s: choosing the NIC address (give one with --addr): %v\n", name, addrErr)
		return fail
	}
	cfg := env.NIC
	cfg.Name = "softnic0"
	if !cfg.Addr.IsValid() {
		cfg.Addr = addr
	}
	n, err := toolnic.Open(cfg)
	if err != nil {
		fmt.Fprintf(env.Err, "softnic %s: %v\n", name, err)
		return fail
	}
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{n.Dev}})
	if err != nil {
		n.Close()
		fmt.Fprintf(env.Err, "softnic %s: starting the connection manager: %v\n", name, err)
		return fail
	}
	env.Dev, env.CM = n.Dev, c
	ctx, cancel := toolcmd.Context()
	defer cancel()
	err = run(ctx, *env)
	cerr := errors.Join(c.Close(), n.Close())
	var x Exit
	switch {
	case errors.As(err, &x):
		return x.ExitStatus()
	case err != nil:
		fmt.Fprintf(env.Err, "softnic %s: %v\n", name, err)
		return fail
	case cerr != nil:
		fmt.Fprintf(env.Err, "softnic %s: %v\n", name, cerr)
		return fail
	}
	return toolcmd.ExitOK
}

// RunClientServer is the end of the command of ucmatose and udaddy,
// whose flags are cmatose.c's and udaddy.c's Options: -s (the server:
// without it the tool is one), -b, -c, -C, -S and -t here, the others
// (-P, -p, -m) handed to each; then the NIC options, the hosts resolved
// (prog names the tool in getaddrinfo's line), the NIC's address chosen
// and the run (RunCommand).
func RunClientServer(env *toolnic.Env, name, prog string, r *getopt.Result, usage func(io.Writer), o *Options,
	each func(m getopt.Match) bool, run func(ctx context.Context, env toolnic.Env) error) int {
	var dst, src string
	if !Matches(env, name, r, map[rune]*int{'c': &o.Conns, 'C': &o.Count, 'S': &o.Size, 't': &o.TOS},
		func(m getopt.Match) bool {
			switch m.Opt.Short {
			case 's':
				dst = m.Value
			case 'b':
				src = m.Value
			default:
				return each(m)
			}
			return true
		}) {
		return 1
	}
	if !NICFlags(env, name, r, usage) {
		return 1
	}
	o.Server = dst == ""
	if !ResolveHosts(Host{Name: dst, Dst: &o.Dst}, Host{Name: src, Dst: &o.Src}) {
		fmt.Fprintf(env.Out, "%s: getaddrinfo error: Name or service not known\n", prog)
		return 254 // EAI_NONAME
	}
	addr, err := NICAddr(o.Server, o.Src, o.Src, o.Dst)
	return RunCommand(env, name, addr, err, 1, run)
}
