package mem

import (
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

type mwState uint8

const (
	// mwInvalid: deallocated (RXE_MW_STATE_INVALID).
	mwInvalid mwState = iota
	// mwFree: a type-2 window not bound, or invalidated (RXE_MW_STATE_FREE).
	mwFree
	// mwValid: a type-1 window (bound or not), or a bound type-2 window
	// (RXE_MW_STATE_VALID).
	mwValid
)

// mwView is an immutable snapshot of a window's binding.
type mwView struct {
	rkey   uint32
	state  mwState
	qpn    uint32 // type 2: the QP it is bound to
	mr     *MR    // nil when unbound
	addr   uint64 // IOVA in mr of the window's first byte
	length uint64
	access ibv.Access
}

// MW is a memory window (ibv_alloc_mw): a remotely accessible view of part
// of an MR, with its own rkey and rights.
type MW struct {
	t     *Table
	pd    *PD
	index uint32
	typ   int
	v     atomic.Pointer[mwView]
}

// RKey returns the window's current rkey.
func (mw *MW) RKey() uint32 { return mw.v.Load().rkey }

// Type returns 1 or 2 (type 2 meaning rxe's type 2B).
func (mw *MW) Type() int { return mw.typ }

// PD returns the window's protection domain.
func (mw *MW) PD() *PD { return mw.pd }

// Bound reports whether the window is bound to an MR and usable.
func (mw *MW) Bound() bool {
	v := mw.v.Load()
	return v.state == mwValid && v.mr != nil && v.length > 0
}

// Addr returns the IOVA, in the MR, of the window's first byte (0 when
// unbound). Remote addresses through a zero-based window are offsets from
// it.
func (mw *MW) Addr() uint64 { return mw.v.Load().addr }

// Len returns the window's length (0 when unbound).
func (mw *MW) Len() uint64 { return mw.v.Load().length }

// Access returns the rights of the current binding.
func (mw *MW) Access() ibv.Access { return mw.v.Load().access }

// QPN returns the QP a bound type-2 window belongs to (0 otherwise).
func (mw *MW) QPN() uint32 { return mw.v.Load().qpn }

// AllocMW allocates a memory window of pd (ibv_alloc_mw, rxe_alloc_mw),
// type 1 or 2, with rkey index<<8 | random byte. A type-1 window starts
// VALID but unbound (length 0, so it grants nothing); a type-2 window
// starts FREE. Errors: typ not 1 or 2 or a freed or foreign PD
// (errno.Invalid); a full table (errno.NoMemory).
func (t *Table) AllocMW(pd *PD, typ int) (*MW, error) {
	if typ != 1 && typ != 2 {
		return nil, errno.Invalid
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkPDLocked(pd); err != nil {
		return nil, err
	}
	if t.nMW >= t.lim.MaxMW {
		return nil, errno.NoMemory
	}
	idx := allocIndexLocked(&t.mws, MinMWIndex, MaxMWIndex, &t.mwNext)
	if idx == 0 {
		return nil, errno.NoMemory
	}
	t.nMW++
	pd.refs.Add(1)
	mw := &MW{t: t, pd: pd, index: idx, typ: typ}
	st := mwFree
	if typ == 1 {
		st = mwValid
	}
	mw.v.Store(&mwView{rkey: idx<<8 | t.keyByteLocked(-1), state: st})
	t.mws.storeLocked(idx, mw)
	return mw, nil
}

// DeallocMW frees mw, bound or not (ibv_dealloc_mw, rxe_mw_cleanup drops
// the binding): its rkey stops working and its MR may be deregistered
// again. errno.Invalid for a window already freed or of another table.
func (t *Table) DeallocMW(mw *MW) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkMWLocked(mw); err != nil {
		return err
	}
	v := mw.v.Load()
	if v.mr != nil {
		v.mr.nMW--
	}
	mw.v.Store(&mwView{rkey: v.rkey, state: mwInvalid})
	t.mws.storeLocked(mw.index, nil)
	t.nMW--
	mw.pd.refs.Add(-1)
	return nil
}

func (t *Table) checkMWLocked(mw *MW) error {
	if mw == nil || mw.t != t {
		return errForeignMW
	}
	if t.mws.load(mw.index) != mw {
		return errDeadMW
	}
	return nil
}

// MWByKey returns the live window whose current rkey is rkey, bound or
// not: the requester resolves a BIND_MW work request's window with it.
func (t *Table) MWByKey(rkey uint32) (*MW, error) {
	i := rkey >> 8
	if i < MinMWIndex || i > MaxMWIndex {
		return nil, errNoIndex
	}
	mw := t.mws.load(i)
	if mw == nil {
		return nil, errNoIndex
	}
	if mw.v.Load().rkey != rkey {
		return nil, errKeyByte
	}
	return mw, nil
}

// BindMW binds mw to [addr, addr+length) of the MR whose lkey is mrKey,
// with rights access, and returns the window's new rkey (rxe_bind_mw,
// rxe_check_bind_mw, rxe_do_bind_mw). Type 1 comes from ibv_bind_mw, type 2
// from a BIND_MW work request; either way qpn is the posting QP and qpPD
// its PD. The new rkey keeps the window's index; its key byte is newKey's
// low 8 bits for type 2 (the consumer owns it; rxe_do_bind_mw). For type 1
// it is newKey's low 8 bits when newKey is a whole rkey of this window
// (same index) with a key byte other than the current one: ibv_bind_mw's
// provider picks ibv_inc_rkey(mw->rkey) and hands it to the caller before
// the bind executes, and rxe_do_bind_mw installs it. Any other newKey makes
// a type-1 bind pick a fresh random byte, different from the old one.
//
// The checks, each with its sentinel:
//   - mw freed or foreign: errno.Invalid.
//   - access with unsupported flags: errno.Invalid (RXE_ACCESS_SUPPORTED_MW).
//   - type 1 with ZERO_BASED: errno.Invalid (o10-36.2.2).
//   - type 2 already bound: errno.Busy (o10-37.2.30: must be FREE).
//   - qpPD not the window's PD: ErrWrongPD (C10-72; softnic checks it for
//     type 1 too, as the IBA verbs require the QP, MW and MR to share a PD
//     — the rxe fix "RDMA/rxe: Check PDs for memory window binds").
//   - type 2 with length 0: errno.Invalid (o10-37.2.40).
//   - the MR: no live VALID MR with key mrKey (ErrInvalidKey), or of
//     another PD (ErrWrongPD).
//   - the MR zero-based: errno.Invalid (rxe: "attempt to bind MW to zero based
//     MR").
//   - the MR without MW_BIND: ErrAccess (C10-73).
//   - a writable window (REMOTE_WRITE or REMOTE_ATOMIC) on an MR without
//     LOCAL_WRITE: ErrAccess (C10-74).
//   - [addr, addr+length) not inside the MR: ErrRange (C10-75). softnic
//     checks the address range for zero-based windows too; rxe checks only
//     their length.
//
// A type-1 bind with length 0 unbinds the window (ibv_bind_mw(3)): it
// stays VALID with a new rkey and grants nothing; mrKey is then ignored.
// A type-1 window may be rebound while bound; the old binding goes.
func (t *Table) BindMW(mw *MW, qpn uint32, qpPD *PD, mrKey uint32, addr, length uint64, access ibv.Access, newKey uint32) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkMWLocked(mw); err != nil {
		return 0, err
	}
	if access&^SupportedMWAccess != 0 {
		return 0, errAccessFlags
	}
	old := mw.v.Load()
	switch mw.typ {
	case 1:
		if access&ibv.AccessZeroBased != 0 {
			return 0, errZeroBasedType1
		}
	case 2:
		if old.state != mwFree {
			return 0, errno.Busy
		}
	}
	if qpPD != mw.pd {
		return 0, errPD
	}
	if mw.typ == 2 && length == 0 {
		return 0, errZeroLen
	}
	var mr *MR
	if length > 0 {
		var err error
		if mr, err = t.bindTargetLocked(qpPD, mrKey, addr, length, access); err != nil {
			return 0, err
		}
	}
	var key uint32
	switch {
	case mw.typ == 2:
		key = newKey & KeyByteMask
	case newKey>>8 == mw.index && newKey != old.rkey:
		key = newKey & KeyByteMask // type 1 with the caller's (ibv_inc_rkey) key
	default:
		key = t.keyByteLocked(int(old.rkey & KeyByteMask))
	}
	nv := &mwView{
		rkey:   old.rkey&^KeyByteMask | key,
		state:  mwValid,
		mr:     mr,
		addr:   addr,
		length: length,
		access: access,
	}
	if mw.typ == 2 {
		nv.qpn = qpn
	}
	if mr == nil {
		nv.addr, nv.access = 0, 0
	}
	if old.mr != nil {
		old.mr.nMW--
	}
	if mr != nil {
		mr.nMW++
	}
	mw.v.Store(nv)
	return nv.rkey, nil
}

// bindTargetLocked applies the MR-side bind rules (rxe_check_bind_mw).
func (t *Table) bindTargetLocked(qpPD *PD, mrKey uint32, addr, length uint64, access ibv.Access) (*MR, error) {
	i := mrKey >> 8
	if i < MinMRIndex || i > MaxMRIndex {
		return nil, errNoIndex
	}
	mr := t.mrs.load(i)
	if mr == nil {
		return nil, errNoIndex
	}
	v := mr.v.Load()
	if v.key != mrKey {
		return nil, errKeyByte
	}
	if v.state != mrValid {
		return nil, errMRNotValid
	}
	if v.pd != qpPD {
		return nil, errPD
	}
	if v.access&ibv.AccessZeroBased != 0 {
		return nil, errZeroBasedMR
	}
	if v.access&ibv.AccessMWBind == 0 {
		return nil, errNoMWBind
	}
	if access&(ibv.AccessRemoteWrite|ibv.AccessRemoteAtomic) != 0 &&
		v.access&ibv.AccessLocalWrite == 0 {
		return nil, errWritableMW
	}
	if !v.contains(addr, length) {
		return nil, errBindRange
	}
	return mr, nil
}

// Bind-specific detail errors.
var (
	errZeroBasedType1 = wrapf(errno.Invalid, "a type-1 window cannot be zero-based (o10-36.2.2)")
	errZeroBasedMR    = wrapf(errno.Invalid, "cannot bind a window to a zero-based MR")
	errNoMWBind       = wrapf(ErrAccess, "MR lacks MW_BIND (C10-73)")
	errWritableMW     = wrapf(ErrAccess, "writable window on an MR without LOCAL_WRITE (C10-74)")
	errBindRange      = wrapf(ErrRange, "window outside the MR (C10-75)")
	errType1Inv       = wrapf(errno.Invalid, "a type-1 window cannot be invalidated (o10-37.2.26)")
	errNotFastInv     = wrapf(errno.Invalid, "only a fast-registration MR can be invalidated")
)

// Invalidate executes LOCAL_INV posted on QP qpn of pd, or SEND_WITH_INV
// received on it, for rkey (rxe_resp.c invalidate_rkey → rxe_invalidate_mr
// or rxe_invalidate_mw):
//
//   - An MR key must name a fast-reg MR (errno.Invalid otherwise: rxe refuses
//     any type but IB_MR_TYPE_MEM_REG) with no windows bound (errno.Busy;
//     "Attempt to invalidate an MR while bound to MWs"); it becomes FREE.
//     Invalidating a FREE fast-reg MR again succeeds, as in rxe.
//   - An MW key must name a type-2 window (errno.Invalid for type 1:
//     o10-37.2.26) that is bound (ErrInvalidKey otherwise) to this QP
//     (ErrWrongQP); it becomes FREE, keeping its rkey, and its MR loses a
//     binding.
//   - In both cases the key must match exactly (ErrInvalidKey) and the
//     object must be in pd (ErrWrongPD).
//
// The PD and QP checks go beyond rxe, which makes neither: an invalidation
// arriving on a QP must not reach another PD's memory, and a type-2B
// window belongs to the QP it was bound through.
func (t *Table) Invalidate(pd *PD, qpn uint32, rkey uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := rkey >> 8
	switch {
	case i >= MinMRIndex && i <= MaxMRIndex:
		mr := t.mrs.load(i)
		if mr == nil {
			return errNoIndex
		}
		v := mr.v.Load()
		if v.key != rkey {
			return errKeyByte
		}
		if v.pd != pd {
			return errPD
		}
		if !mr.fast {
			return errNotFastInv
		}
		if mr.nMW > 0 {
			return errno.Busy
		}
		nv := *v
		nv.state = mrFree
		mr.v.Store(&nv)
		return nil
	case i >= MinMWIndex && i <= MaxMWIndex:
		mw := t.mws.load(i)
		if mw == nil {
			return errNoIndex
		}
		v := mw.v.Load()
		if v.rkey != rkey {
			return errKeyByte
		}
		if mw.typ == 1 {
			return errType1Inv
		}
		if mw.pd != pd {
			return errPD
		}
		if v.state != mwValid {
			return errMWNotValid
		}
		if v.qpn != qpn {
			return ErrWrongQP
		}
		v.mr.nMW--
		mw.v.Store(&mwView{rkey: v.rkey, state: mwFree})
		return nil
	}
	return errNoIndex
}

// BoundTo reports whether the window is bound to mr (counted in the
// errno.Busy of DeregMR).
func (mw *MW) BoundTo(mr *MR) bool {
	v := mw.v.Load()
	return mr != nil && v.mr == mr
}
