package nic

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/nic/cq"
	"github.com/softnic/softnic/internal/transport"
)

// drainCQ is the CQ a QP's transport completes into: the application's
// CQ, less the completions of the drain markers armed on it (the
// kernel's drain marks its WR with its own ib_cqe instead, which
// libibverbs' wr_id cannot carry).
type drainCQ struct {
	cq    *cq.CQ
	armed atomic.Int32 // len(markers), read without mu on the hot path

	mu      sync.Mutex
	markers []*drainMarker // guarded by mu
}

var _ transport.CQ = (*drainCQ)(nil)

// drainMarker is a drain's marker WR as the CQ waits for it.
type drainMarker struct {
	opcode ibv.WCOpcode
	done   chan struct{} // closed when its completion was taken
}

// Push adds wc to the CQ unless it is an armed marker's flush completion,
// which it takes instead (and reports as added).
func (d *drainCQ) Push(wc *ibv.WorkCompletion, solicited bool) bool {
	if d.armed.Load() != 0 && wc.Status == ibv.WCWRFlushErr && wc.WRID == ibv.DrainWRID && d.take(wc) {
		return true
	}
	return d.cq.Push(wc, solicited)
}

func (d *drainCQ) take(wc *ibv.WorkCompletion) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, m := range d.markers {
		if m.opcode == wc.Opcode {
			d.markers = slices.Delete(d.markers, i, i+1)
			d.armed.Add(-1)
			close(m.done)
			return true
		}
	}
	return false
}

// arm waits for the flush completion of a marker of opcode op.
func (d *drainCQ) arm(op ibv.WCOpcode) *drainMarker {
	m := &drainMarker{opcode: op, done: make(chan struct{})}
	d.mu.Lock()
	d.markers = append(d.markers, m)
	d.armed.Add(1)
	d.mu.Unlock()
	return m
}

// disarm forgets m, whose WR was not posted.
func (d *drainCQ) disarm(m *drainMarker) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i := slices.Index(d.markers, m); i >= 0 {
		d.markers = slices.Delete(d.markers, i, i+1)
		d.armed.Add(-1)
	}
}

// waitFor waits until done is closed or ctx ends, done first when both
// are. A drain whose wait ended with ctx leaves its marker armed, so that
// the marker's completion, whenever it comes, is still taken out of the
// application's CQ.
func waitFor(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drainState is a QP's drain machinery: its CQs as the transport sees
// them, and the wait for IBV_EVENT_QP_LAST_WQE_REACHED.
type drainState struct {
	send, recv *drainCQ

	mu      sync.Mutex
	lastWQE chan struct{} // guarded by mu: closed once LAST_WQE_REACHED went out for this stay in ERR
}

func (s *drainState) init(send, recv *cq.CQ) {
	s.send = &drainCQ{cq: send}
	s.recv = &drainCQ{cq: recv}
	s.lastWQE = make(chan struct{})
}

// lastWQEFired records that LAST_WQE_REACHED went out.
func (s *drainState) lastWQEFired() {
	s.mu.Lock()
	select {
	case <-s.lastWQE:
	default:
		close(s.lastWQE)
	}
	s.mu.Unlock()
}

// lastWQERearm starts waiting for the next stay in ERR (the QP was reset).
func (s *drainState) lastWQERearm() {
	s.mu.Lock()
	select {
	case <-s.lastWQE:
		s.lastWQE = make(chan struct{})
	default:
	}
	s.mu.Unlock()
}

func (s *drainState) lastWQEChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastWQE
}

// DrainSQ moves the QP to ERR and waits until every send WR posted
// before the call has completed or been flushed (the kernel's
// ib_drain_sq, __ib_drain_sq): it posts a signaled marker after the
// modify (a zero-length RDMA WRITE; a zero-length SEND to the NIC's own
// address on a UD QP, which has no WRITE) and waits for its flush
// completion, which comes after theirs and is taken out of the send CQ.
// When it returns, their completions are in the send CQ. A ctx that has
// already ended leaves the QP alone; one that ends during the wait
// returns its error with the QP in ERR (the marker's completion is still
// taken out when it comes).
func (qp *QP) DrainSQ(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState); err != nil {
		return errno.Wrapf(err, "drain send queue")
	}
	wr := ibv.SendWR{WRID: ibv.DrainWRID, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled}
	op := ibv.WCRDMAWrite
	if qp.typ == ibv.QPTypeUD {
		wr.Opcode, op = ibv.WRSend, ibv.WCSend
		wr.AH = &ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: qp.n.addr}}
	}
	m := qp.dr.send.arm(op)
	if _, err := qp.PostSend([]ibv.SendWR{wr}); err != nil {
		qp.dr.send.disarm(m)
		return errno.Wrapf(err, "drain send queue: post the marker")
	}
	return waitFor(ctx, m.done)
}

// DrainRQ moves the QP to ERR and waits until every receive WR posted
// before the call has completed or been flushed (the kernel's
// ib_drain_rq, __ib_drain_rq): it posts a marker receive after the modify
// and waits for its flush completion, which is taken out of the receive
// CQ. A QP on an SRQ has no receive queue to post to: as the kernel's
// __ib_drain_srq does, DrainRQ waits instead for IBV_EVENT_QP_LAST_WQE_REACHED
// (which the application still receives), raised once the QP's WQE in
// progress was flushed and it takes no more from the SRQ. A QP on a WQ is
// moved to ERR, which flushes the WQE it holds; the WQ keeps its own.
// ctx is handled as by DrainSQ.
func (qp *QP) DrainRQ(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState); err != nil {
		return errno.Wrapf(err, "drain receive queue")
	}
	switch {
	case qp.srq != nil:
		return waitFor(ctx, qp.dr.lastWQEChan())
	case qp.wq != nil:
		return nil
	}
	m := qp.dr.recv.arm(ibv.WCRecv)
	if _, err := qp.PostRecv([]ibv.RecvWR{{WRID: ibv.DrainWRID}}); err != nil {
		qp.dr.recv.disarm(m)
		return errno.Wrapf(err, "drain receive queue: post the marker")
	}
	return waitFor(ctx, m.done)
}
