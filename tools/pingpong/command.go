package pingpong

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

var kindSummaries = [...]string{
	RC:  "RC SEND ping-pong, like rdma-core's ibv_rc_pingpong",
	UC:  "UC SEND ping-pong, like rdma-core's ibv_uc_pingpong",
	UD:  "UD SEND ping-pong, like rdma-core's ibv_ud_pingpong",
	SRQ: "RC ping-pong over a shared receive queue, like ibv_srq_pingpong",
}

// Command is "softnic rc_pingpong" (uc_pingpong, ud_pingpong,
// srq_pingpong): rdma-core's example k's options, then Run.
func Command(k Kind) toolcmd.Command {
	return toolcmd.Command{Name: k.String(), Summary: kindSummaries[k], Run: func(env *toolnic.Env, args []string) int {
		name := k.String()
		r, status, ok := toolcmd.Parse(env, name, opts(k), args, usage(k))
		if !ok {
			return status
		}
		cfg, err := config(k, r)
		return RunCommand(env, name, r, err, &cfg.ServerName, cfg.IBDev, func(ctx context.Context, env toolnic.Env) error {
			_, err := Run(ctx, cfg, env)
			return err
		}, nil)
	}}
}

// RunCommand is the end of a command of the pingpongs' kind (the
// pingpongs, tm_pingpong, xsrq_pingpong) once its options are parsed
// into a config (cfgErr, its error): at most one host operand, written
// to *server; the NIC opened for device dev and that host; run called on
// it; then done, when not nil (the JSON output). It returns the exit
// status.
func RunCommand(env *toolnic.Env, name string, r *getopt.Result, cfgErr error, server *string, dev string,
	run func(ctx context.Context, env toolnic.Env) error, done func() error) int {
	host, err := toolcmd.ServerHost(env, r, cfgErr, "more than one host: %q")
	if err != nil {
		return toolcmd.BadUsage(env, name, err)
	}
	if host != "" {
		*server = host
	}
	err = toolcmd.RunOnNIC(env, dev, *server, false, run)
	if err == nil && done != nil {
		err = done()
	}
	if err != nil {
		return toolcmd.Fail(env, name, err)
	}
	return toolcmd.ExitOK
}

// ConnOpts are the options every pingpong takes first, in rdma-core's
// getopt order: the out-of-band port, the device and its port.
func ConnOpts() []toolcmd.Opt {
	o, R := toolcmd.NewOpt, getopt.RequiredArg
	return []toolcmd.Opt{
		o('p', "port", R, "<port>", "listen on/connect to port <port> (default 18515)"),
		o('d', "ib-dev", R, "<dev>", "use IB device <dev> (softnic: names the NIC; default softnic0)"),
		o('i', "ib-port", R, "<port>", "use port <port> of IB device (default 1)"),
	}
}

// opts returns the options of rdma-core's example k, in its getopt
// order, with its usage text.
func opts(k Kind) []toolcmd.Opt {
	o := toolcmd.NewOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	size := "size of message to exchange (default 4096)"
	if k == UD {
		size = "size of message to exchange (default 1024)"
	}
	opts := append(ConnOpts(), o('s', "size", R, "<size>", size))
	if k != UD {
		opts = append(opts, o('m', "mtu", R, "<size>", "path MTU (default 1024)"))
	}
	if k == SRQ {
		opts = append(opts, o('q', "num-qp", R, "<num>", "number of QPs to use (default 16)"))
	}
	opts = append(opts,
		o('r', "rx-depth", R, "<dep>", "number of receives to post at a time (default 500)"),
		o('n', "iters", R, "<iters>", "number of exchanges (default 1000)"),
		o('l', "sl", R, "<sl>", "service level value"),
		o('e', "events", N, "", "sleep on CQ events (default poll)"),
		o('g', "gid-idx", R, "<gid index>", "local port gid index (softnic: default 0)"),
	)
	switch k {
	case RC:
		opts = append(opts,
			o('o', "odp", N, "", "use on demand paging"),
			o('O', "iodp", N, "", "use implicit on demand paging"),
			o('P', "prefetch", N, "", "prefetch an ODP MR"),
			o('t', "ts", N, "", "get CQE with timestamp"),
			o('c', "chk", N, "", "validate received buffer"),
			o('j', "dm", N, "", "use device memory"),
			o('N', "new_send", N, "", "use new post send WR API"),
			o('U', "allow-cc-unprotected", N, "", "allow allocation of unprotected/shared memory on CoCo guests"),
		)
	case SRQ:
		opts = append(opts,
			o('o', "odp", N, "", "use on demand paging"),
			o('c', "chk", N, "", "validate received buffer"))
	default:
		opts = append(opts, o('c', "chk", N, "", "validate received buffer"))
	}
	if k != UD {
		// softnic's own: the C tools hard-code timeout 14.
		opts = append(opts, o(0, "qp-timeout", R, "<n>",
			"softnic: local ACK timeout 4.096 us x 2^n, 0..31 (default 14, as the C tools; 0 = no timer)"))
	}
	return opts
}

func usage(k Kind) func(io.Writer) {
	return func(w io.Writer) {
		n := k.String()
		fmt.Fprintf(w, "usage: softnic %s [options] [host]\n\n", n)
		fmt.Fprintf(w, "softnic's version of rdma-core's ibv_%s: it pairs with ibv_%s in either role.\n\n", n, n)
		fmt.Fprintf(w, "  softnic %s            start a server and wait for connection\n", n)
		fmt.Fprintf(w, "  softnic %s <host>     connect to server at <host>\n\nOptions:\n", n)
		toolcmd.WriteOpts(w, opts(k))
		fmt.Fprintln(w, "\nsoftnic options:")
		toolcmd.WriteOpts(w, toolcmd.NICOpts)
		fmt.Fprintln(w, "\nThe output lines, the out-of-band exchange on TCP port -p and the exit status\n"+
			"are rdma-core's. -c checks every byte; a failed check exits 1.")
	}
}

// config turns the parsed options into a Config, refusing values the C
// tools refuse (and garbage they would silently take as 0).
func config(k Kind, r *getopt.Result) (Config, error) {
	cfg := Defaults(k)
	i := toolcmd.Int
	if err := toolcmd.ParseInts(r,
		i("port", 0, 65535, &cfg.Port), i("ib-port", 1, 255, &cfg.IBPort), i("size", 0, 1<<31, &cfg.Size),
		i("rx-depth", 1, 1<<14, &cfg.RxDepth), i("iters", 1, 1<<31-1, &cfg.Iters), i("sl", 0, 15, &cfg.SL),
		i("gid-idx", -1, 255, &cfg.GIDIndex), i("num-qp", 1, MaxQP, &cfg.NumQP),
		i("qp-timeout", 0, 31, &cfg.QPTimeout),
	); err != nil {
		return cfg, err
	}
	if err := ParseDevice(r, &cfg.IBDev, &cfg.MTU); err != nil {
		return cfg, err
	}
	cfg.Events = r.Has("events")
	cfg.Check = r.Has("chk")
	cfg.NewSend = r.Has("new_send")
	cfg.ODP = r.Has("odp") || r.Has("iodp")
	cfg.ImplicitODP = r.Has("iodp")
	cfg.Prefetch = r.Has("prefetch")
	cfg.Timestamps = r.Has("ts")
	cfg.DM = r.Has("dm")
	cfg.CCUnprotected = r.Has("allow-cc-unprotected")
	return cfg, nil
}

// ParseDevice sets the device (-d) and the path MTU (-m: 256 to 4096
// bytes, as pp_mtu_to_enum takes them) when the command line gives them.
func ParseDevice(r *getopt.Result, dev *string, mtu *ibv.MTU) error {
	if m, ok := r.Last("ib-dev"); ok {
		*dev = m.Value
	}
	m, ok := r.Last("mtu")
	if !ok {
		return nil
	}
	v, err := getopt.Int(m.Value)
	*mtu = 0
	if err == nil {
		switch v {
		case 256, 512, 1024, 2048, 4096:
			*mtu = ibv.MTUFromBytes(int(v))
		}
	}
	if *mtu == 0 {
		return fmt.Errorf("invalid --mtu %q (256, 512, 1024, 2048 or 4096)", m.Value)
	}
	return nil
}
