// Command softnic is the softnic tool. Each subcommand is one entry in
// commandList, declared by the package that holds its logic (a
// toolcmd.Command: its name, its line of help, and a run that parses its
// command line and runs it); this package only dispatches, prints the
// list and the version, and wires the standard streams (STYLE.md §23).
//
// Usage:
//
//	softnic demo [-v] [--role both|server|client]
//	softnic decode [--json] FILE.pcap...
//	softnic rc_pingpong|uc_pingpong|ud_pingpong|srq_pingpong [options] [host]
//	softnic tm_pingpong [-t tags] [-r rndv-bytes] [-u late] [-c] [--json] [options] [host]
//	softnic xsrq_pingpong [-c clients] [-n tests] [options] [host]
//	softnic write_bw|write_lat|read_bw|read_lat|send_bw|send_lat|atomic_bw|atomic_lat [options] [host]
//	softnic rping -s|-c [-vVdPq] [-S size] [-C count] [-I addr] [-a addr] [-p port]
//	softnic ucmatose [-s server] [-b bind] [-c conns] [-C count] [-S size] [-p port] [-P tcp|ib]
//	softnic rdma_server [-p port]
//	softnic rdma_client [-s server] [-p port]
//	softnic udaddy [-s server] [-b bind] [-c conns] [-C count] [-S size] [-P udp|ipoib]
//	softnic mckey -m group [-s] [-b bind] [-c conns] [-C count] [-S size] [-p port_space]
//	softnic info [--addr IP] [-d dev] [-i port] [-l] [--json]
//	softnic help [COMMAND]
//	softnic version
//
// The NIC tools take the options of the rdma-core, perftest and librdmacm
// tools they are named after and pair with them in either role; see
// tools/pingpong, tools/perftest, tools/cm and tools/devinfo.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/softnic/softnic/tools/cm/mckey"
	"github.com/softnic/softnic/tools/cm/rdmasync"
	"github.com/softnic/softnic/tools/cm/rping"
	"github.com/softnic/softnic/tools/cm/ucmatose"
	"github.com/softnic/softnic/tools/cm/udaddy"
	"github.com/softnic/softnic/tools/decode"
	"github.com/softnic/softnic/tools/demo"
	"github.com/softnic/softnic/tools/devinfo"
	"github.com/softnic/softnic/tools/perftest"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/tools/tmpingpong"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/tools/xsrqpingpong"
)

// Exit statuses of softnic itself (package toolcmd).
const (
	exitOK    = toolcmd.ExitOK
	exitFail  = toolcmd.ExitFail
	exitUsage = toolcmd.ExitUsage
)

// commandList returns the commands in the order help lists them. To add
// one, declare its toolcmd.Command beside its logic and add a line here.
func commandList() []toolcmd.Command {
	return []toolcmd.Command{
		demo.Command,
		decode.Command,
		pingpong.Command(pingpong.RC),
		pingpong.Command(pingpong.UC),
		pingpong.Command(pingpong.UD),
		pingpong.Command(pingpong.SRQ),
		tmpingpong.Command,
		xsrqpingpong.Command,
		perftest.Command(perftest.Write, perftest.BW),
		perftest.Command(perftest.Write, perftest.Lat),
		perftest.Command(perftest.Read, perftest.BW),
		perftest.Command(perftest.Read, perftest.Lat),
		perftest.Command(perftest.Send, perftest.BW),
		perftest.Command(perftest.Send, perftest.Lat),
		perftest.Command(perftest.Atomic, perftest.BW),
		perftest.Command(perftest.Atomic, perftest.Lat),
		rping.Command,
		ucmatose.Command,
		rdmasync.ServerCommand,
		rdmasync.ClientCommand,
		udaddy.Command,
		mckey.Command,
		devinfo.Command,
		{Name: "exec", Summary: "run an unmodified libibverbs program (ibv_devinfo, perftest, pyverbs) over softnic", Run: runExec},
		{Name: "help", Summary: "show usage of softnic or of one command", Run: runHelp},
		{Name: "version", Summary: "print the version", Run: runVersion},
	}
}

// testLink, when set, replaces the UDP link of every tool: cmd tests run
// the tools in-process over the in-memory fabric with it.
var testLink toolnic.LinkFunc

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches to the command named by args[0].
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "softnic: unknown command %q\nRun 'softnic help' for usage.\n", args[0])
		return exitUsage
	}
	return c.Run(&toolnic.Env{Out: stdout, Err: stderr, NIC: toolnic.Config{Link: testLink}}, args[1:])
}

func lookup(name string) (toolcmd.Command, bool) {
	for _, c := range commandList() {
		if c.Name == name {
			return c, true
		}
	}
	return toolcmd.Command{}, false
}

// usage prints the list of commands.
func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("softnic is a software RoCEv2 RDMA NIC.\n\nUsage:\n\n\tsoftnic <command> [arguments]\n\nCommands:\n\n")
	for _, c := range commandList() {
		fmt.Fprintf(&b, "\t%-13s %s\n", c.Name, c.Summary)
	}
	b.WriteString("\nRun 'softnic help <command>' for a command's usage.\n")
	io.WriteString(w, b.String())
}

// runHelp implements "softnic help [COMMAND]": a command's usage is what
// it prints for -h, on standard output.
func runHelp(env *toolnic.Env, args []string) int {
	stdout, stderr := env.Out, env.Err
	switch {
	case len(args) == 0:
		usage(stdout)
		return exitOK
	case len(args) > 1:
		fmt.Fprintln(stderr, "usage: softnic help [COMMAND]")
		return exitUsage
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "softnic help: unknown command %q\nRun 'softnic help' for usage.\n", args[0])
		return exitUsage
	}
	if c.Name == "help" {
		fmt.Fprintln(stdout, "usage: softnic help [COMMAND]\n\nShows usage of softnic or of COMMAND.")
		return exitOK
	}
	return c.Run(&toolnic.Env{Out: stdout, Err: stdout}, []string{"-h"})
}
