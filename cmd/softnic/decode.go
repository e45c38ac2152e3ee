package main

import (
	"bufio"
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/decode"
)

// runDecode implements "softnic decode [--json] FILE.pcap...": it prints
// every RoCEv2 packet of the captures with its ICRC verdict and ends with
// the line "N packets, N icrc ok, N icrc bad". It exits 1 when a packet has
// a bad ICRC or does not parse, or a file cannot be read.
func runDecode(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("decode", "decode [--json] FILE.pcap...\n\n"+
		"Prints each RoCEv2 packet (UDP port 4791) of the pcap or pcapng files: frame\n"+
		"number, addresses, opcode, QPN, PSN, extension headers, payload length, the\n"+
		"MAD of a QP 1 datagram (connection manager messages field by field) and\n"+
		"the ICRC verdict, then a summary. Exits 1 if any ICRC is bad, any packet is\n"+
		"malformed or any file cannot be read.", stderr)
	jsonOut := fs.Bool("json", false, "print one JSON object per packet and a final JSON summary object")
	files, status, ok := parseArgs(fs, args)
	if !ok {
		return status
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "softnic decode: no capture files given")
		fs.Usage()
		return exitUsage
	}
	out := bufio.NewWriter(stdout)
	sum, err := decode.Run(out, files, decode.Options{JSON: *jsonOut})
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "softnic decode: %v\n", err)
		return exitFail
	}
	if !sum.OK() {
		return exitFail
	}
	return exitOK
}
