// Command bench is scripts/bench: it measures the machine's raw UDP
// limits and softnic's bandwidth, message rate, CPU per GB and latency in
// one run and prints them as one table with ratios and the goals of
// issues 34 and 13 (package tools/bench). scripts/bench builds it, softnic and udpbench and runs
// it; run that, not this.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/softnic/softnic/tools/bench"
	"github.com/softnic/softnic/tools/toolnic"
)

const usage = `usage: scripts/bench [--quick] [--json] [--qps N] [--gomaxprocs N] [--cpuprofile FILE] [--clib DIR]
       scripts/bench --guests [--quick] [--json] [--results DIR] [--rounds N]

Measures, in one run on this machine:
  - the raw UDP limits with cmd/udpbench (raw/plain, raw/gso+gro, and
    softnic's UDP link without the engine, link/gso+gro), 4112-byte
    datagrams, and again with 80-byte ones, a 64-byte SEND's packet: the
    message-rate limit;
  - softnic between two processes on 127.0.0.1 and 127.0.0.2 with the
    perftest look-alikes' --json: write_bw 64 KiB, read_bw 64 KiB, send_bw 64 B
    (message rate), write_lat 8 B twice, with blocking waits and with
    --busy-poll on both sides (typical, p99 and a histogram of every
    sample, for each), and write_bw 64 KiB over --qps QPs;
  - the CPU time (user + system) per 10^9 bytes moved: udpbench's process
    over each mode's run; softnic's two processes from start to exit,
    less the same of a setup run (the same pair with -n 5), over the
    bytes beyond the setup run's;
  - with --clib (scripts/bench builds softnic's libibverbs and gives it):
    Debian's perftest over that library (softnic exec), ib_write_bw 64 KiB,
    ib_send_bw 64 B and ib_write_lat 8 B with the look-alikes' arguments,
    each against its look-alike's figure of the same run (issue 31's goals:
    bandwidth and message rate >= 90%, latency <= 1.2x);
and prints them with each figure over raw gso+gro (send_bw: over the
80-byte datagrams' gso+gro rate) and the goals, each PASS or SHORT:
issue 34's (write_bw and read_bw >= 0.75 of raw gso+gro and CPU/GB <=
1.5x link/gso+gro's; send_bw >= 2 M msg/s and >= 0.5 of the 80-byte
gso+gro; --busy-poll write_lat <= 1.5x the busy ping-pong and <= the
blocking one, p99 <= 3x typical; write_bw over --qps QPs >= 0.85 of one
QP's), issue 31's for --clib's rows, and issue 13's absolute ones (write_bw >= 20 Gbit/s, write_lat
<= 25 us blocking and <= 10 us busy-poll). It binds UDP port 4791 on
127.0.0.1 and 127.0.0.2 and TCP ports from --port: run it where nothing
else does (a network namespace).
Exit status 1 when a measurement failed (its row says FAILED and why); a
SHORT figure is a measurement, not a failure. --cpuprofile profiles the
blocking write_lat 8 B client (the run without --busy-poll). Each softnic
process runs with GOMAXPROCS set to half the CPUs (at least 1), as if
each had a host of its own; --gomaxprocs 0 leaves Go's default (every
CPU each, the two runtimes contending for the same CPUs).

--guests (needs root; slow: 4-6 minutes under qemu TCG, not for CI)
boots two identical 1-vCPU guests of the interop bed (test/interop/bed)
and measures plain UDP's floor between them with a static udpbench
(-serve in one, -peer in the other: raw/plain and raw/gso+gro with
datagrams of a packet at the path MTU, and the ping-pong). Then each
test runs twice back to back: perftest over rxe (ib_write_bw and
ib_read_bw 64 KiB, ib_send_bw 64 B, ib_write_lat 8 B), then, with rxe
removed from both guests (and added again before the next test), a
static softnic's look-alike with the same arguments. It prints each
figure for rxe <-> rxe and softnic <-> softnic, its floor, and
softnic/rxe against issue 13's goals (bandwidth and message rate >= 2x,
latency <= 1x). softnic's write_lat 8 B runs once more with --busy-poll
on both sides (rxe has no such mode): the row "write_lat 8 B typical,
busy-poll" is over rxe's one write_lat, goal <= 1x. It refuses to run
when the bed is up already, and always takes its bed down. --results
keeps every tool's output. --rounds N runs all the tests N times (rxe's
and softnic's back to back each time) and shows each figure's median and
softnic/rxe as the median of the rounds' own: the guests' speed drifts
by up to 2x over minutes, more than one run can tell.

Options:
`

func main() {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "a short smoke run: fewer iterations, shorter udpbench runs")
	asJSON := fs.Bool("json", false, "print the table as one JSON object (progress on standard error)")
	qps := fs.Int("qps", 1000, "QPs of the many-QP write_bw (perftest's -q); 0 skips it")
	procs := fs.Int("gomaxprocs", toolnic.CPUShare(runtime.NumCPU(), 2), "GOMAXPROCS of each softnic process (default: half the CPUs each, at least 1); 0: Go's default, every CPU")
	prof := fs.String("cpuprofile", "", "write the blocking write_lat 8 B client's CPU profile (the run without --busy-poll) to `file`")
	softnic := fs.String("softnic", "softnic", "the softnic binary")
	clib := fs.String("clib", "", "the directory of softnic's libibverbs (scripts/clib): Debian's perftest runs over it too")
	udpbench := fs.String("udpbench", "udpbench", "the udpbench binary (--guests: a static one, for the floor; empty: no floor)")
	port := fs.Int("port", 18600, "first TCP port of the tools' out-of-band exchanges")
	guests := fs.Bool("guests", false, "the guest mode: rxe <-> rxe then softnic <-> softnic on two 1-vCPU guests of the interop bed (root)")
	bed := fs.String("bed", "test/interop/bed", "--guests: the interop bed's script")
	state := fs.String("bed-state", "", "--guests: the bed's INTEROP_STATE (default: $INTEROP_STATE, else /run/softnic-interop)")
	results := fs.String("results", "", "--guests: a directory to keep every tool's output in")
	rounds := fs.Int("rounds", 1, "--guests: how many times to run the tests (medians are shown)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(os.Stdout)
			fs.Usage()
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		fs.SetOutput(os.Stderr)
		fs.Usage()
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *rounds < 1 {
		fmt.Fprintf(os.Stderr, "bench: --rounds %d: at least 1\n", *rounds)
		os.Exit(2)
	}
	if *guests {
		os.Exit(runGuests(ctx, bench.GuestConfig{Bed: *bed, Softnic: *softnic, UDPBench: *udpbench, State: stateDir(*state),
			Results: *results, Quick: *quick, Rounds: *rounds, Log: os.Stderr}, *asJSON))
	}
	m := bench.Run(ctx, bench.Config{Softnic: *softnic, UDPBench: *udpbench, Quick: *quick,
		TCPPort: *port, ManyQPs: *qps, CPUProfile: *prof, GOMAXPROCS: *procs, CLib: *clib, Log: os.Stderr})
	t := bench.Build(m)
	if *asJSON {
		b, err := t.JSON()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
	} else {
		fmt.Print(t.Format())
	}
	if len(m.Errors) > 0 {
		os.Exit(1)
	}
}

// runGuests runs the guest mode and prints its table; it returns the exit
// status: 1 when a figure is missing or the run stopped early.
func runGuests(ctx context.Context, c bench.GuestConfig, asJSON bool) int {
	t := bench.BuildGuests(bench.RunGuests(ctx, c))
	if asJSON {
		b, err := t.JSON()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 1
		}
		os.Stdout.Write(b)
	} else {
		fmt.Print(t.Format())
	}
	if t.Failed() {
		return 1
	}
	return 0
}

// stateDir returns the bed's state directory: flag, else $INTEROP_STATE,
// else lib.sh's default.
func stateDir(flag string) string {
	if flag != "" {
		return flag
	}
	if s := os.Getenv("INTEROP_STATE"); s != "" {
		return s
	}
	return "/run/softnic-interop"
}
