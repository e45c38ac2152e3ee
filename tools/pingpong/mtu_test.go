package pingpong

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/tools/tooltest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
)

// TestPingpongMTU runs the pingpongs between two 1500-byte fabric
// endpoints (active MTU 1024). rc_pingpong's default path MTU, 1024, fits;
// a -m above the active MTU is used as given, as rc_pingpong.c does (rxe
// accepts path MTUs up to max_mtu), and its packets are refused by the
// link (the fabric's DropOversize, the kernel's EMSGSIZE): the run fails,
// with an error, not a panic. ud_pingpong runs at its default size 1024.
func TestPingpongMTU(t *testing.T) {
	for _, tt := range []struct {
		name  string
		mod   func(*Config)
		ok    bool
		drops bool
	}{
		{"rc defaults", func(c *Config) {}, true, false},
		{"rc 8 KiB check", func(c *Config) { c.Size, c.Check = 8192, true }, true, false},
		{"uc defaults", func(c *Config) { c.Kind = UC }, true, false},
		{"ud defaults", func(c *Config) { c.Kind, c.Size = UD, Defaults(UD).Size }, true, false},
		{"rc -m 2048", func(c *Config) { c.MTU = ibv.MTU2048 }, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := fabric.New(fabric.Config{Seed: 1})
			t.Cleanup(func() { f.Close() })
			sdev, sep := tooltest.DeviceMTU(t, f, "10.0.0.1", 1500)
			cdev, cep := tooltest.DeviceMTU(t, f, "10.0.0.2", 1500)
			cfg := Defaults(RC)
			cfg.Iters = 10
			tt.mod(&cfg)
			stall := 20 * time.Second
			if !tt.ok {
				stall = 2 * time.Second // no packet gets through: fail soon
			}
			srv, cli := runPairOn(t, sdev, cdev, cfg, stall)
			drops := sep.Stats().DropOversize.Packets + cep.Stats().DropOversize.Packets
			if tt.ok {
				if srv.err != nil || cli.err != nil || drops != 0 {
					t.Fatalf("server: %v\n%s\nclient: %v\n%s\n%d oversize drops", srv.err, srv.out.String(), cli.err, cli.out.String(), drops)
				}
				checkOutput(t, "client", cli.out.String(), 1, cfg)
				return
			}
			if srv.err == nil && cli.err == nil {
				t.Fatalf("path MTU 2048 over a 1500-byte link succeeded")
			}
			if tt.drops && drops == 0 {
				t.Errorf("no oversize drops counted")
			}
			t.Logf("server: %v, client: %v, %d oversize drops", srv.err, cli.err, drops)
		})
	}
}

// TestUDPingpongSizeOverPortMTU: ud_pingpong -s above the port's active
// MTU, which follows the interface (1500 bytes: 1024), refuses to start on
// either side, with ud_pingpong.c's message.
func TestUDPingpongSizeOverPortMTU(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	dev, _ := tooltest.DeviceMTU(t, f, "10.0.0.1", 1500)
	for _, server := range []bool{true, false} {
		cfg := Defaults(UD)
		cfg.Size = 4096
		env := toolnic.Env{Dev: dev, Out: &strings.Builder{}}
		if server {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			env.Listener = ln
		} else {
			cfg.ServerName, cfg.Port = "127.0.0.1", 1 // never dialled
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := Run(ctx, cfg, env)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "Requested size larger than port MTU (1024)") {
			t.Errorf("server %v: -s 4096 on MTU 1024: %v, want \"Requested size larger than port MTU (1024)\"", server, err)
		}
	}
}
