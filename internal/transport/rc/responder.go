package rc

import (
	"encoding/binary"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// resKind is what a responder resource remembers.
type resKind uint8

const (
	resNone resKind = iota
	resRead
	resAtomic
	resFlush       // FLUSH: replayed by an empty READ response (oA19-28, oA19-29)
	resAtomicWrite // ATOMIC WRITE: likewise, never written twice
)

// resource is one entry of the responder-resource ring that lets a
// duplicate READ, atomic, FLUSH or ATOMIC WRITE be answered again without
// re-executing it (IBTA 9.7.5.1.5 C9-105..C9-111; rxe_resp.c
// duplicate_request, rxe_prepare_res).
type resource struct {
	kind     resKind
	firstPSN wire.PSN
	lastPSN  wire.PSN
	va       uint64
	rkey     uint32
	length   uint32
	orig     uint64 // atomic: the value returned the first time
	opcode   wire.Opcode
}

// readReply is a READ response being sent (possibly a replay).
type readReply struct {
	active bool
	psn    wire.PSN // next response PSN
	data   iovec    // the memory read
	off    int      // bytes of data already sent
	left   int      // bytes of data still to send
	first  bool     // the next packet is the first of this reply
	// paced: the last pass stopped for the QP's rate (congestion
	// control), and the pacer's timer wakes the QP.
	paced bool
}

// responder is the receive side of the QP (rxe_resp.c).
type responder struct {
	psn     wire.PSN // expected PSN (ePSN)
	msn     uint32   // message sequence number (AETH MSN)
	sentNak bool     // a PSN sequence NAK went out for this gap (send it once)

	// The message in progress.
	inMsg   bool
	msgKind wire.Mask // MaskSend or MaskWrite
	drop    bool      // UC: drop until the next FIRST/ONLY

	haveWQE bool
	wqe     transport.RecvWQE
	tm      tmState // a tag-matching SRQ's choice for the SEND in progress
	recvOff uint64  // SEND: bytes placed into wqe

	wrData iovec  // WRITE: the target range
	wrOff  int    // WRITE: bytes of wrData written
	wrLeft int    // WRITE: bytes of wrData still to come
	wrLen  uint32 // WRITE: RETH DMA length (byte_len of WRITE_WITH_IMM)

	resources []resource
	nextRes   int
	reply     readReply
	replyBuf  iovec // storage of reply.data, kept between replies

	ackPending bool
	ackPSN     wire.PSN

	// held are requests received beyond psn, in PSN order, waiting
	// for the one missing (reorder.go).
	held []heldRequest
	// gap is the expected PSN the last reorder window opened for.
	gap wire.PSN

	// XRC_RECV: the XRC SRQ the message in progress takes its receive,
	// PD and CQ from, and its number (xrcTargetLocked).
	xrcSRQN uint32
	xrcT    XRCTarget
}

func (r *responder) reading() bool { return r.reply.active }

// requestLocked runs one request packet through the responder's checks
// and executes it: CHK_PSN, CHK_OP_SEQ, CHK_OP_VALID, CHK_RESOURCE,
// CHK_LENGTH, CHK_RKEY, EXECUTE, ACKNOWLEDGE (rxe_resp.c rxe_responder).
func (r *responder) requestLocked(qp *QP, p *wire.Packet, out transport.Output, now time.Time) {
	if !qp.isRC() {
		r.ucRequestLocked(qp, p)
		return
	}
	if qp.xrc {
		if e := r.xrcTargetLocked(qp, p); e != respOK {
			r.errorLocked(qp, out, e, p)
			return
		}
	}
	if e := r.checkLocked(qp, p, out, now); e != respOK {
		r.errorLocked(qp, out, e, p)
	}
}

// xrcTargetLocked resolves the XRC SRQ an XRC_RECV QP's request names in
// its XRCETH and makes its receive queue, PD and CQ the QP's for this
// packet: a SEND takes its receive WQE from that SRQ and completes on its
// CQ, and every rkey and receive SGE is checked in its PD (IBTA 9.3.7;
// rdma-core ibv_create_srq_ex(3): an XRC SRQ has a PD and a CQ, the
// XRC_RECV QP neither). An SRQ number that names no XRC SRQ of the QP's
// XRC domain, or a packet that continues a message under another SRQ
// number than the one it started with, is an invalid request: NAK and
// the QP to ERR (IBTA 9.7.5.1: invalid request, class C as for a bad
// opcode). A duplicate is checked the same way, and then answered by
// checkLocked as on RC.
func (r *responder) xrcTargetLocked(qp *QP, p *wire.Packet) respErr {
	num := p.XRCETH().XRCSRQ()
	if r.inMsg {
		// The message in progress keeps the SRQ it started with: an error
		// now completes its WQE on that SRQ's CQ, whatever packets out of
		// sequence named since.
		qp.cfg.RQ, qp.cfg.PD, qp.cfg.RecvCQ = r.xrcT.RQ, r.xrcT.PD, r.xrcT.CQ
		if p.PSN() == r.psn {
			if num != r.xrcSRQN {
				return errXRCSRQ
			}
			return respOK
		}
	}
	t, ok := qp.cfg.XRCSRQ(num)
	if !ok {
		return errXRCSRQ
	}
	qp.cfg.RQ, qp.cfg.PD, qp.cfg.RecvCQ = t.RQ, t.PD, t.CQ
	if p.PSN() == r.psn {
		r.xrcSRQN, r.xrcT = num, t
	}
	return respOK
}

// checkLocked runs the checks and executes the request; it returns the
// error that stopped it, if any.
func (r *responder) checkLocked(qp *QP, p *wire.Packet, out transport.Output, now time.Time) respErr {
	switch d := p.PSN().Compare(r.psn); {
	case d > 0:
		// A gap: held for the reorder window (holdLocked), else NAKed
		// once with the expected PSN (C9-109; rxe check_psn).
		if r.holdLocked(qp, p, now) {
			// Counted as rxe counts every request beyond the
			// expected PSN (out_of_sequence, check_psn).
			qp.cfg.Counters.OutOfSequence.Add(1)
			return respOK
		}
		return errPSNOutOfSeq
	case d < 0:
		qp.cfg.Counters.DuplicateRequest.Add(1)
		r.duplicateLocked(qp, p, out)
		return respOK
	}
	r.sentNak = false

	// CHK_OP_SEQ: MIDDLE/LAST continue an open message of the same kind;
	// FIRST/ONLY may not interrupt one (C9-92; rxe check_op_seq).
	if !r.opSeqOK(p) {
		return errMissingOpcode
	}
	// CHK_OP_VALID: the QP must allow the remote operation (C9-93; rxe
	// check_op_valid).
	need := ibv.Access(0)
	switch {
	case p.Is(wire.MaskWrite), p.Is(wire.MaskAtomicWrite):
		need = ibv.AccessRemoteWrite
	case p.Is(wire.MaskRead):
		need = ibv.AccessRemoteRead
	case p.Is(wire.MaskAtomic):
		need = ibv.AccessRemoteAtomic
	case p.Is(wire.MaskFlush):
		// The QP must allow each placement type asked for (rxe
		// check_qp_attr_access: IB_ACCESS_FLUSH_GLOBAL / _PERSISTENT).
		need = flushAccess(p.FETH().PlacementType())
	}
	if qp.attr.AccessFlags&need != need {
		return errUnsupportedOpcode
	}
	// CHK_LENGTH (C9-89..C9-92; rxe_resp_check_length).
	if p.CheckPMTU(qp.pmtu) != nil {
		return errLength
	}
	// CHK_RESOURCE: READ, atomics, FLUSH and ATOMIC WRITE need a responder
	// resource; max_dest_rd_atomic 0 accepts none (rxe check_resource).
	if len(r.resources) == 0 && (p.Is(wire.MaskRead) || p.Is(wire.MaskAtomic) ||
		p.Is(wire.MaskFlush) || p.Is(wire.MaskAtomicWrite)) {
		return errTooManyRdAtomic
	}
	switch {
	case p.Is(wire.MaskSend):
		return r.sendLocked(qp, p, out)
	case p.Is(wire.MaskWrite):
		return r.writeLocked(qp, p, out)
	case p.Is(wire.MaskRead):
		return r.readLocked(qp, p, out)
	case p.Is(wire.MaskAtomic):
		return r.atomicLocked(qp, p, out)
	case p.Is(wire.MaskFlush):
		return r.flushLocked(qp, p, out)
	case p.Is(wire.MaskAtomicWrite):
		return r.atomicWriteLocked(qp, p, out)
	}
	return errUnsupportedOpcode
}

// flushAccess returns the rights a FLUSH of placement type typ needs.
func flushAccess(typ uint8) ibv.Access {
	var a ibv.Access
	if typ&wire.FlushGlobal != 0 {
		a |= ibv.AccessFlushGlobal
	}
	if typ&wire.FlushPersistent != 0 {
		a |= ibv.AccessFlushPersistent
	}
	return a
}

func (r *responder) opSeqOK(p *wire.Packet) bool {
	if r.inMsg {
		return p.Is(r.msgKind) && !p.Is(wire.MaskStart)
	}
	return p.Is(wire.MaskStart)
}

// takeWQELocked gets the receive WQE a SEND or WRITE_WITH_IMM consumes.
func (r *responder) takeWQELocked(qp *QP) bool {
	if r.haveWQE {
		return true
	}
	if !qp.cfg.RQ.Take(&r.wqe) {
		return false
	}
	r.haveWQE, r.recvOff = true, 0
	return true
}

func (r *responder) sendLocked(qp *QP, p *wire.Packet, out transport.Output) respErr {
	if e := r.placeSendLocked(qp, p); e != respOK {
		return e
	}
	r.acceptLocked(qp, p, out)
	return respOK
}

// placeSendLocked places a SEND packet's payload into the receive WQE,
// taking one at the first packet, and completes the WQE at the last (rxe
// check_resource, send_data_in, do_complete). RC and UC share it.
func (r *responder) placeSendLocked(qp *QP, p *wire.Packet) respErr {
	data := p.Payload
	if p.Is(wire.MaskStart) {
		if qp.cfg.TM != nil {
			// A tag-matching SRQ: the one branch the TM path costs others.
			var e respErr
			if data, e = r.startTMLocked(qp, p); e != respOK {
				return e
			}
			if !r.haveWQE {
				// A matched RNDV request: the rendezvous took it over.
				r.inMsg, r.msgKind = false, wire.MaskSend
				return respOK
			}
		} else if !r.takeWQELocked(qp) {
			// No receive WQE: RNR NAK with the failed PSN (C9-133; rxe
			// check_resource).
			return errRNR
		}
	}
	if r.recvOff+uint64(len(data)) > r.wqe.Length {
		// The message overruns the receive buffer (rxe send_data_in);
		// a tagged buffer too small completes as IBV_WC_LOC_LEN_ERR, as
		// mlx5 reports it (handle_tag_matching).
		return errRecvLength
	}
	if err := qp.cfg.Mem.Scatter(qp.cfg.PD, r.wqe.SGList, r.recvOff, data); err != nil {
		// A receive WQE the MR table refuses (rxe send_data_in).
		return errMalformedWQE
	}
	r.recvOff += uint64(len(data))
	r.inMsg, r.msgKind = !p.Is(wire.MaskEnd), wire.MaskSend
	if p.Is(wire.MaskEnd) {
		qp.cfg.Counters.RDMARecvs.Add(1)
		if ie := p.IETH(); ie != nil {
			// SEND with Invalidate: once the message is placed, invalidate
			// the IETH's rkey, an MR or a type-2 window of this QP
			// (IBTA 9.4.1.2 / 10.6.5; rxe_resp.c invalidate_rkey); a
			// failure is class J.
			if err := qp.cfg.Mem.Invalidate(qp.cfg.PD, qp.cfg.QPN, ie.RKey()); err != nil {
				return errInvalidateRKey
			}
		}
		r.completeRecvLocked(qp, ibv.WCSuccess, p)
	}
	return respOK
}

func (r *responder) writeLocked(qp *QP, p *wire.Packet, out transport.Output) respErr {
	if reth := p.RETH(); reth != nil && reth.DMALen() > MaxMsgSize {
		return errLength
	}
	if e := r.placeWriteLocked(qp, p); e != respOK {
		return e
	}
	r.acceptLocked(qp, p, out)
	return respOK
}

// placeWriteLocked places a WRITE packet's payload into the target MR,
// resolving the RETH's range at the first packet, and completes a receive
// WQE for WRITE_WITH_IMM at the last (rxe check_rkey, write_data_in,
// do_complete). RC and UC share it.
func (r *responder) placeWriteLocked(qp *QP, p *wire.Packet) respErr {
	if reth := p.RETH(); reth != nil {
		// CHK_RKEY for the whole DMA range at the first packet (C9-88:
		// zero-length writes skip the key check; mem.Remote does that).
		data, err := qp.cfg.Mem.RemoteV(qp.cfg.PD, qp.cfg.QPN, reth.RKey(), reth.VA(), reth.DMALen(), ibv.AccessRemoteWrite, r.wrData[:0])
		if err != nil {
			return remoteErr(err)
		}
		r.wrData, r.wrOff, r.wrLeft, r.wrLen = data, 0, int(reth.DMALen()), reth.DMALen()
	}
	// The payload must fit what the RETH announced and the last packet
	// must end it exactly (rxe_resp_check_length).
	n := len(p.Payload)
	if n > r.wrLeft || (p.Is(wire.MaskEnd) && n != r.wrLeft) {
		return errLength
	}
	if p.Is(wire.MaskImmediate) && !r.takeWQELocked(qp) {
		return errRNR
	}
	r.wrData.writeAt(r.wrOff, p.Payload)
	r.wrOff += n
	r.wrLeft -= n
	r.inMsg, r.msgKind = !p.Is(wire.MaskEnd), wire.MaskWrite
	if p.Is(wire.MaskImmediate) {
		r.completeRecvLocked(qp, ibv.WCSuccess, p)
	}
	return respOK
}

func (r *responder) readLocked(qp *QP, p *wire.Packet, out transport.Output) respErr {
	psn := p.PSN()
	reth := p.RETH()
	if reth.DMALen() > MaxMsgSize {
		return errLength
	}
	data, err := qp.cfg.Mem.RemoteV(qp.cfg.PD, qp.cfg.QPN, reth.RKey(), reth.VA(), reth.DMALen(), ibv.AccessRemoteRead, r.replyBuf[:0])
	if err != nil {
		return remoteErr(err)
	}
	r.replyBuf = data
	npkts := max((reth.DMALen()+uint32(qp.pmtu)-1)/uint32(qp.pmtu), 1)
	res := r.newResource()
	*res = resource{kind: resRead, firstPSN: psn, lastPSN: psn.Add(npkts - 1),
		va: reth.VA(), rkey: reth.RKey(), length: reth.DMALen()}
	r.flushAckLocked(qp, out)
	r.reply = readReply{active: true, psn: psn, data: data, left: int(reth.DMALen()), first: true}
	r.msn++ // at execution of a READ (C9-148)
	r.psn = psn.Add(npkts)
	return respOK
}

func (r *responder) atomicLocked(qp *QP, p *wire.Packet, out transport.Output) respErr {
	psn := p.PSN()
	a := p.AtomicETH()
	if a.VA()&7 != 0 {
		// Misaligned atomic: invalid request (C9-128).
		return errMisalignedAtomic
	}
	b, err := qp.cfg.Mem.Remote(qp.cfg.PD, qp.cfg.QPN, a.RKey(), a.VA(), 8, ibv.AccessRemoteAtomic)
	if err != nil {
		return remoteErr(err)
	}
	var orig uint64
	if p.Opcode.Op() == wire.RCCompareSwap.Op() {
		orig = qp.cfg.Mem.CompareSwap(b, a.Compare(), a.SwapAdd())
	} else {
		orig = qp.cfg.Mem.FetchAdd(b, a.SwapAdd())
	}
	res := r.newResource()
	*res = resource{kind: resAtomic, firstPSN: psn, lastPSN: psn, va: a.VA(), rkey: a.RKey(), orig: orig, opcode: p.Opcode}
	r.msn++
	r.psn = psn.Next()
	r.flushAckLocked(qp, out)
	r.sendAtomicAckLocked(qp, out, psn, orig)
	return respOK
}

// flushLocked executes a FLUSH (IBA A19.4.4; rxe_resp.c process_flush):
// the rkey must grant the placement types asked for, over the RETH range
// or, with selectivity "MR", the whole region (mem.Table.Flush). softnic's
// memory is ordinary memory, visible to every reader once written, so a
// valid FLUSH has nothing further to do. It takes a responder resource
// so that a duplicate is answered again without re-executing (oA19-28),
// counts as a message (MSN), occupies one PSN, and is answered by a
// zero-length RDMA READ RESPONSE ONLY.
func (r *responder) flushLocked(qp *QP, p *wire.Packet, out transport.Output) respErr {
	psn := p.PSN()
	f, reth := p.FETH(), p.RETH()
	err := qp.cfg.Mem.Flush(qp.cfg.PD, qp.cfg.QPN, reth.RKey(), reth.VA(), reth.DMALen(),
		flushAccess(f.PlacementType()), f.Selectivity())
	if err != nil {
		// A placement type or selectivity the IBA does not define is an
		// invalid request; a key that does not grant the flush a remote
		// access error.
		return remoteErr(err)
	}
	res := r.newResource()
	*res = resource{kind: resFlush, firstPSN: psn, lastPSN: psn, va: reth.VA(), rkey: reth.RKey(),
		length: reth.DMALen(), opcode: p.Opcode}
	r.msn++
	r.psn = psn.Next()
	r.flushAckLocked(qp, out)
	r.sendReadRespAckLocked(qp, out, psn)
	return respOK
}

// atomicWriteLocked executes an ATOMIC WRITE (IBA A19.4.2; rxe_resp.c
// atomic_write_reply): the RETH must announce exactly the 8 bytes carried
// (rxe check_length: payload == resid), the rkey must grant REMOTE_WRITE
// and the address be 8-byte aligned (else Invalid Request). The 8 bytes
// are stored as one atomic store, a responder resource remembers the
// request so a duplicate is answered without storing again, and the
// answer is a zero-length RDMA READ RESPONSE ONLY.
func (r *responder) atomicWriteLocked(qp *QP, p *wire.Packet, out transport.Output) respErr {
	psn := p.PSN()
	reth := p.RETH()
	if reth.DMALen() != 8 {
		return errLength
	}
	b, err := qp.cfg.Mem.RemoteAtomic(qp.cfg.PD, qp.cfg.QPN, reth.RKey(), reth.VA(), ibv.AccessRemoteWrite)
	if err != nil {
		return remoteErr(err)
	}
	// rxe stores the payload's u64 as loaded (native order): the memory
	// receives the payload bytes unchanged.
	qp.cfg.Mem.AtomicWrite(b, binary.NativeEndian.Uint64(p.Payload))
	res := r.newResource()
	*res = resource{kind: resAtomicWrite, firstPSN: psn, lastPSN: psn, va: reth.VA(), rkey: reth.RKey(),
		length: 8, opcode: p.Opcode}
	r.msn++
	r.psn = psn.Next()
	r.flushAckLocked(qp, out)
	r.sendReadRespAckLocked(qp, out, psn)
	return respOK
}

// sendReadRespAckLocked answers a FLUSH or ATOMIC WRITE at psn with a
// zero-length RDMA READ RESPONSE ONLY carrying an ACK AETH (rxe_resp.c
// send_read_response_ack).
func (r *responder) sendReadRespAckLocked(qp *QP, out transport.Output, psn wire.PSN) {
	h := wire.Headers{}
	h.BTH.Opcode = wire.RCReadResponseOnly
	h.BTH.PSN = psn
	h.AETH = wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: r.msn & wire.QPNMask}
	b, n := qp.startPacket(out, &h)
	qp.finishPacket(out, b, n, 0)
}

func (r *responder) newResource() *resource {
	res := &r.resources[r.nextRes]
	r.nextRes = (r.nextRes + 1) % len(r.resources)
	return res
}

// acceptLocked finishes an executed SEND or WRITE packet: the expected
// PSN moves on, MSN counts completed messages, and an AckReq packet is
// acknowledged (coalesced with later ones of the same pass).
func (r *responder) acceptLocked(qp *QP, p *wire.Packet, out transport.Output) {
	if p.Is(wire.MaskEnd) {
		r.msn++
	}
	r.psn = p.PSN().Next()
	if !qp.isRC() || !p.AckReq() {
		return
	}
	r.deferAckLocked(qp, p.PSN())
}

// deferAckLocked makes the pass's coalesced ACK acknowledge psn, the
// latest PSN the responder has accepted; flushAckLocked sends it. An ACK
// it replaces counts as deferred (ack_deferred), an AckReq packet's or a
// duplicate's (duplicateLocked) alike.
func (r *responder) deferAckLocked(qp *QP, psn wire.PSN) {
	if r.ackPending {
		qp.cfg.Counters.AckDeferred.Add(1)
	}
	r.ackPending, r.ackPSN = true, psn
}

// flushAckLocked sends the pending coalesced ACK, if any.
func (r *responder) flushAckLocked(qp *QP, out transport.Output) {
	if !r.ackPending {
		return
	}
	r.ackPending = false
	r.sendAckLocked(qp, out, wire.AckUnlimited, r.ackPSN)
}

func (r *responder) sendAckLocked(qp *QP, out transport.Output, syn wire.Syndrome, psn wire.PSN) {
	h := wire.Headers{}
	h.BTH.Opcode = wire.RCAck
	h.BTH.PSN = psn
	h.AETH = wire.AETHFields{Syndrome: syn, MSN: r.msn & wire.QPNMask}
	b, n := qp.startPacket(out, &h)
	qp.finishPacket(out, b, n, 0)
}

func (r *responder) sendAtomicAckLocked(qp *QP, out transport.Output, psn wire.PSN, orig uint64) {
	h := wire.Headers{}
	h.BTH.Opcode = wire.RCAtomicAck
	h.BTH.PSN = psn
	h.AETH = wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: r.msn & wire.QPNMask}
	h.AtomicAckETH.Orig = orig
	b, n := qp.startPacket(out, &h)
	qp.finishPacket(out, b, n, 0)
}

// nakGapLocked NAKs the gap at the expected PSN with a PSN sequence error,
// once a gap (C9-109; rxe check_psn: sent_psn_nak): an out-of-sequence
// request that could not be held (errPSNOutOfSeq), or the reorder window
// passing with the gap still open (reorderTimerLocked). The next request
// at the expected PSN opens the way for the next gap's (checkLocked).
func (r *responder) nakGapLocked(qp *QP, out transport.Output) {
	if r.sentNak {
		return
	}
	r.sentNak = true
	r.nakLocked(qp, out, wire.NakPSNSequence, r.psn)
}

// nakLocked sends a NAK or RNR NAK now, after any pending ACK.
func (r *responder) nakLocked(qp *QP, out transport.Output, syn wire.Syndrome, psn wire.PSN) {
	if syn != wire.NakPSNSequence {
		// The requester goes back to psn, or the QP to ERR: what was
		// held is sent again or never executed. A PSN sequence NAK
		// keeps it (holdLocked), but for the READs.
		r.dropHeldLocked(qp)
	} else {
		r.dropHeldReadsLocked()
	}
	r.flushAckLocked(qp, out)
	r.sendAckLocked(qp, out, syn, psn)
}

// completeRecvLocked completes the receive WQE in use. p is the packet
// that ended the message (for immediate data, invalidation and SE).
func (r *responder) completeRecvLocked(qp *QP, st ibv.WCStatus, p *wire.Packet) {
	if !r.haveWQE {
		return
	}
	r.haveWQE = false
	wc := &qp.wc // a field, so the interface call does not move it to the heap
	*wc = ibv.WorkCompletion{
		WRID:   r.wqe.WRID,
		Status: st,
		Opcode: ibv.WCRecv,
		QPNum:  qp.cfg.QPN,
		SrcQP:  qp.attr.DestQPN,
	}
	solicited := false
	if st == ibv.WCSuccess && p != nil {
		wc.ByteLen = uint32(r.recvOff)
		if p.Is(wire.MaskWrite) {
			// RECV_RDMA_WITH_IMM reports the WRITE's length (rxe do_complete).
			wc.Opcode = ibv.WCRecvRDMAWithImm
			wc.ByteLen = r.wrLen
		}
		if im := p.ImmDt(); im != nil {
			wc.Flags |= ibv.WCWithImm
			wc.Imm = im.Imm()
		}
		if ie := p.IETH(); ie != nil {
			wc.Flags |= ibv.WCWithInv
			wc.Imm = ie.RKey()
		}
		solicited = p.SE()
	}
	if r.tm.kind != tmNone {
		r.completeTMLocked(qp, wc)
	}
	if !qp.cfg.RecvCQ.Push(wc, solicited) {
		r.errorLocked(qp, nil, errCQOverflow, nil)
	}
}

// duplicateLocked answers a request whose PSN is before the expected one
// (IBTA 9.7.5.1.5; rxe_resp.c duplicate_request): SEND and WRITE are
// acknowledged again without re-execution (C9-105), READ is replayed from
// the responder resource, an atomic's stored result is sent again
// without executing it twice.
//
// The ACK of a duplicate SEND or WRITE is the pass's coalesced ACK
// (IBTA 9.7.5.1.3): every duplicate is acknowledged by the PSN before the
// expected one with the current MSN, so the duplicates of one pass (and
// the in-order packets among them) need one ACK between them, not one
// each. Deliberately unlike rxe, which sends one per duplicate
// (duplicate_request: send_ack for every SEND and WRITE): a requester
// that timed out sends its whole window again (rc.MaxUnackedPSNs, 512
// packets), and one identical ACK for each of them was as many packets
// more through both hosts, each read and dropped by the requester
// (rcvd_dropped_pkts{reason="response"}), when the ACK of the window's
// end was what it needed.
func (r *responder) duplicateLocked(qp *QP, p *wire.Packet, out transport.Output) {
	psn := p.PSN()
	switch {
	case p.Is(wire.MaskSend) || p.Is(wire.MaskWrite):
		r.deferAckLocked(qp, r.psn.Sub(1))
	case p.Is(wire.MaskRead):
		res := r.findResource(resRead, psn)
		if res == nil {
			return // not found: silently dropped (class D)
		}
		reth := p.RETH()
		off := reth.VA() - res.va
		if reth.VA() < res.va || reth.RKey() != res.rkey || off+uint64(reth.DMALen()) > uint64(res.length) ||
			off != uint64(psn.Diff(res.firstPSN))*uint64(qp.pmtu) {
			return // not the same READ or a sub-range of it
		}
		data, err := qp.cfg.Mem.RemoteV(qp.cfg.PD, qp.cfg.QPN, reth.RKey(), reth.VA(), reth.DMALen(), ibv.AccessRemoteRead, r.replyBuf[:0])
		if err != nil {
			return
		}
		r.replyBuf = data
		r.flushAckLocked(qp, out)
		// A replay from the READ's first PSN is a new reply (FIRST/ONLY);
		// one from inside it continues the original reply with
		// MIDDLE/LAST, as rxe's read_reply does in
		// rdatm_res_state_replay and as an rxe requester demands (its
		// check_ack takes a FIRST only at the WQE's first PSN).
		r.reply = readReply{active: true, psn: psn, data: data, left: int(reth.DMALen()), first: psn == res.firstPSN}
	case p.Is(wire.MaskAtomic):
		res := r.findResource(resAtomic, psn)
		if res == nil || res.firstPSN != psn {
			return
		}
		r.flushAckLocked(qp, out)
		r.sendAtomicAckLocked(qp, out, psn, res.orig)
	case p.Is(wire.MaskFlush), p.Is(wire.MaskAtomicWrite):
		// Replayed from the resource, never executed again: a late copy
		// of an ATOMIC WRITE must not overwrite what later requests
		// stored (oA19-28, oA19-29; rxe duplicate_request res->replay).
		k := resFlush
		if p.Is(wire.MaskAtomicWrite) {
			k = resAtomicWrite
		}
		res := r.findResource(k, psn)
		if res == nil || res.firstPSN != psn || res.rkey != p.RETH().RKey() || res.va != p.RETH().VA() {
			return // not found: silently dropped (class D)
		}
		r.flushAckLocked(qp, out)
		r.sendReadRespAckLocked(qp, out, psn)
	}
}

func (r *responder) findResource(k resKind, psn wire.PSN) *resource {
	for i := range r.resources {
		res := &r.resources[i]
		if res.kind == k && !psn.Before(res.firstPSN) && !psn.After(res.lastPSN) {
			return res
		}
	}
	return nil
}

// readReplyLocked sends up to budget packets of the READ reply in
// progress and reports whether any remain to send at once (rxe_resp.c
// read_reply). With congestion control, the responses are paced as the
// requests are (requesterLocked): the responder is the sender of a READ's
// data, so a CNP for the QP (its peer's notification point answering
// CE-marked responses) slows its replies too (DCQCN, Zhu et al. §3: the
// reaction point is the sender of the data). A reply over the QP's rate
// stops, paced is set, and the pacer's timer wakes the QP.
func (r *responder) readReplyLocked(qp *QP, out transport.Output, now time.Time) bool {
	rp := &r.reply
	rp.paced = false
	for sent := 0; rp.active && sent < budget; sent++ {
		if qp.rp != nil {
			if d := qp.rp.Wait(now); d > 0 {
				qp.pace.Arm(qp.cfg.Clock, d, qp.cfg.Waker)
				rp.paced = true
				return false
			}
		}
		n := min(rp.left, qp.pmtu)
		last := n == rp.left
		h := wire.Headers{}
		switch {
		case rp.first && last:
			h.BTH.Opcode = wire.RCReadResponseOnly
		case rp.first:
			h.BTH.Opcode = wire.RCReadResponseFirst
		case last:
			h.BTH.Opcode = wire.RCReadResponseLast
		default:
			h.BTH.Opcode = wire.RCReadResponseMiddle
		}
		h.BTH.PSN = rp.psn
		h.AETH = wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: r.msn & wire.QPNMask}
		b, hdr := qp.startPacket(out, &h)
		// The response's payload goes from the MR where it lies when it
		// can (splitOutput): memory the application may write meanwhile,
		// as it may under a NIC's DMA read; a packet whose bytes changed
		// after its ICRC was computed is dropped by the requester, which
		// reads again.
		var view []byte
		so := splitOutput(out, n)
		if so != nil {
			view = rp.data.viewAt(rp.off, n)
		}
		if view != nil {
			qp.finishSplitPacket(so, b, hdr, view)
		} else {
			rp.data.readAt(rp.off, b[hdr:hdr+n])
			qp.finishPacket(out, b, hdr, n)
		}
		if qp.rp != nil {
			qp.rp.Sent(qp.encap.HeaderLen()+wire.PacketLen(h.BTH.Opcode, n), now)
		}
		rp.off += n
		rp.left -= n
		rp.psn = rp.psn.Next()
		rp.first = false
		if last {
			*rp = readReply{}
		}
	}
	return rp.active
}

// ucRequestLocked is the UC responder: no ACKs or NAKs; a PSN gap or an
// out-of-sequence opcode drops the message in progress and everything up
// to the next FIRST/ONLY, and a dropped message consumes no receive WQE
// (IBTA 9.8.3; rxe_resp.c check_psn / check_op_seq for UC). Data is
// placed as on RC (placeSendLocked, placeWriteLocked); an error drops the
// message (ucDropLocked).
func (r *responder) ucRequestLocked(qp *QP, p *wire.Packet) {
	if e := r.ucCheckLocked(qp, p); e != respOK {
		r.ucDropLocked(qp, e)
	}
}

func (r *responder) ucCheckLocked(qp *QP, p *wire.Packet) respErr {
	psn := p.PSN()
	if p.Is(wire.MaskStart) {
		r.abortUCLocked()
		r.psn = psn
	} else if r.drop || psn != r.psn {
		r.psn = psn.Next()
		return errPSNOutOfSeq
	} else if !r.inMsg || !p.Is(r.msgKind) {
		r.psn = psn.Next()
		return errMissingOpcode
	}
	if p.CheckPMTU(qp.pmtu) != nil {
		return errLength
	}
	var e respErr
	switch {
	case p.Is(wire.MaskSend):
		e = r.placeSendLocked(qp, p)
	case p.Is(wire.MaskWrite):
		if p.RETH() != nil && qp.attr.AccessFlags&ibv.AccessRemoteWrite == 0 {
			return errUnsupportedOpcode // rxe check_op_valid: UC drops it
		}
		e = r.placeWriteLocked(qp, p)
	default:
		qp.cfg.Counters.DropNoQP.Add(1)
		return respOK
	}
	if e != respOK {
		return e
	}
	r.drop = false
	var discard nopOutput
	r.acceptLocked(qp, p, &discard)
	return respOK
}

// ucDropLocked drops the UC message in progress for error e, counting it
// as respRules says, and everything up to the next FIRST/ONLY (rxe
// drop_msg; classes D and D1).
func (r *responder) ucDropLocked(qp *QP, e respErr) {
	count := respRules[e].uc
	if count == nil {
		count = dropUCMessage // an RC-only error: the engine lets no RC opcode reach UC
	}
	count(qp.cfg.Counters).Add(1)
	r.abortUCLocked()
	r.drop = true
}

// abortUCLocked abandons a partly received UC message; its receive WQE
// stays with the QP for the next message.
func (r *responder) abortUCLocked() {
	r.inMsg = false
	r.recvOff = 0
	r.wrOff, r.wrLeft = 0, 0
}

// nopOutput is an Output for paths that never send.
type nopOutput struct{}

func (nopOutput) Buf() []byte           { return nil }
func (nopOutput) Send(int, *wire.Encap) {}
