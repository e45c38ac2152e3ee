package verbs

import (
	"context"

	"github.com/softnic/softnic/nic/cq"
)

// CompChannel is a completion event channel (ibv_comp_channel): CQs
// attached to it report their notifications on it.
type CompChannel struct {
	ch *cq.Channel
}

// CreateCompChannel makes a completion channel (ibv_create_comp_channel).
func (d *Device) CreateCompChannel() *CompChannel { return &CompChannel{ch: cq.NewChannel()} }

// GetEvent blocks until a CQ attached to the channel has a notification
// and returns it (ibv_get_cq_event); ctx bounds the wait.
func (c *CompChannel) GetEvent(ctx context.Context) (*CQ, error) {
	q, err := c.ch.Get(ctx)
	if err != nil {
		return nil, err
	}
	return cqOf(q), nil
}

// Close destroys the channel (ibv_destroy_comp_channel).
func (c *CompChannel) Close() error { return c.ch.Close() }

// CQ is a completion queue (ibv_cq).
type CQ struct {
	d *Device
	q *cq.CQ
}

// cqs maps engine CQs back to their verbs wrappers for GetEvent.
var cqs = newRegistry[*cq.CQ, *CQ]()

func cqOf(q *cq.CQ) *CQ { c, _ := cqs.get(q); return c }

// CreateCQ creates a completion queue of at least cqe entries, attached to
// ch when ch is not nil (ibv_create_cq).
func (d *Device) CreateCQ(cqe int, ch *CompChannel) (*CQ, error) {
	q, err := cq.New(cqe, d.QueryDevice().MaxCQE)
	if err != nil {
		return nil, errno(err)
	}
	c := &CQ{d: d, q: q}
	q.SetOverflowHandler(func() {
		d.n.PostAsync(AsyncEvent{Type: 0 /* IBV_EVENT_CQ_ERR */, Other: c})
	})
	if ch != nil {
		ch.ch.Attach(q)
	}
	cqs.put(q, c)
	return c, nil
}

// Poll copies up to len(wc) completions into wc and returns how many
// (ibv_poll_cq). It does not allocate.
func (c *CQ) Poll(wc []WorkCompletion) int { return c.q.Poll(wc) }

// ReqNotify arms the CQ to notify its channel on the next completion, or
// with solicitedOnly on the next solicited or failed one (ibv_req_notify_cq).
func (c *CQ) ReqNotify(solicitedOnly bool) error { return errno(c.q.ReqNotify(solicitedOnly)) }

// Resize changes the CQ's capacity (ibv_resize_cq).
func (c *CQ) Resize(cqe int) error { return errno(c.q.Resize(cqe)) }

// Cap returns the CQ's capacity.
func (c *CQ) Cap() int { return c.q.Cap() }

// Destroy destroys the CQ (ibv_destroy_cq); EBUSY while QPs use it.
func (c *CQ) Destroy() error {
	if err := c.q.Destroy(); err != nil {
		return errno(err)
	}
	cqs.del(c.q)
	return nil
}
