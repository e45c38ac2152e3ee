package main

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/tmpingpong"
	"github.com/softnic/softnic/tools/toolnic"
)

// tmPingpongOpts are tm_pingpong's options: rdma-core's pingpong flags it
// shares, and its own.
func tmPingpongOpts() []optSpec {
	o := newOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return []optSpec{
		o('p', "port", R, "<port>", "listen on/connect to port <port> (default 18515)"),
		o('d', "ib-dev", R, "<dev>", "use IB device <dev> (softnic: names the NIC; default softnic0)"),
		o('i', "ib-port", R, "<port>", "use port <port> of IB device (default 1)"),
		o('s', "size", R, "<size>", "largest message (default 4096): message i carries size>>(i%4) bytes, at least 1"),
		o('m', "mtu", R, "<size>", "path MTU (default 1024)"),
		o('n', "iters", R, "<iters>", "messages each way (default 1000)"),
		o('t', "tags", R, "<tags>", fmt.Sprintf("tags in flight: messages per window (default 16, at most %d)", tmpingpong.MaxTags)),
		o('r', "rndv", R, "<bytes>", "messages of at least <bytes> go rendezvous, smaller ones eager (default 2048; 0: all)"),
		o('u', "unexpected", R, "<num>", "tags per window posted only after their message arrived (default 1)"),
		o('g', "gid-idx", R, "<gid index>", "local port gid index (default 0)"),
		o('c', "chk", N, "", "validate every byte received"),
		o(0, "json", N, "", "print the results as one JSON object (the text lines go to stderr)"),
		o(0, "qp-timeout", R, "<n>", "local ACK timeout 4.096 us x 2^n, 0..31 (default 14)"),
	}
}

func tmPingpongUsage(w io.Writer) {
	fmt.Fprint(w, "usage: softnic tm_pingpong [options] [host]\n\n"+
		"Tagged messages both ways between two RC QPs on tag-matching SRQs: eager below\n"+
		"-r bytes, rendezvous (the receiver READs, then sends a FIN) from -r up. Each side\n"+
		"posts its tags in a shuffled order and -u of them per window only after their\n"+
		"message arrived: those arrive unexpected and are matched in software, then synced.\n\n"+
		"  softnic tm_pingpong            start a server and wait for connection\n"+
		"  softnic tm_pingpong <host>     connect to server at <host>\n\nOptions:\n")
	writeOpts(w, tmPingpongOpts())
	fmt.Fprintln(w, "\nsoftnic options:")
	writeOpts(w, nicOpts)
	fmt.Fprintln(w, "\nThe out-of-band exchange on TCP port -p is rdma-core's pingpongs'. Both sides\n"+
		"must use the same -n, -s, -t and -r. A failed check or a failed run exits 1.")
}

// runTMPingpong is "softnic tm_pingpong".
func runTMPingpong(args []string, stdout, stderr io.Writer) int {
	const name = "tm_pingpong"
	r, status, ok := parseTool(name, tmPingpongOpts(), args, stdout, stderr, tmPingpongUsage)
	if !ok {
		return status
	}
	cfg, err := tmPingpongConfig(r)
	out := stdout
	if r.Has("json") {
		out = stderr // stdout carries the JSON alone (tools/tooljson)
	}
	var res *tmpingpong.Result
	return runPingpongLike(name, r, err, &cfg.ServerName, cfg.IBDev, out, stderr,
		func(ctx context.Context, env toolnic.Env) (err error) {
			res, err = tmpingpong.Run(ctx, cfg, env)
			return err
		},
		func() error {
			if !r.Has("json") {
				return nil
			}
			b, err := tmpingpong.JSON(res)
			if err == nil {
				_, err = stdout.Write(b)
			}
			return err
		})
}

// tmPingpongConfig turns the parsed options into a Config.
func tmPingpongConfig(r *getopt.Result) (tmpingpong.Config, error) {
	cfg := tmpingpong.Defaults()
	if err := parseIntOpts(r, []intOpt{
		{"port", 0, 65535, &cfg.Port}, {"ib-port", 1, 255, &cfg.IBPort}, {"size", 1, 1 << 30, &cfg.Size},
		{"iters", 1, 1<<31 - 1, &cfg.Iters}, {"tags", 1, tmpingpong.MaxTags, &cfg.Tags},
		{"rndv", 0, 1 << 31, &cfg.RndvThreshold}, {"unexpected", 0, tmpingpong.MaxTags, &cfg.Unexpected},
		{"gid-idx", -1, 255, &cfg.GIDIndex}, {"qp-timeout", 0, 31, &cfg.QPTimeout},
	}); err != nil {
		return cfg, err
	}
	if err := parseMTUOpt(r, &cfg.MTU); err != nil {
		return cfg, err
	}
	if m, ok := r.Last("ib-dev"); ok {
		cfg.IBDev = m.Value
	}
	cfg.Check = r.Has("chk")
	return cfg, nil
}
