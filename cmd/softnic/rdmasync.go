package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/cm/rdmasync"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

// rdmaSyncUsage is the usage of rdma_server (client false) or
// rdma_client.
func rdmaSyncUsage(client bool) func(io.Writer) {
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
		writeCMUsage(w, b.String(), rdmaSyncOpts(client),
			fmt.Sprintf("\nThe output lines (\"%s: start\", \"%s: end N\") and exit status are the C tool's.", name, name))
	}
}

func rdmaSyncOpts(client bool) []optSpec {
	o := newOpt
	R := getopt.RequiredArg
	var opts []optSpec
	if client {
		opts = append(opts, o('s', "", R, "server_address", "the server (default 127.0.0.1)"))
	}
	return append(opts, o('p', "", R, "port_number", "port (default 7471)"))
}

// runRDMASync returns the run function of softnic rdma_server or
// rdma_client.
func runRDMASync(client bool) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		name := "rdma_server"
		if client {
			name = "rdma_client"
		}
		r, status, ok := parseCMTool(name, rdmaSyncOpts(client), args, stdout, stderr, rdmaSyncUsage(client), 1)
		if !ok {
			return status
		}
		server, port := rdmasync.DefaultServer, rdmasync.DefaultPort
		if m, ok := r.Last("s"); ok {
			server = m.Value
		}
		if m, ok := r.Last("p"); ok {
			port = m.Value
		}
		nf, ok := cmNICFlags(name, r, stdout, stderr, rdmaSyncUsage(client))
		if !ok {
			return 1
		}
		addr := toolnic.DefaultServerAddr
		if client {
			dst, err := lookupHost(server)
			if err == nil {
				addr, err = cmNICAddr(false, netip.Addr{}, netip.Addr{}, dst)
			}
			if err != nil && !nf.addr.IsValid() {
				fmt.Fprintf(stderr, "softnic %s: choosing the NIC address (give one with --addr): %v\n", name, err)
				return 1
			}
		}
		return runOnCM(name, nf, addr, nil, stderr, func(ctx context.Context, c *cm.CM) error {
			env := toolnic.Env{CM: c, Out: stdout, Err: stderr, Stall: nf.stall}
			var status int
			if client {
				status = rdmasync.RunClient(ctx, server, port, env)
			} else {
				status = rdmasync.RunServer(ctx, port, env)
			}
			if status != 0 {
				return &cmkit.Status{Code: status}
			}
			return nil
		})
	}
}
