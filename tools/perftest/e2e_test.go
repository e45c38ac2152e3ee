package perftest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/tools/tooltest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

type side struct {
	out, errOut bytes.Buffer
	res         *Result
	err         error
}

// runPair runs a server and a client of cfg over an in-memory fabric.
func runPair(t *testing.T, cfg Config, scfgMod func(*Config)) (srv, cli *side) {
	t.Helper()
	return runPairEnv(t, cfg, scfgMod, func(*Env) {})
}

// runPairEnv is runPair with envMod applied to both sides' Env.
func runPairEnv(t *testing.T, cfg Config, scfgMod func(*Config), envMod func(*Env)) (srv, cli *side) {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	return runPairOn(t, f, cfg, scfgMod, envMod)
}

// runPairOn is runPairEnv on the fabric f: the server at 10.0.0.1, the
// client at 10.0.0.2.
func runPairOn(t *testing.T, f *fabric.Fabric, cfg Config, scfgMod func(*Config), envMod func(*Env)) (srv, cli *side) {
	t.Helper()
	devs := tooltest.Devices(t, f, "10.0.0.1", "10.0.0.2")
	scfg := cfg
	if scfgMod != nil {
		scfgMod(&scfg)
	}
	return runPairDevs(t, devs[0], devs[1], scfg, cfg, envMod)
}

// runPairDevs runs a server of scfg on sdev and a client of ccfg on cdev,
// with envMod applied to both sides' Env.
func runPairDevs(t *testing.T, sdev, cdev *verbs.Device, scfg, ccfg Config, envMod func(*Env)) (srv, cli *side) {
	t.Helper()
	srv, cli = &side{}, &side{}
	tooltest.ClientServer(t, sdev, cdev, 20*time.Second, func(ctx context.Context, env toolnic.Env) {
		env.Out, env.Err = &srv.out, &srv.errOut
		senv := Env{Env: env}
		envMod(&senv)
		srv.res, srv.err = Run(ctx, scfg, senv)
	}, func(ctx context.Context, env toolnic.Env, port int) {
		env.Out, env.Err, env.ConnectRetry = &cli.out, &cli.errOut, 10*time.Second
		cenv := Env{Env: env}
		envMod(&cenv)
		ccfg.ServerName, ccfg.Port = "127.0.0.1", port
		cli.res, cli.err = Run(ctx, ccfg, cenv)
	})
	return srv, cli
}

func TestPerftestPairs(t *testing.T) {
	for _, tt := range []struct {
		name string
		verb Verb
		test TestKind
		mod  func(*Config)
	}{
		{"write_bw", Write, BW, func(c *Config) { c.Iters, c.Size = 50, 5000 }},
		{"write_bw check 3 QPs", Write, BW, func(c *Config) { c.Iters, c.Size, c.NumQP, c.Check = 40, 300, 3, true }},
		{"write_bw 2 QPs no moderation", Write, BW, func(c *Config) { c.Iters, c.Size, c.NumQP = 300, 65536, 2 }},
		{"write_bw big check", Write, BW, func(c *Config) { c.Iters, c.Size, c.Check = 8, 1<<20, true }},
		{"write_bw UC", Write, BW, func(c *Config) { c.Iters, c.Size, c.Conn = 20, 4096, UC }},
		{"read_bw check", Read, BW, func(c *Config) { c.Iters, c.Size, c.Check = 30, 100, true }},
		{"read_bw mtu256", Read, BW, func(c *Config) { c.Iters, c.Size, c.MTU = 10, 70000, 256 }},
		{"send_bw check", Send, BW, func(c *Config) { c.Iters, c.Size, c.Check = 60, 2000, true }},
		{"send_bw UD", Send, BW, func(c *Config) { c.Iters, c.Size, c.Conn = 20, 1024, UD }},
		{"atomic_bw fadd check", Atomic, BW, func(c *Config) { c.Iters, c.Check = 200, true }},
		{"atomic_bw cas check", Atomic, BW, func(c *Config) { c.Iters, c.Atomic, c.Check = 50, CmpAndSwap, true }},
		{"write_lat", Write, Lat, func(c *Config) { c.Iters, c.Size = 20, 64 }},
		{"read_lat check", Read, Lat, func(c *Config) { c.Iters, c.Size, c.Check = 20, 1000, true }},
		{"send_lat", Send, Lat, func(c *Config) { c.Iters, c.Size = 20, 100 }},
		{"send_lat UC", Send, Lat, func(c *Config) { c.Iters, c.Size, c.Conn = 20, 100, UC }},
		{"atomic_lat check", Atomic, Lat, func(c *Config) { c.Iters, c.Check = 20, true }},
		{"write_bw gbits noPeak", Write, BW, func(c *Config) { c.Iters, c.ReportGbit, c.NoPeak = 20, true, true }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults(tt.verb, tt.test)
			tt.mod(&cfg)
			srv, cli := runPair(t, cfg, nil)
			if srv.err != nil || cli.err != nil {
				t.Fatalf("server: %v\n%s%s\nclient: %v\n%s%s", srv.err, srv.out.String(), srv.errOut.String(), cli.err, cli.out.String(), cli.errOut.String())
			}
			for _, s := range []*side{srv, cli} {
				if !strings.Contains(s.out.String(), " Link type       : Ethernet\n") {
					t.Errorf("no test info:\n%s", s.out.String())
				}
			}
			if cfg.Check && !srv.res.Checked && !cli.res.Checked {
				t.Errorf("--check checked nothing")
			}
			t.Logf("server:\n%s%s\nclient:\n%s%s", srv.out.String(), srv.errOut.String(), cli.out.String(), cli.errOut.String())
		})
	}
}

func TestProgressAndJSON(t *testing.T) {
	progressDelay, progressTick = 0, time.Millisecond
	defer func() { progressDelay, progressTick = 2*time.Second, 500*time.Millisecond }()
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	open := func(a string) *verbs.Device {
		ep, _ := f.Attach(netip.MustParseAddr(a))
		d, err := verbs.Open(verbs.Config{Link: ep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Defaults(Write, BW)
	cfg.Duration, cfg.Margin = 2*time.Second, 0
	ccfg := cfg
	ccfg.ServerName, ccfg.Port = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	var prog tooltest.SyncBuffer
	var sout, cout bytes.Buffer
	var serr, cerr error
	var cres *Result
	var wg sync.WaitGroup
	wg.Add(2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		defer wg.Done()
		_, serr = Run(ctx, cfg, Env{Env: toolnic.Env{Dev: open("10.0.0.1"), Out: &sout, Listener: ln}, JSON: true})
	}()
	go func() {
		defer wg.Done()
		cres, cerr = Run(ctx, ccfg, Env{Env: toolnic.Env{Dev: open("10.0.0.2"), Out: &cout, ConnectRetry: 5 * time.Second}, Progress: &prog, JSON: true})
	}()
	wg.Wait()
	if serr != nil || cerr != nil {
		t.Fatalf("server %v, client %v", serr, cerr)
	}
	if p := prog.String(); !strings.Contains(p, "\rwrite_bw: ") || !strings.Contains(p, " of 2 s") || !strings.HasSuffix(p, "\r\x1b[K") {
		t.Errorf("progress: got %q", p)
	}
	var got Result
	if err := tooljson.Decode(cout.Bytes(), &got); err != nil {
		t.Fatalf("client JSON: %v\n%s", err, cout.String())
	}
	if got.Tool != "write_bw" || got.Side != "client" || len(got.BW) != 1 || got.BW[0].Iters == 0 || got.BW[0].BWAvg <= 0 ||
		got.Peer != Version || len(got.Local) != 1 || got.Local[0].QPN != cres.Local[0].QPN {
		t.Errorf("client JSON: got %+v", got)
	}
	if err := tooljson.Decode(sout.Bytes(), &got); err != nil || got.Side != "server" || len(got.BW) != 1 {
		t.Errorf("server JSON: %v %+v\n%s", err, got, sout.String())
	}
}

// A live peer whose messages come late (each delayed 150 ms, beyond the
// local ACK timeout of 67 ms): write_lat's and send_lat's waiting side
// probes it with zero-length RDMA WRITEs, the peer's NIC acknowledges
// them, and the run completes as if there were none - the probes place
// no data, consume no receive and take no completion the iterations
// count.
func TestLatProbesLivePeer(t *testing.T) {
	for _, tt := range []struct {
		name string
		verb Verb
		op   wire.Opcode // the peer's message, delayed
	}{
		{"write_lat", Write, wire.RCWriteOnly},
		{"send_lat", Send, wire.RCSendOnly},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := fabric.New(fabric.Config{Seed: 1})
			t.Cleanup(func() { f.Close() })
			srvAddr, cliAddr := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
			f.AddFilter(fabric.OnMatch(fabric.And(fabric.From(srvAddr), fabric.OpcodeIs(tt.op)), fabric.Delay(150*time.Millisecond)))
			var probes atomic.Int64
			remove := f.Tap(func(p fabric.Packet) {
				if p.Src == cliAddr && p.Parsed && p.Wire.Opcode == wire.RCWriteOnly && len(p.Wire.Payload) == 0 {
					probes.Add(1)
				}
			})
			defer remove()
			cfg := Defaults(tt.verb, Lat)
			cfg.Iters, cfg.Size = 5, 64
			srv, cli := runPairOn(t, f, cfg, nil, func(*Env) {})
			if srv.err != nil || cli.err != nil {
				t.Fatalf("server: %v\n%s\nclient: %v\n%s", srv.err, srv.errOut.String(), cli.err, cli.errOut.String())
			}
			if probes.Load() == 0 {
				t.Errorf("the client sent no probe while the server's messages were 150 ms late")
			}
			if len(cli.res.Lat) != 1 || cli.res.Lat[0].Iters != 5 {
				t.Errorf("client's result %+v, want one line of 5 iterations", cli.res.Lat)
			}
			t.Logf("%d probes", probes.Load())
		})
	}
}

// A -D run whose server dies shortly before the end: its NIC falls silent
// and its out-of-band connection closes. The client's duration ends with
// WRITEs in flight and its closing handshake meets EOF; it then waits for
// the transport's verdict, which names what happened and wins over the
// socket's EOF. Local ACK timeout 17 (537 ms, bound 8 × 537 ms) keeps the
// verdict well after the end of the duration and the silence well before.
func TestDurationRunPeerDiesAtTheEnd(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	srvAddr := netip.MustParseAddr("10.0.0.1")
	var silent atomic.Bool
	f.AddFilter(func(p *fabric.Packet) fabric.Action {
		if silent.Load() && p.Src == srvAddr {
			return fabric.Drop
		}
		return fabric.Pass
	})
	open := func(a netip.Addr) *verbs.Device {
		ep, err := f.Attach(a)
		if err != nil {
			t.Fatal(err)
		}
		d, err := verbs.Open(verbs.Config{Link: ep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	sdev, cdev := open(srvAddr), open(netip.MustParseAddr("10.0.0.2"))
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Defaults(Write, BW)
	cfg.Duration, cfg.Size, cfg.QPTimeout = 3*time.Second, 4096, 17
	ccfg := cfg
	ccfg.ServerName, ccfg.Port = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sctx, kill := context.WithCancel(ctx)
	defer kill()
	var cliOut, cliErr tooltest.SyncBuffer
	var srvErr bytes.Buffer
	done := make(chan error, 2)
	go func() {
		_, err := Run(sctx, cfg, Env{Env: toolnic.Env{Dev: sdev, Out: io.Discard, Err: &srvErr, Listener: ln, Stall: 20 * time.Second}})
		done <- err
	}()
	var cliRunErr error
	cliDone := make(chan struct{})
	go func() {
		defer close(cliDone)
		_, cliRunErr = Run(ctx, ccfg, Env{Env: toolnic.Env{Dev: cdev, Out: &cliOut, Err: &cliErr, Stall: 20 * time.Second, ConnectRetry: 10 * time.Second}})
	}()
	// The client prints the header as its duration starts.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(cliOut.String(), "#bytes") {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not start:\n%s%s", cliOut.String(), cliErr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	started := time.Now()
	time.Sleep(cfg.Duration - time.Second) // one second before the end
	silent.Store(true)
	kill()
	<-done
	<-cliDone
	took := time.Since(started)
	var re *toolnic.ErrRetryExceeded
	if !errors.As(cliRunErr, &re) || re.RNR || re.Retries != 7 {
		t.Fatalf("client: %v, want the transport's verdict (7 retries)\n%s", cliRunErr, cliErr.String())
	}
	if !strings.Contains(cliErr.String(), "out-of-band exchange") {
		t.Errorf("the client did not meet the EOF first (the verdict came during the run):\n%s", cliErr.String())
	}
	// Each side shows its QP's state after the failure: the client's in
	// ERR (its retries spent), the server's still in RTR (perftest moves
	// a passive WRITE server's QP no further, ctx_connect).
	if !regexp.MustCompile(`(?m)^ QP 0x[0-9a-f]{4}: state ERR, sq_psn 0x[0-9a-f]{6}, rq_psn 0x[0-9a-f]{6}$`).MatchString(cliErr.String()) {
		t.Errorf("the client did not show its QP in ERR:\n%s", cliErr.String())
	}
	if !regexp.MustCompile(`(?m)^ QP 0x[0-9a-f]{4}: state RTR, `).MatchString(srvErr.String()) {
		t.Errorf("the server did not show its QP in RTR:\n%s", srvErr.String())
	}
	// The verdict: 8 local ACK timeouts after the silence began, 2 s
	// into the run.
	if bound := cfg.Duration - time.Second + 8*(4096<<17)*time.Nanosecond; took > bound+time.Second {
		t.Errorf("client ended %v into the run, want by %v", took, bound)
	}
	t.Logf("client ended %v into the run: %v", took, cliRunErr)
}
