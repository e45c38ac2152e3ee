package verbs

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// CompChannel is a completion event channel (ibv_comp_channel): CQs
// attached to it report their notifications on it.
type CompChannel struct {
	d     *Device
	ch    *nic.CompChannel
	cqs   atomic.Int32  // CQs attached, for CQ.Wait (cqwait.go)
	timer nic.TimerSlot // GetEventTimeout's
}

// CreateCompChannel makes a completion channel (ibv_create_comp_channel)
// of device d: CreateCQ on another device refuses it (EINVAL).
func (d *Device) CreateCompChannel() *CompChannel {
	return &CompChannel{d: d, ch: nic.NewCompChannel()}
}

func (c *CompChannel) ok() bool { return c != nil && c.ch != nil }

// GetEvent blocks until a CQ attached to the channel has a notification
// and returns it (ibv_get_cq_event); ctx bounds the wait, and its error
// is returned as is when it ends first. On a device opened with
// Config.BusyPoll it polls the link for that long before it sleeps. Each event must be acknowledged
// with CQ.AckEvents before the CQ can be destroyed.
func (c *CompChannel) GetEvent(ctx context.Context) (*CQ, error) {
	return c.getEvent(ctx, -1)
}

// GetEventTimeout is GetEvent that also gives up after timeout, with an
// error wrapping ETIMEDOUT: the C pattern of poll(2) on the channel's fd
// with a timeout, then ibv_get_cq_event. A timeout of 0 or less takes
// only an event already queued (after the device's busy polling). Unlike
// GetEvent under context.WithTimeout it allocates nothing (its timer is
// reused), which matters to a loop that waits once per message.
func (c *CompChannel) GetEventTimeout(ctx context.Context, timeout time.Duration) (*CQ, error) {
	return c.getEvent(ctx, max(timeout, 0))
}

// getEvent is GetEvent (timeout < 0) and GetEventTimeout.
func (c *CompChannel) getEvent(ctx context.Context, timeout time.Duration) (*CQ, error) {
	if err := c.live(); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, errNilCtx
	}
	var q *nic.CQ
	if c.d.busyPollUntil(func() bool {
		var ok bool
		q, ok = c.ch.TryGet()
		return ok
	}) {
		return cqOf(q), nil
	}
	c.d.n.EndPoll() // the receive goroutine reads the link while this sleeps
	var expired <-chan time.Time
	if timeout >= 0 {
		t := c.timer.Start(timeout)
		defer c.timer.Done(t)
		expired = t.C
	}
	q, err := c.ch.GetUntil(ctx, expired)
	if err != nil {
		return nil, err
	}
	return cqOf(q), nil
}

// Ready returns a channel that holds a value while events may be queued
// on c, for a select loop that then takes them with GetEventTimeout and a
// timeout of 0 (which may find none: another consumer took them). It is
// nil for a CompChannel not made by CreateCompChannel. softnic's C
// libibverbs waits on it to signal the file descriptor a program polls.
func (c *CompChannel) Ready() <-chan struct{} {
	if !c.ok() {
		return nil
	}
	return c.ch.C()
}

// Close destroys the channel (ibv_destroy_comp_channel): EBUSY while CQs
// are attached to it, EINVAL when it is already closed.
func (c *CompChannel) Close() error {
	if !c.ok() {
		return errNil("CompChannel")
	}
	return c.ch.Close()
}

// CQ is a completion queue (ibv_cq).
type CQ struct {
	d    *Device
	q    *nic.CQ
	ch   *CompChannel // the channel given to CreateCQ, or nil
	dead atomic.Bool  // destroyed
	wait *cqWaiter    // CQ.Wait's wake-up (cqwait.go)
	// parent is the parent domain CreateCQEx was given, held until
	// Destroy (as mlx5 holds it: its ibv_dealloc_pd is EBUSY meanwhile).
	parent *PD
}

// cqs maps engine CQs back to their verbs wrappers for GetEvent.
// cqOf returns the verbs CQ of an engine CQ: its cq_context. (A global
// map here would keep every device ever opened alive.)
func cqOf(q *nic.CQ) *CQ { c, _ := q.Context().(*CQ); return c }

func (c *CQ) ok() bool { return c != nil && c.q != nil }

// CreateCQ creates a completion queue of at least cqe entries, attached to
// ch when ch is not nil (ibv_create_cq). The capacity is rounded up as
// rxe rounds it (to a power of two minus one); Cap reports it. When the
// CQ overruns, the device reports EventCQErr with the CQ in
// AsyncEvent.Other, and the QP whose completion was lost moves to ERR.
func (d *Device) CreateCQ(cqe int, ch *CompChannel) (*CQ, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if ch != nil && !ch.ok() {
		return nil, errNil("CompChannel")
	}
	if ch != nil {
		if err := d.sameDevice("the completion channel", ch.d); err != nil {
			return nil, err
		}
	}
	q, err := nic.NewCQ(cqe, d.QueryDevice().MaxCQE)
	if err != nil {
		return nil, err
	}
	c := &CQ{d: d, q: q, ch: ch, wait: newCQWaiter(q)}
	q.SetOverflowHandler(func() {
		d.n.PostAsync(ibv.AsyncEvent{Type: ibv.EventCQErr, Other: c})
	})
	if ch != nil {
		ch.ch.Attach(q)
		ch.cqs.Add(1)
	}
	q.SetContext(c)
	return c, nil
}

// Poll copies up to len(wc) completions into wc and returns how many
// (ibv_poll_cq). It does not allocate.
//
// A poll that finds the CQ empty first reads what has arrived on the
// device's link, without waiting, and handles it on the calling goroutine
// (Device.Progress; run to completion): an application that polls drives
// the device itself, as a poll of a hardware CQ finds what the NIC wrote,
// and never waits for softnic's receive goroutine to be scheduled. That
// read is one non-blocking recvmmsg on a UDP link (none while another
// goroutine is in Progress). The receive goroutine reads the link too and
// handles whatever the polls leave, or, while an application polls
// busily, steps off the link until it blocks or stops (Device.Progress);
// Config.BusyPoll is about the blocking waits, which do not poll the link
// unless it is set.
func (c *CQ) Poll(wc []ibv.WorkCompletion) int {
	if !c.ok() {
		return 0
	}
	if k := c.q.Poll(wc); k > 0 || len(wc) == 0 {
		return k
	}
	if c.d.n.Progress() == 0 {
		return 0
	}
	return c.q.Poll(wc)
}

// ReqNotify arms the CQ to notify its channel on the next completion, or
// with solicitedOnly on the next solicited or failed one (ibv_req_notify_cq).
// An overrun or destroyed CQ cannot be armed (EINVAL).
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	if err := c.live(); err != nil {
		return err
	}
	return c.q.ReqNotify(solicitedOnly)
}

// AckEvents acknowledges n completion events GetEvent returned for this
// CQ (ibv_ack_cq_events); Destroy refuses a CQ with events not
// acknowledged. Acknowledging more than were returned is EINVAL.
func (c *CQ) AckEvents(n int) error {
	if !c.ok() {
		return errNil("CQ")
	}
	ch := c.q.Channel()
	if ch == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("%w: ack of %d events on a CQ without a completion channel", EINVAL, n)
	}
	return ch.Ack(c.q, n)
}

// Resize changes the CQ's capacity to at least cqe entries, keeping the
// completions queued (ibv_resize_cq); EINVAL when cqe is below the number
// queued or above the device's max_cqe.
func (c *CQ) Resize(cqe int) error {
	if err := c.live(); err != nil {
		return err
	}
	return c.q.Resize(cqe)
}

// Cap returns the CQ's capacity.
func (c *CQ) Cap() int {
	if !c.ok() {
		return 0
	}
	return c.q.Cap()
}

// Destroy destroys the CQ (ibv_destroy_cq): EBUSY while QPs use it or
// completion events are not acknowledged (the error names the QPs and WQs
// using it, or the events), EINVAL when it already was.
func (c *CQ) Destroy() error {
	if !c.ok() {
		return errNil("CQ")
	}
	if err := c.d.asyncBusy(c); err != nil {
		return fmt.Errorf("destroy CQ: %w", err)
	}
	if err := c.q.Destroy(); err != nil {
		return c.d.busy(err, "CQ", func(obj any) bool {
			switch v := obj.(type) {
			case *QP:
				return v.init.SendCQ == c || v.init.RecvCQ == c
			case *WQ:
				return v.cq == c
			}
			return false
		})
	}
	c.dead.Store(true)
	if c.ch != nil {
		c.ch.cqs.Add(-1)
	}
	if p := c.parent; p != nil {
		p.mu.Lock()
		p.cqs--
		p.mu.Unlock()
	}
	c.wait.wake() // a Wait in progress returns EINVAL
	if c.d.ok() {
		c.d.n.DropAsyncFor(c)
	}
	return nil
}
