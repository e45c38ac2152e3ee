package nic

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/nic/cq"
	"github.com/softnic/softnic/internal/tm"
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
	// Type, CQ and TM are struct ibv_srq_init_attr_ex's srq_type, cq and
	// tm_cap (ibv_create_srq_ex(3)): a tag-matching SRQ (SRQTypeTM) needs
	// a CQ, where its list operations and all its receives complete, and
	// a tag list of 1..MaxTMTags tags taking 1..MaxTMOps operations.
	Type ibv.SRQType
	CQ   *cq.CQ
	TM   ibv.TMCap
	// XRCD is the xrcd of an XRC SRQ (SRQTypeXRC), which also needs a CQ:
	// the receives it gives XRC_RECV QPs complete there.
	XRCD *XRCD
}

// Tag-matching limits (QueryDeviceEx's tm_caps). mlx5 takes its from the
// device (providers/mlx5/verbs.c mlx5_query_device_ex: max_num_tags is
// (1 << log_tag_matching_list_sz) - 1, max_sge 1, max_rndv_hdr_size
// MLX5_TM_MAX_RNDV_MSG_SIZE 64); softnic's are of the same order.
const (
	MaxTMTags      = 1023
	MaxTMOps       = 1024
	MaxTMSGE       = 1
	MaxRndvHdrSize = 64
)

// TMCaps returns the device's tag-matching capabilities.
func TMCaps() ibv.TMCaps {
	return ibv.TMCaps{MaxRndvHdrSize: MaxRndvHdrSize, MaxNumTags: MaxTMTags, Flags: ibv.TMCapRC, MaxOps: MaxTMOps, MaxSGE: MaxTMSGE}
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

	// A tag-matching SRQ's tag list and CQ; nil for a basic SRQ. An XRC
	// SRQ has a CQ too.
	tm *tm.List
	cq *cq.CQ

	// An XRC SRQ's domain and number (ibv_get_srq_num); nil and 0 for
	// the others.
	xrcd *XRCD
	num  uint32
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
		return nil, fmt.Errorf("%w: SRQ needs a PD", errno.Invalid)
	}
	if err := checkRQCap("SRQ", a.MaxWR, maxSRQWR, a.MaxSGE, maxSRQSGE); err != nil {
		return nil, err
	}
	if a.XRCD != nil && a.Type != ibv.SRQTypeXRC {
		return nil, fmt.Errorf("%w: an XRC domain for a %v SRQ (XRC SRQs only)", errno.Invalid, a.Type)
	}
	switch a.Type {
	case ibv.SRQTypeBasic:
	case ibv.SRQTypeTM:
		switch {
		case a.CQ == nil:
			return nil, fmt.Errorf("%w: a tag-matching SRQ needs a CQ", errno.Invalid)
		case a.TM.MaxNumTags == 0 || a.TM.MaxNumTags > MaxTMTags:
			return nil, fmt.Errorf("%w: max_num_tags %d not in 1..%d", errno.Invalid, a.TM.MaxNumTags, MaxTMTags)
		case a.TM.MaxOps == 0 || a.TM.MaxOps > MaxTMOps:
			return nil, fmt.Errorf("%w: max_ops %d not in 1..%d", errno.Invalid, a.TM.MaxOps, MaxTMOps)
		}
	case ibv.SRQTypeXRC:
		switch {
		case a.XRCD == nil:
			return nil, fmt.Errorf("%w: an XRC SRQ needs an XRC domain", errno.Invalid)
		case a.CQ == nil:
			return nil, fmt.Errorf("%w: an XRC SRQ needs a CQ", errno.Invalid)
		}
	default:
		return nil, fmt.Errorf("%w: SRQ type %d", errno.Invalid, a.Type)
	}
	if int(n.srqs.Add(1)) > maxSRQ {
		n.srqs.Add(-1)
		return nil, fmt.Errorf("%w: %d SRQs exist", errno.NoMemory, maxSRQ)
	}
	s := &SRQ{}
	s.init(n, pd, a.Context, "SRQ", max(a.MaxWR, minSRQWR), a.MaxSGE)
	switch a.Type {
	case ibv.SRQTypeTM:
		s.cq = a.CQ
		s.tm = tm.New(int(a.TM.MaxNumTags), int(a.TM.MaxOps), MaxTMSGE, a.CQ)
		a.CQ.Ref()
	case ibv.SRQTypeXRC:
		if err := a.XRCD.use(); err != nil {
			n.srqs.Add(-1)
			return nil, err
		}
		if err := n.xrc.addSRQ(s); err != nil {
			a.XRCD.unuse()
			n.srqs.Add(-1)
			return nil, err
		}
		s.cq, s.xrcd = a.CQ, a.XRCD
		a.CQ.Ref()
	}
	return s, nil
}

// Query returns the SRQ's attributes (ibv_query_srq): its capacity, its
// SGEs per WR and the armed limit (0 once the limit event fired).
func (s *SRQ) Query() (ibv.SRQAttr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return ibv.SRQAttr{}, fmt.Errorf("%w: SRQ destroyed", errno.Invalid)
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
		return fmt.Errorf("%w: SRQ attribute mask %#x", errno.Invalid, uint32(mask))
	}
	if mask&ibv.SRQAttrMaxWR != 0 {
		if err := checkRQCap("SRQ", attr.MaxWR, maxSRQWR, 0, 0); err != nil {
			return err
		}
		if mask&ibv.SRQAttrLimit == 0 && s.limit != 0 && attr.MaxWR < s.limit {
			return fmt.Errorf("%w: SRQ max_wr %d below the armed limit %d", errno.Invalid, attr.MaxWR, s.limit)
		}
	}
	if mask&ibv.SRQAttrLimit != 0 {
		capWR := uint32(s.rq.Cap())
		if mask&ibv.SRQAttrMaxWR != 0 {
			capWR = attr.MaxWR
		}
		if attr.SRQLimit > capWR {
			return fmt.Errorf("%w: SRQ limit %d exceeds max_wr %d", errno.Invalid, attr.SRQLimit, capWR)
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

// Destroy destroys the SRQ (ibv_destroy_srq). It fails with errno.Busy while
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
	if s.xrcd != nil {
		// No XRC_RECV QP takes another WQE from it after this.
		s.n.xrc.removeSRQ(s)
		s.xrcd.unuse()
	}
	s.destroyLocked()
	if s.cq != nil {
		s.cq.Unref()
	}
	s.n.srqs.Add(-1)
	return nil
}

// PostOps runs tag list operations on a tag-matching SRQ
// (ibv_post_srq_ops; tm.List.Post has the rules); on error it returns the
// index of the first op not run. On a basic SRQ it is errno.NotSupported.
func (s *SRQ) PostOps(ops []ibv.OpsWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return 0, err
	}
	if s.tm == nil {
		return 0, fmt.Errorf("%w: list operations on a basic SRQ", errno.NotSupported)
	}
	return s.tm.Post(ops)
}

// Type returns the SRQ's type.
func (s *SRQ) Type() ibv.SRQType {
	switch {
	case s.tm != nil:
		return ibv.SRQTypeTM
	case s.xrcd != nil:
		return ibv.SRQTypeXRC
	}
	return ibv.SRQTypeBasic
}

// Num returns an XRC SRQ's number, what a peer's XRC_SEND WRs name in
// their RemoteSRQN (ibv_get_srq_num); other SRQs have none (EINVAL).
func (s *SRQ) Num() (uint32, error) {
	if s.xrcd == nil {
		return 0, fmt.Errorf("%w: SRQ number of a %v SRQ (XRC SRQs only)", errno.Invalid, s.Type())
	}
	return s.num, nil
}
