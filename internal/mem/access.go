package mem

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// lookupLocal resolves an lkey for QP pd's local access (rxe lookup_mr with
// RXE_LOOKUP_LOCAL) and checks [addr, addr+n).
func (t *Table) lookupLocal(pd *PD, sge ibv.SGE, write bool) (*mrView, error) {
	i := sge.LKey >> 8
	if i < MinMRIndex || i > MaxMRIndex {
		if i >= MinMWIndex && i <= MaxMWIndex {
			return nil, errMWKeyLocal
		}
		return nil, errNoIndex
	}
	mr := t.mrs.load(i)
	if mr == nil {
		return nil, errNoIndex
	}
	v := mr.v.Load()
	if v.key != sge.LKey {
		return nil, errKeyByte
	}
	if v.state != mrValid {
		return nil, errMRNotValid
	}
	if v.pd != pd {
		return nil, errPD
	}
	if write && v.access&ibv.AccessLocalWrite == 0 {
		return nil, errNeedLWrite
	}
	if !v.contains(sge.Addr, uint64(sge.Length)) {
		return nil, errOutOfRegion
	}
	return v, nil
}

// Local resolves sge for a local access by a QP of pd: the requester
// gathering a send, the responder scattering a receive or a READ response.
// The lkey must name a VALID MR (ErrInvalidKey: unknown index, key byte
// mismatch, a window's key, deregistered or FREE) of pd (ErrWrongPD);
// write needs LOCAL_WRITE (ErrAccess), a read needs no right (rxe copy_data
// passes access 0 for gathers, IB_ACCESS_LOCAL_WRITE for scatters);
// [Addr, Addr+Length) must lie inside the MR (ErrRange, overflow included).
// In a fast-reg MR a range spanning two chunks gives ErrDiscontiguous: use
// LocalV.
//
// A zero-length SGE returns nil, nil without looking at the key: rxe's
// copy_data skips SGEs of length 0 without a lookup, so a zero-length SGE
// with a garbage lkey is legal.
func (t *Table) Local(pd *PD, sge ibv.SGE, write bool) ([]byte, error) {
	if sge.Length == 0 {
		return nil, nil
	}
	v, err := t.lookupLocal(pd, sge, write)
	if err != nil {
		return nil, err
	}
	return v.slice(sge.Addr, uint64(sge.Length))
}

// LocalV is Local for ranges that may span chunks: it appends the pieces
// of the range, in order, to dst and returns it (nothing appended for a
// zero-length SGE). With enough capacity in dst it allocates nothing.
func (t *Table) LocalV(pd *PD, sge ibv.SGE, write bool, dst [][]byte) ([][]byte, error) {
	if sge.Length == 0 {
		return dst, nil
	}
	v, err := t.lookupLocal(pd, sge, write)
	if err != nil {
		return dst, err
	}
	return v.appendSlices(dst, sge.Addr, uint64(sge.Length)), nil
}

// resolveRemote finds the MR memory for a remote access (rxe_resp.c
// check_rkey): rkey names an MR (lookup_mr with RXE_LOOKUP_REMOTE) or a
// window (rxe_lookup_mw), and returns the view and the IOVA in it. With
// wholeRegion the range is not checked (FLUSH of the whole MR).
func (t *Table) resolveRemote(pd *PD, qpn, rkey uint32, va, n uint64, need ibv.Access, wholeRegion bool) (*mrView, uint64, error) {
	i := rkey >> 8
	switch {
	case i >= MinMRIndex && i <= MaxMRIndex:
		mr := t.mrs.load(i)
		if mr == nil {
			return nil, 0, errNoIndex
		}
		v := mr.v.Load()
		if v.key != rkey {
			return nil, 0, errKeyByte
		}
		if v.state != mrValid {
			return nil, 0, errMRNotValid
		}
		if v.pd != pd {
			return nil, 0, errPD
		}
		if v.access&need != need {
			return nil, 0, errNeedRights
		}
		if !wholeRegion && !v.contains(va, n) {
			return nil, 0, errOutOfRegion
		}
		return v, va, nil
	case i >= MinMWIndex && i <= MaxMWIndex:
		mw := t.mws.load(i)
		if mw == nil {
			return nil, 0, errNoIndex
		}
		w := mw.v.Load()
		if w.rkey != rkey {
			return nil, 0, errKeyByte
		}
		if w.state != mwValid || w.mr == nil || w.length == 0 {
			return nil, 0, errMWNotValid
		}
		if mw.pd != pd {
			return nil, 0, errPD
		}
		if mw.typ == 2 && w.qpn != qpn {
			return nil, 0, ErrWrongQP
		}
		if w.access&need != need {
			return nil, 0, errNeedRights
		}
		iova := va
		if !wholeRegion {
			if w.access&ibv.AccessZeroBased != 0 {
				// Zero-based: va is an offset into the window (rxe:
				// qp->resp.offset = mw->addr).
				if va > w.length || n > w.length-va {
					return nil, 0, errOutOfWindow
				}
				iova = w.addr + va
			} else if va < w.addr || n > w.length || va-w.addr > w.length-n {
				return nil, 0, errOutOfWindow
			}
		}
		v := w.mr.v.Load()
		if v.state != mrValid {
			return nil, 0, errMRNotValid
		}
		if !wholeRegion && !v.contains(iova, n) {
			return nil, 0, errOutOfRegion
		}
		return v, iova, nil
	}
	return nil, 0, errNoIndex
}

// Remote resolves [va, va+length) under rkey for a remote access arriving
// on QP qpn of pd and needing every right in need (REMOTE_READ for READ,
// REMOTE_WRITE for WRITE and ATOMIC WRITE, REMOTE_ATOMIC for atomics,
// FLUSH_GLOBAL / FLUSH_PERSISTENT for FLUSH). It returns the memory itself;
// the caller reads or writes it.
//
// rkey may name an MR or a memory window, told apart by index
// (rkey_is_mw). The checks, in rxe_resp.c check_rkey's order:
//   - no object with the index, key byte mismatch, MR not VALID, window not
//     bound: ErrInvalidKey;
//   - a type-2 window bound to another QP: ErrWrongQP (an ErrInvalidKey);
//   - object not in pd: ErrWrongPD;
//   - a right in need missing from the MR (lookup_mr:
//     (access & mr->access) != access) or from the window's binding (rights
//     the window lacks are refused even if its MR has them): ErrAccess;
//   - the range, overflow included, outside the window or the MR: ErrRange.
//     Through a zero-based window va is an offset from the window's start.
//
// When need includes REMOTE_ATOMIC the resolved IOVA must also be 8-byte
// aligned (ErrAlign; checked after the rkey, as rxe_mr_do_atomic_op does).
// ATOMIC WRITE needs the same: use RemoteAtomic for it.
//
// A length of 0 returns nil, nil without any check: a zero-length RDMA
// READ or WRITE carries no meaningful rkey (IBA C9-88; rxe check_rkey). A
// range inside a fast-reg MR that spans two of its chunks gives
// ErrDiscontiguous: use RemoteV.
//
// Remote takes no lock and allocates nothing, refused or not.
func (t *Table) Remote(pd *PD, qpn uint32, rkey uint32, va uint64, length uint32, need ibv.Access) ([]byte, error) {
	if length == 0 {
		return nil, nil
	}
	v, iova, err := t.resolveRemote(pd, qpn, rkey, va, uint64(length), need, false)
	if err != nil {
		return nil, err
	}
	if need&ibv.AccessRemoteAtomic != 0 && iova&7 != 0 {
		return nil, errAtomicAlign
	}
	return v.slice(iova, uint64(length))
}

// RemoteV is Remote for ranges that may span chunks of a fast-reg MR: it
// appends the pieces of the range, in order, to dst and returns it
// (nothing appended for length 0). With enough capacity in dst it
// allocates nothing.
func (t *Table) RemoteV(pd *PD, qpn uint32, rkey uint32, va uint64, length uint32, need ibv.Access, dst [][]byte) ([][]byte, error) {
	if length == 0 {
		return dst, nil
	}
	v, iova, err := t.resolveRemote(pd, qpn, rkey, va, uint64(length), need, false)
	if err != nil {
		return dst, err
	}
	if need&ibv.AccessRemoteAtomic != 0 && iova&7 != 0 {
		return dst, errAtomicAlign
	}
	return v.appendSlices(dst, iova, uint64(length)), nil
}

// RemoteAtomic resolves the 8 bytes at va for an atomic (need
// REMOTE_ATOMIC: CMP_SWAP, FETCH_ADD) or an ATOMIC WRITE (need
// REMOTE_WRITE, IBA A19): Remote's checks, then 8-byte alignment of the
// resolved IOVA (ErrAlign; rxe_mr_do_atomic_op, rxe_mr_do_atomic_write
// "See IBA A19.4.2"). Pass the result to CompareSwap, FetchAdd or
// AtomicWrite.
func (t *Table) RemoteAtomic(pd *PD, qpn uint32, rkey uint32, va uint64, need ibv.Access) ([]byte, error) {
	v, iova, err := t.resolveRemote(pd, qpn, rkey, va, 8, need, false)
	if err != nil {
		return nil, err
	}
	if iova&7 != 0 {
		return nil, errAtomicAlign
	}
	return v.slice(iova, 8)
}

// Flush selectivity levels (FETH bits 5:4; IBV_FLUSH_RANGE, IBV_FLUSH_MR).
const (
	FlushRange = 0
	FlushMR    = 1
)

// Flush validates a FLUSH (IBA A19) arriving on QP qpn of pd: need must be
// a non-empty subset of FLUSH_GLOBAL|FLUSH_PERSISTENT (errno.Invalid), the
// rkey must grant it as for Remote, and with level FlushRange
// [va, va+length) must lie inside the region — a zero length is checked
// too (va inside or at the end), since rxe skips the rkey check only for
// zero-length READ and WRITE. With level FlushMR va and length are
// ignored. Any other level is errno.Invalid. softnic's memory is ordinary
// memory, already globally visible once written, so a valid FLUSH has
// nothing more to do.
func (t *Table) Flush(pd *PD, qpn uint32, rkey uint32, va uint64, length uint32, need ibv.Access, level uint8) error {
	if need == 0 || need&^FlushAccess != 0 {
		return errFlushNeed
	}
	if level != FlushRange && level != FlushMR {
		return errFlushLevel
	}
	_, _, err := t.resolveRemote(pd, qpn, rkey, va, uint64(length), need, level == FlushMR)
	return err
}

// CheckGather reports the error Gather would return for sgl, reading
// nothing: a batch posted all or nothing (ibv_wr_complete) checks every
// WR before it enqueues any.
func (t *Table) CheckGather(pd *PD, sgl []ibv.SGE) error {
	for i, s := range sgl {
		if s.Length == 0 {
			continue
		}
		if _, err := t.lookupInline(pd, s); err != nil {
			return gatherError(i, s, err)
		}
	}
	return nil
}

// CheckAdvise checks an SGE of ibv_advise_mr: its lkey must name a valid
// MR of pd registered with IBV_ACCESS_ON_DEMAND, with LOCAL_WRITE when
// write, holding the range (Local's checks), else the lookup's error or
// ErrAccess (mlx5_ib_advise_mr's EFAULT cases).
func (t *Table) CheckAdvise(pd *PD, s ibv.SGE, write bool) error {
	v, err := t.lookupLocal(pd, s, write)
	if err != nil {
		return err
	}
	if v.access&ibv.AccessOnDemand == 0 {
		return errNotODP
	}
	return nil
}

// lookupInline resolves an SGE of inline data (IBV_SEND_INLINE with
// SGEs), whose lkey ibv_post_send(3) says "will not be checked": a C
// provider copies the bytes from the address. A Go program's addresses
// mean something only through the memory softnic holds, so the address
// is looked up among the QP's PD's MRs instead: the SGE's own MR when its
// lkey names a valid MR of pd that covers the range (an MR registered at
// another IOVA than its buffer's address is found only so), else any
// valid MR of pd registered at its buffer's own address (RegMR: its
// addresses are the process's) that covers the range, whatever the lkey
// and the MR's rights (a read needs none, as in Local). Only an address no
// MR of the PD covers is refused, with the SGE's own lookup error
// (ErrInvalidKey for a key naming nothing, ErrRange for an address
// outside its MR). The scan over the PD's MRs runs only when the lkey
// does not do.
func (t *Table) lookupInline(pd *PD, s ibv.SGE) (*mrView, error) {
	v, err := t.lookupLocal(pd, s, false)
	if err == nil {
		return v, nil
	}
	for c := range t.mrs.dir[:MaxMRIndex>>slotBits+1] {
		chunk := t.mrs.dir[c].Load()
		if chunk == nil {
			continue
		}
		for i := range chunk {
			mr := chunk[i].Load()
			if mr == nil || mr.v.Load().pd != pd {
				continue
			}
			w := mr.v.Load()
			if w.state == mrValid && len(w.chunks) == 1 && w.iova == addrOf(w.chunks[0].b) && w.contains(s.Addr, uint64(s.Length)) {
				return w, nil
			}
		}
	}
	return nil, err
}

func gatherError(i int, s ibv.SGE, err error) error {
	return errno.Wrapf(err, "SGE %d (lkey %#x addr %#x length %d)", i, s.LKey, s.Addr, s.Length)
}
