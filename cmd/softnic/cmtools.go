package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// The librdmacm example look-alikes (rping, ucmatose, rdma_server,
// rdma_client, udaddy, mckey) connect through the connection manager
// (package verbs/cm) on the NIC they open; they take the NIC options of
// the other tools (--addr, --pcap, --metrics, ...) beside their C
// counterparts' flags, which name the CM addresses.

// cmNICOpts are the NIC options that make sense for a CM tool: the
// out-of-band TCP timeouts do not apply.
func cmNICOpts() []optSpec {
	var o []optSpec
	for _, s := range nicOpts {
		switch s.Long {
		case "accept-timeout", "connect-timeout":
			continue
		}
		o = append(o, s)
	}
	return o
}

// parseCMTool parses a CM tool's command line: -h prints usage (status
// 0); a bad command line prints the error and usage and returns
// badStatus, as the C tools' getopt loops do.
func parseCMTool(name string, opts []optSpec, args []string, stdout, stderr io.Writer,
	usage func(io.Writer), badStatus int) (*getopt.Result, int, bool) {
	var all []getopt.Option
	for _, o := range opts {
		all = append(all, o.Option)
	}
	for _, o := range cmNICOpts() {
		all = append(all, o.Option)
	}
	r, err := getopt.Parse(all, args)
	if errors.Is(err, getopt.ErrHelp) {
		usage(stdout)
		return nil, exitOK, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		usage(stdout)
		return nil, badStatus, false
	}
	return r, 0, true
}

// lookupHost resolves a host as the C tools' getaddrinfo does: an
// address as it is, a name through the resolver, IPv4 first.
func lookupHost(host string) (netip.Addr, error) {
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

// cmNICAddr picks the NIC address of a CM tool when --addr is not given:
// a server's bound address (bind, when it is a specific one) or
// 127.0.0.1; a client's source address (src, when given) or the one that
// reaches the server at dst.
func cmNICAddr(server bool, bind, src, dst netip.Addr) (netip.Addr, error) {
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

// cmSession is an open NIC and a CM on it.
type cmSession struct {
	nic *toolnic.NIC
	cm  *cm.CM
}

// openCM opens the NIC at addr (nf.addr when given) and starts a CM on
// it.
func openCM(name string, nf nicFlags, addr netip.Addr) (*cmSession, error) {
	if nf.addr.IsValid() {
		addr = nf.addr
	}
	n, err := toolnic.Open(toolnic.Config{Addr: addr, Port: nf.port, PeerPort: nf.peerPort, Link: testLink,
		Pcap: nf.pcap, Metrics: nf.metrics, MetricsFile: nf.metricsFile, Name: "softnic0", BusyPoll: nf.busyPoll})
	if err != nil {
		return nil, err
	}
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{n.Dev}})
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("starting the connection manager: %w", err)
	}
	return &cmSession{nic: n, cm: c}, nil
}

// Close stops the CM, then the NIC.
func (s *cmSession) Close() error {
	return errors.Join(s.cm.Close(), s.nic.Close())
}

// cmAddrFormat checks a CM tool's -f address_format as cmatose.c and
// udaddy.c do: ip and name are taken, gid (AF_IB) is refused (false: exit
// 1), anything else is warned about.
func cmAddrFormat(name, v string, stderr io.Writer) bool {
	v = strings.ToLower(v)
	switch {
	case strings.HasPrefix(v, "gid"):
		fmt.Fprintf(stderr, "softnic %s: -f gid: AF_IB addresses are not supported by softnic\n", name)
		return false
	case strings.HasPrefix(v, "ip"), strings.HasPrefix(v, "name"):
	default:
		fmt.Fprintln(stderr, "Warning: unknown address format")
	}
	return true
}

// cmPortSpace reads a CM tool's -P: other (ib, ipoib) picks ps, def
// (tcp, udp) leaves *dst, anything else is warned about.
func cmPortSpace(v, other, def string, ps cm.PortSpace, dst *cm.PortSpace, stderr io.Writer) {
	v = strings.ToLower(v)
	switch {
	case strings.HasPrefix(v, other):
		*dst = ps
	case strings.HasPrefix(v, def):
	default:
		fmt.Fprintln(stderr, "Warning: unknown port space format")
	}
}

// cmInt reads a CM tool's numeric option (0 to 2^31-1); false: the
// error is printed, exit 1.
func cmInt(name string, m getopt.Match, stderr io.Writer) (int, bool) {
	v, err := getopt.Int(m.Value)
	if err != nil || v < 0 || v > 1<<31-1 {
		fmt.Fprintf(stderr, "softnic %s: -%c %q: not a number\n", name, m.Opt.Short, m.Value)
		return 0, false
	}
	return int(v), true
}

// cmHost is a host named on a CM tool's command line and where its
// address goes.
type cmHost struct {
	s   string
	dst *netip.Addr
}

// resolveCMHosts resolves each named host (lookupHost); false at the
// first that does not resolve.
func resolveCMHosts(hosts ...cmHost) bool {
	for _, h := range hosts {
		if h.s == "" {
			continue
		}
		a, err := lookupHost(h.s)
		if err != nil {
			return false
		}
		*h.dst = a
	}
	return true
}

// runOnCM is the end of every CM tool's command: unless addrErr (choosing
// the NIC address) stops it, it opens the NIC at addr and a CM on it,
// runs the tool, closes both and returns the exit status: a
// *cmkit.Status's Code & 0xff, else 1 for an error of the run or of the
// closing, else 0.
func runOnCM(name string, nf nicFlags, addr netip.Addr, addrErr error, stderr io.Writer,
	run func(ctx context.Context, c *cm.CM) error) int {
	if addrErr != nil && !nf.addr.IsValid() {
		fmt.Fprintf(stderr, "softnic %s: choosing the NIC address (give one with --addr): %v\n", name, addrErr)
		return 1
	}
	s, err := openCM(name, nf, addr)
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		return 1
	}
	ctx, cancel := toolContext()
	defer cancel()
	err = run(ctx, s.cm)
	cerr := s.Close()
	var st *cmkit.Status
	switch {
	case errors.As(err, &st):
		return st.Code & 0xff
	case err != nil:
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		return 1
	case cerr != nil:
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, cerr)
		return 1
	}
	return exitOK
}

// writeCMUsage writes a CM tool's usage: head, its options, the NIC
// options, tail.
func writeCMUsage(w io.Writer, head string, opts []optSpec, tail string) {
	fmt.Fprint(w, head)
	writeOpts(w, opts)
	fmt.Fprintln(w, "\nsoftnic options:")
	writeOpts(w, cmNICOpts())
	fmt.Fprintln(w, tail)
}

// cmMatches walks a CM tool's options in order: a numeric one in ints is
// read into its int (cmInt), -f is checked (cmAddrFormat), the others go
// to each. false: the error is printed, exit 1.
func cmMatches(name string, r *getopt.Result, stderr io.Writer, ints map[rune]*int, each func(m getopt.Match) bool) bool {
	for _, m := range r.Matches {
		if p, ok := ints[m.Opt.Short]; ok {
			v, ok := cmInt(name, m, stderr)
			if !ok {
				return false
			}
			*p = v
			continue
		}
		if m.Opt.Short == 'f' {
			if !cmAddrFormat(name, m.Value, stderr) {
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

// cmNICFlags ends a CM tool's command line: operands print the usage, a
// bad NIC option its error; ok false means exit 1.
func cmNICFlags(name string, r *getopt.Result, stdout, stderr io.Writer, usage func(io.Writer)) (nicFlags, bool) {
	if len(r.Operands) > 0 {
		usage(stdout)
		return nicFlags{}, false
	}
	nf, err := parseNICFlags(r)
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		return nicFlags{}, false
	}
	return nf, true
}
