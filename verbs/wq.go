package verbs

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// WQInitAttr describes a work queue to create (struct ibv_wq_init_attr).
type WQInitAttr struct {
	// Type is WQTypeRQ, the only type.
	Type ibv.WQType
	// MaxWR is the capacity in receive WRs, 1..MaxQPWR; MaxSGE the SGEs
	// per WR, up to MaxSGE.
	MaxWR  uint32
	MaxSGE uint32
	// PD is the protection domain the WQ and its receive buffers belong
	// to, and CQ the completion queue of its receives.
	PD *PD
	CQ *CQ
	// CreateFlags (enum ibv_wq_flags: VLAN stripping, FCS scatter, delay
	// drop, padding) are not supported: any is EINVAL.
	CreateFlags uint32
}

// WQ is a receive work queue (ibv_wq, ibv_create_wq(3)).
//
// On a NIC with receive side scaling, WQs are the receive queues an
// indirection table spreads a RAW_PACKET QP's traffic over. softnic has
// no RSS and no RAW_PACKET QPs: a WQ is a receive queue with a state
// machine of its own, which an RC, UC or UD QP created with
// QPInitAttr.WQ takes its receive WQEs from (an indirection table of
// one WQ), completing them on the WQ's CQ.
//
// What that is good for in softnic: stopping and flushing a QP's
// receives without touching its send side or its connection. Moving the
// WQ to ERR completes every receive posted to it with WR_FLUSH_ERR, and
// the QP, finding no WQE, answers further SENDs with RNR NAKs (RC) or
// drops them (UC, UD) while its sends go on; RESET then RDY lets the
// application post afresh. Programs written against ibv_create_wq also
// run unchanged up to the indirection table.
//
// States: a WQ is created in RESET, where posting is refused (EINVAL).
// Modify moves it RESET→RDY, RDY→RDY, and from any state to ERR or
// RESET; ERR→RDY is refused (go through RESET, as for QPs). Entering ERR
// flushes every posted WR; WRs posted in ERR are flushed at once;
// entering RESET discards the posted WRs without completions. Flush
// completions carry the WQ number as their QPNum. The WQE a QP holds
// while a message arrives is not the WQ's any more: it completes, or is
// flushed with the QP's own move to ERR. As with an SRQ, a WQE's buffers
// are checked against the PD of the QP that takes it.
type WQ struct {
	pd *PD
	cq *CQ
	w  *nic.WQ
}

func (w *WQ) ok() bool { return w != nil && w.w != nil }

// engine returns the engine WQ for QPInitAttr.WQ: nil for none.
func (w *WQ) engine() (*nic.WQ, error) {
	switch {
	case w == nil:
		return nil, nil
	case !w.ok():
		return nil, errNil("WQ")
	}
	return w.w, nil
}

// CreateWQ creates a receive work queue in RESET (ibv_create_wq): a type
// other than WQTypeRQ, a MaxWR of 0 or above MaxQPWR, a MaxSGE above
// MaxSGE or create flags are EINVAL. WQ.Cap reports the sizes granted.
func (d *Device) CreateWQ(attr WQInitAttr) (*WQ, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if !attr.PD.ok() {
		return nil, errNil("WQInitAttr.PD")
	}
	if err := d.sameDevice("WQInitAttr.PD", attr.PD.d); err != nil {
		return nil, err
	}
	release, err := attr.PD.use()
	if err != nil {
		return nil, err
	}
	defer release()
	switch {
	case !attr.CQ.ok():
		return nil, errNil("WQInitAttr.CQ")
	case attr.CQ.dead.Load():
		return nil, errNil("WQInitAttr.CQ (destroyed)")
	}
	if err := d.sameDevice("WQInitAttr.CQ", attr.CQ.d); err != nil {
		return nil, err
	}
	v := &WQ{pd: attr.PD, cq: attr.CQ}
	w, err := d.n.CreateWQ(attr.PD.pd, nic.WQInitAttr{Type: attr.Type, MaxWR: attr.MaxWR, MaxSGE: attr.MaxSGE,
		CQ: attr.CQ.q, CreateFlags: attr.CreateFlags, Context: v})
	if err != nil {
		return nil, err
	}
	v.w = w
	d.objs.add(v)
	return v, nil
}

// Modify changes the WQ's state (ibv_modify_wq): WQAttrState with
// attr.State; WQAttrCurrState, if set, must match the current state;
// WQAttrFlags with a non-zero FlagsMask is EINVAL. A refused transition
// is EINVAL and changes nothing.
func (w *WQ) Modify(attr *ibv.WQAttr, mask ibv.WQAttrMask) error {
	if err := w.live(); err != nil {
		return err
	}
	return w.w.Modify(attr, mask)
}

// State returns the WQ's state (ibv_wq.state; WQStateUnknown once
// destroyed, after Device.Close, or for a WQ not made by CreateWQ).
func (w *WQ) State() ibv.WQState {
	if w.live() != nil {
		return ibv.WQStateUnknown
	}
	return w.w.State()
}

// Num returns the WQ number (ibv_wq.wq_num).
func (w *WQ) Num() uint32 {
	if !w.ok() {
		return 0
	}
	return w.w.Num()
}

// Cap returns the sizes CreateWQ granted: the WRs the WQ holds and the
// SGEs a WR may have, at least what WQInitAttr asked for (what
// ibv_create_wq writes back into wq_init_attr's max_wr and max_sge).
func (w *WQ) Cap() (maxWR, maxSGE uint32) {
	if !w.ok() {
		return 0, 0
	}
	wr, sge := w.w.Cap()
	return uint32(wr), uint32(sge)
}

// Len returns the number of WRs posted and not yet taken.
func (w *WQ) Len() int {
	if !w.ok() {
		return 0
	}
	return w.w.Len()
}

// CQ returns the WQ's completion queue.
func (w *WQ) CQ() *CQ {
	if !w.ok() {
		return nil
	}
	return w.cq
}

// PostRecv posts receive WRs to the WQ (ibv_post_wq_recv), with bad-WR
// reporting as QP.PostRecv: EINVAL in RESET or for too many SGEs, ENOMEM
// (and ENOSPC) for a full WQ. WRs posted in ERR complete with
// WCWRFlushErr.
func (w *WQ) PostRecv(wrs ...ibv.RecvWR) (int, error) {
	if err := w.live(); err != nil {
		return 0, err
	}
	n, err := w.w.PostRecv(wrs)
	return n, err
}

// Destroy destroys the WQ (ibv_destroy_wq): EBUSY while QPs use it (the
// error names them); posted WRs are dropped without completions.
// Destroying it again is EINVAL.
func (w *WQ) Destroy() error {
	if !w.ok() {
		return errNil("WQ")
	}
	return w.pd.d.destroyRQ(w, fmt.Sprintf("WQ %#x", w.Num()), w.w, func(qp *QP) bool { return qp.init.WQ == w })
}
