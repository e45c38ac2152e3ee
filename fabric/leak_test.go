package fabric

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/link"
)

// runTraffic exchanges impaired traffic between two endpoints with a
// reader goroutine each, then closes the fabric and waits for the readers.
func runTraffic(t *testing.T, f *Fabric, advance func()) {
	a, _ := f.Attach(addrA)
	b, _ := f.Attach(addrB)
	f.SetImpairment(Impairment{Loss: 0.1, Duplicate: 0.1, Reorder: 0.2, Delay: time.Millisecond, Jitter: time.Millisecond})
	var wg sync.WaitGroup
	for _, ep := range []*Endpoint{a, b} {
		wg.Go(func() {
			msgs := make([]link.Datagram, 8)
			for i := range msgs {
				msgs[i].Buf = make([]byte, 0, link.MaxDatagram)
			}
			for {
				if _, err := ep.ReadBatch(msgs); err != nil {
					if !errors.Is(err, link.ErrLinkClosed) {
						t.Errorf("ReadBatch: %v", err)
					}
					return
				}
			}
		})
	}
	sendSeq(t, a, addrB, 200)
	sendSeq(t, b, addrA, 200)
	advance()
	sendSeq(t, a, addrB, 50) // some still in flight at Close
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// TestNoGoroutineLeakSynctest fails (synctest.Test panics) if any goroutine
// or timer callback of the bubble outlives Close.
func TestNoGoroutineLeakSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Config{Seed: 7}) // clock.Real: fake time in the bubble
		runTraffic(t, f, func() { time.Sleep(10 * time.Millisecond) })
		if got := f.Stats().Delivered.Packets; got == 0 {
			t.Error("nothing delivered")
		}
	})
}

// TestNoGoroutineLeakManual runs the fabric on a Manual clock inside a
// synctest bubble, which fails if any goroutine outlives Close (counting
// runtime.NumGoroutine instead was flaky: other tests' goroutines come
// and go), and checks no timer is left on the clock.
func TestNoGoroutineLeakManual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mc := clock.NewManual(t0)
		f := New(Config{Seed: 7, Clock: mc})
		runTraffic(t, f, func() { mc.Advance(10 * time.Millisecond) })
		if got := mc.Pending(); got != 0 {
			t.Errorf("%d timers pending after Close", got)
		}
	})
}
