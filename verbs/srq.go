package verbs

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// SRQAttr holds a shared receive queue's attributes (struct
// ibv_srq_attr): its capacity in WRs, its SGEs per WR and its armed limit
// (0 when disarmed).

// SRQAttrMask selects what SRQ.Modify changes (enum ibv_srq_attr_mask).

// SRQInitAttr describes a shared receive queue to create (struct
// ibv_srq_init_attr).
type SRQInitAttr struct {
	// MaxWR is the capacity in receive WRs, 1..MaxSRQWR.
	MaxWR uint32
	// MaxSGE is the most SGEs a WR may have, up to MaxSRQSGE.
	MaxSGE uint32
	// SRQLimit is ignored, as ibv_create_srq(3) says: the SRQ starts
	// disarmed and Modify with SRQAttrLimit arms it (rxe would arm it
	// here).
	SRQLimit uint32
}

// SRQ is a shared receive queue (ibv_srq): RC, UC and UD QPs created with
// QPInitAttr.SRQ take their receive WQEs from it, in posting order. Each
// receive WQE is checked against the PD of the QP that takes it.
//
// Modify with SRQAttrLimit arms the one-shot limit event: when a QP takes
// a WQE and fewer than the limit remain posted, the device's asynchronous
// events get an EventSRQLimitReached whose Other is this *SRQ, and the
// SRQ is disarmed (Query reports limit 0) until Modify arms it again.
//
// An SRQ-attached QP that enters ERR, by a modify or on its own, raises
// EventQPLastWQEReached (once per stay in ERR): it takes no more WQEs, and
// its own WQE in progress has been flushed.
type SRQ struct {
	pd *PD
	s  *nic.SRQ
	cq *CQ // a tag-matching SRQ's CQ (CreateSRQEx)
}

func (s *SRQ) ok() bool { return s != nil && s.s != nil }

// engine returns the engine SRQ for QPInitAttr.SRQ: nil for none.
func (s *SRQ) engine() (*nic.SRQ, error) {
	switch {
	case s == nil:
		return nil, nil
	case !s.ok():
		return nil, errNil("SRQ")
	}
	return s.s, nil
}

// CreateSRQ creates a shared receive queue in pd (ibv_create_srq). A
// MaxWR of 0 or above MaxSRQWR, or a MaxSGE above MaxSRQSGE, is EINVAL;
// more than MaxSRQ SRQs is ENOMEM.
func (pd *PD) CreateSRQ(attr SRQInitAttr) (*SRQ, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	defer release()
	v := &SRQ{pd: pd}
	s, err := pd.d.n.CreateSRQ(pd.pd, nic.SRQInitAttr{
		MaxWR: attr.MaxWR, MaxSGE: attr.MaxSGE, SRQLimit: attr.SRQLimit, Context: v,
	})
	if err != nil {
		return nil, err
	}
	v.s = s
	pd.d.objs.add(v)
	return v, nil
}

// Modify resizes the SRQ and/or arms its limit (ibv_modify_srq):
// SRQAttrMaxWR takes a capacity in 1..MaxSRQWR that holds the WRs posted
// and is not below the armed limit; SRQAttrLimit takes a limit up to the
// capacity (0 disarms). A refusal is EINVAL and changes nothing.
func (s *SRQ) Modify(attr *ibv.SRQAttr, mask ibv.SRQAttrMask) error {
	if err := s.live(); err != nil {
		return err
	}
	return s.s.Modify(attr, mask)
}

// Query returns the SRQ's attributes (ibv_query_srq).
func (s *SRQ) Query() (ibv.SRQAttr, error) {
	if err := s.live(); err != nil {
		return ibv.SRQAttr{}, err
	}
	a, err := s.s.Query()
	return a, err
}

// PostRecv posts receive WRs to the SRQ (ibv_post_srq_recv), with bad-WR
// reporting as QP.PostRecv: EINVAL for too many SGEs, ENOMEM (and ENOSPC)
// for a full SRQ.
func (s *SRQ) PostRecv(wrs ...ibv.RecvWR) (int, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	n, err := s.s.PostRecv(wrs)
	return n, err
}

// Len returns the number of WRs posted and not yet taken by a QP.
func (s *SRQ) Len() int {
	if !s.ok() {
		return 0
	}
	return s.s.Len()
}

// PD returns the protection domain the SRQ was created in.
func (s *SRQ) PD() *PD {
	if !s.ok() {
		return nil
	}
	return s.pd
}

// Destroy destroys the SRQ (ibv_destroy_srq): EBUSY while QPs use it (the
// error names them) or while events about it are not acknowledged; WRs
// still posted are dropped without completions.
func (s *SRQ) Destroy() error {
	if !s.ok() {
		return errNil("SRQ")
	}
	return s.pd.d.destroyRQ(s, "SRQ", s.s, func(qp *QP) bool { return qp.init.SRQ == s })
}
