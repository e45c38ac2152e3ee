package cq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/softnic/softnic/internal/errno"
)

// Channel is a completion event channel (ibv_comp_channel): CQs attached
// to it queue one event each time their notification request is met, and
// the consumer takes them in order with Get or TryGet, then acknowledges
// them with Ack (ibv_get_cq_event(3), ibv_ack_cq_events(3)). Many CQs may
// share a channel. Like the kernel's ib_uverbs_comp_handler, the channel
// queues one event per notification and does not merge them.
type Channel struct {
	mu       sync.Mutex
	q        []*CQ // guarded by mu; ring of queued events, length a power of two
	qhead    int   // guarded by mu
	qlen     int   // guarded by mu
	attached int   // guarded by mu; CQs attached
	closed   bool  // guarded by mu

	sig  chan struct{} // holds a token while events may be queued
	done chan struct{} // closed by Close
}

// NewChannel creates a completion channel (ibv_create_comp_channel).
func NewChannel() *Channel {
	return &Channel{
		q:    make([]*CQ, 8),
		sig:  make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// Attach makes ch the channel of c's completion events, as passing the
// channel to ibv_create_cq does; a CQ has at most one channel, and
// attaching it elsewhere moves it (dropping its events queued on the old
// one). Events for a channel already closed are dropped.
func (ch *Channel) Attach(c *CQ) {
	c.mu.Lock()
	if c.destroyed || c.ch == ch {
		c.mu.Unlock()
		return
	}
	old := c.ch
	c.ch = ch
	c.mu.Unlock()
	if old != nil {
		old.detach(c)
	}
	ch.mu.Lock()
	ch.attached++
	ch.mu.Unlock()
}

// detach forgets c and drops its queued events (ib_uverbs_release_ucq).
func (ch *Channel) detach(c *CQ) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.attached--
	n := 0
	for i := 0; i < ch.qlen; i++ {
		e := ch.q[(ch.qhead+i)&(len(ch.q)-1)]
		if e != c {
			ch.q[(ch.qhead+n)&(len(ch.q)-1)] = e
			n++
		}
	}
	for i := n; i < ch.qlen; i++ {
		ch.q[(ch.qhead+i)&(len(ch.q)-1)] = nil
	}
	ch.qlen = n
}

// post queues an event for c and wakes a waiter.
func (ch *Channel) post(c *CQ) {
	ch.mu.Lock()
	if ch.closed || c.dead.Load() {
		ch.mu.Unlock()
		return
	}
	if ch.qlen == len(ch.q) {
		q := make([]*CQ, 2*len(ch.q))
		for i := 0; i < ch.qlen; i++ {
			q[i] = ch.q[(ch.qhead+i)&(len(ch.q)-1)]
		}
		ch.q, ch.qhead = q, 0
	}
	ch.q[(ch.qhead+ch.qlen)&(len(ch.q)-1)] = c
	ch.qlen++
	ch.mu.Unlock()
	ch.signal()
}

func (ch *Channel) signal() {
	select {
	case ch.sig <- struct{}{}:
	default:
	}
}

// TryGet takes the oldest event without waiting and returns its CQ, or
// false when none is queued. The event counts as unacknowledged until Ack.
func (ch *Channel) TryGet() (*CQ, bool) {
	ch.mu.Lock()
	if ch.qlen == 0 {
		ch.mu.Unlock()
		return nil, false
	}
	c := ch.q[ch.qhead]
	ch.q[ch.qhead] = nil
	ch.qhead = (ch.qhead + 1) & (len(ch.q) - 1)
	ch.qlen--
	more := ch.qlen > 0
	c.events.Add(1)
	ch.mu.Unlock()
	if more {
		ch.signal()
	}
	return c, true
}

// Get waits for an event and returns its CQ (ibv_get_cq_event). It fails
// with ctx's error when ctx ends first, with ErrClosed once the channel is
// closed. The event counts as unacknowledged until Ack.
func (ch *Channel) Get(ctx context.Context) (*CQ, error) {
	return ch.GetUntil(ctx, nil)
}

// GetUntil is Get that also gives up, with ErrTimedOut, when expired
// delivers (a timer's channel; nil: never).
func (ch *Channel) GetUntil(ctx context.Context, expired <-chan time.Time) (*CQ, error) {
	for {
		if c, ok := ch.TryGet(); ok {
			return c, nil
		}
		select {
		case <-ch.sig:
		case <-ch.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-expired:
			return nil, ErrTimedOut
		}
	}
}

// C returns a channel that holds a value while events may be queued, for
// select loops: after a receive, call TryGet (it may find nothing when
// another consumer took the event).
func (ch *Channel) C() <-chan struct{} { return ch.sig }

// Ack acknowledges n events Get or TryGet returned for c
// (ibv_ack_cq_events); Destroy refuses a CQ with unacknowledged events.
func (ch *Channel) Ack(c *CQ, n int) error {
	for {
		a := c.acked.Load()
		if n < 0 || a+int64(n) > c.events.Load() {
			return fmt.Errorf("%w: ack of %d events, %d unacknowledged", errno.Invalid, n, c.UnackedEvents())
		}
		if c.acked.CompareAndSwap(a, a+int64(n)) {
			return nil
		}
	}
}

// Close destroys the channel (ibv_destroy_comp_channel): it fails with
// errno.Busy while CQs are attached; waiting Gets return ErrClosed.
func (ch *Channel) Close() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case ch.closed:
		return ErrClosed
	case ch.attached > 0:
		return fmt.Errorf("%w: %d CQs attached to the channel", errno.Busy, ch.attached)
	}
	ch.closed = true
	close(ch.done)
	clear(ch.q)
	ch.qlen = 0
	return nil
}
