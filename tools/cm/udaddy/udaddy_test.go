package udaddy

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/toolnic"

	"github.com/softnic/softnic/tools/tooltest"
)

const (
	serverOut = "udaddy: starting server\nreceiving data transfers\nsending replies\ndata transfers complete\n" +
		"test complete\nreturn status 0\n"
	clientOut = "udaddy: starting client\nudaddy: connecting\ninitiating data transfers\nreceiving data transfers\n" +
		"data transfers complete\ntest complete\nreturn status 0\n"
)

func TestPair(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"3 connections", func(c *Config) { c.Conns, c.Count, c.Size = 3, 5, 1000 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults()
			tt.mod(&cfg)
			scfg, ccfg := cfg, cfg
			scfg.Server, ccfg.Dst = true, netip.MustParseAddr("10.0.0.1")
			so, co, serr, cerr := tooltest.CMPair(t, 20*time.Second,
				func(ctx context.Context, env toolnic.Env) error { return Run(ctx, scfg, env) },
				func(ctx context.Context, env toolnic.Env) error { return Run(ctx, ccfg, env) })
			if serr != nil || so != serverOut {
				t.Errorf("server: %v\n%s", serr, so)
			}
			if cerr != nil || co != clientOut {
				t.Errorf("client: %v\n%s", cerr, co)
			}
		})
	}
}
