package transport

import (
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/clock"
)

// PaceTimer wakes a QP when its congestion-control pacer lets it send
// again (the requester or a UD send pass stops when the pacer says wait):
// one timer a QP, armed at most once at a time; the pass it wakes arms it
// again if the QP must still wait. Its callback only wakes the QP
// (STYLE.md 9). Arm and Stop are called with the QP's lock held.
type PaceTimer struct {
	t     clock.Timer
	armed atomic.Bool
	w     Waker
}

// Arm makes the timer wake w in d, on clk, unless it is running.
func (p *PaceTimer) Arm(clk clock.Clock, d time.Duration, w Waker) {
	if p.armed.Swap(true) {
		return
	}
	if p.t == nil {
		p.w = w
		p.t = clk.AfterFunc(d, p.fire)
	} else {
		p.t.Reset(d)
	}
}

// Stop stops the timer (the QP's reset, error or destroy).
func (p *PaceTimer) Stop() {
	if p.t != nil {
		p.t.Stop()
		p.armed.Store(false)
	}
}

func (p *PaceTimer) fire() { p.armed.Store(false); p.w.Wake() }
