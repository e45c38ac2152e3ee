package main

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/cm/mckey"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

// mckeyOpts are mckey.c's options, in its getopt order ("m:M:sb:c:C:S:p:").
func mckeyOpts() []optSpec {
	o := newOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return []optSpec{
		o('m', "", R, "multicast_address", "the multicast group to join"),
		o('M', "", R, "unmapped_multicast_address", "an AF_IB group (not supported by softnic)"),
		o('s', "", N, "", "be the sender"),
		o('b', "", R, "bind_address", "address to bind to"),
		o('c', "", R, "connections", "IDs joining the group (default 1)"),
		o('C', "", R, "message_count", "datagrams (default 10)"),
		o('S', "", R, "message_size", "datagram size (default 100; at most the active MTU)"),
		o('p', "", R, "port_space", fmt.Sprintf("port space - %#x for UDP (default), %#x for IPOIB", int(cm.PSUDP), int(cm.PSIPoIB))),
	}
}

func mckeyUsage(w io.Writer) {
	writeCMUsage(w, "usage: softnic mckey -m multicast_address [-s] [-b bind_address] [-c connections]\n"+
		"       [-C message_count] [-S message_size] [-p port_space]\n\n"+
		"softnic's version of librdmacm's mckey: it pairs with mckey in either role. Each ID\n"+
		"joins the group through the RDMA CM; the receiver waits for -C datagrams, the\n"+
		"sender (-s) SENDs them to the group.\n\nOptions:\n", mckeyOpts(),
		"\nThe output lines and the exit status (\"return status N\") are mckey.c's; as it\n"+
			"does, the tool pauses 3 s after joining before the transfers.")
}

// runMckey is "softnic mckey".
func runMckey(args []string, stdout, stderr io.Writer) int {
	const name = "mckey"
	r, status, ok := parseCMTool(name, mckeyOpts(), args, stdout, stderr, mckeyUsage, 1)
	if !ok {
		return status
	}
	cfg := mckey.Defaults()
	var group, src string
	if !cmMatches(name, r, stderr, map[rune]*int{'c': &cfg.Conns, 'C': &cfg.Count, 'S': &cfg.Size},
		func(m getopt.Match) bool {
			switch m.Opt.Short {
			case 'm':
				group = m.Value
			case 'M':
				fmt.Fprintf(stderr, "softnic %s: -M: AF_IB multicast addresses are not supported by softnic\n", name)
				return false
			case 's':
				cfg.Sender = true
			case 'b':
				src = m.Value
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
	if group == "" {
		mckeyUsage(stdout)
		return 1
	}
	nf, ok := cmNICFlags(name, r, stdout, stderr, mckeyUsage)
	if !ok {
		return 1
	}
	if !resolveCMHosts(cmHost{group, &cfg.Group}, cmHost{src, &cfg.Src}) {
		fmt.Fprintf(stdout, "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n")
		fmt.Fprintf(stdout, "test complete\nreturn status %d\n", -2)
		return 254
	}
	addr, err := cmNICAddr(true, cfg.Src, cfg.Src, cfg.Group)
	return runOnCM(name, nf, addr, err, stderr, func(ctx context.Context, c *cm.CM) error {
		return mckey.Run(ctx, cfg, mckey.Env{Env: toolnic.Env{CM: c, Out: stdout, Err: stderr, Stall: nf.stall}})
	})
}
