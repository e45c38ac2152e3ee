package verbs

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// Work-request and completion opcodes of the memory operations, FLUSH and
// ATOMIC WRITE, and the FLUSH arguments (libibverbs verbs.h; REG_MR is
// the kernel's IB_WR_REG_MR / IB_WC_REG_MR, which libibverbs lacks).
const (
	FlushGlobal     = 1 // IBV_FLUSH_GLOBAL: placement type global visibility
	FlushPersistent = 2 // IBV_FLUSH_PERSISTENT: placement type persistence
	FlushRange      = 0 // IBV_FLUSH_RANGE: flush [addr, addr+len) of the region
	FlushMR         = 1 // IBV_FLUSH_MR: flush the whole region
)

// MRType is the kind of region AllocMR makes (enum ib_mr_type).
type MRType int

// The kinds of enum ib_mr_type AllocMR knows: MRTypeMemReg, a
// fast-registration region (IB_MR_TYPE_MEM_REG), is the one kind softnic
// makes; MRTypeSGGaps (IB_MR_TYPE_SG_GAPS, a region mapping elements with
// gaps) and MRTypeIntegrity (IB_MR_TYPE_INTEGRITY, the signature MRs of
// ib_alloc_mr_integrity: T10-DIF protection information computed and
// checked on the wire) are deliberately not offered: AllocMR answers
// EOPNOTSUPP (rxe_alloc_mr refuses every type but MEM_REG).
const (
	MRTypeMemReg    MRType = 0
	MRTypeSGGaps    MRType = 1
	MRTypeIntegrity MRType = 5
)

// RegMRWR is the reg part of a REG_MR work request (the kernel's
// ib_reg_wr); MR.RegWR builds one.

// AllocMR allocates a fast-registration memory region able to map
// maxNumSG pages (ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, max_num_sg);
// rxe_alloc_mr). It starts free: its key grants nothing until MapSG maps
// memory into it and a REG_MR work request registers it. maxNumSG must be
// 1..ibv.DeviceAttr.MaxFastRegPageLen (EINVAL); the types but
// MRTypeMemReg are refused (see MRType).
//
// The cycle (IBA 10.6.3.1, the kernel's fast registration):
//
//	n, err := mr.MapSG(bufs, 4096)                  // ib_map_mr_sg
//	mr.UpdateFastRegKey(verbs.IncKey(mr.RKey()))    // ib_update_fast_reg_key
//	qp.PostSend(mr.RegWR(id, ibv.SendSignaled, access))   // IB_WR_REG_MR
//	... remote access with mr.RKey() at mr.Addr() ...
//	qp.PostSend(ibv.SendWR{Opcode: ibv.WRLocalInv, InvRKey: mr.RKey()}) // or the peer's SEND_WITH_INV
//
// after which the region is free again, to be mapped anew.
func (pd *PD) AllocMR(typ MRType, maxNumSG int) (*MR, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	defer release()
	switch typ {
	case MRTypeMemReg:
	case MRTypeSGGaps, MRTypeIntegrity:
		return nil, fmt.Errorf("%w: MR type %v (softnic makes IB_MR_TYPE_MEM_REG only)", EOPNOTSUPP, typ)
	default:
		return nil, fmt.Errorf("%w: MR type %d (softnic makes IB_MR_TYPE_MEM_REG only)", EINVAL, typ)
	}
	m, err := pd.d.n.Mem().AllocMR(pd.pd, maxNumSG)
	if err != nil {
		return nil, nic.Wrapf(err, "alloc MR of %d pages", maxNumSG)
	}
	mr := pd.newMR(m)
	mr.key.Store(m.LKey())
	return mr, nil
}

// MapSG maps sg into the free fast-registration region mr as a list of
// pages of pageSize bytes (ib_map_mr_sg) and returns how many elements it
// mapped: the first may start anywhere in a page, the others must start
// on a page boundary after an element that ended on one, or continue the
// previous element in memory; mapping stops at the first element that
// breaks the rule or does not fit the region's pages. Addr and Len then
// report the mapped range: the first element's address and the mapped
// elements' total length. It never maps part of an element (MapSGOffset
// does, as the kernel's ib_map_mr_sg). EINVAL for an ordinary MR or a bad
// page size, EBUSY while the region is registered (invalidate it first),
// ENOMEM when the first element alone does not fit.
func (mr *MR) MapSG(sg [][]byte, pageSize int) (int, error) {
	if err := mr.live(); err != nil {
		return 0, err
	}
	n, err := mr.d.n.Mem().MapMRSG(mr.mr, sg, pageSize)
	return n, err
}

// MapSGOffset is ib_map_mr_sg with its sg_offset: the mapping starts
// *sgOffset bytes into the first element, and an element that does not
// fit the region's pages is mapped in part, as ib_sg_to_pages maps it
// (up to the start of the last page it could set), instead of refused.
// It returns the number of whole elements mapped and sets *sgOffset to
// where the mapping stopped: 0 when every mapped element was mapped
// whole, else the offset into element n from which the next MapSGOffset
// (on the next region) carries on. MapSG's errors apply, and EINVAL for an
// offset beyond the first element; ENOMEM only when not one byte of the
// first element fits. A nil sgOffset maps from offset 0 and does not
// report the stop.
func (mr *MR) MapSGOffset(sg [][]byte, sgOffset *uint32, pageSize int) (int, error) {
	if err := mr.live(); err != nil {
		return 0, err
	}
	var off uint64
	if sgOffset != nil {
		off = uint64(*sgOffset)
	}
	n, stop, err := mr.d.n.Mem().MapMRSGAt(mr.mr, sg, off, pageSize)
	if err == nil && sgOffset != nil {
		*sgOffset = uint32(stop)
	}
	return n, err
}

// MapMRSG is ib_map_mr_sg(mr, sg, sg_nents, sg_offset, page_size):
// MR.MapSGOffset in its argument order.
func (d *Device) MapMRSG(mr *MR, sg [][]byte, sgOffset *uint32, pageSize int) (int, error) {
	if !d.ok() {
		return 0, errNil("Device")
	}
	if !mr.ok() || mr.d != d {
		return 0, fmt.Errorf("%w: MR not of device %s", EINVAL, d.Name())
	}
	return mr.MapSGOffset(sg, sgOffset, pageSize)
}

// UpdateFastRegKey gives the fast-registration region mr the key byte of
// newKey (its low 8 bits), the key the next REG_MR installs
// (ib_update_fast_reg_key): LKey and RKey report the new key from now on.
// Call it before building the REG_MR with RegWR. Only the key byte may
// change (IBA 10.6.3.1; rxe_reg_fast_mr refuses another index).
func (mr *MR) UpdateFastRegKey(newKey uint32) error {
	if err := mr.live(); err != nil {
		return err
	}
	if !mr.mr.Fast() {
		return fmt.Errorf("%w: MR %#x is not a fast-registration MR", EINVAL, mr.LKey())
	}
	k := mr.key.Load()
	mr.key.Store(k&^0xff | newKey&0xff)
	return nil
}

// RegWR builds the REG_MR work request that registers the fast-
// registration region mr as mapped by MapSG, with key mr.RKey() and rights
// access (the kernel's ib_reg_wr; RegMRWR's fields may be changed before
// posting). Post it on a QP of the region's PD; it runs in order with the
// send queue's other work requests and completes with opcode WCRegMR, or
// with WCLocQPOpErr if the region was not free, belongs to another PD, or
// the key changes more than its key byte (rxe_reg_fast_mr), or access is
// one ibv_reg_mr would refuse.
func (mr *MR) RegWR(wrid uint64, flags ibv.SendFlags, access ibv.Access) ibv.SendWR {
	reg := &ibv.RegMRWR{Key: mr.RKey(), Access: access}
	if mr.ok() {
		reg.MR = mr.mr
		reg.MRLKey = mr.mr.LKey()
		reg.IOVA, reg.Length = mr.mr.Mapped()
	}
	return ibv.SendWR{WRID: wrid, Opcode: ibv.WRRegMR, Flags: flags, Reg: reg}
}
