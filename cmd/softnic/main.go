// Command softnic is the softnic tool. Each subcommand is one entry in
// commandList and one file holding its run function; the logic lives in
// packages that tests call directly, so this package only parses flags,
// wires and prints (STYLE.md §23).
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
//	softnic exec [--addr IP] [options] -- PROGRAM [ARGS...]
//	softnic help [COMMAND]
//	softnic version
//
// The NIC tools take the options of the rdma-core and perftest tools they
// are named after and pair with them in either role; see
// tools/pingpong, tools/perftest and tools/devinfo.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/softnic/softnic/tools/perftest"
	"github.com/softnic/softnic/tools/pingpong"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem
	exitUsage = 2 // bad command line
)

// command is one subcommand. run gets the arguments after the command
// name and returns the exit status; given -h it prints its usage to stderr
// and returns exitOK.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commandList returns the subcommands in the order help lists them. To add
// one, add a line here.
func commandList() []command {
	return []command{
		{"demo", "run two softnic NICs against each other and check every byte", runDemo},
		{"decode", "decode and check the RoCEv2 packets in pcap files", runDecode},
		{"rc_pingpong", "RC SEND ping-pong, like rdma-core's ibv_rc_pingpong", runPingpong(pingpong.RC)},
		{"uc_pingpong", "UC SEND ping-pong, like rdma-core's ibv_uc_pingpong", runPingpong(pingpong.UC)},
		{"ud_pingpong", "UD SEND ping-pong, like rdma-core's ibv_ud_pingpong", runPingpong(pingpong.UD)},
		{"srq_pingpong", "RC ping-pong over a shared receive queue, like ibv_srq_pingpong", runPingpong(pingpong.SRQ)},
		{"tm_pingpong", "tagged messages on tag-matching SRQs, eager and rendezvous, some unexpected", runTMPingpong},
		{"xsrq_pingpong", "XRC ping-pong into the peer's XRC SRQ, like ibv_xsrq_pingpong", runXSRQPingpong},
		{"write_bw", "RDMA WRITE bandwidth, like perftest's ib_write_bw", runPerftest(perftest.Write, perftest.BW)},
		{"write_lat", "RDMA WRITE latency, like perftest's ib_write_lat", runPerftest(perftest.Write, perftest.Lat)},
		{"read_bw", "RDMA READ bandwidth, like perftest's ib_read_bw", runPerftest(perftest.Read, perftest.BW)},
		{"read_lat", "RDMA READ latency, like perftest's ib_read_lat", runPerftest(perftest.Read, perftest.Lat)},
		{"send_bw", "SEND bandwidth, like perftest's ib_send_bw", runPerftest(perftest.Send, perftest.BW)},
		{"send_lat", "SEND latency, like perftest's ib_send_lat", runPerftest(perftest.Send, perftest.Lat)},
		{"atomic_bw", "atomic bandwidth, like perftest's ib_atomic_bw", runPerftest(perftest.Atomic, perftest.BW)},
		{"atomic_lat", "atomic latency, like perftest's ib_atomic_lat", runPerftest(perftest.Atomic, perftest.Lat)},
		{"rping", "RDMA READ/WRITE ping over the connection manager, like librdmacm's rping", runRping},
		{"ucmatose", "RC connections through the connection manager, like librdmacm's ucmatose", runUcmatose},
		{"rdma_server", "one 16-byte SEND each way, synchronous CM calls, like librdmacm's rdma_server", runRDMASync(false)},
		{"rdma_client", "the client of rdma_server, like librdmacm's rdma_client", runRDMASync(true)},
		{"udaddy", "UD datagrams to peers resolved through the connection manager (SIDR), like librdmacm's udaddy", runUdaddy},
		{"mckey", "UD multicast joined through the connection manager, like librdmacm's mckey", runMckey},
		{"info", "show a NIC's attributes, like rdma-core's ibv_devinfo -v", runInfo},
		{"exec", "run an unmodified libibverbs program (ibv_devinfo, perftest, pyverbs) over softnic", runExec},
		{"help", "show usage of softnic or of one command", runHelp},
		{"version", "print the version", runVersion},
	}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches to the subcommand named by args[0].
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
	return c.run(args[1:], stdout, stderr)
}

func lookup(name string) (command, bool) {
	for _, c := range commandList() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usage prints the list of commands.
func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("softnic is a software RoCEv2 RDMA NIC.\n\nUsage:\n\n\tsoftnic <command> [arguments]\n\nCommands:\n\n")
	for _, c := range commandList() {
		fmt.Fprintf(&b, "\t%-13s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'softnic help <command>' for a command's usage.\n")
	io.WriteString(w, b.String())
}

// runHelp implements "softnic help [COMMAND]".
func runHelp(args []string, stdout, stderr io.Writer) int {
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
	if c.name == "help" {
		fmt.Fprintln(stdout, "usage: softnic help [COMMAND]\n\nShows usage of softnic or of COMMAND.")
		return exitOK
	}
	return c.run([]string{"-h"}, stdout, stdout)
}

// newFlagSet returns a flag set for command name whose usage message is
// synopsis followed by the flag defaults.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("softnic "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: softnic %s\n", synopsis)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(fs.Output(), "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseArgs parses args with fs, allowing flags after positional
// arguments ("decode a.pcap --json"); "--" ends the flags. It returns the
// positional arguments, and the exit status to use when parsing failed or
// help was asked for (ok false).
func parseArgs(fs *flag.FlagSet, args []string) (pos []string, status int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), exitOK, true
		}
		if len(rest) == 0 {
			return pos, exitOK, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
