package main

import (
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/devinfo"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
)

var infoOpts = []optSpec{
	{getopt.Option{Short: 'd', Long: "ib-dev", Arg: getopt.RequiredArg}, "<dev>", "name the device <dev> (default softnic0)"},
	{getopt.Option{Short: 'i', Long: "ib-port", Arg: getopt.RequiredArg}, "<port>", "use port <port> of IB device (default all ports)"},
	{getopt.Option{Short: 'l', Long: "list", Arg: getopt.NoArg}, "", "print only the IB devices names"},
	{getopt.Option{Short: 'v', Long: "verbose", Arg: getopt.NoArg}, "", "print all the attributes of the IB device(s) (the default)"},
	{getopt.Option{Short: 's', Long: "short", Arg: getopt.NoArg}, "", "softnic: print what ibv_devinfo prints without -v"},
	{getopt.Option{Long: "json", Arg: getopt.NoArg}, "", "softnic: print the -v attributes as one JSON object"},
	{getopt.Option{Long: "addr", Arg: getopt.RequiredArg}, "<ip>", "the NIC's IP address (default 127.0.0.1)"},
}

func infoUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: softnic info [options]\n\nPrints the attributes of the softnic NIC at --addr in the layout of rdma-core's\n"+
		"\"ibv_devinfo -v\". It brings the NIC up on a private in-memory link: it binds no\nport and needs no peer. With --json it prints the same attributes as one JSON\nobject (tools/devinfo.Device documents it).\n\nOptions:")
	writeOpts(w, infoOpts)
}

// runInfo implements "softnic info".
func runInfo(args []string, stdout, stderr io.Writer) int {
	r, status, ok := parseTool("info", infoOpts[:len(infoOpts)-1], args, stdout, stderr, infoUsage)
	if !ok {
		return status
	}
	if len(r.Operands) > 0 {
		fmt.Fprintf(stderr, "softnic info: unexpected argument %q\n", r.Operands[0])
		return exitTool
	}
	nf, err := parseNICFlags(r)
	if err != nil {
		fmt.Fprintf(stderr, "softnic info: %v\n", err)
		return exitTool
	}
	addr := nf.addr
	if !addr.IsValid() {
		addr = toolnic.DefaultServerAddr
	}
	name := "softnic0"
	if m, ok := r.Last("ib-dev"); ok {
		name = m.Value
	}
	o := devinfo.Options{Verbose: !r.Has("short")}
	if m, ok := r.Last("ib-port"); ok {
		v, err := getopt.Int(m.Value)
		if err != nil || v < 1 || v > 255 {
			fmt.Fprintf(stderr, "softnic info: invalid --ib-port %q\n", m.Value)
			return exitTool
		}
		o.Port = int(v)
	}
	if r.Has("list") {
		if r.Has("json") {
			fmt.Fprintln(stderr, "softnic info: -l and --json do not go together")
			return exitTool
		}
		devinfo.List(stdout, []string{name})
		return exitOK
	}
	n, err := toolnic.Open(toolnic.Config{Addr: addr, Name: name, Detached: true})
	if err != nil {
		return failTool(stderr, "info", err)
	}
	defer n.Close()
	if o.Port > 1 {
		fmt.Fprintln(stderr, "Invalid port requested for device")
		return exitTool
	}
	write := devinfo.Write
	if r.Has("json") {
		write = devinfo.WriteJSON
	}
	if err := write(stdout, n.Dev, o); err != nil {
		return failTool(stderr, "info", err)
	}
	return exitOK
}
