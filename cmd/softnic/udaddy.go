package main

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/cm/udaddy"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

// udaddyOpts are udaddy.c's options, in its getopt order
// ("s:b:c:C:S:t:p:P:f:").
func udaddyOpts() []optSpec {
	o := newOpt
	R := getopt.RequiredArg
	return []optSpec{
		o('s', "", R, "server_address", "resolve UD connections to the server at this address (without: be the server)"),
		o('b', "", R, "bind_address", "address to bind to"),
		o('c', "", R, "connections", "connections (default 1)"),
		o('C', "", R, "message_count", "datagrams each way per connection (default 10)"),
		o('S', "", R, "message_size", "datagram size (default 100; at most the active MTU)"),
		o('t', "", R, "type_of_service", "type of service (accepted; no effect on softnic)"),
		o('p', "", R, "port_space", fmt.Sprintf("port space - %#x for UDP (default), %#x for IPOIB", int(cm.PSUDP), int(cm.PSIPoIB))),
		o('P', "", R, "port_space", "udp or ipoib"),
		o('f', "", R, "address_format", "name, ip, ipv6, or gid (softnic: name and ip)"),
	}
}

func udaddyUsage(w io.Writer) {
	writeCMUsage(w, "usage: softnic udaddy [-s server_address] [-b bind_address] [-c connections]\n"+
		"       [-C message_count] [-S message_size] [-P udp|ipoib]\n\n"+
		"softnic's version of librdmacm's udaddy: it pairs with udaddy in either role. The\n"+
		"client resolves UD QPs of the server through the RDMA CM (SIDR, port 7174) and\n"+
		"SENDs -C datagrams WITH_IMM its QPN on each; the server answers each peer.\n\nOptions:\n",
		udaddyOpts(), "\nThe output lines and the exit status (\"return status N\") are udaddy.c's.")
}

// runUdaddy is "softnic udaddy".
func runUdaddy(args []string, stdout, stderr io.Writer) int {
	const name = "udaddy"
	r, status, ok := parseCMTool(name, udaddyOpts(), args, stdout, stderr, udaddyUsage, 1)
	if !ok {
		return status
	}
	cfg := udaddy.Defaults()
	var dst, src string
	if !cmMatches(name, r, stderr, map[rune]*int{'c': &cfg.Conns, 'C': &cfg.Count, 'S': &cfg.Size, 't': &cfg.TOS},
		func(m getopt.Match) bool {
			switch m.Opt.Short {
			case 's':
				dst = m.Value
			case 'b':
				src = m.Value
			case 'P':
				cmPortSpace(m.Value, "ipoib", "udp", cm.PSIPoIB, &cfg.PortSpace, stderr)
			case 'p':
				v, ok := cmInt(name, m, stderr)
				if !ok {
					return false
				}
				cfg.PortSpace = cm.PortSpace(v)
			}
			return true
		}) {
		return 1
	}
	nf, ok := cmNICFlags(name, r, stdout, stderr, udaddyUsage)
	if !ok {
		return 1
	}
	cfg.Server = dst == ""
	if !resolveCMHosts(cmHost{dst, &cfg.Dst}, cmHost{src, &cfg.Src}) {
		fmt.Fprintf(stdout, "udaddy: getaddrinfo error: Name or service not known\n")
		return 254
	}
	addr, err := cmNICAddr(cfg.Server, cfg.Src, cfg.Src, cfg.Dst)
	return runOnCM(name, nf, addr, err, stderr, func(ctx context.Context, c *cm.CM) error {
		return udaddy.Run(ctx, cfg, toolnic.Env{CM: c, Out: stdout, Err: stderr, Stall: nf.stall})
	})
}
