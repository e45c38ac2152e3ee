package mckey

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

const name = "mckey"

// Command is "softnic mckey".
var Command = toolcmd.Command{Name: name,
	Summary: "UD multicast joined through the connection manager, like librdmacm's mckey", Run: run}

// opts are mckey.c's options, in its getopt order ("m:M:sb:c:C:S:p:").
func opts() []toolcmd.Opt {
	o := toolcmd.NewOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return []toolcmd.Opt{
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

func usage(w io.Writer) {
	cmkit.WriteUsage(w, "usage: softnic mckey -m multicast_address [-s] [-b bind_address] [-c connections]\n"+
		"       [-C message_count] [-S message_size] [-p port_space]\n\n"+
		"softnic's version of librdmacm's mckey: it pairs with mckey in either role. Each ID\n"+
		"joins the group through the RDMA CM; the receiver waits for -C datagrams, the\n"+
		"sender (-s) SENDs them to the group.\n\nOptions:\n", opts(),
		"\nThe output lines and the exit status (\"return status N\") are mckey.c's; as it\n"+
			"does, the tool pauses 3 s after joining before the transfers.")
}

func run(env *toolnic.Env, args []string) int {
	r, status, ok := cmkit.Parse(env, name, opts(), args, usage, 1)
	if !ok {
		return status
	}
	cfg := Defaults()
	var group, src string
	if !cmkit.Matches(env, name, r, map[rune]*int{'c': &cfg.Conns, 'C': &cfg.Count, 'S': &cfg.Size},
		func(m getopt.Match) bool {
			switch m.Opt.Short {
			case 'm':
				group = m.Value
			case 'M':
				fmt.Fprintf(env.Err, "softnic %s: -M: AF_IB multicast addresses are not supported by softnic\n", name)
				return false
			case 's':
				cfg.Sender = true
			case 'b':
				src = m.Value
			case 'p':
				v, ok := cmkit.Int(env, name, m)
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
		usage(env.Out)
		return 1
	}
	if !cmkit.NICFlags(env, name, r, usage) {
		return 1
	}
	if !cmkit.ResolveHosts(cmkit.Host{Name: group, Dst: &cfg.Group}, cmkit.Host{Name: src, Dst: &cfg.Src}) {
		fmt.Fprintf(env.Out, "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n")
		fmt.Fprintf(env.Out, "test complete\nreturn status %d\n", -2)
		return 254
	}
	addr, err := cmkit.NICAddr(true, cfg.Src, cfg.Src, cfg.Group)
	return cmkit.RunCommand(env, name, addr, err, 1, func(ctx context.Context, env toolnic.Env) error {
		return Run(ctx, cfg, Env{Env: env})
	})
}
