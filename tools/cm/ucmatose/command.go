package ucmatose

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

const name = "ucmatose"

// Command is "softnic ucmatose".
var Command = toolcmd.Command{Name: name,
	Summary: "RC connections through the connection manager, like librdmacm's ucmatose", Run: run}

// opts are cmatose.c's options, in its getopt order
// ("s:b:f:P:c:C:S:t:p:m").
func opts() []toolcmd.Opt {
	o := toolcmd.NewOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return []toolcmd.Opt{
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

func usage(w io.Writer) {
	cmkit.WriteUsage(w, "usage: softnic ucmatose [-s server_address] [-b bind_address] [-c connections]\n"+
		"       [-C message_count] [-S message_size] [-p port_number] [-P tcp|ib]\n\n"+
		"softnic's version of librdmacm's ucmatose (cmatose.c): it pairs with ucmatose in\n"+
		"either role. The client opens -c RC connections through the RDMA CM; the server\n"+
		"SENDs -C messages of -S bytes on each, the client replies with as many, the server\n"+
		"disconnects.\n\nOptions:\n", opts(),
		"\nThe output lines and the exit status (\"return status N\") are cmatose.c's.")
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
			cmkit.PortSpace(env, m.Value, "ib", "tcp", cm.PSIB, &cfg.PortSpace)
		case 'p':
			v, ok := cmkit.Int(env, name, m)
			if !ok {
				return false
			}
			if v > 65535 {
				fmt.Fprintf(env.Err, "softnic %s: -p %q: not a port\n", name, m.Value)
				return false
			}
			cfg.Port = uint16(v)
		case 'm':
			cfg.Migrate = true
		}
		return true
	}, func(ctx context.Context, env toolnic.Env) error { return Run(ctx, cfg, env) })
}
