package verbs

import (
	"fmt"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
)

// SendOpsFlags selects the work-request builders a QP's extended interface
// accepts (enum ibv_qp_create_send_ops_flags); set at QP creation.
type SendOpsFlags uint64

// The send_ops_flags bits, one per QPEx builder (IBV_QP_EX_WITH_*).
const (
	SendOpsRDMAWrite        SendOpsFlags = 1 << 0  // WrRDMAWrite
	SendOpsRDMAWriteWithImm SendOpsFlags = 1 << 1  // WrRDMAWriteImm
	SendOpsSend             SendOpsFlags = 1 << 2  // WrSend
	SendOpsSendWithImm      SendOpsFlags = 1 << 3  // WrSendImm
	SendOpsRDMARead         SendOpsFlags = 1 << 4  // WrRDMARead
	SendOpsAtomicCmpAndSwp  SendOpsFlags = 1 << 5  // WrAtomicCmpSwp
	SendOpsAtomicFetchAdd   SendOpsFlags = 1 << 6  // WrAtomicFetchAdd
	SendOpsLocalInv         SendOpsFlags = 1 << 7  // WrLocalInv
	SendOpsBindMW           SendOpsFlags = 1 << 8  // WrBindMW
	SendOpsSendWithInv      SendOpsFlags = 1 << 9  // WrSendInv
	SendOpsTSO              SendOpsFlags = 1 << 10 // WrSendTSO: UD only (IBV_QP_EX_WITH_SEND_TSO)
	SendOpsFlush            SendOpsFlags = 1 << 11 // WrFlush
	SendOpsAtomicWrite      SendOpsFlags = 1 << 12 // WrAtomicWrite
)

// QPEx is a QP's extended send interface (ibv_qp_ex): work requests are
// built with WrStart, one builder per WR (which takes WRID and WRFlags as
// they are at the call), setters for the WR just built, then posted
// together by WrComplete or dropped by WrAbort (ibv_wr_post(3)).
//
// Between WrStart and WrComplete/WrAbort the QP's send queue is held by
// the builder (the per-QP critical section of ibv_wr_start, mlx5's
// send-queue lock): a PostSend, BindMW or WrStart on the QP from another
// goroutine waits until the batch ends. The batch belongs to the
// goroutine that called WrStart: its builders, setters and WrComplete or
// WrAbort must be called there, and from there a PostSend or BindMW on
// the QP is refused at once with EBUSY, and a second WrStart makes the
// batch's WrComplete fail with EBUSY, since either would wait on itself.
// Outside a batch builders and setters do nothing.
//
// An error in any builder or setter is remembered and reported by
// WrComplete, which then posts nothing: a builder whose operation is not
// in the QP's SendOpsFlags is EOPNOTSUPP; more SGEs than max_send_sge or
// more inline bytes than max_inline_data are ENOSPC, as the rxe provider
// reports them (the error matches EINVAL too). WrComplete also posts
// nothing when the send queue cannot take every WR (ENOSPC, also
// matching ENOMEM) or the transport refuses one of them, such as an
// operation the engine does not implement (EINVAL).
type QPEx struct {
	// WRID is the wr_id the next builder gives its WR.
	WRID uint64
	// WRFlags are the send flags the next builder gives its WR.
	WRFlags ibv.SendFlags

	qp   *QP
	ops  SendOpsFlags
	busy atomic.Bool // between WrStart and WrComplete/WrAbort
	// owner is the goroutine token (goroutine) of the batch's goroutine,
	// 0 outside a batch: lockPost refuses that goroutine.
	owner atomic.Uintptr
	wrs   []ibv.SendWR
	meta  []wrMeta  // where each WR's SGEs and inline data are stored
	sges  []ibv.SGE // backing store for the WRs' SGE lists
	data  []byte    // backing store for inline data
	err   error
}

// wrMeta locates a WR's SGE list and inline data in the backing stores,
// which may move as they grow; WrComplete points the WRs at them.
type wrMeta struct {
	sgeOff, sgeN   int
	dataOff, dataN int
	inline         bool
	hdrOff, hdrN   int // a TSO WR's header, in data
	tso            bool
}

// Ex returns the QP's extended send interface (ibv_qp_to_qp_ex). The QP
// must have been created with SendOpsFlags (EOPNOTSUPP otherwise).
func (qp *QP) Ex() (*QPEx, error) {
	if err := qp.live(); err != nil {
		return nil, err
	}
	if qp.ex == nil {
		return nil, fmt.Errorf("%w: QP %#x created without send_ops_flags", EOPNOTSUPP, qp.QPN())
	}
	return qp.ex, nil
}

func (x *QPEx) ok() bool { return x != nil && x.qp.ok() }

// WrStart begins a batch of work requests (ibv_wr_start), waiting while
// another goroutine posts on the QP or holds a batch of it. On the
// goroutine that already holds the QP's batch it waits for nothing and
// fails that batch: its WrComplete is EBUSY and posts nothing.
func (x *QPEx) WrStart() {
	if !x.ok() {
		return
	}
	me := goroutine()
	if x.owner.Load() == me {
		x.fail(fmt.Errorf("%w: ibv_wr_start in the batch this goroutine holds on QP %#x", EBUSY, x.qp.QPN()))
		return
	}
	x.qp.postMu.Lock()
	x.owner.Store(me)
	x.busy.Store(true)
	x.wrs, x.meta, x.sges, x.data, x.err = x.wrs[:0], x.meta[:0], x.sges[:0], x.data[:0], nil
}

// WrComplete posts every WR built since WrStart, or none if a builder or
// setter failed or the queue cannot take them all, and ends the batch
// (ibv_wr_complete). Without WrStart it is EINVAL.
func (x *QPEx) WrComplete() error {
	if !x.ok() {
		return errNil("QPEx")
	}
	if !x.busy.Load() {
		return fmt.Errorf("%w: ibv_wr_complete without ibv_wr_start", EINVAL)
	}
	defer x.end()
	if x.err != nil {
		return x.err
	}
	if err := x.qp.pd.d.check(); err != nil {
		return err
	}
	x.fixup()
	if i, err := x.qp.pd.d.checkWRs(x.wrs); err != nil {
		return fmt.Errorf("WR %d: %w", i, err)
	}
	if err := x.qp.qp.PostSendAll(x.wrs); err != nil {
		return err
	}
	x.qp.noteBinds(x.wrs)
	return nil
}

// WrAbort drops every WR built since WrStart and ends the batch
// (ibv_wr_abort); without WrStart it does nothing.
func (x *QPEx) WrAbort() {
	if x.ok() && x.busy.Load() {
		x.end()
	}
}

func (x *QPEx) end() {
	x.busy.Store(false)
	x.owner.Store(0)
	clear(x.wrs)
	x.qp.postMu.Unlock()
}

// fixup points each WR's SGE list and inline data into the backing
// stores.
func (x *QPEx) fixup() {
	for i := range x.wrs {
		w, m := &x.wrs[i], &x.meta[i]
		w.SGList = x.sges[m.sgeOff : m.sgeOff+m.sgeN : m.sgeOff+m.sgeN]
		w.InlineData = nil
		if m.inline {
			w.InlineData = x.data[m.dataOff : m.dataOff+m.dataN : m.dataOff+m.dataN]
		}
		if m.tso {
			w.TSOHeader = x.data[m.hdrOff : m.hdrOff+m.hdrN : m.hdrOff+m.hdrN]
		}
	}
}

func (x *QPEx) fail(err error) {
	if x.err == nil {
		x.err = err
	}
}

// errSpace is a setter's error for data that does not fit the WR: rxe's
// provider reports ENOSPC; it matches EINVAL as well.
func errSpace(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ENOSPC, EINVAL, fmt.Sprintf(format, args...))
}

// build starts a new WR of opcode op, if the QP enabled it; it returns
// nil outside a batch.
func (x *QPEx) build(op ibv.WROpcode, flag SendOpsFlags) *ibv.SendWR {
	if !x.ok() || !x.busy.Load() {
		return nil
	}
	if x.ops&flag == 0 {
		x.fail(fmt.Errorf("%w: %v not in the QP's send_ops_flags", EOPNOTSUPP, op))
	}
	x.wrs = append(x.wrs, ibv.SendWR{WRID: x.WRID, Flags: x.WRFlags, Opcode: op})
	x.meta = append(x.meta, wrMeta{})
	return &x.wrs[len(x.wrs)-1]
}

// cur returns the WR the last builder made and its storage, for setters;
// nil outside a batch.
func (x *QPEx) cur() (*ibv.SendWR, *wrMeta) {
	if !x.ok() || !x.busy.Load() {
		return nil, nil
	}
	if len(x.wrs) == 0 {
		x.fail(fmt.Errorf("%w: setter called before a builder", EINVAL))
		x.wrs = append(x.wrs, ibv.SendWR{})
		x.meta = append(x.meta, wrMeta{})
	}
	return &x.wrs[len(x.wrs)-1], &x.meta[len(x.meta)-1]
}

// WrSend builds a SEND (ibv_wr_send).
func (x *QPEx) WrSend() { x.build(ibv.WRSend, SendOpsSend) }

// WrSendImm builds a SEND with immediate data (ibv_wr_send_imm).
func (x *QPEx) WrSendImm(imm uint32) {
	if w := x.build(ibv.WRSendWithImm, SendOpsSendWithImm); w != nil {
		w.Imm = imm
	}
}

// WrSendInv builds a SEND that invalidates rkey at the responder (ibv_wr_send_inv).
func (x *QPEx) WrSendInv(rkey uint32) {
	if w := x.build(ibv.WRSendWithInv, SendOpsSendWithInv); w != nil {
		w.InvRKey = rkey
	}
}

// WrSendTSO builds a TSO SEND of a UD QP (ibv_wr_send_tso): its payload,
// given by WrSetSGE(List) or WrSetInlineData(List) as for WrSend, is sent
// in pieces of mss bytes (the last may be shorter), each an ordinary UD
// SEND_ONLY datagram starting with a copy of hdr, which is copied now.
// The QP must be a UD QP created with MaxTSOHeader of at least len(hdr);
// hdr plus mss must fit the port MTU and the payload
// ibv.TSOCaps.MaxTSO, else WrComplete is EINVAL. One completion,
// ibv.WCTSO, reports the whole WR. mlx5 offers TSO on RAW_PACKET QPs
// only, rxe not at all; see QPInitAttr.MaxTSOHeader.
func (x *QPEx) WrSendTSO(hdr []byte, mss uint16) {
	w := x.build(ibv.WRTSO, SendOpsTSO)
	if w == nil {
		return
	}
	w.MSS = mss
	m := &x.meta[len(x.meta)-1]
	m.hdrOff, m.hdrN, m.tso = len(x.data), len(hdr), true
	x.data = append(x.data, hdr...)
}

// WrRDMAWrite builds an RDMA WRITE (ibv_wr_rdma_write).
func (x *QPEx) WrRDMAWrite(rkey uint32, addr uint64) {
	if w := x.build(ibv.WRRDMAWrite, SendOpsRDMAWrite); w != nil {
		w.RKey, w.RemoteAddr = rkey, addr
	}
}

// WrRDMAWriteImm builds an RDMA WRITE with immediate (ibv_wr_rdma_write_imm).
func (x *QPEx) WrRDMAWriteImm(rkey uint32, addr uint64, imm uint32) {
	if w := x.build(ibv.WRRDMAWriteWithImm, SendOpsRDMAWriteWithImm); w != nil {
		w.RKey, w.RemoteAddr, w.Imm = rkey, addr, imm
	}
}

// WrRDMARead builds an RDMA READ (ibv_wr_rdma_read).
func (x *QPEx) WrRDMARead(rkey uint32, addr uint64) {
	if w := x.build(ibv.WRRDMARead, SendOpsRDMARead); w != nil {
		w.RKey, w.RemoteAddr = rkey, addr
	}
}

// WrAtomicCmpSwp builds a compare-and-swap (ibv_wr_atomic_cmp_swp).
func (x *QPEx) WrAtomicCmpSwp(rkey uint32, addr, compare, swap uint64) {
	if w := x.build(ibv.WRAtomicCmpAndSwp, SendOpsAtomicCmpAndSwp); w != nil {
		w.RKey, w.RemoteAddr, w.CompareAdd, w.Swap = rkey, addr, compare, swap
	}
}

// WrAtomicFetchAdd builds a fetch-and-add (ibv_wr_atomic_fetch_add).
func (x *QPEx) WrAtomicFetchAdd(rkey uint32, addr, add uint64) {
	if w := x.build(ibv.WRAtomicFetchAndAdd, SendOpsAtomicFetchAdd); w != nil {
		w.RKey, w.RemoteAddr, w.CompareAdd = rkey, addr, add
	}
}

// WrLocalInv builds a local invalidate of rkey (ibv_wr_local_inv).
func (x *QPEx) WrLocalInv(rkey uint32) {
	if w := x.build(ibv.WRLocalInv, SendOpsLocalInv); w != nil {
		w.InvRKey = rkey
	}
}

// WrBindMW builds a BIND_MW of mw giving it rkey and the binding info
// (ibv_wr_bind_mw); see BindMWWR. mw.RKey becomes rkey when WrComplete
// posts it.
func (x *QPEx) WrBindMW(mw *MW, rkey uint32, info MWBindInfo) {
	if w := x.build(ibv.WRBindMW, SendOpsBindMW); w != nil {
		w.Bind = BindMWWR(0, 0, mw, rkey, info).Bind
		if err := x.qp.pd.d.checkBind(mw, &info); err != nil {
			x.fail(err)
		}
	}
}

// WrFlush builds a FLUSH of [addr, addr+length) under rkey with placement
// type typ and selectivity level (ibv_wr_flush).
func (x *QPEx) WrFlush(rkey uint32, addr uint64, length uint32, typ, level uint8) {
	if w := x.build(ibv.WRFlush, SendOpsFlush); w != nil {
		w.RKey, w.RemoteAddr, w.FlushType, w.FlushLevel, w.FlushLen = rkey, addr, typ, level, length
	}
}

// WrAtomicWrite builds an 8-byte ATOMIC WRITE of value (ibv_wr_atomic_write);
// the value is copied now and, as in rxe, does not count against
// max_inline_data.
func (x *QPEx) WrAtomicWrite(rkey uint32, addr uint64, value [8]byte) {
	w := x.build(ibv.WRAtomicWrite, SendOpsAtomicWrite)
	if w == nil {
		return
	}
	w.RKey, w.RemoteAddr = rkey, addr
	m := &x.meta[len(x.meta)-1]
	m.dataOff, m.dataN, m.inline = len(x.data), len(value), true
	x.data = append(x.data, value[:]...)
	w.Flags |= ibv.SendInline
}

// WrSetSGE gives the last WR one scatter/gather element (ibv_wr_set_sge).
func (x *QPEx) WrSetSGE(lkey uint32, addr uint64, length uint32) {
	x.WrSetSGEList([]ibv.SGE{{Addr: addr, Length: length, LKey: lkey}})
}

// WrSetSGEList gives the last WR a list of SGEs, copied now; the WR's
// length is the sum of theirs (ibv_wr_set_sge_list).
func (x *QPEx) WrSetSGEList(sges []ibv.SGE) {
	w, m := x.cur()
	if w == nil {
		return
	}
	if lim := x.qp.init.Cap.MaxSendSGE; len(sges) > int(lim) {
		x.fail(errSpace("%d SGEs, QP max_send_sge %d", len(sges), lim))
	}
	m.sgeOff, m.sgeN, m.inline = len(x.sges), len(sges), false
	x.sges = append(x.sges, sges...)
	w.Flags &^= ibv.SendInline
}

// WrSetInlineData gives the last WR inline data, copied now
// (ibv_wr_set_inline_data).
func (x *QPEx) WrSetInlineData(b []byte) { x.WrSetInlineDataList([][]byte{b}) }

// WrSetInlineDataList gives the last WR the concatenation of bufs as
// inline data, copied now (ibv_wr_set_inline_data_list).
func (x *QPEx) WrSetInlineDataList(bufs [][]byte) {
	w, m := x.cur()
	if w == nil {
		return
	}
	start := len(x.data)
	for _, b := range bufs {
		x.data = append(x.data, b...)
	}
	n := len(x.data) - start
	if lim := x.qp.init.Cap.MaxInlineData; n > int(lim) {
		x.fail(errSpace("%d inline bytes, QP max_inline_data %d", n, lim))
	}
	m.dataOff, m.dataN, m.inline, m.sgeN = start, n, true, 0
	w.Flags |= ibv.SendInline
}
