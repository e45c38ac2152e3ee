package main

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/cm/ucmatose"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

// ucmatoseOpts are cmatose.c's options, in its getopt order
// ("s:b:f:P:c:C:S:t:p:m").
func ucmatoseOpts() []optSpec {
	o := newOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return []optSpec{
		o('s', "", R, "server_address", "connect to the server at this address (without: be the server)"),
		o('b', "", R, "bind_address", "address to bind to"),
		o('f', "", R, "address_format", "name, ip, ipv6, or gid (softnic: name and ip)"),
		o('P', "", R, "port_space", "tcp or ib"),
		o('c', "", R, "connections", "connections (default 1)"),
		o('C', "", R, "message_count", "messages each way per connection (default 10)"),
		o('S', "", R, "message_size", "message size (default 100)"),
		o('t', "", R, "type_of_service", "type of service (accepted; no effect on softnic)"),
		o('p', "", R, "port_number", "port (default 7471)"),
		o('m', "", N, "", "migrate to a new event channel (not supported by softnic)"),
	}
}

func ucmatoseUsage(w io.Writer) {
	writeCMUsage(w, "usage: softnic ucmatose [-s server_address] [-b bind_address] [-c connections]\n"+
		"       [-C message_count] [-S message_size] [-p port_number] [-P tcp|ib]\n\n"+
		"softnic's version of librdmacm's ucmatose (cmatose.c): it pairs with ucmatose in\n"+
		"either role. The client opens -c RC connections through the RDMA CM; the server\n"+
		"SENDs -C messages of -S bytes on each, the client replies with as many, the server\n"+
		"disconnects.\n\nOptions:\n", ucmatoseOpts(),
		"\nThe output lines and the exit status (\"return status N\") are cmatose.c's.")
}

// runUcmatose is "softnic ucmatose".
func runUcmatose(args []string, stdout, stderr io.Writer) int {
	const name = "ucmatose"
	r, status, ok := parseCMTool(name, ucmatoseOpts(), args, stdout, stderr, ucmatoseUsage, 1)
	if !ok {
		return status
	}
	cfg := ucmatose.Defaults()
	var dst, src string
	if !cmMatches(name, r, stderr, map[rune]*int{'c': &cfg.Conns, 'C': &cfg.Count, 'S': &cfg.Size, 't': &cfg.TOS},
		func(m getopt.Match) bool {
			switch m.Opt.Short {
			case 's':
				dst = m.Value
			case 'b':
				src = m.Value
			case 'P':
				cmPortSpace(m.Value, "ib", "tcp", cm.PSIB, &cfg.PortSpace, stderr)
			case 'p':
				v, ok := cmInt(name, m, stderr)
				if !ok {
					return false
				}
				if v > 65535 {
					fmt.Fprintf(stderr, "softnic %s: -p %q: not a port\n", name, m.Value)
					return false
				}
				cfg.Port = uint16(v)
			case 'm':
				cfg.Migrate = true
			}
			return true
		}) {
		return 1
	}
	nf, ok := cmNICFlags(name, r, stdout, stderr, ucmatoseUsage)
	if !ok {
		return 1
	}
	cfg.Server = dst == ""
	if !resolveCMHosts(cmHost{dst, &cfg.Dst}, cmHost{src, &cfg.Src}) {
		fmt.Fprintf(stdout, "cmatose: getaddrinfo error: Name or service not known\n")
		return 254 // EAI_NONAME
	}
	addr, err := cmNICAddr(cfg.Server, cfg.Src, cfg.Src, cfg.Dst)
	return runOnCM(name, nf, addr, err, stderr, func(ctx context.Context, c *cm.CM) error {
		return ucmatose.Run(ctx, cfg, toolnic.Env{CM: c, Out: stdout, Err: stderr, Stall: nf.stall})
	})
}
