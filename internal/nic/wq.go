package nic

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/nic/cq"
	"github.com/softnic/softnic/internal/transport"
)

// WQInitAttr describes a work queue to create (struct ibv_wq_init_attr).
type WQInitAttr struct {
	Type   ibv.WQType
	MaxWR  uint32
	MaxSGE uint32
	// CQ receives the completions of the WQ's receive WRs.
	CQ *cq.CQ
	// CreateFlags are enum ibv_wq_flags: none supported.
	CreateFlags uint32
	// Context is what the WQ's asynchronous events carry in
	// AsyncEvent.Other.
	Context any
}

// WQ is a receive work queue (ibv_wq; the kernel's ib_wq): a receive
// queue with a state machine of its own, RESET, RDY and ERR. Receive WRs
// may be posted in RDY, are refused in RESET and are flushed with
// WR_FLUSH_ERR in ERR; entering ERR flushes the WRs posted, entering
// RESET discards them without completions. RC, UC and UD QPs created with
// QPInitAttr.WQ take their receive WQEs from it, and complete them on its
// CQ; a WQ that is not RDY holds none to take (softnic has no receive
// side scaling: a QP on a WQ is an indirection table of one WQ). As with
// an SRQ, a WQE's buffers are checked against the PD of the QP that takes
// it. It is a sharedRQ (the ring, attaching QPs, destroying) with a CQ and
// the state machine of its own.
type WQ struct {
	sharedRQ

	cq    *cq.CQ
	num   uint32
	state ibv.WQState // guarded by mu
}

// CreateWQ creates a receive work queue in pd, in RESET (ibv_create_wq;
// ib_create_wq): MaxWR in 1..MaxQPWR, MaxSGE up to MaxSGE, a CQ, no
// create flags.
func (n *NIC) CreateWQ(pd *mem.PD, a WQInitAttr) (*WQ, error) {
	switch {
	case n.closed.Load():
		return nil, ErrClosed
	case pd == nil || a.CQ == nil:
		return nil, fmt.Errorf("%w: WQ needs a PD and a CQ", errno.Invalid)
	case a.Type != ibv.WQTypeRQ:
		return nil, fmt.Errorf("%w: WQ type %d (softnic has IBV_WQT_RQ)", errno.Invalid, a.Type)
	}
	if err := checkRQCap("WQ", a.MaxWR, maxQPWR, a.MaxSGE, maxSGE); err != nil {
		return nil, err
	}
	if a.CreateFlags != 0 {
		return nil, fmt.Errorf("%w: WQ create flags %#x not supported", errno.Invalid, a.CreateFlags)
	}
	// WQ numbers are a space of their own, apart from QPNs, as mlx5's RQ
	// numbers are.
	w := &WQ{cq: a.CQ, num: n.wqNum.Add(1)}
	w.init(n, pd, a.Context, fmt.Sprintf("WQ %#x", w.num), a.MaxWR, a.MaxSGE)
	a.CQ.Ref()
	return w, nil
}

// Num returns the WQ number (ibv_wq.wq_num); flush completions carry it
// as their QP number.
func (w *WQ) Num() uint32 { return w.num }

// State returns the WQ's state (ibv_wq.state).
func (w *WQ) State() ibv.WQState {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.destroyed {
		return ibv.WQStateUnknown
	}
	return w.state
}

// Cap returns the WQ's capacity in WRs and SGEs per WR.
func (w *WQ) Cap() (maxWR, maxSGE int) { return w.rq.Cap(), w.rq.MaxSGE() }

// wqTransitionOK is the WQ state table: any state to RESET or ERR, RESET
// to RDY, RDY to RDY (IBTA 10.3.1 applied to a lone receive queue, as for
// QPs: ERR is left only through RESET).
func wqTransitionOK(cur, next ibv.WQState) bool {
	switch next {
	case ibv.WQStateReset, ibv.WQStateErr:
		return true
	case ibv.WQStateRdy:
		return cur == ibv.WQStateReset || cur == ibv.WQStateRdy
	}
	return false
}

// Modify changes the WQ's state (ibv_modify_wq): WQAttrState with the
// next state, checked against the state table; WQAttrCurrState, if set,
// must name the current state. Flags are not supported (EINVAL for any
// flag in FlagsMask). Entering ERR completes every posted WR with
// WR_FLUSH_ERR on the WQ's CQ; entering RESET discards them.
func (w *WQ) Modify(attr *ibv.WQAttr, mask ibv.WQAttrMask) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usableLocked(); err != nil {
		return err
	}
	switch {
	case attr == nil || mask&^(ibv.WQAttrState|ibv.WQAttrCurrState|ibv.WQAttrFlags) != 0:
		return fmt.Errorf("%w: WQ attribute mask %#x", errno.Invalid, uint32(mask))
	case mask&ibv.WQAttrFlags != 0 && attr.FlagsMask != 0:
		return fmt.Errorf("%w: WQ flags %#x not supported", errno.Invalid, attr.FlagsMask)
	case mask&ibv.WQAttrCurrState != 0 && attr.CurrState != w.state:
		return fmt.Errorf("%w: WQ %#x is %v, not %v (IBV_WQ_ATTR_CURR_STATE)", errno.Invalid, w.num, w.state, attr.CurrState)
	}
	if mask&ibv.WQAttrState == 0 {
		return nil
	}
	if !wqTransitionOK(w.state, attr.State) {
		return fmt.Errorf("%w: WQ %#x: %v->%v", errno.Invalid, w.num, w.state, attr.State)
	}
	prev := w.state
	w.state = attr.State
	switch {
	case attr.State == ibv.WQStateReset:
		w.rq.Drain(func(*transport.RecvWQE) {})
	case attr.State == ibv.WQStateErr && prev != ibv.WQStateErr:
		w.flushLocked()
	}
	return nil
}

// flushLocked completes every posted WR with WR_FLUSH_ERR.
func (w *WQ) flushLocked() {
	w.rq.Drain(func(r *transport.RecvWQE) {
		wc := transport.FlushedRecv(r, w.num)
		w.cq.Push(&wc, false)
	})
}

// PostRecv posts receive WRs to the WQ (ibv_post_wq_recv); on error it
// returns the index of the first WR not posted. Posting in RESET is
// refused; WRs posted in ERR are flushed at once.
func (w *WQ) PostRecv(wrs []ibv.RecvWR) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usableLocked(); err != nil {
		return 0, err
	}
	if w.state == ibv.WQStateReset {
		return 0, fmt.Errorf("%w: post receive to WQ %#x in RESET", transport.ErrState, w.num)
	}
	i, err := w.rq.Post(wrs)
	if w.state == ibv.WQStateErr {
		w.flushLocked()
	}
	return i, err
}

// Destroy destroys the WQ (ibv_destroy_wq): EBUSY while QPs use it; WRs
// still posted are dropped without completions, and queued asynchronous
// events about it are dropped too.
func (w *WQ) Destroy() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.destroyableLocked(); err != nil {
		return err
	}
	w.destroyLocked()
	w.cq.Unref()
	return nil
}
