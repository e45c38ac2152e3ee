package verbs

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// Waiting for completions
//
// Wait and All are conveniences libibverbs leaves to its users (pyverbs
// and rdma-core's examples write the same loop): poll the CQ; when it is
// empty, arm it (ibv_req_notify_cq), poll once more for a completion that
// arrived before the arming took hold, then block until the CQ's
// notification fires or the context ends.

// cqWaiter is what Wait blocks on: the CQ's notifier (the engine's
// counterpart of the kernel's comp_handler, run on the goroutine that
// pushed the completion) puts a token in c when an armed CQ gets one.
type cqWaiter struct {
	c       chan struct{} // holds a token after a notification
	waiters atomic.Int32  // goroutines in Wait's blocking phase
}

func newCQWaiter(q *nic.CQ) *cqWaiter {
	w := &cqWaiter{c: make(chan struct{}, 1)}
	q.SetNotifier(w.wake)
	return w
}

// wake leaves a token unless one is there already. It never blocks, so
// the engine goroutine that runs it does not either.
func (w *cqWaiter) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Wait copies up to len(wc) completions into wc, waiting until there is
// at least one, and returns how many. Completions already queued are
// returned at once, even when ctx has ended; otherwise Wait arms the CQ
// for its next completion (ReqNotify(false)) and blocks until it comes or
// ctx ends, then returns ctx's error wrapped ("wait for completions on
// CQ: context deadline exceeded"; errors.Is finds it). A completion with
// an error status is a completion like any other: Wait returns it, and
// nil.
//
// Wait fails with EINVAL when wc is empty, ctx is nil, or the CQ cannot
// be armed: destroyed (also while Wait blocks) or overrun (after an
// overrun the completions still queued are returned first; the next Wait
// then fails).
//
// Notifications. Wait consumes the CQ's notification request: an arming
// made by ReqNotify before Wait is used by Wait, and Wait may leave the CQ
// armed when it returns. On a CQ created with a completion channel each
// notification also queues an event on the channel; Wait takes those
// events and acknowledges them (ibv_get_cq_event and ibv_ack_cq_events),
// so the channel must serve this CQ alone: Wait on a CQ whose channel
// has other CQs attached is EINVAL (it would take their events), and
// GetEvent on the channel must not be called while Wait is used.
//
// A CQ's moderation (CQ.Modify) applies to the notification Wait blocks
// on: once the CQ is empty, Wait returns when the moderation's count of
// completions has arrived or its period has passed.
//
// Cost: when completions are queued, one Poll. Otherwise one arming,
// a second Poll, the device's busy polling (Config.BusyPoll) and a block on a Go channel that the engine goroutine
// pushing the next completion signals; no timer and no polling loop, so it
// works unchanged on the fabric's fake clock and inside testing/synctest.
// Wait does not allocate. Several goroutines may Wait on one CQ: each
// completion goes to one of them.
func (c *CQ) Wait(ctx context.Context, wc []ibv.WorkCompletion) (int, error) {
	if err := c.live(); err != nil {
		return 0, err
	}
	if ctx == nil {
		return 0, errNilCtx
	}
	if len(wc) == 0 {
		return 0, fmt.Errorf("%w: Wait with no room for a completion", EINVAL)
	}
	if n := c.q.Poll(wc); n > 0 {
		return n, nil
	}
	if c.ch != nil {
		if n := c.ch.cqs.Load(); n > 1 {
			return 0, fmt.Errorf("%w: Wait on a CQ whose completion channel serves %d CQs: Wait takes the channel's events", EINVAL, n)
		}
	}
	w := c.wait
	w.waiters.Add(1)
	defer w.waiters.Add(-1)
	for {
		c.ackEvents()
		if c.dead.Load() {
			return 0, fmt.Errorf("%w: wait for completions: CQ destroyed", EINVAL)
		}
		if err := c.q.ReqNotify(false); err != nil {
			// Overrun or destroyed; an overrun CQ may still hold
			// completions pushed before it overran.
			if n := c.q.Poll(wc); n > 0 {
				return n, nil
			}
			return 0, fmt.Errorf("wait for completions: %w", err)
		}
		if n := c.q.Poll(wc); n > 0 {
			return n, nil
		}
		var n int
		if c.d.busyPollUntil(func() bool { n = c.q.Poll(wc); return n > 0 }) {
			c.ackEvents()
			return n, nil
		}
		c.d.n.EndPoll() // the receive goroutine reads the link while this sleeps
		select {
		case <-w.c:
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for completions on CQ: %w", ctx.Err())
		}
		if n := c.q.Poll(wc); n > 0 {
			c.ackEvents()
			if w.waiters.Load() > 1 {
				w.wake() // another waiter may find completions left
			}
			return n, nil
		}
	}
}

// ackEvents takes and acknowledges the events the CQ's notifications
// queued on its channel, which serves this CQ alone (Wait checks).
func (c *CQ) ackEvents() {
	if c.ch == nil {
		return
	}
	ch := c.q.Channel()
	if ch == nil {
		return
	}
	for {
		q, ok := ch.TryGet()
		if !ok {
			return
		}
		_ = ch.Ack(q, 1) // q is c.q: the channel serves c alone
	}
}

// All returns an iterator over the CQ's completions as they arrive, for
// a range loop:
//
//	for wc, err := range cq.All(ctx) {
//		if err != nil {
//			return err // ctx ended, or the CQ was destroyed or overran
//		}
//		...
//	}
//
// It takes completions one at a time with Wait, so leaving the loop
// leaves every completion not yet seen on the CQ. It ends after yielding
// the first error Wait returns (with a zero WorkCompletion); it never
// ends on its own otherwise. Wait's rules on notifications and
// completion channels apply. Neither All nor its loop allocates per
// completion.
func (c *CQ) All(ctx context.Context) iter.Seq2[ibv.WorkCompletion, error] {
	return func(yield func(ibv.WorkCompletion, error) bool) {
		var wc [1]ibv.WorkCompletion
		for {
			if _, err := c.Wait(ctx, wc[:]); err != nil {
				yield(ibv.WorkCompletion{}, err)
				return
			}
			if !yield(wc[0], nil) {
				return
			}
		}
	}
}
