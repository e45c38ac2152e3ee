package demo

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"

	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

// Command is "softnic demo".
var Command = toolcmd.Command{Name: "demo", Summary: "run two softnic NICs against each other and check every byte", Run: run}

func run(env *toolnic.Env, args []string) int {
	fs := toolcmd.NewFlagSet("demo", "demo [-v] [--addr-a IP] [--addr-b IP] [--port-udp N] [--role both|server|client] [--port N]\n\n"+
		"Starts two softnic processes, each with its own NIC (127.0.0.1 and 127.0.0.2 by\n"+
		"default), and has them run an RC ping-pong, an RDMA WRITE bandwidth test, RDMA\n"+
		"READs and atomics against each other over RoCEv2 (UDP), with the rc_pingpong\n"+
		"and perftest look-alikes, every run checking its data. Exits 0 only if every\n"+
		"run passed and every byte checked out.\n\n"+
		"Across two hosts, run the same command on both but for --role: the servers'\n"+
		"half on the host at --addr-a, the clients' half on the host at --addr-b, in\n"+
		"either order (each waits 45 s for the other at each step):\n\n"+
		"  hostA$ softnic demo --addr-a 10.0.0.1 --addr-b 10.0.0.2 --role server\n"+
		"  hostB$ softnic demo --addr-a 10.0.0.1 --addr-b 10.0.0.2 --role client\n\n"+
		"The steps use TCP ports --port, --port+1, ... for their out-of-band exchange.", env.Err)
	verbose := fs.Bool("v", false, "also print every tool's own output")
	a := fs.String("addr-a", "127.0.0.1", "the first NIC's address (the servers')")
	b := fs.String("addr-b", "127.0.0.2", "the second NIC's address (the clients')")
	port := fs.Uint("port-udp", 4791, "the RoCEv2 UDP port of both NICs")
	role := fs.String("role", "both", "both: run both processes here; server or client: one half of a demo across two hosts")
	tcp := fs.Uint("port", 0, fmt.Sprintf("the first step's TCP port (default: any free port; %d with --role server or client)", DefaultPort))
	rest, status, ok := toolcmd.ParseArgs(fs, args)
	if !ok {
		return status
	}
	if len(rest) > 0 {
		fmt.Fprintf(env.Err, "softnic demo: unexpected argument %q\n", rest[0])
		return toolcmd.ExitUsage
	}
	aa, err1 := netip.ParseAddr(*a)
	ba, err2 := netip.ParseAddr(*b)
	if err := errors.Join(err1, err2); err != nil || *port == 0 || *port > 65535 || *tcp > 65535-uint(len(Steps)) {
		fmt.Fprintf(env.Err, "softnic demo: bad address or port: %v\n", err)
		return toolcmd.ExitUsage
	}
	r, err := ParseRole(*role)
	if err != nil {
		fmt.Fprintf(env.Err, "softnic demo: --role: %v\n", err)
		return toolcmd.ExitUsage
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(env.Err, "softnic demo: %v\n", err)
		return toolcmd.ExitFail
	}
	// Both processes on this machine: half its CPUs each, unless the
	// user chose GOMAXPROCS (the children inherit it).
	procs := 0
	if os.Getenv("GOMAXPROCS") == "" {
		procs = toolnic.CPUShare(runtime.NumCPU(), 2)
	}
	ctx, cancel := toolcmd.Context()
	defer cancel()
	if err := Run(ctx, Config{Exe: exe, A: aa.Unmap(), B: ba.Unmap(), UDPPort: uint16(*port), Verbose: *verbose,
		Role: r, Port: int(*tcp), GOMAXPROCS: procs}, env.Out); err != nil {
		fmt.Fprintf(env.Err, "softnic demo: %v\n", err)
		return toolcmd.ExitFail
	}
	return toolcmd.ExitOK
}
