package nic

import (
	"fmt"
	"sync"

	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
)

// sharedRQ is what an SRQ and a WQ have in common: a receive queue of its
// own in a PD, which QPs attach to and take their receive WQEs from
// instead of an RQ of their own. It holds the ring (transport.RecvQueue:
// posting in order with bad-WR reporting, EINVAL for too many SGEs, ENOMEM
// on a full queue), counts the QPs attached so that destroying it while
// they are is EBUSY (the kernel's ib_destroy_srq_user and ib_destroy_wq_user:
// usecnt), and refuses every verb once destroyed. A WQE's buffers are not
// checked here but against the PD of the QP that takes it, as rxe's
// responder does (copy_data(qp->pd)).
//
// SRQ adds the limit event and resizing; WQ adds its state machine, whose
// ERR flushes the ring on the WQ's CQ.
type sharedRQ struct {
	n    *NIC
	pd   *mem.PD
	rq   *transport.RecvQueue
	ctx  any    // what the queue's asynchronous events carry in AsyncEvent.Other
	name string // "SRQ" or "WQ 0x1", for errors

	mu        sync.Mutex // also guards the SRQ's and the WQ's own fields
	users     int        // guarded by mu: QPs attached
	destroyed bool       // guarded by mu
}

// checkRQCap refuses (EINVAL) an SRQ or a WQ of maxWR WRs outside
// 1..limWR or of maxSGE SGEs per WR above limSGE (rxe rxe_srq_chk_attr;
// the kernel's ib_create_wq leaves the WQ's to the driver, and softnic
// gives it a QP's RQ limits).
func checkRQCap(kind string, maxWR, limWR, maxSGE, limSGE uint32) error {
	switch {
	case maxWR == 0 || maxWR > limWR:
		return fmt.Errorf("%w: %s max_wr %d not in 1..%d", errno.Invalid, kind, maxWR, limWR)
	case maxSGE > limSGE:
		return fmt.Errorf("%w: %s max_sge %d exceeds %d", errno.Invalid, kind, maxSGE, limSGE)
	}
	return nil
}

// init makes the queue's ring of maxWR WRs of up to maxSGE SGEs (at least
// one), and takes a reference on pd.
func (q *sharedRQ) init(n *NIC, pd *mem.PD, ctx any, name string, maxWR, maxSGE uint32) {
	q.n, q.pd, q.ctx, q.name = n, pd, ctx, name
	q.rq = transport.NewRecvQueue(int(maxWR), int(max(maxSGE, 1)))
	pd.Ref()
}

// usableLocked refuses a verb on a destroyed queue (EINVAL) or on a closed
// NIC.
func (q *sharedRQ) usableLocked() error {
	switch {
	case q.destroyed:
		return fmt.Errorf("%w: %s destroyed", errno.Invalid, q.name)
	case q.n.closed.Load():
		return ErrClosed
	}
	return nil
}

// Len returns the number of WRs posted and not yet taken.
func (q *sharedRQ) Len() int { return q.rq.Len() }

// attach records a QP taking its receive WQEs from the queue.
func (q *sharedRQ) attach() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.destroyed {
		return fmt.Errorf("%w: %s destroyed", errno.Invalid, q.name)
	}
	q.users++
	return nil
}

// detach drops a QP recorded by attach.
func (q *sharedRQ) detach() {
	q.mu.Lock()
	q.users--
	q.mu.Unlock()
}

// destroyableLocked says why the queue cannot be destroyed: EINVAL the
// second time, EBUSY while QPs are attached.
func (q *sharedRQ) destroyableLocked() error {
	switch {
	case q.destroyed:
		return fmt.Errorf("%w: %s already destroyed", errno.Invalid, q.name)
	case q.users > 0:
		return fmt.Errorf("%w: %s used by %d QPs", errno.Busy, q.name, q.users)
	}
	return nil
}

// destroyLocked destroys a queue destroyableLocked allowed: the WRs still
// posted are dropped without completions, the PD is released and the
// queued asynchronous events about the queue go with it.
func (q *sharedRQ) destroyLocked() {
	q.destroyed = true
	q.rq.Drain(func(*transport.RecvWQE) {})
	q.pd.Unref()
	q.n.DropAsyncFor(q.ctx)
}
