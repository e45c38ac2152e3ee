package decode

import (
	"bufio"
	"fmt"

	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

// Command is "softnic decode [--json] FILE.pcap...": it prints every
// RoCEv2 packet of the captures with its ICRC verdict and ends with the
// line "N packets, N icrc ok, N icrc bad". It exits 1 when a packet has a
// bad ICRC or does not parse, or a file cannot be read.
var Command = toolcmd.Command{Name: "decode", Summary: "decode and check the RoCEv2 packets in pcap files", Run: run}

func run(env *toolnic.Env, args []string) int {
	fs := toolcmd.NewFlagSet("decode", "decode [--json] FILE.pcap...\n\n"+
		"Prints each RoCEv2 packet (UDP port 4791) of the pcap or pcapng files: frame\n"+
		"number, addresses, opcode, QPN, PSN, extension headers, payload length, the\n"+
		"MAD of a QP 1 datagram (connection manager messages field by field) and\n"+
		"the ICRC verdict, then a summary. Exits 1 if any ICRC is bad, any packet is\n"+
		"malformed or any file cannot be read.", env.Err)
	jsonOut := fs.Bool("json", false, "print one JSON object per packet and a final JSON summary object")
	files, status, ok := toolcmd.ParseArgs(fs, args)
	if !ok {
		return status
	}
	if len(files) == 0 {
		fmt.Fprintln(env.Err, "softnic decode: no capture files given")
		fs.Usage()
		return toolcmd.ExitUsage
	}
	out := bufio.NewWriter(env.Out)
	sum, err := Run(out, files, Options{JSON: *jsonOut})
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(env.Err, "softnic decode: %v\n", err)
		return toolcmd.ExitFail
	}
	if !sum.OK() {
		return toolcmd.ExitFail
	}
	return toolcmd.ExitOK
}
