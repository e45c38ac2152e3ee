package pingpong

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/wire"
)

// TestQPTimeout: --qp-timeout sets the RC QPs' local ACK timeout. The
// server's NIC is silent (its RoCE packets are lost; the out-of-band
// exchange is TCP and unaffected), so the client's first SEND goes out
// retry_cnt+1 = 8 times, one local ACK timeout apart, and the run ends
// with the transport's verdict. At --qp-timeout 8 (1.05 ms) the eight
// transmissions span at least 7 × 1.05 ms and far less than the default
// timeout 14's 7 × 67 ms: the upper bound, a quarter of that, leaves 16×
// room for late timers because this runs on the wall clock (the pingpong's TCP exchange cannot run in a
// synctest bubble).
func TestQPTimeout(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	srvAddr, cliAddr := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	f.AddFilter(fabric.DropIf(fabric.From(srvAddr)))
	var mu sync.Mutex
	var sends []time.Time
	remove := f.Tap(func(p fabric.Packet) {
		if p.Src == cliAddr && p.Parsed && p.Wire.Opcode == wire.RCSendOnly {
			mu.Lock()
			sends = append(sends, time.Now())
			mu.Unlock()
		}
	})
	defer remove()
	cfg := Defaults(RC)
	cfg.Iters, cfg.Size, cfg.QPTimeout = 10, 64, 8
	_, cli := runPair(t, cfg, f)
	const verdict = "peer stopped answering: transport retry counter exceeded after 7 retries"
	if cli.err == nil || !strings.Contains(cli.err.Error(), verdict) {
		t.Fatalf("client error %v, want %q", cli.err, verdict)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sends) != 8 {
		t.Fatalf("client SEND transmitted %d times, want 8 (the first and retry_cnt 7 retries)", len(sends))
	}
	span := sends[7].Sub(sends[0])
	timeout := func(exp uint) time.Duration { return time.Duration(4096<<exp) * time.Nanosecond }
	if lo, hi := 7*timeout(8), 7*timeout(14)/4; span < lo || span > hi {
		t.Errorf("8 transmissions over %v, want within [%v, %v] (timeout 8, not 14)", span, lo, hi)
	}
}
