package perftest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/tooltest"
)

// runPairMTU is runPair with the server's and the client's fabric
// endpoints at interface MTUs smtu and cmtu.
func runPairMTU(t *testing.T, cfg Config, smtu, cmtu int) (srv, cli *side) {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	sdev, _ := tooltest.DeviceMTU(t, f, "10.0.0.1", smtu)
	cdev, _ := tooltest.DeviceMTU(t, f, "10.0.0.2", cmtu)
	return runPairDevs(t, sdev, cdev, cfg, cfg, func(*Env) {})
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
