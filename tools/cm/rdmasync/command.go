package rdmasync

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

// ServerCommand is "softnic rdma_server".
var ServerCommand = toolcmd.Command{Name: "rdma_server",
	Summary: "one 16-byte SEND each way, synchronous CM calls, like librdmacm's rdma_server",
	Run:     func(env *toolnic.Env, args []string) int { return run(env, args, false) }}

// ClientCommand is "softnic rdma_client".
var ClientCommand = toolcmd.Command{Name: "rdma_client",
	Summary: "the client of rdma_server, like librdmacm's rdma_client",
	Run:     func(env *toolnic.Env, args []string) int { return run(env, args, true) }}

// usage is the usage of rdma_server (client false) or rdma_client.
func usage(client bool) func(io.Writer) {
	return func(w io.Writer) {
		name, other := "rdma_server", "rdma_client"
		if client {
			name, other = other, name
		}
		var b strings.Builder
		fmt.Fprintf(&b, "usage: softnic %s", name)
		if client {
			fmt.Fprint(&b, " [-s server_address]")
		}
		fmt.Fprint(&b, " [-p port_number]\n\n")
		fmt.Fprintf(&b, "softnic's version of librdmacm's %s: with %s (either softnic's or\n"+
			"rdma-core's) it connects through the RDMA CM's synchronous calls and exchanges one\n"+
			"16-byte SEND each way.\n\nOptions:\n", name, other)
		cmkit.WriteUsage(w, b.String(), opts(client),
			fmt.Sprintf("\nThe output lines (\"%s: start\", \"%s: end N\") and exit status are the C tool's.", name, name))
	}
}

func opts(client bool) []toolcmd.Opt {
	o := toolcmd.NewOpt
	R := getopt.RequiredArg
	var opts []toolcmd.Opt
	if client {
		opts = append(opts, o('s', "", R, "server_address", "the server (default 127.0.0.1)"))
	}
	return append(opts, o('p', "", R, "port_number", "port (default 7471)"))
}

// run is softnic rdma_server or rdma_client.
func run(env *toolnic.Env, args []string, client bool) int {
	name := "rdma_server"
	if client {
		name = "rdma_client"
	}
	r, status, ok := cmkit.Parse(env, name, opts(client), args, usage(client), 1)
	if !ok {
		return status
	}
	server, port := DefaultServer, DefaultPort
	if m, ok := r.Last("s"); ok {
		server = m.Value
	}
	if m, ok := r.Last("p"); ok {
		port = m.Value
	}
	if !cmkit.NICFlags(env, name, r, usage(client)) {
		return 1
	}
	addr := toolnic.DefaultServerAddr
	var err error
	if client {
		var dst netip.Addr
		if dst, err = cmkit.LookupHost(server); err == nil {
			addr, err = cmkit.NICAddr(false, netip.Addr{}, netip.Addr{}, dst)
		}
	}
	return cmkit.RunCommand(env, name, addr, err, 1, func(ctx context.Context, env toolnic.Env) error {
		var status int
		if client {
			status = RunClient(ctx, server, port, env)
		} else {
			status = RunServer(ctx, port, env)
		}
		if status != 0 {
			return &cmkit.Status{Code: status}
		}
		return nil
	})
}
