package udaddy

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

const name = "udaddy"

// Command is "softnic udaddy".
var Command = toolcmd.Command{Name: name,
	Summary: "UD datagrams to peers resolved through the connection manager (SIDR), like librdmacm's udaddy", Run: run}

// opts are udaddy.c's options, in its getopt order ("s:b:c:C:S:t:p:P:f:").
func opts() []toolcmd.Opt {
	o := toolcmd.NewOpt
	R := getopt.RequiredArg
	return []toolcmd.Opt{
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

func usage(w io.Writer) {
	cmkit.WriteUsage(w, "usage: softnic udaddy [-s server_address] [-b bind_address] [-c connections]\n"+
		"       [-C message_count] [-S message_size] [-P udp|ipoib]\n\n"+
		"softnic's version of librdmacm's udaddy: it pairs with udaddy in either role. The\n"+
		"client resolves UD QPs of the server through the RDMA CM (SIDR, port 7174) and\n"+
		"SENDs -C datagrams WITH_IMM its QPN on each; the server answers each peer.\n\nOptions:\n",
		opts(), "\nThe output lines and the exit status (\"return status N\") are udaddy.c's.")
}

func run(env *toolnic.Env, args []string) int {
	r, status, ok := cmkit.Parse(env, name, opts(), args, usage, 1)
	if !ok {
		return status
	}
	cfg := Defaults()
	return cmkit.RunClientServer(env, name, prog, r, usage, &cfg.Options, func(m getopt.Match) bool {
		switch m.Opt.Short {
		case 'P':
			cmkit.PortSpace(env, m.Value, "ipoib", "udp", cm.PSIPoIB, &cfg.PortSpace)
		case 'p':
			v, ok := cmkit.Int(env, name, m)
			if !ok {
				return false
			}
			cfg.PortSpace = cm.PortSpace(v)
		}
		return true
	}, func(ctx context.Context, env toolnic.Env) error { return Run(ctx, cfg, env) })
}
