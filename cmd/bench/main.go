// Command bench is scripts/bench: it measures the machine's raw UDP
// limits and softnic's bandwidth, message rate and latency in one run and
// prints them as one table with ratios and issue 13's goals (package
// internal/bench). scripts/bench builds it, softnic and udpbench and runs
// it; run that, not this.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/softnic/softnic/internal/bench"
)

const usage = `usage: scripts/bench [--quick] [--json] [--qps N] [--cpuprofile FILE]

Measures, in one run on this machine:
  - the raw UDP limits with cmd/udpbench (raw/plain, raw/gso+gro, and
    softnic's UDP link without the engine, link/gso+gro), 4112-byte datagrams;
  - softnic between two processes on 127.0.0.1 and 127.0.0.2 with the
    perftest look-alikes' --json: write_bw 64 KiB, read_bw 64 KiB, send_bw 64 B
    (message rate), write_lat 8 B (typical, p99 and a histogram of every
    sample) and write_bw 64 KiB over --qps QPs;
and prints them with write_bw over raw gso+gro and issue 13's goals, each
PASS or SHORT. It binds UDP port 4791 on 127.0.0.1 and 127.0.0.2 and TCP
ports from --port: run it where nothing else does (a network namespace).
Exit status 1 when a measurement failed (its row says FAILED and why); a
SHORT figure is a measurement, not a failure.

busy-poll mode: not built (its rows print "n/a (not built)")
guest mode: not built (two 1-vCPU guests of the interop bed, rxe <-> rxe then
softnic <-> softnic)

Options:
`

func main() {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "a short smoke run: fewer iterations, shorter udpbench runs")
	asJSON := fs.Bool("json", false, "print the table as one JSON object (progress on standard error)")
	qps := fs.Int("qps", 1000, "QPs of the many-QP write_bw (perftest's -q); 0 skips it")
	prof := fs.String("cpuprofile", "", "write the write_lat 8 B client's CPU profile to `file`")
	softnic := fs.String("softnic", "softnic", "the softnic binary")
	udpbench := fs.String("udpbench", "udpbench", "the udpbench binary")
	port := fs.Int("port", 18600, "first TCP port of the tools' out-of-band exchanges")
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m := bench.Run(ctx, bench.Config{Softnic: *softnic, UDPBench: *udpbench, Quick: *quick,
		TCPPort: *port, ManyQPs: *qps, CPUProfile: *prof, Log: os.Stderr})
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
