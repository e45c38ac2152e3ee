package mckey

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/toolnic"

	"github.com/softnic/softnic/tools/tooltest"
)

var (
	recvOut = regexp.MustCompile(`^mckey: starting server\nmckey: joining\n` +
		`mckey: joined dgid: ::ffff:239\.1\.2\.3 mlid 0x[0-9a-f]+ sl 0\n` +
		`receiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n$`)
	sendOut = regexp.MustCompile(`^mckey: starting client\nmckey: joining\n` +
		`mckey: joined dgid: ::ffff:239\.1\.2\.3 mlid 0x[0-9a-f]+ sl 0\n` +
		`initiating data transfers\ndata transfers complete\ntest complete\nreturn status 0\n$`)
)

func TestPair(t *testing.T) {
	cms, _ := tooltest.CMs(t, "10.0.0.1", "10.0.0.2")
	cfg := Defaults()
	cfg.Group = netip.MustParseAddr("239.1.2.3")
	rcfg, scfg := cfg, cfg
	scfg.Sender = true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var rout, sout tooltest.SyncBuffer
	var rerr, serr error
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		rerr = Run(ctx, rcfg, Env{Env: toolnic.Env{CM: cms[0], Out: &rout, Stall: 20 * time.Second}, Settle: -1})
	}()
	// The sender starts once the receiver has joined, as a person would.
	for !strings.Contains(rout.String(), "mckey: joined") {
		select {
		case <-rdone:
			t.Fatalf("receiver ended: %v\n%s", rerr, rout.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	serr = Run(ctx, scfg, Env{Env: toolnic.Env{CM: cms[1], Out: &sout, Stall: 20 * time.Second}, Settle: -1})
	<-rdone
	if serr != nil || !sendOut.MatchString(sout.String()) {
		t.Errorf("sender: %v\n%s", serr, sout.String())
	}
	if rerr != nil || !recvOut.MatchString(rout.String()) {
		t.Errorf("receiver: %v\n%s", rerr, rout.String())
	}
}
