package toolnic

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// DefaultStall is how long a tool waits for the next completion (or the
// peer's next message) before it gives up, unless told otherwise.
const DefaultStall = 30 * time.Second

// DefaultSpin is how long a Waiter polls before it sleeps. The C tools
// poll for ever. A poll of an empty CQ reads the link (verbs.CQ.Poll), so
// while the tool polls it drives the NIC itself; but the CPUs are shared
// with the NIC's other goroutines and with the peer, and on two vCPUs a
// longer spin made the latency tail worse (docs/performance.md,
// "toolnic.DefaultSpin: the spin before a tool blocks").
const DefaultSpin = 50 * time.Microsecond

// ErrStall reports that nothing arrived for the stall timeout.
type ErrStall struct {
	What  string // what was awaited: "a completion", "the peer's message"
	After time.Duration
}

func (e *ErrStall) Error() string {
	return fmt.Sprintf("timeout: no %s for %v", e.What, e.After)
}

// Waiter waits for completions on a CQ: it polls, keeps polling for Spin,
// then arms the CQ and sleeps on its completion channel (the
// ibv_req_notify_cq / re-poll / ibv_get_cq_event pattern), so an idle
// tool leaves the CPUs to the NIC.
type Waiter struct {
	CQ    *verbs.CQ
	Ch    *verbs.CompChannel // the channel CQ was created with
	Spin  time.Duration      // 0: DefaultSpin
	Stall time.Duration      // 0: DefaultStall; < 0: wait forever
}

// Poll fills wc with at least one completion and returns how many. It
// fails with *ErrStall when nothing completes for w.Stall, or with ctx's
// error.
func (w *Waiter) Poll(ctx context.Context, wc []ibv.WorkCompletion) (int, error) {
	if n := w.CQ.Poll(wc); n > 0 {
		return n, nil
	}
	spin := w.Spin
	if spin == 0 {
		spin = DefaultSpin
	}
	stall := w.Stall
	if stall == 0 {
		stall = DefaultStall
	}
	start := time.Now()
	for time.Since(start) < spin {
		runtime.Gosched()
		if n := w.CQ.Poll(wc); n > 0 {
			return n, nil
		}
	}
	for {
		if err := w.CQ.ReqNotify(false); err != nil {
			return 0, err
		}
		if n := w.CQ.Poll(wc); n > 0 {
			return n, nil
		}
		var err error
		if stall > 0 {
			// Not GetEvent under context.WithDeadline: a tool waits
			// once per message, and a context and its timer per wait
			// cost a measurable share of write_lat's CPU on a slow host
			// (docs/performance.md, "toolnic.Waiter").
			_, err = w.Ch.GetEventTimeout(ctx, time.Until(start.Add(stall)))
		} else {
			_, err = w.Ch.GetEvent(ctx)
		}
		if n := w.CQ.Poll(wc); n > 0 {
			return n, nil
		}
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, verbs.ETIMEDOUT) {
				return 0, &ErrStall{What: "work completion", After: stall}
			}
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, err
		}
	}
}
