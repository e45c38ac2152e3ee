package devinfo

import (
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

const name = "info"

// Command is "softnic info".
var Command = toolcmd.Command{Name: name, Summary: "show a NIC's attributes, like rdma-core's ibv_devinfo -v", Run: run}

var opts = []toolcmd.Opt{
	{Option: getopt.Option{Short: 'd', Long: "ib-dev", Arg: getopt.RequiredArg}, Arg: "<dev>", Help: "name the device <dev> (default softnic0)"},
	{Option: getopt.Option{Short: 'i', Long: "ib-port", Arg: getopt.RequiredArg}, Arg: "<port>", Help: "use port <port> of IB device (default all ports)"},
	{Option: getopt.Option{Short: 'l', Long: "list", Arg: getopt.NoArg}, Help: "print only the IB devices names"},
	{Option: getopt.Option{Short: 'v', Long: "verbose", Arg: getopt.NoArg}, Help: "print all the attributes of the IB device(s) (the default)"},
	{Option: getopt.Option{Short: 's', Long: "short", Arg: getopt.NoArg}, Help: "softnic: print what ibv_devinfo prints without -v"},
	{Option: getopt.Option{Long: "json", Arg: getopt.NoArg}, Help: "softnic: print the -v attributes as one JSON object"},
	{Option: getopt.Option{Long: "addr", Arg: getopt.RequiredArg}, Arg: "<ip>", Help: "the NIC's IP address (default 127.0.0.1)"},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: softnic info [options]\n\nPrints the attributes of the softnic NIC at --addr in the layout of rdma-core's\n"+
		"\"ibv_devinfo -v\". It brings the NIC up on a private in-memory link: it binds no\nport and needs no peer. With --json it prints the same attributes as one JSON\n"+
		"object (tools/devinfo.Device documents it).\n\nOptions:")
	toolcmd.WriteOpts(w, opts)
}

func run(env *toolnic.Env, args []string) int {
	// --addr is one of the NIC options Parse adds.
	r, status, ok := toolcmd.Parse(env, name, opts[:len(opts)-1], args, usage)
	if !ok {
		return status
	}
	if len(r.Operands) > 0 {
		fmt.Fprintf(env.Err, "softnic info: unexpected argument %q\n", r.Operands[0])
		return toolcmd.ExitFail
	}
	if err := toolcmd.ParseNICOpts(r, env); err != nil {
		fmt.Fprintf(env.Err, "softnic info: %v\n", err)
		return toolcmd.ExitFail
	}
	addr := env.NIC.Addr
	if !addr.IsValid() {
		addr = toolnic.DefaultServerAddr
	}
	dev := "softnic0"
	if m, ok := r.Last("ib-dev"); ok {
		dev = m.Value
	}
	o := Options{Verbose: !r.Has("short")}
	if m, ok := r.Last("ib-port"); ok {
		v, err := getopt.Int(m.Value)
		if err != nil || v < 1 || v > 255 {
			fmt.Fprintf(env.Err, "softnic info: invalid --ib-port %q\n", m.Value)
			return toolcmd.ExitFail
		}
		o.Port = int(v)
	}
	if r.Has("list") {
		if r.Has("json") {
			fmt.Fprintln(env.Err, "softnic info: -l and --json do not go together")
			return toolcmd.ExitFail
		}
		List(env.Out, []string{dev})
		return toolcmd.ExitOK
	}
	n, err := toolnic.Open(toolnic.Config{Addr: addr, Name: dev, Detached: true, CC: env.NIC.CC})
	if err != nil {
		return toolcmd.Fail(env, name, err)
	}
	defer n.Close()
	if o.Port > 1 {
		fmt.Fprintln(env.Err, "Invalid port requested for device")
		return toolcmd.ExitFail
	}
	write := Write
	if r.Has("json") {
		write = WriteJSON
	}
	if err := write(env.Out, n.Dev, o); err != nil {
		return toolcmd.Fail(env, name, err)
	}
	return toolcmd.ExitOK
}
