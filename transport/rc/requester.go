package rc

import (
	"encoding/binary"
	"fmt"

	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/transport"
	"github.com/softnic/softnic/wire"
)

// wqeState is a send WQE's progress (rxe_verbs.h enum wqe_state).
type wqeState uint8

const (
	wqePosted   wqeState = iota // not started (or rewound by a retry)
	wqeInFlight                 // some packets sent
	wqePending                  // every packet sent, awaiting acknowledgement
	wqeDone                     // completed
)

// wrKind groups work-request opcodes by how the transport treats them.
type wrKind uint8

const (
	kindSend wrKind = iota
	kindWrite
	kindRead
	kindAtomic
	// kindFlush is FLUSH (IBA A19): one request packet with FETH and RETH,
	// answered by a zero-length RDMA READ response.
	kindFlush
	// kindAtomicWrite is ATOMIC WRITE (IBA A19): one request packet with
	// RETH and 8 bytes, answered like FLUSH.
	kindAtomicWrite
	// kindLocal is LOCAL_INV, BIND_MW or REG_MR: memory operations the
	// requester executes itself when they reach it, without a packet
	// (rxe_req.c rxe_do_local_ops).
	kindLocal
)

// sendWQE is a posted send work request with its transport progress.
type sendWQE struct {
	wr       transport.SendWR // SGList aliases sgl, InlineData aliases inline
	sgl      []transport.SGE
	inline   []byte
	kind     wrKind
	length   uint32 // message length in bytes
	signaled bool
	state    wqeState
	status   transport.WCStatus
	firstPSN wire.PSN
	lastPSN  wire.PSN
	sendOff  uint32           // next byte the requester sends (SEND/WRITE), or READ resume offset
	recvOff  uint32           // READ: bytes received
	orig     uint64           // atomic: original remote value
	bind     transport.MWBind // BIND_MW: a copy of wr.Bind
	reg      transport.RegMR  // REG_MR: a copy of wr.Reg
}

// needsResponse reports whether the WQE completes only on an explicit
// response (READ data, atomic ACK, the empty READ response to FLUSH and
// ATOMIC WRITE) rather than a coalescable ACK. These are also the WQEs
// the initiator depth counts: rxe's check_init_depth counts READ, atomics
// and ATOMIC WRITE; softnic counts FLUSH too, because the responder spends
// a responder resource on it (rxe_prepare_res) and a requester that sent
// more than max_dest_rd_atomic of them could push an unanswered READ's
// resource out of the ring.
func (w *sendWQE) needsResponse() bool {
	switch w.kind {
	case kindRead, kindAtomic, kindFlush, kindAtomicWrite:
		return true
	}
	return false
}

// sendQueue is a ring of send WQEs indexed by ever-increasing positions.
type sendQueue struct {
	ring    []sendWQE
	headIdx uint64 // oldest not yet retired
	tailIdx uint64 // next free
}

func (q *sendQueue) init(n, maxSGE, maxInline int) {
	if n < 1 {
		n = 1
	}
	q.ring = make([]sendWQE, n)
	for i := range q.ring {
		q.ring[i].sgl = make([]transport.SGE, 0, maxSGE)
		q.ring[i].inline = make([]byte, 0, maxInline)
	}
}

func (q *sendQueue) reset()                 { q.headIdx, q.tailIdx = 0, 0 }
func (q *sendQueue) empty() bool            { return q.headIdx == q.tailIdx }
func (q *sendQueue) full() bool             { return q.tailIdx-q.headIdx == uint64(len(q.ring)) }
func (q *sendQueue) at(i uint64) *sendWQE   { return &q.ring[i%uint64(len(q.ring))] }
func (q *sendQueue) head() *sendWQE         { return q.at(q.headIdx) }
func (q *sendQueue) pop()                   { q.headIdx++ }
func (q *sendQueue) count() int             { return int(q.tailIdx - q.headIdx) }
func (q *sendQueue) valid(i uint64) bool    { return i >= q.headIdx && i < q.tailIdx }
func (q *sendQueue) inFlight(i uint64) bool { return q.valid(i) && q.at(i).state != wqePosted }

// requester is the send side (rxe_req.c).
type requester struct {
	idx       uint64   // next WQE to send from
	psn       wire.PSN // next PSN to send
	maxIdx    uint64   // one past the last WQE ever started (PSNs assigned)
	highPSN   wire.PSN // one past the highest PSN ever sent
	noack     int      // packets sent since the last AckReq
	rnrWait   bool     // waiting for the RNR timer
	needRetry bool
}

// kindOf classifies op for qp's type; ok is false for opcodes the QP type
// does not support. RC takes every opcode of ibv_post_send(3) and
// ibv_wr_post(3) but TSO; UC takes SEND, WRITE (with immediate) and the
// local operations LOCAL_INV, BIND_MW and REG_MR, which need no transport
// (the ibv_post_send(3) table; rdmavt and mlx5 allow all three on UC, rxe
// BIND_MW only). UC refuses SEND_WITH_INV although that table marks it:
// IBTA defines no UC SEND with Invalidate opcode (Table 38 has only the
// RC and XRC ones, and package wire has none for UC), and rxe's
// next_opcode_uc fails it too.
func kindOf(t transport.QPType, op transport.WROpcode) (wrKind, bool) {
	rc := t == transport.QPTypeRC
	switch op {
	case transport.WRSend, transport.WRSendWithImm:
		return kindSend, true
	case transport.WRSendWithInv:
		return kindSend, rc
	case transport.WRRDMAWrite, transport.WRRDMAWriteWithImm:
		return kindWrite, true
	case transport.WRRDMARead:
		return kindRead, rc
	case transport.WRAtomicCmpAndSwp, transport.WRAtomicFetchAndAdd:
		return kindAtomic, rc
	case transport.WRFlush:
		return kindFlush, rc
	case transport.WRAtomicWrite:
		return kindAtomicWrite, rc
	case transport.WRLocalInv, transport.WRBindMW, transport.WRRegMR:
		return kindLocal, true
	}
	return 0, false
}

// PostSend queues wrs in order (ibv_post_send). It stops at the first WR
// it refuses and returns its index with an error wrapping
// transport.ErrInvalid, ErrFull or ErrState; the WRs before it are posted.
func (qp *QP) PostSend(wrs []transport.SendWR) (int, error) {
	qp.mu.Lock()
	i, err := qp.postSendLocked(wrs)
	qp.mu.Unlock()
	qp.flushEvents()
	if i > 0 {
		qp.cfg.Wake()
	}
	return i, err
}

// PostSendAll posts every WR of wrs, or none if any is refused or the
// send queue has no room for all of them (ibv_wr_complete semantics: a
// full queue there is ENOSPC, rxe provider wr_complete).
func (qp *QP) PostSendAll(wrs []transport.SendWR) error {
	qp.mu.Lock()
	err := qp.checkAllLocked(wrs)
	if err == nil {
		_, err = qp.postSendLocked(wrs)
	}
	qp.mu.Unlock()
	qp.flushEvents()
	if err == nil && len(wrs) > 0 {
		qp.cfg.Wake()
	}
	return err
}

func (qp *QP) checkAllLocked(wrs []transport.SendWR) error {
	for i := range wrs {
		if err := qp.checkSendWR(&wrs[i]); err != nil {
			return fmt.Errorf("WR %d: %w", i, err)
		}
	}
	if free := len(qp.sq.ring) - qp.sq.count(); len(wrs) > free {
		return fmt.Errorf("%w: %d WRs, room for %d", transport.ErrFull, len(wrs), free)
	}
	return nil
}

func (qp *QP) postSendLocked(wrs []transport.SendWR) (int, error) {
	switch qp.state {
	case transport.QPStateReset, transport.QPStateInit, transport.QPStateRTR:
		return 0, fmt.Errorf("%w: post send in state %v", transport.ErrState, qp.state)
	}
	for i := range wrs {
		if err := qp.checkSendWR(&wrs[i]); err != nil {
			return i, err
		}
		if qp.sq.full() {
			return i, fmt.Errorf("%w: send queue holds %d WRs", transport.ErrFull, len(qp.sq.ring))
		}
		if err := qp.enqueueLocked(&wrs[i]); err != nil {
			return i, err
		}
		if qp.state == transport.QPStateErr {
			// WRs posted in ERR complete with a flush error (IBTA 10.8.3.3;
			// the kernel's ib_drain_qp relies on it).
			qp.flushLocked()
		}
	}
	return len(wrs), nil
}

// checkSendWR validates a WR against the QP (ibv_post_send(3); rxe
// provider validate_send_wr).
func (qp *QP) checkSendWR(wr *transport.SendWR) error {
	kind, ok := kindOf(qp.cfg.Type, wr.Opcode)
	if !ok {
		if wr.Opcode == transport.WRSendWithInv {
			return fmt.Errorf("%w: opcode %v not supported on %v QPs (IBTA defines no UC SEND with Invalidate)",
				transport.ErrInvalid, wr.Opcode, qp.cfg.Type)
		}
		return fmt.Errorf("%w: opcode %v not supported on %v QPs", transport.ErrInvalid, wr.Opcode, qp.cfg.Type)
	}
	if len(wr.SGList) > int(qp.cfg.Cap.MaxSendSGE) {
		return fmt.Errorf("%w: %d SGEs, QP max_send_sge %d", transport.ErrInvalid, len(wr.SGList), qp.cfg.Cap.MaxSendSGE)
	}
	length := uint64(0)
	for _, s := range wr.SGList {
		length += uint64(s.Length)
	}
	if wr.Flags&transport.SendInline != 0 {
		switch kind {
		case kindRead, kindAtomic, kindFlush, kindLocal:
			return fmt.Errorf("%w: IBV_SEND_INLINE on %v", transport.ErrInvalid, wr.Opcode)
		}
		if wr.InlineData != nil {
			length = uint64(len(wr.InlineData))
		}
		// ATOMIC WRITE's 8 bytes travel in the WQE and do not count
		// against max_inline_data (rxe provider wr_atomic_write).
		if length > uint64(qp.cfg.Cap.MaxInlineData) && kind != kindAtomicWrite {
			return fmt.Errorf("%w: %d inline bytes, QP max_inline_data %d", transport.ErrInvalid, length, qp.cfg.Cap.MaxInlineData)
		}
		if wr.InlineData == nil {
			if err := qp.cfg.Mem.CheckGather(qp.cfg.PD, wr.SGList); err != nil {
				return transport.InlineError(err)
			}
		}
	}
	if length > MaxMsgSize {
		return fmt.Errorf("%w: message of %d bytes exceeds max_msg_sz %d", transport.ErrInvalid, length, MaxMsgSize)
	}
	switch kind {
	case kindAtomic:
		if length < 8 {
			return fmt.Errorf("%w: atomic needs an 8-byte local buffer, got %d", transport.ErrInvalid, length)
		}
		if wr.RemoteAddr&7 != 0 {
			return fmt.Errorf("%w: atomic remote address %#x not 8-byte aligned", transport.ErrInvalid, wr.RemoteAddr)
		}
	case kindAtomicWrite:
		// IBA A19.4.2: exactly 8 bytes to an 8-byte aligned address.
		if length != 8 {
			return fmt.Errorf("%w: ATOMIC_WRITE carries exactly 8 bytes, got %d", transport.ErrInvalid, length)
		}
		if wr.RemoteAddr&7 != 0 {
			return fmt.Errorf("%w: ATOMIC_WRITE remote address %#x not 8-byte aligned", transport.ErrInvalid, wr.RemoteAddr)
		}
	case kindFlush:
		// IBA A19.4.4: placement type global (1), persistent (2) or both;
		// selectivity range (0) or whole MR (1).
		if wr.FlushType == 0 || wr.FlushType&^(wire.FlushGlobal|wire.FlushPersistent) != 0 {
			return fmt.Errorf("%w: FLUSH placement type %d (want IBV_FLUSH_GLOBAL and/or IBV_FLUSH_PERSISTENT)", transport.ErrInvalid, wr.FlushType)
		}
		if wr.FlushLevel > wire.FlushMR {
			return fmt.Errorf("%w: FLUSH selectivity level %d (want IBV_FLUSH_RANGE or IBV_FLUSH_MR)", transport.ErrInvalid, wr.FlushLevel)
		}
		if wr.FlushLen > MaxMsgSize-1 {
			return fmt.Errorf("%w: FLUSH length %d above 2^31-1", transport.ErrInvalid, wr.FlushLen)
		}
	case kindLocal:
		switch {
		case wr.Opcode == transport.WRBindMW && wr.Bind == nil:
			return fmt.Errorf("%w: BIND_MW without bind information", transport.ErrInvalid)
		case wr.Opcode == transport.WRRegMR && wr.Reg == nil:
			return fmt.Errorf("%w: REG_MR without registration information", transport.ErrInvalid)
		}
	}
	return nil
}

// MaxMsgSize is the largest message (ibv_device_attr max_msg_sz; rxe 2^31).
const MaxMsgSize = 1 << 31

// enqueueLocked puts wr in the send queue. It fails only when inline data
// given by SGEs cannot be read (transport.InlineError): checkSendWR has
// checked them, so only an MR deregistered in between gets here; the
// queue is then unchanged.
func (qp *QP) enqueueLocked(wr *transport.SendWR) error {
	w := qp.sq.at(qp.sq.tailIdx)
	sgl, inline := w.sgl[:0], w.inline[:0]
	*w = sendWQE{sgl: sgl, inline: inline}
	// Copy the WR field by field: copying the whole struct would let the
	// caller's SGE slice escape to the heap on every post.
	w.wr.WRID, w.wr.Opcode, w.wr.Flags = wr.WRID, wr.Opcode, wr.Flags
	w.wr.Imm, w.wr.InvRKey = wr.Imm, wr.InvRKey
	w.wr.RemoteAddr, w.wr.RKey = wr.RemoteAddr, wr.RKey
	w.wr.CompareAdd, w.wr.Swap = wr.CompareAdd, wr.Swap
	w.wr.RemoteQPN, w.wr.RemoteQKey = wr.RemoteQPN, wr.RemoteQKey
	w.wr.FlushType, w.wr.FlushLevel, w.wr.FlushLen = wr.FlushType, wr.FlushLevel, wr.FlushLen
	w.kind, _ = kindOf(qp.cfg.Type, wr.Opcode)
	w.sgl = append(w.sgl, wr.SGList...)
	w.wr.SGList = w.sgl
	if wr.Bind != nil {
		w.bind = *wr.Bind
	}
	if wr.Reg != nil {
		w.reg = *wr.Reg
	}
	if wr.Flags&transport.SendInline != 0 {
		if wr.InlineData != nil {
			w.inline = append(w.inline, wr.InlineData...)
		} else {
			var err error
			if w.inline, err = qp.cfg.Mem.Gather(qp.cfg.PD, wr.SGList, w.inline); err != nil {
				return transport.InlineError(err)
			}
		}
		w.wr.InlineData = w.inline
		w.length = uint32(len(w.inline))
	} else {
		for _, s := range w.sgl {
			w.length += s.Length
		}
	}
	switch w.kind {
	case kindAtomic:
		w.length = 8
	case kindFlush:
		w.length = wr.FlushLen // no local data; the range's length (rxe wr_flush: dma.length)
	case kindLocal:
		w.length = 0
	}
	w.signaled = qp.cfg.SigAll || wr.Flags&transport.SendSignaled != 0
	qp.sq.tailIdx++
	return nil
}

// packets returns how many PSNs the WQE occupies: one per PMTU of data
// for SEND, WRITE and READ (a READ request reserves its responses' PSNs,
// rxe_req.c update_wqe_psn), one otherwise.
func (qp *QP) packets(w *sendWQE) uint32 {
	switch w.kind {
	case kindSend, kindWrite, kindRead:
		n := (w.length + uint32(qp.pmtu) - 1) / uint32(qp.pmtu)
		return max(n, 1)
	case kindLocal:
		return 0
	}
	return 1
}

// requesterLocked sends what the window, the initiator depth and fences
// allow, at most budget packets (rxe_req.c rxe_requester). It reports
// whether it stopped with sendable work left.
func (qp *QP) requesterLocked(out transport.Output) bool {
	if qp.state != transport.QPStateRTS && qp.state != transport.QPStateSQD {
		return false
	}
	r := &qp.req
	if r.rnrWait {
		// Nothing goes out before the RNR timer fires, not even a retry a
		// PSN sequence NAK asked for meanwhile: it waits for the timer too
		// (IBTA 9.7.5.2.8; rxe_req.c: need_retry && !wait_for_rnr_timer).
		return false
	}
	if r.needRetry {
		qp.retryLocked()
	}
	for sent := 0; sent < budget; sent++ {
		if !qp.sq.valid(r.idx) {
			qp.checkDrainedLocked()
			return false
		}
		w := qp.sq.at(r.idx)
		if w.kind == kindLocal && w.state != wqePosted {
			// Executed already (a retry rewound past it): never twice. A
			// failed one stops the requester until the completer reaches it
			// and moves the QP to ERR (rxe_req.c req_error).
			if w.status != transport.WCSuccess {
				return false
			}
			r.idx++
			continue
		}
		if !qp.canStartLocked(w) {
			return false
		}
		if w.kind == kindLocal {
			qp.localOpLocked(w)
			continue
		}
		if qp.isRC() && r.psn.Diff(qp.comp.psn) >= maxUnackedPSNs {
			return false // window full (RXE_MAX_UNACKED_PSNS)
		}
		qp.sendPacketLocked(w, out)
	}
	return qp.sq.valid(r.idx)
}

// canStartLocked decides whether WQE w may start now and assigns its PSNs.
func (qp *QP) canStartLocked(w *sendWQE) bool {
	r := &qp.req
	if w.state == wqePosted {
		// A WQE a retry rewound (index below maxIdx) is in flight, not
		// new: SQD lets it go out again (IBTA 10.3.1: WRs in progress
		// complete; rxe req_retry resets them to posted and sends them in
		// SQD too).
		if qp.state == transport.QPStateSQD && r.idx >= r.maxIdx {
			qp.checkDrainedLocked()
			return false // SQD: finish what started, start nothing new
		}
		if w.wr.Flags&transport.SendFence != 0 && qp.outstandingRdAtomicLocked() > 0 {
			return false // IBV_SEND_FENCE waits for prior READs and atomics
		}
		if w.wr.Opcode == transport.WRLocalInv && !qp.allDoneBeforeLocked(r.idx) {
			// LOCAL_INV is always fenced: every earlier WR must have
			// completed (IBA 10.6.5.1 local invalidate fence; rxe_req.c
			// rxe_wqe_is_fenced "Make mandatory for the rxe driver").
			return false
		}
		if w.needsResponse() && qp.outstandingRdAtomicLocked() >= max(int(qp.attr.MaxRdAtomic), 1) {
			return false // initiator depth (rxe_req.c check_init_depth)
		}
		if w.kind != kindLocal { // local operations take no PSN
			w.firstPSN = r.psn
			w.lastPSN = r.psn.Add(qp.packets(w) - 1)
		}
		w.sendOff, w.recvOff = 0, 0
		w.state = wqeInFlight
		if r.idx >= r.maxIdx {
			r.maxIdx = r.idx + 1
		}
	}
	return true
}

// allDoneBeforeLocked reports whether every WQE before index i completed.
func (qp *QP) allDoneBeforeLocked(i uint64) bool {
	for j := qp.sq.headIdx; j < i; j++ {
		if qp.sq.at(j).state != wqeDone {
			return false
		}
	}
	return true
}

// localOpLocked executes the LOCAL_INV, BIND_MW or REG_MR WQE w at the
// requester's position, in order with the WQEs around it (rxe_req.c
// rxe_do_local_ops). It completes once every earlier WQE has (the
// completer reports send completions in order); a failure completes it
// with LOC_QP_OP_ERR (MW_BIND_ERR for BIND_MW) and then moves the QP to
// ERR.
func (qp *QP) localOpLocked(w *sendWQE) {
	pd, qpn, tbl := qp.cfg.PD, qp.cfg.QPN, qp.cfg.Mem
	var err error
	fail := transport.WCLocQPOpErr
	switch w.wr.Opcode {
	case transport.WRLocalInv:
		// An MR or a type-2 window, told apart by the key's index
		// (rxe_invalidate_mr / rxe_invalidate_mw).
		err = tbl.Invalidate(pd, qpn, w.wr.InvRKey)
	case transport.WRRegMR:
		mr, ok := w.reg.MR.(*mem.MR)
		if !ok {
			mr, err = tbl.MRByKey(w.reg.MRLKey)
		}
		if err == nil {
			err = tbl.RegFast(pd, mr, w.reg.Key, w.reg.IOVA, w.reg.Length, w.reg.Access)
		}
	case transport.WRBindMW:
		fail = transport.WCMWBindErr
		var mw *mem.MW
		if mw, err = tbl.MWByKey(w.bind.MWHandle); err == nil {
			b := &w.bind
			_, err = tbl.BindMW(mw, qpn, pd, b.MRLKey, b.Addr, b.Length, b.Access, b.NewRKey)
		}
	}
	w.state = wqePending
	w.status = transport.WCSuccess
	if err != nil {
		w.status = fail
		qp.cfg.Counters.SendErr.Add(1)
	} else {
		qp.req.idx++
	}
	qp.completeLocalsLocked()
}

// completeLocalsLocked completes, in order, the executed local operations
// that every earlier WQE has completed before; it stops at the first WQE
// still outstanding: the completer's walk with nothing newly acknowledged.
func (qp *QP) completeLocalsLocked() {
	qp.comp.ackWalkLocked(qp, qp.comp.psn, false)
	qp.retireLocked()
}

// completeLocalLocked completes the executed local operation w, all of
// whose predecessors are done. It reports false when w failed: the QP is
// then in ERR.
func (qp *QP) completeLocalLocked(w *sendWQE) bool {
	if w.status != transport.WCSuccess {
		qp.completeSendLocked(w, true)
		qp.toErrorLocked()
		return false
	}
	qp.completeSendLocked(w, false)
	return true
}

// outstandingRdAtomicLocked counts READ/atomic WQEs sent but not completed.
func (qp *QP) outstandingRdAtomicLocked() int {
	n := 0
	for i := qp.sq.headIdx; i < qp.req.idx; i++ {
		w := qp.sq.at(i)
		if w.needsResponse() && w.state != wqeDone {
			n++
		}
	}
	return n
}

// checkDrainedLocked reports the SQ-drained event once the QP is in SQD
// and nothing it started is outstanding (IBTA 10.3.1 SQD; IBV_EVENT_SQ_DRAINED).
// Every WQE below maxIdx was started, including those a retry rewound to
// posted: they count until completed.
func (qp *QP) checkDrainedLocked() {
	if qp.state != transport.QPStateSQD || qp.sqDrained {
		return
	}
	for i := qp.sq.headIdx; i < qp.sq.tailIdx && i < qp.req.maxIdx; i++ {
		if qp.sq.at(i).state != wqeDone {
			return
		}
	}
	qp.sqDrained = true
	if qp.attr.EnSQDAsyncNotify {
		qp.events = append(qp.events, EventSQDrained)
	}
}

// Packet opcodes of a SEND or WRITE by place in the message: [kind][place]
// with place = first/middle/last/only, and the last/only variants that
// carry immediate data or an invalidate (rxe_req.c next_opcode_rc/uc).
var (
	sendOps     = [4]wire.Opcode{wire.RCSendFirst, wire.RCSendMiddle, wire.RCSendLast, wire.RCSendOnly}
	sendImmOps  = [4]wire.Opcode{wire.RCSendFirst, wire.RCSendMiddle, wire.RCSendLastImm, wire.RCSendOnlyImm}
	sendInvOps  = [4]wire.Opcode{wire.RCSendFirst, wire.RCSendMiddle, wire.RCSendLastInv, wire.RCSendOnlyInv}
	writeOps    = [4]wire.Opcode{wire.RCWriteFirst, wire.RCWriteMiddle, wire.RCWriteLast, wire.RCWriteOnly}
	writeImmOps = [4]wire.Opcode{wire.RCWriteFirst, wire.RCWriteMiddle, wire.RCWriteLastImm, wire.RCWriteOnlyImm}
)

// opcodeFor picks the packet opcode of a SEND or WRITE packet from its
// place in the message, in transport class class.
func opcodeFor(class wire.Opcode, op transport.WROpcode, first, last bool) wire.Opcode {
	ops := &writeOps
	switch op {
	case transport.WRSend:
		ops = &sendOps
	case transport.WRSendWithImm:
		ops = &sendImmOps
	case transport.WRSendWithInv:
		ops = &sendInvOps
	case transport.WRRDMAWriteWithImm:
		ops = &writeImmOps
	}
	place := 1 // middle
	switch {
	case first && last:
		place = 3
	case first:
		place = 0
	case last:
		place = 2
	}
	return class | ops[place].Op()
}

// sendPacketLocked sends the next packet of w and advances the requester.
func (qp *QP) sendPacketLocked(w *sendWQE, out transport.Output) {
	r := &qp.req
	class := wire.ClassRC
	if !qp.isRC() {
		class = wire.ClassUC
	}
	var h wire.Headers
	h.BTH.PSN = r.psn
	payload := uint32(0)
	last := true
	switch w.kind {
	case kindSend, kindWrite:
		first := w.sendOff == 0
		payload = min(w.length-w.sendOff, uint32(qp.pmtu))
		last = w.sendOff+payload == w.length
		h.BTH.Opcode = opcodeFor(class, w.wr.Opcode, first, last)
		if w.kind == kindWrite && first {
			h.RETH = wire.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.length}
		}
		if last {
			h.Imm = w.wr.Imm
			h.InvRKey = w.wr.InvRKey
			// SE only on the last packet of a SEND or WRITE_WITH_IMM (IBTA 9.2.3).
			h.BTH.SE = w.wr.Flags&transport.SendSolicited != 0 && h.BTH.Opcode.Is(wire.MaskSolicited)
		}
	case kindRead:
		// A first READ or one resumed after a partial response: ask for
		// the bytes not yet received (rxe_req.c req_retry).
		off := w.recvOff
		h.BTH.Opcode = wire.RCReadRequest
		h.RETH = wire.RETHFields{VA: w.wr.RemoteAddr + uint64(off), RKey: w.wr.RKey, DMALen: w.length - off}
	case kindAtomic:
		h.AtomicETH = wire.AtomicETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey}
		if w.wr.Opcode == transport.WRAtomicCmpAndSwp {
			h.BTH.Opcode = wire.RCCompareSwap
			h.AtomicETH.SwapAdd, h.AtomicETH.Compare = w.wr.Swap, w.wr.CompareAdd
		} else {
			h.BTH.Opcode = wire.RCFetchAdd
			h.AtomicETH.SwapAdd = w.wr.CompareAdd
		}
	case kindFlush:
		// FETH then RETH; no payload (oA19-2). rxe init_req_packet:
		// feth_init(type, level), RETH VA = iova, len = resid.
		h.BTH.Opcode = wire.RCFlush
		h.FETH = wire.FETHFields{PlacementType: w.wr.FlushType, Selectivity: w.wr.FlushLevel}
		h.RETH = wire.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.wr.FlushLen}
	case kindAtomicWrite:
		h.BTH.Opcode = wire.RCAtomicWrite
		h.RETH = wire.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: 8}
		payload = 8
	}
	// AckReq on the last packet of every RC message and periodically in
	// long ones (rxe_req.c: RXE_MAX_PKT_PER_ACK); never on UC.
	if qp.isRC() {
		r.noack++
		if last || r.noack > maxPktPerAck {
			h.BTH.AckReq = true
			r.noack = 0
		}
	}
	b, hdr := qp.startPacket(out, &h)
	if payload > 0 {
		if err := qp.gather(w, b[hdr:hdr+int(payload)], w.sendOff); err != nil {
			qp.localErrorLocked(w, transport.WCLocProtErr)
			return
		}
	}
	qp.finishPacket(out, b, hdr, int(payload))

	switch w.kind {
	case kindSend, kindWrite:
		w.sendOff += payload
		r.psn = r.psn.Next()
	case kindRead:
		r.psn = w.lastPSN.Next()
	default:
		r.psn = r.psn.Next()
	}
	if r.psn.After(r.highPSN) {
		r.highPSN = r.psn
	}
	if qp.isRC() {
		// Every request arms the retransmit timer if it is not running
		// (rxe_req.c: mod_timer when !timer_pending); only progress pushes
		// its deadline out.
		qp.armRetryLocked()
	}
	if !last {
		return
	}
	w.state = wqePending
	r.idx++
	if w.kind == kindSend {
		qp.cfg.Counters.RDMASends.Add(1)
	}
	if !qp.isRC() {
		// UC has no acknowledgements: a WQE completes once sent (rxe_comp.c
		// handles UC/UD WQEs at send time).
		qp.completeSendLocked(w, false)
		qp.retireLocked()
	}
}

// gather copies the WQE's message bytes [off, off+len(dst)) into dst from
// its inline data or its SGEs, checking each SGE against the MR table.
func (qp *QP) gather(w *sendWQE, dst []byte, off uint32) error {
	if w.wr.InlineData != nil {
		copy(dst, w.inline[off:])
		return nil
	}
	for _, s := range w.sgl {
		if len(dst) == 0 {
			break
		}
		if off >= s.Length {
			off -= s.Length
			continue
		}
		src, err := qp.localVec(s, false)
		if err != nil {
			return err
		}
		n := src.readAt(int(off), dst)
		dst = dst[n:]
		off = 0
	}
	return nil
}

// scatter copies src into the SGE list at byte offset off, checking each
// SGE for local write access.
func scatter(qp *QP, sgl []transport.SGE, off uint64, src []byte) error {
	for _, s := range sgl {
		if len(src) == 0 {
			break
		}
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		dst, err := qp.localVec(s, true)
		if err != nil {
			return err
		}
		n := dst.writeAt(int(off), src)
		src = src[n:]
		off = 0
	}
	if len(src) > 0 {
		return errShortSGL
	}
	return nil
}

var errShortSGL = fmt.Errorf("%w: scatter list too short", transport.ErrInvalid)

// putAtomicResult stores an atomic's original value in the WQE's local
// buffer in CPU byte order (rxe_comp.c do_atomic: atmack_orig → host order).
func (qp *QP) putAtomicResult(w *sendWQE) error {
	var v [8]byte
	binary.NativeEndian.PutUint64(v[:], w.orig)
	return scatter(qp, w.sgl, 0, v[:])
}

// localErrorLocked fails w with a local error status and moves the QP to
// ERR (rxe_req.c req_error).
func (qp *QP) localErrorLocked(w *sendWQE, st transport.WCStatus) {
	w.status = st
	w.state = wqePending
	qp.cfg.Counters.SendErr.Add(1)
	qp.completeSendLocked(w, true)
	qp.toErrorLocked()
}

// completeSendLocked posts w's completion if it is signaled or failed
// (errors always complete, IBTA 10.7.3.1) and marks it done.
func (qp *QP) completeSendLocked(w *sendWQE, force bool) {
	if w.state == wqeDone {
		return
	}
	w.state = wqeDone
	if !(w.signaled || force || w.status != transport.WCSuccess) {
		return
	}
	wc := &qp.wc // a field, so the interface call does not move it to the heap
	*wc = transport.WorkCompletion{
		WRID:   w.wr.WRID,
		Status: w.status,
		Opcode: wcOpcode(w.wr.Opcode),
		QPNum:  qp.cfg.QPN,
	}
	if w.status == transport.WCSuccess {
		wc.ByteLen = w.length
	}
	if !qp.cfg.SendCQ.Push(wc, false) {
		qp.toErrorLocked() // CQ overrun: the QP goes to error (IBTA 11.4.2.1)
	}
}

// retireLocked pops completed WQEs off the head of the SQ.
func (qp *QP) retireLocked() {
	for !qp.sq.empty() && qp.sq.head().state == wqeDone && qp.sq.headIdx < qp.req.idx {
		qp.sq.pop()
	}
}

func wcOpcode(op transport.WROpcode) transport.WCOpcode {
	switch op {
	case transport.WRRDMAWrite, transport.WRRDMAWriteWithImm:
		return transport.WCRDMAWrite
	case transport.WRRDMARead:
		return transport.WCRDMARead
	case transport.WRAtomicCmpAndSwp:
		return transport.WCCompSwap
	case transport.WRAtomicFetchAndAdd:
		return transport.WCFetchAdd
	case transport.WRLocalInv:
		return transport.WCLocalInv
	case transport.WRBindMW:
		return transport.WCBindMW
	case transport.WRFlush:
		return transport.WCFlush
	case transport.WRAtomicWrite:
		return transport.WCAtomicWrite
	case transport.WRRegMR:
		return transport.WCRegMR
	}
	return transport.WCSend
}
