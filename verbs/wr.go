package verbs

import (
	"fmt"
	"sync"
)

// SendOpsFlags selects the work-request builders a QP's extended interface
// accepts (enum ibv_qp_create_send_ops_flags); set at QP creation.
type SendOpsFlags uint64

const (
	SendOpsRDMAWrite        SendOpsFlags = 1 << 0
	SendOpsRDMAWriteWithImm SendOpsFlags = 1 << 1
	SendOpsSend             SendOpsFlags = 1 << 2
	SendOpsSendWithImm      SendOpsFlags = 1 << 3
	SendOpsRDMARead         SendOpsFlags = 1 << 4
	SendOpsAtomicCmpAndSwp  SendOpsFlags = 1 << 5
	SendOpsAtomicFetchAdd   SendOpsFlags = 1 << 6
	SendOpsLocalInv         SendOpsFlags = 1 << 7
	SendOpsBindMW           SendOpsFlags = 1 << 8
	SendOpsSendWithInv      SendOpsFlags = 1 << 9
	SendOpsTSO              SendOpsFlags = 1 << 10
	SendOpsFlush            SendOpsFlags = 1 << 11
	SendOpsAtomicWrite      SendOpsFlags = 1 << 12
)

// QPEx is a QP's extended send interface (ibv_qp_ex): work requests are
// built with WrStart, one builder per WR (which takes WRID and WRFlags as
// they are at the call), setters for the WR just built, then posted
// together by WrComplete or dropped by WrAbort (ibv_wr_post(3)).
//
// Between WrStart and WrComplete/WrAbort the QP's send queue is held by
// the builder (the per-QP critical section of ibv_wr_start): PostSend on
// the same QP waits until then. An error in any builder or setter is
// remembered and reported by WrComplete, which then posts nothing.
type QPEx struct {
	// WRID is the wr_id the next builder gives its WR.
	WRID uint64
	// WRFlags are the send flags the next builder gives its WR.
	WRFlags SendFlags

	qp   *QP
	ops  SendOpsFlags
	mu   sync.Mutex // held from WrStart to WrComplete/WrAbort
	busy bool       // guarded by the QP's post lock
	wrs  []SendWR
	meta []wrMeta // where each WR's SGEs and inline data are stored
	sges []SGE    // backing store for the WRs' SGE lists
	data []byte   // backing store for inline data
	err  error
}

// wrMeta locates a WR's SGE list and inline data in the backing stores,
// which may move as they grow; WrComplete points the WRs at them.
type wrMeta struct {
	sgeOff, sgeN   int
	dataOff, dataN int
	inline         bool
}

// Ex returns the QP's extended send interface (ibv_qp_to_qp_ex). The QP
// must have been created with SendOpsFlags.
func (qp *QP) Ex() (*QPEx, error) {
	if qp.ex == nil {
		return nil, fmt.Errorf("%w: QP created without send_ops_flags", EOPNOTSUPP)
	}
	return qp.ex, nil
}

// WrStart begins a batch of work requests (ibv_wr_start).
func (x *QPEx) WrStart() {
	x.qp.postMu.Lock()
	x.busy = true
	x.wrs, x.meta, x.sges, x.data, x.err = x.wrs[:0], x.meta[:0], x.sges[:0], x.data[:0], nil
}

// WrComplete posts every WR built since WrStart, or none if a builder or
// setter failed or the queue cannot take them all, and ends the batch
// (ibv_wr_complete).
func (x *QPEx) WrComplete() error {
	if !x.busy {
		return fmt.Errorf("%w: ibv_wr_complete without ibv_wr_start", EINVAL)
	}
	defer x.end()
	if x.err != nil {
		return x.err
	}
	x.fixup()
	return errno(x.qp.qp.PostSendAll(x.wrs))
}

// WrAbort drops every WR built since WrStart and ends the batch
// (ibv_wr_abort).
func (x *QPEx) WrAbort() {
	if x.busy {
		x.end()
	}
}

func (x *QPEx) end() {
	x.busy = false
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
	}
}

func (x *QPEx) fail(err error) {
	if x.err == nil {
		x.err = err
	}
}

// build starts a new WR of opcode op, if the QP enabled it.
func (x *QPEx) build(op WROpcode, flag SendOpsFlags) *SendWR {
	if !x.busy {
		x.fail(fmt.Errorf("%w: builder called outside ibv_wr_start", EINVAL))
	} else if x.ops&flag == 0 {
		x.fail(fmt.Errorf("%w: %v not in the QP's send_ops_flags", EOPNOTSUPP, op))
	}
	x.wrs = append(x.wrs, SendWR{WRID: x.WRID, Flags: x.WRFlags, Opcode: op})
	x.meta = append(x.meta, wrMeta{})
	return &x.wrs[len(x.wrs)-1]
}

// cur returns the WR the last builder made, for setters.
func (x *QPEx) cur() *SendWR {
	if len(x.wrs) == 0 {
		x.fail(fmt.Errorf("%w: setter called before a builder", EINVAL))
		x.wrs = append(x.wrs, SendWR{})
		x.meta = append(x.meta, wrMeta{})
	}
	return &x.wrs[len(x.wrs)-1]
}

func (x *QPEx) curMeta() *wrMeta { x.cur(); return &x.meta[len(x.meta)-1] }

// WrSend builds a SEND (ibv_wr_send).
func (x *QPEx) WrSend() { x.build(WRSend, SendOpsSend) }

// WrSendImm builds a SEND with immediate data (ibv_wr_send_imm).
func (x *QPEx) WrSendImm(imm uint32) { x.build(WRSendWithImm, SendOpsSendWithImm).Imm = imm }

// WrSendInv builds a SEND that invalidates rkey at the responder (ibv_wr_send_inv).
func (x *QPEx) WrSendInv(rkey uint32) { x.build(WRSendWithInv, SendOpsSendWithInv).InvRKey = rkey }

// WrRDMAWrite builds an RDMA WRITE (ibv_wr_rdma_write).
func (x *QPEx) WrRDMAWrite(rkey uint32, addr uint64) {
	w := x.build(WRRDMAWrite, SendOpsRDMAWrite)
	w.RKey, w.RemoteAddr = rkey, addr
}

// WrRDMAWriteImm builds an RDMA WRITE with immediate (ibv_wr_rdma_write_imm).
func (x *QPEx) WrRDMAWriteImm(rkey uint32, addr uint64, imm uint32) {
	w := x.build(WRRDMAWriteWithImm, SendOpsRDMAWriteWithImm)
	w.RKey, w.RemoteAddr, w.Imm = rkey, addr, imm
}

// WrRDMARead builds an RDMA READ (ibv_wr_rdma_read).
func (x *QPEx) WrRDMARead(rkey uint32, addr uint64) {
	w := x.build(WRRDMARead, SendOpsRDMARead)
	w.RKey, w.RemoteAddr = rkey, addr
}

// WrAtomicCmpSwp builds a compare-and-swap (ibv_wr_atomic_cmp_swp).
func (x *QPEx) WrAtomicCmpSwp(rkey uint32, addr, compare, swap uint64) {
	w := x.build(WRAtomicCmpAndSwp, SendOpsAtomicCmpAndSwp)
	w.RKey, w.RemoteAddr, w.CompareAdd, w.Swap = rkey, addr, compare, swap
}

// WrAtomicFetchAdd builds a fetch-and-add (ibv_wr_atomic_fetch_add).
func (x *QPEx) WrAtomicFetchAdd(rkey uint32, addr, add uint64) {
	w := x.build(WRAtomicFetchAndAdd, SendOpsAtomicFetchAdd)
	w.RKey, w.RemoteAddr, w.CompareAdd = rkey, addr, add
}

// WrLocalInv builds a local invalidate of rkey (ibv_wr_local_inv).
func (x *QPEx) WrLocalInv(rkey uint32) { x.build(WRLocalInv, SendOpsLocalInv).InvRKey = rkey }

// WrFlush builds a FLUSH of [addr, addr+length) under rkey with placement
// type typ and selectivity level (ibv_wr_flush).
func (x *QPEx) WrFlush(rkey uint32, addr uint64, length uint32, typ, level uint8) {
	w := x.build(WRFlush, SendOpsFlush)
	w.RKey, w.RemoteAddr, w.FlushType, w.FlushLevel, w.FlushLen = rkey, addr, typ, level, length
}

// WrAtomicWrite builds an 8-byte ATOMIC WRITE of value (ibv_wr_atomic_write).
func (x *QPEx) WrAtomicWrite(rkey uint32, addr uint64, value [8]byte) {
	w := x.build(WRAtomicWrite, SendOpsAtomicWrite)
	w.RKey, w.RemoteAddr = rkey, addr
	x.WrSetInlineData(value[:])
}

// WrSetSGE gives the last WR one scatter/gather element (ibv_wr_set_sge).
func (x *QPEx) WrSetSGE(lkey uint32, addr uint64, length uint32) {
	x.WrSetSGEList([]SGE{{Addr: addr, Length: length, LKey: lkey}})
}

// WrSetSGEList gives the last WR a list of SGEs, copied (ibv_wr_set_sge_list).
func (x *QPEx) WrSetSGEList(sges []SGE) {
	w, m := x.cur(), x.curMeta()
	if len(sges) > int(x.qp.init.Cap.MaxSendSGE) {
		x.fail(fmt.Errorf("%w: %d SGEs, QP max_send_sge %d", EINVAL, len(sges), x.qp.init.Cap.MaxSendSGE))
	}
	m.sgeOff, m.sgeN, m.inline = len(x.sges), len(sges), false
	x.sges = append(x.sges, sges...)
	w.Flags &^= SendInline
}

// WrSetInlineData gives the last WR inline data, copied now
// (ibv_wr_set_inline_data).
func (x *QPEx) WrSetInlineData(b []byte) { x.WrSetInlineDataList([][]byte{b}) }

// WrSetInlineDataList gives the last WR the concatenation of bufs as
// inline data, copied now (ibv_wr_set_inline_data_list).
func (x *QPEx) WrSetInlineDataList(bufs [][]byte) {
	w, m := x.cur(), x.curMeta()
	start := len(x.data)
	for _, b := range bufs {
		x.data = append(x.data, b...)
	}
	n := len(x.data) - start
	if n > int(x.qp.init.Cap.MaxInlineData) {
		x.fail(fmt.Errorf("%w: %d inline bytes, QP max_inline_data %d", EINVAL, n, x.qp.init.Cap.MaxInlineData))
	}
	m.dataOff, m.dataN, m.inline, m.sgeN = start, n, true, 0
	w.Flags |= SendInline
}
