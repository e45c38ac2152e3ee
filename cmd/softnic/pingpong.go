package main

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/tools/toolnic"
)

// pingpongOpts returns the options of rdma-core's example k, in its
// getopt order, with its usage text.
func pingpongOpts(k pingpong.Kind) []optSpec {
	o := newOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	size := "size of message to exchange (default 4096)"
	if k == pingpong.UD {
		size = "size of message to exchange (default 1024)"
	}
	opts := []optSpec{
		o('p', "port", R, "<port>", "listen on/connect to port <port> (default 18515)"),
		o('d', "ib-dev", R, "<dev>", "use IB device <dev> (softnic: names the NIC; default softnic0)"),
		o('i', "ib-port", R, "<port>", "use port <port> of IB device (default 1)"),
		o('s', "size", R, "<size>", size),
	}
	if k != pingpong.UD {
		opts = append(opts, o('m', "mtu", R, "<size>", "path MTU (default 1024)"))
	}
	if k == pingpong.SRQ {
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
	case pingpong.RC:
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
	case pingpong.SRQ:
		opts = append(opts,
			o('o', "odp", N, "", "use on demand paging"),
			o('c', "chk", N, "", "validate received buffer"))
	default:
		opts = append(opts, o('c', "chk", N, "", "validate received buffer"))
	}
	if k != pingpong.UD {
		// softnic's own: the C tools hard-code timeout 14.
		opts = append(opts, o(0, "qp-timeout", R, "<n>",
			"softnic: local ACK timeout 4.096 us x 2^n, 0..31 (default 14, as the C tools; 0 = no timer)"))
	}
	return opts
}

func pingpongUsage(k pingpong.Kind) func(io.Writer) {
	return func(w io.Writer) {
		n := k.String()
		fmt.Fprintf(w, "usage: softnic %s [options] [host]\n\n", n)
		fmt.Fprintf(w, "softnic's version of rdma-core's ibv_%s: it pairs with ibv_%s in either role.\n\n", n, n)
		fmt.Fprintf(w, "  softnic %s            start a server and wait for connection\n", n)
		fmt.Fprintf(w, "  softnic %s <host>     connect to server at <host>\n\nOptions:\n", n)
		writeOpts(w, pingpongOpts(k))
		fmt.Fprintln(w, "\nsoftnic options:")
		writeOpts(w, nicOpts)
		fmt.Fprintln(w, "\nThe output lines, the out-of-band exchange on TCP port -p and the exit status\n"+
			"are rdma-core's. -c checks every byte; a failed check exits 1.")
	}
}

// runPingpong returns the run function of softnic <k>.
func runPingpong(k pingpong.Kind) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		name := k.String()
		r, status, ok := parseTool(name, pingpongOpts(k), args, stdout, stderr, pingpongUsage(k))
		if !ok {
			return status
		}
		cfg, err := pingpongConfig(k, r)
		return runPingpongLike(name, r, err, &cfg.ServerName, cfg.IBDev, stdout, stderr,
			func(ctx context.Context, env toolnic.Env) error {
				_, err := pingpong.Run(ctx, cfg, env)
				return err
			}, nil)
	}
}

// pingpongConfig turns the parsed options into a Config, refusing values
// the C tools refuse (and garbage they would silently take as 0).
func pingpongConfig(k pingpong.Kind, r *getopt.Result) (pingpong.Config, error) {
	cfg := pingpong.Defaults(k)
	if err := parseIntOpts(r, []intOpt{
		{"port", 0, 65535, &cfg.Port}, {"ib-port", 1, 255, &cfg.IBPort}, {"size", 0, 1 << 31, &cfg.Size},
		{"rx-depth", 1, 1 << 14, &cfg.RxDepth}, {"iters", 1, 1<<31 - 1, &cfg.Iters}, {"sl", 0, 15, &cfg.SL},
		{"gid-idx", -1, 255, &cfg.GIDIndex}, {"num-qp", 1, pingpong.MaxQP, &cfg.NumQP},
		{"qp-timeout", 0, 31, &cfg.QPTimeout},
	}); err != nil {
		return cfg, err
	}
	if err := parseMTUOpt(r, &cfg.MTU); err != nil {
		return cfg, err
	}
	if m, ok := r.Last("ib-dev"); ok {
		cfg.IBDev = m.Value
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

// mtuEnum is pp_mtu_to_enum: 0 for a size that is not an IB MTU.
func mtuEnum(n int) ibv.MTU {
	switch n {
	case 256, 512, 1024, 2048, 4096:
		return ibv.MTUFromBytes(n)
	}
	return 0
}
