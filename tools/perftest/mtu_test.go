package perftest

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/toolnic"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// runPairMTU is runPair with the server's and the client's fabric
// endpoints at interface MTUs smtu and cmtu.
func runPairMTU(t *testing.T, cfg Config, smtu, cmtu int) (srv, cli *side) {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	open := func(a string, mtu int) *verbs.Device {
		ep, err := f.Attach(netip.MustParseAddr(a))
		if err != nil {
			t.Fatal(err)
		}
		if err := ep.SetMTU(mtu); err != nil {
			t.Fatal(err)
		}
		d, err := verbs.Open(verbs.Config{Link: ep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	sdev, cdev := open("10.0.0.1", smtu), open("10.0.0.2", cmtu)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, cli = &side{}, &side{}
	ccfg := cfg
	ccfg.ServerName, ccfg.Port = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		srv.res, srv.err = Run(ctx, cfg, Env{Env: toolnic.Env{Dev: sdev, Out: &srv.out, Err: &srv.errOut, Listener: ln, Stall: 20 * time.Second}})
	}()
	go func() {
		defer wg.Done()
		cli.res, cli.err = Run(ctx, ccfg, Env{Env: toolnic.Env{Dev: cdev, Out: &cli.out, Err: &cli.errOut, Stall: 20 * time.Second, ConnectRetry: 10 * time.Second}})
	}()
	wg.Wait()
	return srv, cli
}

// TestMTUFromPort: without -m the tools run at the port's active MTU,
// which follows the interface (1500 bytes: 1024), and at the smaller of
// the two sides' (perftest_parameters.c set_mtu, check_mtu); -m above the
// active MTU is lowered to it with perftest's message; UD messages are
// cut to the MTU when the size was not given.
func TestMTUFromPort(t *testing.T) {
	for _, tt := range []struct {
		name       string
		verb       Verb
		mod        func(*Config)
		smtu, cmtu int
		want       int    // the MTU both sides run at
		size       uint64 // the message size both sides end with (0: unchecked)
		msg        string // in both sides' stdout
		errMsg     string // in both sides' stderr
	}{
		{"write_bw defaults 1500", Write, func(c *Config) { c.Iters = 20 }, 1500, 1500, 1024, 0, " Mtu             : 1024[B]\n", ""},
		{"write_bw defaults 9000/1500", Write, func(c *Config) { c.Iters = 20 }, 9000, 1500, 1024, 0, " Mtu             : 1024[B]\n", ""},
		{"read_bw defaults 1500", Read, func(c *Config) { c.Iters = 10 }, 1500, 1500, 1024, 0, "", ""},
		{"write_bw -m 4096 on 1500", Write, func(c *Config) { c.Iters, c.MTU = 10, 4096 }, 1500, 1500, 1024, 0,
			"Requested mtu is higher than active mtu \nChanging to active mtu - 3\n", ""},
		{"write_bw -m 2048 on 9000/1500", Write, func(c *Config) { c.Iters, c.MTU = 10, 2048 }, 9000, 1500, 1024, 0, "", ""},
		{"send_bw UD defaults 1500", Send, func(c *Config) { c.Iters, c.Conn = 20, UD }, 1500, 1500, 1024, 1024, "",
			" Max msg size in UD is MTU 1024\n Changing to this MTU\n"},
		{"write_bw defaults loopback MTU", Write, func(c *Config) { c.Iters = 10 }, fabric.DefaultMTU, fabric.DefaultMTU, 4096, 0, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults(tt.verb, BW)
			tt.mod(&cfg)
			srv, cli := runPairMTU(t, cfg, tt.smtu, tt.cmtu)
			if srv.err != nil || cli.err != nil {
				t.Fatalf("server: %v\n%s%s\nclient: %v\n%s%s", srv.err, srv.out.String(), srv.errOut.String(), cli.err, cli.out.String(), cli.errOut.String())
			}
			for who, s := range map[string]*side{"server": srv, "client": cli} {
				if s.res.MTU != tt.want {
					t.Errorf("%s ran at MTU %d, want %d", who, s.res.MTU, tt.want)
				}
				if tt.size != 0 && who == "client" && (len(s.res.BW) == 0 || s.res.BW[0].Size != tt.size) {
					t.Errorf("%s: results %+v, want size %d", who, s.res.BW, tt.size)
				}
				if !strings.Contains(s.out.String(), tt.msg) || !strings.Contains(s.errOut.String(), tt.errMsg) {
					t.Errorf("%s: want %q on stdout and %q on stderr:\n%s\n%s", who, tt.msg, tt.errMsg, s.out.String(), s.errOut.String())
				}
			}
		})
	}
}

// TestSetMTU is set_mtu: the active MTU without -m; -m when not above
// it; else the active MTU and two lines.
func TestSetMTU(t *testing.T) {
	for _, c := range []struct {
		user   int
		active ibv.MTU
		want   ibv.MTU
		msg    string
	}{
		{0, ibv.MTU1024, ibv.MTU1024, ""},
		{0, ibv.MTU4096, ibv.MTU4096, ""},
		{512, ibv.MTU1024, ibv.MTU512, ""},
		{1024, ibv.MTU1024, ibv.MTU1024, ""},
		{2048, ibv.MTU1024, ibv.MTU1024, "Requested mtu is higher than active mtu \nChanging to active mtu - 3\n"},
		{4096, ibv.MTU2048, ibv.MTU2048, "Requested mtu is higher than active mtu \nChanging to active mtu - 4\n"},
	} {
		var b bytes.Buffer
		if got := SetMTU(c.user, c.active, &b); got != c.want || b.String() != c.msg {
			t.Errorf("SetMTU(%d, %v) = %v, %q; want %v, %q", c.user, c.active, got, b.String(), c.want, c.msg)
		}
	}
}
