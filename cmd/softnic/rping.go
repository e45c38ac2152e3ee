package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/softnic/softnic/tools/cm/rping"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
)

// rpingOpts are rping.c's options, in its getopt order
// ("a:I:Pp:C:S:t:scvVdq").
func rpingOpts() []optSpec {
	o := newOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return []optSpec{
		o('a', "", R, "addr", "address (server: bind to it, default any; client: the server)"),
		o('I', "", R, "addr", "Source address to bind to for client."),
		o('P', "", N, "", "persistent server mode allowing multiple connections"),
		o('p', "", R, "port", "port (default 7174)"),
		o('C', "", R, "count", "ping count times (default: for ever)"),
		o('S', "", R, "size", fmt.Sprintf("ping data size (%d to %d, default %d)", rping.MinSize, rping.MaxSize, rping.DefaultSize)),
		o('t', "", R, "tos", "type of service (accepted; no effect on softnic)"),
		o('s', "", N, "", "server side.  To bind to any address with IPv6 use -a ::0"),
		o('c', "", N, "", "client side"),
		o('v', "", N, "", "display ping data to stdout"),
		o('V', "", N, "", "validate ping data"),
		o('d', "", N, "", "debug printfs"),
		o('q', "", N, "", "use self-created, self-modified QP"),
	}
}

func rpingUsage(w io.Writer) {
	fmt.Fprint(w, "usage: softnic rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n"+
		"       softnic rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n\n"+
		"softnic's version of librdmacm's rping: it pairs with rping in either role. The\n"+
		"client SENDs its buffer's address and key, the server RDMA READs the ping data,\n"+
		"the client SENDs its sink, the server RDMA WRITEs the data back; -C times.\n\nOptions:\n")
	writeOpts(w, rpingOpts())
	fmt.Fprintln(w, "\nsoftnic options:")
	writeOpts(w, cmNICOpts())
	fmt.Fprintln(w, "\nWithout --addr the NIC takes -a's address (server; 127.0.0.1 for any), -I's\n"+
		"(client), or the address that reaches the server. The output lines and exit\n"+
		"statuses are rping's: 0, 22 for a bad command line, 255 for a failed run.")
}

// rpingEINVAL is rping.c's status for a bad command line (ret = EINVAL).
const rpingEINVAL = 22

// runRping is "softnic rping".
func runRping(args []string, stdout, stderr io.Writer) int {
	const name = "rping"
	r, status, ok := parseCMTool(name, rpingOpts(), args, stdout, stderr, rpingUsage, rpingEINVAL)
	if !ok {
		return status
	}
	cfg := rping.Defaults()
	server := -1
	for _, m := range r.Matches {
		switch m.Opt.Short {
		case 'a', 'I':
			a, err := lookupHost(m.Value)
			if err != nil {
				fmt.Fprintf(stdout, "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n")
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
				fmt.Fprintf(stderr, "softnic rping: invalid port %q\n", m.Value)
				return rpingEINVAL
			}
			cfg.Port = uint16(v)
		case 's':
			server = 1
		case 'c':
			server = 0
		case 'S', 'C', 't':
			v, err := getopt.Int(m.Value)
			if err != nil || v < -1<<31 || v > 1<<31-1 {
				fmt.Fprintf(stderr, "softnic rping: -%c %q: not a number\n", m.Opt.Short, m.Value)
				return rpingEINVAL
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
		fmt.Fprintln(stderr, err)
		return rpingEINVAL
	}
	if server == -1 || len(r.Operands) > 0 {
		rpingUsage(stdout)
		return rpingEINVAL
	}
	cfg.Server = server == 1
	nf, err := parseNICFlags(r)
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		return rpingEINVAL
	}
	addr, err := cmNICAddr(cfg.Server, cfg.Addr, cfg.Src, cfg.Addr)
	if err != nil && !nf.addr.IsValid() {
		fmt.Fprintf(stderr, "softnic %s: choosing the NIC address (give one with --addr): %v\n", name, err)
		return 255
	}
	s, err := openCM(name, nf, addr)
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		return 255
	}
	if !cfg.Server && !cfg.Addr.IsValid() {
		cfg.Addr = netip.IPv4Unspecified()
	}
	ctx, cancel := toolContext()
	defer cancel()
	err = rping.Run(ctx, cfg, rping.Env{Env: toolnic.Env{CM: s.cm, Out: stdout, Err: stderr, Stall: nf.stall}})
	cerr := s.Close()
	var f *rping.Failure
	switch {
	case errors.As(err, &f):
		return f.Status
	case err != nil:
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		return 255
	case cerr != nil:
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, cerr)
		return 255
	}
	return exitOK
}
