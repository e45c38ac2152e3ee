package tmpingpong

import (
	"context"
	"fmt"
	"io"

	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

const name = "tm_pingpong"

// Command is "softnic tm_pingpong".
var Command = toolcmd.Command{Name: name,
	Summary: "tagged messages on tag-matching SRQs, eager and rendezvous, some unexpected", Run: run}

// opts are tm_pingpong's options: rdma-core's pingpong flags it shares,
// and its own.
func opts() []toolcmd.Opt {
	o := toolcmd.NewOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	return append(pingpong.ConnOpts(),
		o('s', "size", R, "<size>", "largest message (default 4096): message i carries size>>(i%4) bytes, at least 1"),
		o('m', "mtu", R, "<size>", "path MTU (default 1024)"),
		o('n', "iters", R, "<iters>", "messages each way (default 1000)"),
		o('t', "tags", R, "<tags>", fmt.Sprintf("tags in flight: messages per window (default 16, at most %d)", MaxTags)),
		o('r', "rndv", R, "<bytes>", "messages of at least <bytes> go rendezvous, smaller ones eager (default 2048; 0: all)"),
		o('u', "unexpected", R, "<num>", "tags per window posted only after their message arrived (default 1)"),
		o('g', "gid-idx", R, "<gid index>", "local port gid index (default 0)"),
		o('c', "chk", N, "", "validate every byte received"),
		o(0, "json", N, "", "print the results as one JSON object (the text lines go to stderr)"),
		o(0, "qp-timeout", R, "<n>", "local ACK timeout 4.096 us x 2^n, 0..31 (default 14)"),
	)
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: softnic tm_pingpong [options] [host]\n\n"+
		"Tagged messages both ways between two RC QPs on tag-matching SRQs: eager below\n"+
		"-r bytes, rendezvous (the receiver READs, then sends a FIN) from -r up. Each side\n"+
		"posts its tags in a shuffled order and -u of them per window only after their\n"+
		"message arrived: those arrive unexpected and are matched in software, then synced.\n\n"+
		"  softnic tm_pingpong            start a server and wait for connection\n"+
		"  softnic tm_pingpong <host>     connect to server at <host>\n\nOptions:\n")
	toolcmd.WriteOpts(w, opts())
	fmt.Fprintln(w, "\nsoftnic options:")
	toolcmd.WriteOpts(w, toolcmd.NICOpts)
	fmt.Fprintln(w, "\nThe out-of-band exchange on TCP port -p is rdma-core's pingpongs'. Both sides\n"+
		"must use the same -n, -s, -t and -r. A failed check or a failed run exits 1.")
}

func run(env *toolnic.Env, args []string) int {
	r, status, ok := toolcmd.Parse(env, name, opts(), args, usage)
	if !ok {
		return status
	}
	cfg, err := config(r)
	stdout := env.Out
	if r.Has("json") {
		env.Out = env.Err // stdout carries the JSON alone (tools/tooljson)
	}
	var res *Result
	return pingpong.RunCommand(env, name, r, err, &cfg.ServerName, cfg.IBDev,
		func(ctx context.Context, env toolnic.Env) (err error) {
			res, err = Run(ctx, cfg, env)
			return err
		},
		func() error {
			if !r.Has("json") {
				return nil
			}
			b, err := JSON(res)
			if err == nil {
				_, err = stdout.Write(b)
			}
			return err
		})
}

// config turns the parsed options into a Config.
func config(r *getopt.Result) (Config, error) {
	cfg := Defaults()
	i := toolcmd.Int
	if err := toolcmd.ParseInts(r,
		i("port", 0, 65535, &cfg.Port), i("ib-port", 1, 255, &cfg.IBPort), i("size", 1, 1<<30, &cfg.Size),
		i("iters", 1, 1<<31-1, &cfg.Iters), i("tags", 1, MaxTags, &cfg.Tags),
		i("rndv", 0, 1<<31, &cfg.RndvThreshold), i("unexpected", 0, MaxTags, &cfg.Unexpected),
		i("gid-idx", -1, 255, &cfg.GIDIndex), i("qp-timeout", 0, 31, &cfg.QPTimeout),
	); err != nil {
		return cfg, err
	}
	if err := pingpong.ParseDevice(r, &cfg.IBDev, &cfg.MTU); err != nil {
		return cfg, err
	}
	cfg.Check = r.Has("chk")
	return cfg, nil
}
