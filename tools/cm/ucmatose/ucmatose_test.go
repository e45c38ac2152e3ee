package ucmatose

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/toolnic"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/tools/tooltest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// runPair runs a server on 10.0.0.1 and a client on 10.0.0.2, each with
// its own CM on an in-memory fabric; the client retries while the server
// is not listening yet.
func runPair(t *testing.T, cfg Config) (sout, cout string, serr, cerr error) {
	t.Helper()
	scfg, ccfg := cfg, cfg
	scfg.Server = true
	ccfg.Dst = netip.MustParseAddr("10.0.0.1")
	return tooltest.CMPair(t, 20*time.Second,
		func(ctx context.Context, env toolnic.Env) error { return Run(ctx, scfg, env) },
		func(ctx context.Context, env toolnic.Env) error { return Run(ctx, ccfg, env) })
}

const (
	serverOut = "cmatose: starting server\ninitiating data transfers\ncompleting sends\nreceiving data transfers\n" +
		"data transfers complete\ncmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0\n"
	clientOut = "cmatose: starting client\ncmatose: connecting\nreceiving data transfers\nsending replies\n" +
		"data transfers complete\ntest complete\nreturn status 0\n"
)

func TestPair(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"4 connections", func(c *Config) { c.Conns, c.Count, c.Size = 4, 20, 1000 }},
		{"IB port space", func(c *Config) { c.PortSpace = cm.PSIB }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults()
			tt.mod(&cfg)
			so, co, serr, cerr := runPair(t, cfg)
			if serr != nil || cerr != nil {
				t.Fatalf("server: %v\n%s\nclient: %v\n%s", serr, so, cerr, co)
			}
			if so != serverOut {
				t.Errorf("server output:\n%s\nwant:\n%s", so, serverOut)
			}
			if co != clientOut {
				t.Errorf("client output:\n%s\nwant:\n%s", co, clientOut)
			}
		})
	}
}

func TestNoMessages(t *testing.T) {
	cfg := Defaults()
	cfg.Count = 0
	so, co, serr, cerr := runPair(t, cfg)
	if serr != nil || cerr != nil {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", serr, so, cerr, co)
	}
	if want := "cmatose: starting server\ncmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0\n"; so != want {
		t.Errorf("server output:\n%s\nwant:\n%s", so, want)
	}
}

// TestRejected: nobody listens, the peer's CM rejects the REQ with
// reason 8, invalid service ID (cm.c cm_match_req), which cmatose
// returns as its status.
func TestRejected(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	devs := tooltest.Devices(t, f, "10.0.0.1", "10.0.0.2")
	for _, d := range devs {
		c, err := cm.New(cm.Config{Devices: []*verbs.Device{d}})
		if err != nil {
			t.Fatalf("cm.New: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		if d == devs[0] {
			continue
		}
		cfg := Defaults()
		cfg.Dst = netip.MustParseAddr("10.0.0.1")
		var out bytes.Buffer
		err = Run(context.Background(), cfg, toolnic.Env{CM: c, Out: &out, Stall: 10 * time.Second})
		var st *Status
		if !errors.As(err, &st) || st.Code == 0 {
			t.Fatalf("got %v, want a failed status\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "cmatose: event: RDMA_CM_EVENT_REJECTED, error: ") ||
			!strings.HasSuffix(out.String(), "test complete\nreturn status 8\n") {
			t.Errorf("output:\n%s", out.String())
		}
	}
}
