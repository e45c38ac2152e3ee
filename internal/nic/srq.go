package nic

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/mem"
)

// SRQInitAttr describes a shared receive queue to create (struct
// ibv_srq_init_attr).
type SRQInitAttr struct {
	MaxWR  uint32
	MaxSGE uint32
	// SRQLimit is ignored, as ibv_create_srq(3) says ("irrelevant for
	// ibv_create_srq"): an SRQ starts disarmed and Modify arms it. (rxe
	// arms it at creation when the value is not zero.)
	SRQLimit uint32
	// Context is what the SRQ's asynchronous events carry in
	// AsyncEvent.Other (the verbs object wrapping the SRQ).
	Context any
}

// SRQ is a shared receive queue (ibv_srq): one receive queue that any
// number of RC, UC and UD QPs take their receive WQEs from, in posting
// order (ibv_create_srq(3)). Receive WQEs are checked against the PD of
// the QP that takes them, as rxe's responder does (copy_data(qp->pd)).
// It is a sharedRQ (the ring, attaching QPs, destroying) with the limit
// event and resizing of its own.
type SRQ struct {
	sharedRQ

	limit uint32 // guarded by mu: the armed limit, 0 when disarmed
	gen   uint64 // guarded by mu: bumped by every arming
}

const (
	// minSRQWR is the smallest SRQ rxe makes (RXE_MIN_SRQ_WR).
	minSRQWR = 1
	// maxSRQ is the number of SRQs a NIC makes (QueryDevice MaxSRQ).
	maxSRQ = 1 << 14
)

// CreateSRQ creates a shared receive queue in pd (ibv_create_srq; rxe
// rxe_srq_chk_attr): MaxWR in 1..MaxSRQWR, MaxSGE up to MaxSRQSGE (at
// least one SGE is always granted), at most MaxSRQ SRQs per NIC.
func (n *NIC) CreateSRQ(pd *mem.PD, a SRQInitAttr) (*SRQ, error) {
	switch {
	case n.closed.Load():
		return nil, ErrClosed
	case pd == nil:
		return nil, fmt.Errorf("%w: SRQ needs a PD", ErrInvalid)
	}
	if err := checkRQCap("SRQ", a.MaxWR, maxSRQWR, a.MaxSGE, maxSRQSGE); err != nil {
		return nil, err
	}
	if int(n.srqs.Add(1)) > maxSRQ {
		n.srqs.Add(-1)
		return nil, fmt.Errorf("%w: %d SRQs exist", ErrNoMemory, maxSRQ)
	}
	s := &SRQ{}
	s.init(n, pd, a.Context, "SRQ", max(a.MaxWR, minSRQWR), a.MaxSGE)
	return s, nil
}

// Query returns the SRQ's attributes (ibv_query_srq): its capacity, its
// SGEs per WR and the armed limit (0 once the limit event fired).
func (s *SRQ) Query() (ibv.SRQAttr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return ibv.SRQAttr{}, fmt.Errorf("%w: SRQ destroyed", ErrInvalid)
	}
	return ibv.SRQAttr{MaxWR: uint32(s.rq.Cap()), MaxSGE: uint32(s.rq.MaxSGE()), SRQLimit: s.limit}, nil
}

// Modify resizes the SRQ and/or arms its limit (ibv_modify_srq; rxe
// rxe_srq_chk_attr, rxe_srq_from_attr):
//
//   - SRQAttrMaxWR: a new capacity in 1..MaxSRQWR, not below the armed
//     limit nor below the number of WRs posted;
//   - SRQAttrLimit: SRQLimit up to the capacity arms the one-shot
//     IBV_EVENT_SRQ_LIMIT_REACHED, raised when taking a WQE leaves fewer
//     than SRQLimit posted; 0 disarms it. Each arming fires at most once.
func (s *SRQ) Modify(attr *ibv.SRQAttr, mask ibv.SRQAttrMask) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if attr == nil || mask&^(ibv.SRQAttrMaxWR|ibv.SRQAttrLimit) != 0 {
		return fmt.Errorf("%w: SRQ attribute mask %#x", ErrInvalid, uint32(mask))
	}
	if mask&ibv.SRQAttrMaxWR != 0 {
		if err := checkRQCap("SRQ", attr.MaxWR, maxSRQWR, 0, 0); err != nil {
			return err
		}
		if mask&ibv.SRQAttrLimit == 0 && s.limit != 0 && attr.MaxWR < s.limit {
			return fmt.Errorf("%w: SRQ max_wr %d below the armed limit %d", ErrInvalid, attr.MaxWR, s.limit)
		}
	}
	if mask&ibv.SRQAttrLimit != 0 {
		capWR := uint32(s.rq.Cap())
		if mask&ibv.SRQAttrMaxWR != 0 {
			capWR = attr.MaxWR
		}
		if attr.SRQLimit > capWR {
			return fmt.Errorf("%w: SRQ limit %d exceeds max_wr %d", ErrInvalid, attr.SRQLimit, capWR)
		}
	}
	if mask&ibv.SRQAttrMaxWR != 0 {
		if err := s.rq.Resize(int(max(attr.MaxWR, minSRQWR))); err != nil {
			return err
		}
	}
	if mask&ibv.SRQAttrLimit != 0 {
		s.armLocked(attr.SRQLimit)
	}
	return nil
}

// armLocked arms (or with 0 disarms) the limit event.
func (s *SRQ) armLocked(limit uint32) {
	s.gen++
	s.limit = limit
	if limit == 0 {
		s.rq.ArmLimit(0, nil)
		return
	}
	gen := s.gen
	s.rq.ArmLimit(int(limit), func() { s.limitReached(gen) })
}

// limitReached runs once per arming when a QP's take leaves the SRQ below
// its limit: it posts IBV_EVENT_SRQ_LIMIT_REACHED and shows the SRQ
// disarmed (rxe_resp.c get_srq_wqe: srq->limit = 0, then the event).
func (s *SRQ) limitReached(gen uint64) {
	s.mu.Lock()
	if s.gen == gen {
		s.limit = 0
	}
	s.mu.Unlock()
	s.n.postAsync(ibv.AsyncEvent{Type: ibv.EventSRQLimitReached, Other: s.ctx})
}

// PostRecv posts receive WRs to the SRQ (ibv_post_srq_recv); on error it
// returns the index of the first WR not posted. It holds s.mu, then the
// ring's lock; the limit event takes s.mu only after Take has let go of
// the ring's, so the locks are always taken in that order.
func (s *SRQ) PostRecv(wrs []ibv.RecvWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, err
	}
	return s.rq.Post(wrs)
}

// Destroy destroys the SRQ (ibv_destroy_srq). It fails with ErrBusy while
// QPs are attached (the kernel's ib_destroy_srq_user: srq->usecnt), and
// drops the WRs still posted without completions.
func (s *SRQ) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.destroyableLocked(); err != nil {
		return err
	}
	// Disarmed first: dropping the WRs must not raise the limit event.
	s.armLocked(0)
	s.destroyLocked()
	s.n.srqs.Add(-1)
	return nil
}
