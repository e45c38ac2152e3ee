package udaddy

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
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
			cms, _ := tooltest.CMs(t, "10.0.0.1", "10.0.0.2")
			cfg := Defaults()
			tt.mod(&cfg)
			scfg, ccfg := cfg, cfg
			scfg.Server, ccfg.Dst = true, netip.MustParseAddr("10.0.0.1")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var so, co bytes.Buffer
			var serr, cerr error
			tooltest.Pair(func() {
				serr = Run(ctx, scfg, toolnic.Env{CM: cms[0], Out: &so, Stall: 20 * time.Second})
			}, func() bool {
				co.Reset()
				cerr = Run(ctx, ccfg, toolnic.Env{CM: cms[1], Out: &co, Stall: 20 * time.Second})
				return cerr != nil && strings.Contains(co.String(), "RDMA_CM_EVENT_")
			})
			if serr != nil || so.String() != serverOut {
				t.Errorf("server: %v\n%s", serr, so.String())
			}
			if cerr != nil || co.String() != clientOut {
				t.Errorf("client: %v\n%s", cerr, co.String())
			}
		})
	}
}
