package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/softnic/softnic/internal/getopt"
	"github.com/softnic/softnic/internal/ucmatose"
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
	fmt.Fprint(w, "usage: softnic ucmatose [-s server_address] [-b bind_address] [-c connections]\n"+
		"       [-C message_count] [-S message_size] [-p port_number] [-P tcp|ib]\n\n"+
		"softnic's version of librdmacm's ucmatose (cmatose.c): it pairs with ucmatose in\n"+
		"either role. The client opens -c RC connections through the RDMA CM; the server\n"+
		"SENDs -C messages of -S bytes on each, the client replies with as many, the server\n"+
		"disconnects.\n\nOptions:\n")
	writeOpts(w, ucmatoseOpts())
	fmt.Fprintln(w, "\nsoftnic options:")
	writeOpts(w, cmNICOpts())
	fmt.Fprintln(w, "\nThe output lines and the exit status (\"return status N\") are cmatose.c's.")
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
	for _, m := range r.Matches {
		switch m.Opt.Short {
		case 's':
			dst = m.Value
		case 'b':
			src = m.Value
		case 'f':
			v := strings.ToLower(m.Value)
			switch {
			case strings.HasPrefix(v, "gid"):
				fmt.Fprintf(stderr, "softnic %s: -f gid: AF_IB addresses are not supported by softnic\n", name)
				return 1
			case strings.HasPrefix(v, "ip"), strings.HasPrefix(v, "name"):
			default:
				fmt.Fprintln(stderr, "Warning: unknown address format")
			}
		case 'P':
			v := strings.ToLower(m.Value)
			switch {
			case strings.HasPrefix(v, "ib"):
				cfg.PortSpace = cm.PSIB
			case strings.HasPrefix(v, "tcp"):
			default:
				fmt.Fprintln(stderr, "Warning: unknown port space format")
			}
		case 'c', 'C', 'S', 't', 'p':
			v, err := getopt.Int(m.Value)
			if err != nil || v < 0 || v > 1<<31-1 {
				fmt.Fprintf(stderr, "softnic %s: -%c %q: not a number\n", name, m.Opt.Short, m.Value)
				return 1
			}
			switch m.Opt.Short {
			case 'c':
				cfg.Conns = int(v)
			case 'C':
				cfg.Count = int(v)
			case 'S':
				cfg.Size = int(v)
			case 't':
				cfg.TOS = int(v)
			case 'p':
				if v > 65535 {
					fmt.Fprintf(stderr, "softnic %s: -p %q: not a port\n", name, m.Value)
					return 1
				}
				cfg.Port = uint16(v)
			}
		case 'm':
			cfg.Migrate = true
		}
	}
	if len(r.Operands) > 0 {
		ucmatoseUsage(stdout)
		return 1
	}
	nf, err := parseNICFlags(r)
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		return 1
	}
	cfg.Server = dst == ""
	for _, h := range []struct {
		s   string
		dst *netip.Addr
	}{{dst, &cfg.Dst}, {src, &cfg.Src}} {
		if h.s == "" {
			continue
		}
		a, err := lookupHost(h.s)
		if err != nil {
			fmt.Fprintf(stdout, "cmatose: getaddrinfo error: Name or service not known\n")
			return 254 // EAI_NONAME
		}
		*h.dst = a
	}
	addr, err := cmNICAddr(cfg.Server, cfg.Src, cfg.Src, cfg.Dst)
	if err != nil && !nf.addr.IsValid() {
		fmt.Fprintf(stderr, "softnic %s: choosing the NIC address (give one with --addr): %v\n", name, err)
		return 1
	}
	s, err := openCM(name, nf, addr)
	if err != nil {
		fmt.Fprintf(stderr, "softnic %s: %v\n", name, err)
		return 1
	}
	ctx, cancel := toolContext()
	defer cancel()
	err = ucmatose.Run(ctx, cfg, ucmatose.Env{CM: s.cm, Out: stdout, Stall: nf.stall})
	cerr := s.Close()
	var st *ucmatose.Status
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
