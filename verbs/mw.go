package verbs

import (
	"fmt"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// MWType is a memory window's type (enum ibv_mw_type).
type MWType int

// Memory window types. Type 2 is IBA's type 2B, the kind rxe implements
// (IB_DEVICE_MEM_WINDOW_TYPE_2B): bound to the QP that bound it.
const (
	MWType1 MWType = 1 // IBV_MW_TYPE_1: bound with QP.BindMW
	MWType2 MWType = 2 // IBV_MW_TYPE_2: bound with a BIND_MW work request
)

// MWBindWR is the bind_mw part of a BIND_MW work request (ibv_send_wr's
// bind_mw: the window, its new rkey and the ibv_mw_bind_info), with the
// window and the MR named by their keys; BindMWWR builds one.

// MW is a memory window (ibv_mw): a remotely accessible view of part of
// an MR with its own rkey and rights, bound and unbound by work requests
// on the send queue (IBA 10.6.7).
type MW struct {
	pd   *PD
	mw   *nic.MW
	typ  MWType
	rkey atomic.Uint32 // ibv_mw.rkey
}

// mwIndex names a window by its table and key index, which stay the same
// across binds.
type mwIndex struct {
	t   *nic.MemTable
	idx uint32
}

// mws maps windows to their verbs wrappers, so that posting a BIND_MW
// work request, which names its window by rkey, updates the wrapper's rkey.

func (mw *MW) ok() bool { return mw != nil && mw.mw != nil && mw.pd.ok() }

// AllocMW allocates a memory window of type typ (ibv_alloc_mw). A type-1
// window starts valid but bound to nothing; a type-2 window starts free.
// Its rkey is index<<8 | a random key byte, as rxe makes them.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	defer release()
	if typ != MWType1 && typ != MWType2 {
		return nil, fmt.Errorf("%w: memory window type %d (want 1 or 2)", EINVAL, typ)
	}
	m, err := pd.d.n.Mem().AllocMW(pd.pd, int(typ))
	if err != nil {
		return nil, err
	}
	mw := &MW{pd: pd, mw: m, typ: typ}
	mw.rkey.Store(m.RKey())
	pd.d.mws.put(mwIndex{pd.d.n.Mem(), m.RKey() >> 8}, mw)
	pd.d.objs.add(mw)
	return mw, nil
}

// Dealloc frees the window (ibv_dealloc_mw), bound or not: its rkey stops
// working at once and its MR no longer counts it. EINVAL when it was
// already freed.
func (mw *MW) Dealloc() error {
	if !mw.ok() {
		return errNil("MW")
	}
	t := mw.pd.d.n.Mem()
	if err := t.DeallocMW(mw.mw); err != nil {
		return err
	}
	mw.pd.d.mws.del(mwIndex{t, mw.mw.RKey() >> 8})
	mw.pd.d.objs.del(mw)
	return nil
}

// RKey returns the window's rkey (ibv_mw.rkey): the one it has once every
// bind posted through this package has executed. QP.BindMW, QPEx.WrBindMW
// and PostSend of a BIND_MW work request set it when they post the bind,
// as ibv_bind_mw does; if the bind then fails (a MW_BIND_ERR completion)
// the window keeps its old rkey and the QP is in the error state.
func (mw *MW) RKey() uint32 {
	if !mw.ok() {
		return 0
	}
	return mw.rkey.Load()
}

// Type returns the window's type.
func (mw *MW) Type() MWType {
	if !mw.ok() {
		return 0
	}
	return mw.typ
}

// IncKey returns key with its key byte (the low 8 bits) incremented, the
// usual next rkey of a window or fast-registration MR (ibv_inc_rkey,
// ib_inc_rkey).
func IncKey(key uint32) uint32 { return key&^0xff | (key+1)&0xff }

// MWBindInfo is what a bind gives a window (struct ibv_mw_bind_info):
// [Addr, Addr+Length) of MR with rights Access (REMOTE_READ, REMOTE_WRITE,
// REMOTE_ATOMIC, ZERO_BASED for type 2). A type-1 bind with Length 0
// unbinds the window; MR may then be nil.
type MWBindInfo struct {
	MR     *MR
	Addr   uint64
	Length uint64
	Access ibv.Access
}

// MWBind is a type-1 bind request (struct ibv_mw_bind).
type MWBind struct {
	WRID      uint64
	SendFlags ibv.SendFlags
	BindInfo  MWBindInfo
}

// BindMWWR builds the BIND_MW work request that binds mw with bind info
// info and gives it rkey (ibv_send_wr with opcode IBV_WR_BIND_MW): post it
// with QP.PostSend. For a type-2 window rkey is the caller's choice, only
// its key byte counts (IncKey(mw.RKey()) is the usual one); a type-1
// window takes it only when it is a whole rkey of this window, as
// QP.BindMW passes.
func BindMWWR(wrid uint64, flags ibv.SendFlags, mw *MW, rkey uint32, info MWBindInfo) ibv.SendWR {
	b := &ibv.MWBindWR{MWHandle: mw.RKey(), NewRKey: rkey, Addr: info.Addr, Length: info.Length, Access: info.Access}
	if info.MR.ok() {
		b.MRLKey = info.MR.LKey()
	}
	return ibv.SendWR{WRID: wrid, Opcode: ibv.WRBindMW, Flags: flags, Bind: b}
}

// BindMW binds the type-1 window mw (ibv_bind_mw): it posts a BIND_MW work
// request on qp, whose completion (opcode WCBindMW, or status
// WCMWBindErr if a bind rule refused it) says when the bind happened, and
// returns the window's new rkey at once, IncKey of the old one, as the
// rdma-core providers do. Binding with length 0 unbinds the window.
//
// Refused at once with EINVAL: a type-2 window (bind it with a BIND_MW
// work request: BindMWWR, QPEx.WrBindMW), ZERO_BASED access (a type-1
// window cannot be zero-based, IBA o10-36.2.2; rxe's provider checks it
// here), an MR missing with a length, and everything PostSend refuses (a
// UD QP, a QP not yet in RTS; EBUSY in a WrStart batch of the calling
// goroutine; a batch of another goroutine makes it wait), and a
// window or MR of another device. The other bind rules are the engine's and
// fail the completion: QP, window and MR in one PD (C10-72), MR with
// MW_BIND access (C10-73), writable rights only over a locally writable
// MR (C10-74), the range inside the MR (C10-75), no zero-based MR.
func (qp *QP) BindMW(mw *MW, bind MWBind) (uint32, error) {
	if err := qp.live(); err != nil {
		return 0, err
	}
	if !mw.ok() {
		return 0, errNil("MW")
	}
	info := &bind.BindInfo
	switch {
	case mw.typ != MWType1:
		return 0, fmt.Errorf("%w: ibv_bind_mw binds type-1 windows; bind a type-2 window with a BIND_MW work request", EINVAL)
	case info.Access&ibv.AccessZeroBased != 0:
		return 0, fmt.Errorf("%w: a type-1 window cannot be zero-based (IBA o10-36.2.2)", EINVAL)
	case info.Length > 0 && !info.MR.ok():
		return 0, fmt.Errorf("%w: bind of %d bytes without an MR", EINVAL, info.Length)
	}
	if err := qp.pd.d.checkBind(mw, info); err != nil {
		return 0, err
	}
	if err := qp.lockPost(); err != nil {
		return 0, err
	}
	defer qp.postMu.Unlock()
	rkey := IncKey(mw.RKey())
	wr := BindMWWR(bind.WRID, bind.SendFlags, mw, rkey, *info)
	if _, err := qp.postLocked([]ibv.SendWR{wr}); err != nil {
		return 0, err
	}
	return rkey, nil
}

// checkBind refuses a window or MR of another device than d.
func (d *Device) checkBind(mw *MW, info *MWBindInfo) error {
	if mw.ok() {
		if err := d.sameDevice("the memory window", mw.pd.d); err != nil {
			return err
		}
	}
	if info.MR.ok() {
		if err := d.sameDevice("MWBindInfo.MR", info.MR.d); err != nil {
			return err
		}
	}
	return nil
}

// noteBinds sets the rkey of the windows the posted wrs bind.
func (qp *QP) noteBinds(wrs []ibv.SendWR) {
	for i := range wrs {
		b := wrs[i].Bind
		if wrs[i].Opcode != ibv.WRBindMW || b == nil {
			continue
		}
		mw, ok := qp.pd.d.mws.get(mwIndex{qp.pd.d.n.Mem(), b.MWHandle >> 8})
		if !ok {
			continue
		}
		next := b.MWHandle&^0xff | b.NewRKey&0xff // type 2: the caller's key byte
		if mw.typ == MWType1 && (b.NewRKey>>8 != b.MWHandle>>8 || b.NewRKey == b.MWHandle) {
			continue // the engine picks a random byte: unknown here
		}
		mw.rkey.CompareAndSwap(b.MWHandle, next)
	}
}
