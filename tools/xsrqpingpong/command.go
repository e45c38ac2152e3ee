package xsrqpingpong

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

const name = "xsrq_pingpong"

// Command is "softnic xsrq_pingpong".
var Command = toolcmd.Command{Name: name,
	Summary: "XRC ping-pong into the peer's XRC SRQ, like ibv_xsrq_pingpong", Run: run}

// opts are ibv_xsrq_pingpong's options, in its getopt order
// ("p:d:i:s:m:n:l:eog:c:").
func opts() []toolcmd.Opt {
	o := toolcmd.NewOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return append(pingpong.ConnOpts(),
		o('s', "size", R, "<size>", "size of message to exchange (default 4096)"),
		o('m', "mtu", R, "<size>", "path MTU (default 1024)"),
		o('c', "clients", R, "<n>", "number of clients (on server only, default 1)"),
		o('n', "num_tests", R, "<n>", "number of tests per client (default 5)"),
		o('l', "sl", R, "<sl>", "service level value"),
		o('e', "events", N, "", "sleep on CQ events (default poll)"),
		o('o', "odp", N, "", "use on demand paging (softnic: refused, no ODP)"),
		o('g', "gid-idx", R, "<gid index>", "local port gid index (softnic: default 0)"),
	)
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: softnic xsrq_pingpong [options] [host]\n\n"+
		"softnic's version of rdma-core's ibv_xsrq_pingpong: XRC SENDs into the peer's XRC SRQ,\n"+
		"one XRC_SEND and one XRC_RECV QP per client on each side.\n\n"+
		"  softnic xsrq_pingpong            start a server and wait for connection\n"+
		"  softnic xsrq_pingpong <host>     connect to server at <host>\n\nOptions:\n")
	toolcmd.WriteOpts(w, opts())
	fmt.Fprintln(w, "\nsoftnic options:")
	toolcmd.WriteOpts(w, toolcmd.NICOpts)
	fmt.Fprintln(w, "\nThe output lines, the out-of-band exchange on TCP port -p and the exit status\n"+
		"are rdma-core's. A server with -c N sends round robin over all its clients' QPs, as\n"+
		"rdma-core's does: its clients must share an XRC domain, which rdma-core's clients on one\n"+
		"host do and softnic processes do not (go doc ./tools/xsrqpingpong).")
}

func run(env *toolnic.Env, args []string) int {
	r, status, ok := toolcmd.Parse(env, name, opts(), args, usage)
	if !ok {
		return status
	}
	cfg, err := config(r)
	return pingpong.RunCommand(env, name, r, err, &cfg.ServerName, cfg.IBDev,
		func(ctx context.Context, env toolnic.Env) error { return Run(ctx, cfg, env) }, nil)
}

// config turns the parsed options into a Config.
func config(r *getopt.Result) (Config, error) {
	cfg := Defaults()
	i := toolcmd.Int
	if err := toolcmd.ParseInts(r,
		i("port", 0, 65535, &cfg.Port), i("ib-port", 1, 255, &cfg.IBPort), i("size", 1, 1<<30, &cfg.Size),
		i("clients", 1, MaxClients, &cfg.Clients), i("num_tests", 1, 1<<31-1, &cfg.NumTests),
		i("sl", 0, 15, &cfg.SL), i("gid-idx", -1, 255, &cfg.GIDIndex),
	); err != nil {
		return cfg, err
	}
	if err := pingpong.ParseDevice(r, &cfg.IBDev, &cfg.MTU); err != nil {
		return cfg, err
	}
	if r.Has("odp") {
		return cfg, fmt.Errorf("-o (on demand paging): softnic has no ODP")
	}
	cfg.Events = r.Has("events")
	return cfg, nil
}
