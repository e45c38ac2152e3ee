package exec

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// Usage is softnic exec's usage text.
const Usage = `usage: softnic exec [options] -- PROGRAM [ARGS...]

Runs PROGRAM, an unmodified dynamically linked libibverbs program (ibv_devinfo,
ibv_rc_pingpong, perftest's ib_write_bw, pyverbs, ...), over a softnic NIC: with
LD_LIBRARY_PATH leading to softnic's libibverbs.so.1 (built by scripts/clib) and the
NIC configured by the SOFTNIC_* variables the options set. No kernel module, no root.

  softnic exec -- ibv_devinfo -v
  softnic exec --addr 127.0.0.5 -- ib_write_bw -x 1 &
  softnic exec --addr 127.0.0.6 -- ib_write_bw -x 1 127.0.0.5

The device is softnic0; its GID table is rxe's on an IPv4 netdev: GID[1] is the
address (-g 1, -x 1), GID[0] a link-local GID that names it.

Options:
  --addr=<ip>         the NIC's IP address (SOFTNIC_ADDR; default: the first loopback
                      address from 127.0.0.1 up whose UDP port 4791 is free)
  --port=<port>       UDP port (SOFTNIC_PORT; default 4791)
  --dev=<name>        device name (SOFTNIC_DEV; default softnic0)
  --mtu=<bytes>       the port's active MTU, 256..4096 (SOFTNIC_MTU; default: the
                      interface's, as rxe's)
  --busy-poll=<d>     blocking waits poll the link this long first, e.g. 50us
                      (SOFTNIC_BUSY_POLL)
  --poll-wait         after 50us of empty polls of a CQ, each ibv_poll_cq waits up
                      to 50us for the link first (SOFTNIC_POLL_WAIT=1; default:
                      polls of an empty CQ spin)
  --pcap=<file>       write every datagram to a pcap file; %p is the process ID
                      (SOFTNIC_PCAP)
  --metrics=<addr>    serve Prometheus metrics there (SOFTNIC_METRICS)
  --metrics-file=<f>  write the metrics there when the NIC closes (SOFTNIC_METRICS_FILE)
  --debug             print why each refused call failed (SOFTNIC_DEBUG=1)
  --lib=<dir>         the libraries' directory (SOFTNIC_LIB; default build/lib of
                      this checkout, or lib beside the softnic binary's bin/)
`

// Parse parses softnic exec's command line: the options, "--" (optional
// when PROGRAM does not start with "-") and the program to run. It
// returns the libraries' directory as --lib gave it ("" to look for
// them), the options and the program's argv.
func Parse(args []string) (lib string, o Options, argv []string, err error) {
	fs := flag.NewFlagSet("softnic exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "", "")
	port := fs.Uint("port", 0, "")
	fs.StringVar(&o.Dev, "dev", "", "")
	fs.IntVar(&o.MTU, "mtu", 0, "")
	fs.DurationVar(&o.BusyPoll, "busy-poll", 0, "")
	fs.BoolVar(&o.PollWait, "poll-wait", false, "")
	fs.StringVar(&o.Pcap, "pcap", "", "")
	fs.StringVar(&o.Metrics, "metrics", "", "")
	fs.StringVar(&o.MetricsFile, "metrics-file", "", "")
	fs.BoolVar(&o.Debug, "debug", false, "")
	fs.StringVar(&lib, "lib", "", "")
	if err := fs.Parse(args); err != nil {
		return "", o, nil, err
	}
	argv = fs.Args()
	if len(argv) == 0 {
		return "", o, nil, errors.New("no program to run")
	}
	if *addr != "" {
		a, err := netip.ParseAddr(*addr)
		if err != nil {
			return "", o, nil, fmt.Errorf("--addr %q: not an IP address", *addr)
		}
		o.Addr = a.Unmap()
	}
	if *port > 65535 {
		return "", o, nil, fmt.Errorf("--port %d: not a UDP port", *port)
	}
	o.Port = uint16(*port)
	// The options' rules are FromEnv's: check them through it.
	env := map[string]string{}
	for _, kv := range o.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if _, err := FromEnv(func(k string) string { return env[k] }); err != nil {
		return "", o, nil, err
	}
	return lib, o, argv, nil
}

// Command is softnic exec: it runs the program its arguments name over
// softnic, replacing the process, and returns an exit status only when it
// cannot (2 for a bad command line, 1 otherwise), having said why on
// stderr.
func Command(args []string, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		io.WriteString(stderr, Usage)
		return 0
	}
	lib, o, argv, err := Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "softnic exec: %v\n\n", err)
		io.WriteString(stderr, Usage)
		return 2
	}
	dir, err := FindLib(lib)
	if err != nil {
		fmt.Fprintf(stderr, "softnic exec: %v\n", err)
		return 1
	}
	err = Exec(dir, o, argv)
	fmt.Fprintf(stderr, "softnic exec: %s: %v\n", argv[0], err)
	return 1
}
