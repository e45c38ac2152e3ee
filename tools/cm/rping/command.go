package rping

import (
	"context"
	"fmt"
	"io"
	"net/netip"

	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

const name = "rping"

// Command is "softnic rping".
var Command = toolcmd.Command{Name: name,
	Summary: "RDMA READ/WRITE ping over the connection manager, like librdmacm's rping", Run: run}

// opts are rping.c's options, in its getopt order ("a:I:Pp:C:S:t:scvVdq").
func opts() []toolcmd.Opt {
	o := toolcmd.NewOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return []toolcmd.Opt{
		o('a', "", R, "addr", "address (server: bind to it, default any; client: the server)"),
		o('I', "", R, "addr", "Source address to bind to for client."),
		o('P', "", N, "", "persistent server mode allowing multiple connections"),
		o('p', "", R, "port", "port (default 7174)"),
		o('C', "", R, "count", "ping count times (default: for ever)"),
		o('S', "", R, "size", fmt.Sprintf("ping data size (%d to %d, default %d)", MinSize, MaxSize, DefaultSize)),
		o('t', "", R, "tos", "type of service (accepted; no effect on softnic)"),
		o('s', "", N, "", "server side.  To bind to any address with IPv6 use -a ::0"),
		o('c', "", N, "", "client side"),
		o('v', "", N, "", "display ping data to stdout"),
		o('V', "", N, "", "validate ping data"),
		o('d', "", N, "", "debug printfs"),
		o('q', "", N, "", "use self-created, self-modified QP"),
	}
}

func usage(w io.Writer) {
	cmkit.WriteUsage(w, "usage: softnic rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n"+
		"       softnic rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n\n"+
		"softnic's version of librdmacm's rping: it pairs with rping in either role. The\n"+
		"client SENDs its buffer's address and key, the server RDMA READs the ping data,\n"+
		"the client SENDs its sink, the server RDMA WRITEs the data back; -C times.\n\nOptions:\n", opts(),
		"\nWithout --addr the NIC takes -a's address (server; 127.0.0.1 for any), -I's\n"+
			"(client), or the address that reaches the server. The output lines and exit\n"+
			"statuses are rping's: 0, 22 for a bad command line, 255 for a failed run.")
}

// Exit statuses of rping.c: a bad command line (ret = EINVAL), a failed
// run (main returns -1).
const (
	statusEINVAL = 22
	statusFailed = 255
)

func run(env *toolnic.Env, args []string) int {
	r, status, ok := cmkit.Parse(env, name, opts(), args, usage, statusEINVAL)
	if !ok {
		return status
	}
	cfg := Defaults()
	server := -1
	for _, m := range r.Matches {
		switch m.Opt.Short {
		case 'a', 'I':
			a, err := cmkit.LookupHost(m.Value)
			if err != nil {
				fmt.Fprintf(env.Out, "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n")
				return 254 // EAI_NONAME (-2)
			}
			if m.Opt.Short == 'a' {
				cfg.Addr = a
			} else {
				cfg.Src = a
			}
		case 'P':
			cfg.Persistent = true
		case 'p':
			v, err := getopt.Int(m.Value)
			if err != nil || v < 0 || v > 65535 {
				fmt.Fprintf(env.Err, "softnic rping: invalid port %q\n", m.Value)
				return statusEINVAL
			}
			cfg.Port = uint16(v)
		case 's':
			server = 1
		case 'c':
			server = 0
		case 'S', 'C', 't':
			v, err := getopt.Int(m.Value)
			if err != nil || v < -1<<31 || v > 1<<31-1 {
				fmt.Fprintf(env.Err, "softnic rping: -%c %q: not a number\n", m.Opt.Short, m.Value)
				return statusEINVAL
			}
			switch m.Opt.Short {
			case 'S':
				cfg.Size = int(v)
			case 'C':
				cfg.Count = int(v)
			default:
				cfg.TOS = int(v)
			}
		case 'v':
			cfg.Verbose = true
		case 'V':
			cfg.Validate = true
		case 'd':
			cfg.Debug = true
		case 'q':
			cfg.SelfQP = true
		}
	}
	if err := cfg.Check(); err != nil {
		fmt.Fprintln(env.Err, err)
		return statusEINVAL
	}
	if server == -1 || len(r.Operands) > 0 {
		usage(env.Out)
		return statusEINVAL
	}
	cfg.Server = server == 1
	if err := toolcmd.ParseNICOpts(r, env); err != nil {
		fmt.Fprintf(env.Err, "softnic %s: %v\n", name, err)
		return statusEINVAL
	}
	addr, err := cmkit.NICAddr(cfg.Server, cfg.Addr, cfg.Src, cfg.Addr)
	if !cfg.Server && !cfg.Addr.IsValid() {
		cfg.Addr = netip.IPv4Unspecified()
	}
	return cmkit.RunCommand(env, name, addr, err, statusFailed, func(ctx context.Context, env toolnic.Env) error {
		return Run(ctx, cfg, Env{Env: env})
	})
}

// ExitStatus is the exit status of the failed run.
func (f *Failure) ExitStatus() int { return f.Status }
