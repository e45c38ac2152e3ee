package verbs

import (
	"context"
)

// DrainWRID is the wr_id of the marker work requests the drains post.
// Their completions never reach the application: see DrainSQ.

// DrainSQ moves the QP to ERR and waits until every send WR posted
// before the call has completed or been flushed with WCWRFlushErr: their
// completions are then all in the send CQ, each exactly once, for the
// application to poll. It is the kernel's ib_drain_sq (verbs.c
// __ib_drain_sq), which libibverbs lacks: after the modify it posts a
// signaled zero-length RDMA WRITE (a zero-length SEND on a UD QP) whose
// flush completion, queued after every earlier one, marks the end. The
// marker's completion is taken out of the CQ, not returned by Poll, and
// takes no room in it. WRs posted after the drain are flushed like any
// WR posted in ERR.
//
// The marker has wr_id DrainWRID: an application WR with that wr_id and
// the same opcode, flushed during the drain, is indistinguishable from
// it, and the CQ returns one of the two identical completions.
//
// ctx bounds the wait: when it has already ended, DrainSQ returns its
// error and leaves the QP alone; when it ends during the wait (softnic
// flushes a WR posted in ERR at once, so in practice the wait ends at
// once), the QP stays in ERR and the marker's completion is still kept
// out of the CQ when it comes. The QP does not raise EventQPFatal for the
// drain's modify. As ib_drain_sq, it needs a QP that may go to ERR: one
// in RESET is refused (EINVAL, RESET→ERR is not a transition).
func (qp *QP) DrainSQ(ctx context.Context) error {
	if err := qp.live(); err != nil {
		return err
	}
	if ctx == nil {
		return errNilCtx
	}
	return qp.qp.DrainSQ(ctx)
}

// DrainRQ moves the QP to ERR and waits until every receive WR posted
// before the call has completed or been flushed (the kernel's
// ib_drain_rq): a marker receive, posted after the modify, is flushed
// after them and taken out of the receive CQ, as DrainSQ's marker is.
//
// A QP on an SRQ has no receive queue of its own: DrainRQ then does what
// the kernel's __ib_drain_srq does, moves the QP to ERR and waits for
// EventQPLastWQEReached, raised once the WQE the QP held was flushed and
// it takes no more from the SRQ (the application still gets the event).
// The SRQ's WQEs stay posted for its other QPs. A QP on a WQ is moved to
// ERR, which flushes the WQE it held; the WQ keeps its WQEs (move the WQ
// to ERR to flush them). ctx is handled as by DrainSQ.
func (qp *QP) DrainRQ(ctx context.Context) error {
	if err := qp.live(); err != nil {
		return err
	}
	if ctx == nil {
		return errNilCtx
	}
	return qp.qp.DrainRQ(ctx)
}

// DrainQP drains the send queue, then the receive queue (ib_drain_qp):
// DrainSQ followed by DrainRQ.
func (qp *QP) DrainQP(ctx context.Context) error {
	if err := qp.DrainSQ(ctx); err != nil {
		return err
	}
	return qp.DrainRQ(ctx)
}
