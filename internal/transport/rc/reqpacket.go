package rc

// Building the requester's packets: opcodes, headers and payload of each
// request packet (rxe_req.c next_opcode, init_req_packet, finish_packet).

import (
	"syscall"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

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
func opcodeFor(class wire.Opcode, op ibv.WROpcode, first, last bool) wire.Opcode {
	ops := &writeOps
	switch op {
	case ibv.WRSend:
		ops = &sendOps
	case ibv.WRSendWithImm:
		ops = &sendImmOps
	case ibv.WRSendWithInv:
		ops = &sendInvOps
	case ibv.WRRDMAWriteWithImm:
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

// sendPacketLocked sends the next packet of w at time now and advances
// the requester.
func (qp *QP) sendPacketLocked(w *sendWQE, out transport.Output, now time.Time) {
	r := &qp.req
	readEnd := wire.PSN(0)
	if w.kind == kindRead {
		// A READ asks for its responses not yet received, with one
		// request from the first missing to the last missing (a first
		// READ: the whole; after a retry: what the completer did not
		// receive, IBTA 9.7.5.1.5; readRange).
		end := w.lastPSN.Next()
		r.psn = qp.nextMissingLocked(r.psn, end)
		if r.psn == end {
			// Every response has come already; the completer completes it.
			w.state = wqePending
			r.idx++
			return
		}
		readEnd = qp.lastMissingLocked(r.psn, end).Next()
	}
	var h wire.Headers
	payload, last := qp.requestHeaders(w, r.psn, readEnd, &h)
	// AckReq on the last packet of every RC message and periodically in
	// long ones (rxe_req.c: RXE_MAX_PKT_PER_ACK), and at least twice a
	// window when losses made the window smaller than that: the
	// requester stops at the window's edge, and only an ACK lets it go
	// on; so at the edge of its share of the peer's budget
	// (atFlightEdgeLocked). Never on UC.
	if qp.isRC() {
		r.noack++
		if last || r.noack > maxPktPerAck || int32(r.noack) >= qp.comp.win/2 || qp.atFlightEdgeLocked() {
			h.BTH.AckReq = true
			r.noack = 0
			if !r.rttOn && !qp.comp.retrying && !r.psn.Before(r.highPSN) && w.kind != kindRead {
				// A first transmission: time its round trip (a READ
				// times its own, completer.timeReadLocked).
				r.rttPSN, r.rttAt, r.rttOn = r.psn, now, true
			}
		}
	}
	if err := qp.emitRequest(w, &h, payload, out); err != nil {
		qp.localErrorLocked(w, ibv.WCLocProtErr)
		return
	}
	if r.psn.Before(r.highPSN) {
		w.askedAt = now // sent again (completer.askedLongAgo)
	} else if w.kind == kindRead {
		w.sentAt = now // timed to its first response (completer.timeReadLocked)
	}
	if qp.rp != nil {
		qp.rp.Sent(qp.encap.HeaderLen()+wire.PacketLen(h.BTH.Opcode, int(payload)), now)
	}
	if !qp.isRC() {
		qp.ucSent = append(qp.ucSent, r.idx) // ucFlushLocked learns its fate
	}

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
	if w.kind == kindRead && w.lastPSN.Next().After(r.highPSN) {
		r.highPSN = w.lastPSN.Next() // a READ's responses are all outstanding
	}
	if qp.isRC() {
		// Every request arms the retransmit timer if it is not running
		// (rxe_req.c: mod_timer when !timer_pending); only progress pushes
		// its deadline out.
		qp.armRetryLocked(now)
		qp.armProbeLocked(now)
	}
	if !last {
		return
	}
	w.state = wqePending
	r.idx++
	if w.kind == kindSend {
		qp.cfg.Counters.RDMASends.Add(1)
	}
	// UC has no acknowledgements: a WQE completes once its packets are
	// sent (rxe_net.c rxe_xmit_packet marks a UC WQE done when the link
	// took its last packet), after the pass writes them
	// (ucFlushLocked).
}

// ucFlushLocked writes the packets the pass queued for a UC QP and
// learns what the link did with them (transport.Flusher), then completes
// in order the WQEs sent whole, as rxe_xmit_packet completes a UC WQE
// once rxe_send took its last packet. A packet the link refused because
// the destination cannot be reached at all (transport.Unroutable: no
// route, the interface down, the link closed) fails its WQE with
// IBV_WC_LOC_QP_OP_ERR and moves the QP to ERR, as rxe_requester does
// when rxe_prepare finds no route (finish_packet's error) or rxe_send
// fails with other than -EAGAIN. Any other refusal (ENOBUFS, EMSGSIZE)
// loses the packet as the wire would: UC does not resend, and the WQE
// completes. An Output that cannot say (not a Flusher) has taken every
// packet.
func (qp *QP) ucFlushLocked(out transport.Output) {
	if len(qp.ucSent) > 0 {
		var errs []syscall.Errno
		if f, ok := out.(transport.Flusher); ok {
			errs = f.Flush()
		}
		for i, idx := range qp.ucSent {
			if i < len(errs) && transport.Unroutable(errs[i]) && qp.sq.valid(idx) {
				if w := qp.sq.at(idx); w.sendErr == 0 {
					w.sendErr = errs[i]
				}
			}
		}
		qp.ucSent = qp.ucSent[:0]
	}
	for i := qp.sq.headIdx; i < qp.req.idx && qp.sq.valid(i); i++ {
		w := qp.sq.at(i)
		if w.state == wqeDone {
			continue
		}
		if w.state != wqePending {
			break
		}
		switch {
		case w.kind == kindLocal:
			if !qp.completeLocalLocked(w) {
				return
			}
		case w.sendErr != 0:
			qp.localErrorLocked(w, ibv.WCLocQPOpErr)
			return
		default:
			qp.completeSendLocked(w, false)
		}
	}
	qp.retireLocked()
}

// lastMissingLocked returns the last PSN from psn up to end whose response
// the completer has not received (psn itself when none is).
func (qp *QP) lastMissingLocked(psn, end wire.PSN) wire.PSN {
	c := &qp.comp
	for q := end.Sub(1); q.After(psn); q = q.Sub(1) {
		if !c.ahead.has(c.psn, q) {
			return q
		}
	}
	return psn
}

// nextMissingLocked returns the first PSN from psn up to end whose
// response the completer has not received, or end.
func (qp *QP) nextMissingLocked(psn, end wire.PSN) wire.PSN {
	c := &qp.comp
	for psn.Before(end) && c.ahead.has(c.psn, psn) {
		psn = psn.Next()
	}
	return psn
}

// sendRequestLocked sends again the request of w's responses from PSN psn
// up to readEnd (a READ's run; the request itself for an atomic, FLUSH or
// ATOMIC WRITE), leaving the requester where it is: the completer's
// re-ask of lost responses (reaskRequestsLocked).
func (qp *QP) sendRequestLocked(w *sendWQE, psn, readEnd wire.PSN, out transport.Output, now time.Time) {
	var h wire.Headers
	payload, _ := qp.requestHeaders(w, psn, readEnd, &h)
	h.BTH.AckReq = true
	if err := qp.emitRequest(w, &h, payload, out); err != nil {
		qp.localErrorLocked(w, ibv.WCLocProtErr)
		return
	}
	w.askedAt = now
	qp.cfg.Counters.Reasked.Add(1)
}

// requestHeaders fills h with the headers of w's request packet at PSN
// psn (for a READ, the request for its responses psn..readEnd) and
// returns its payload's length and whether it is the message's last
// packet.
func (qp *QP) requestHeaders(w *sendWQE, psn, readEnd wire.PSN, h *wire.Headers) (payload uint32, last bool) {
	class := qp.class
	h.BTH.PSN = psn
	// The XRCETH goes into every request packet of an XRC_SEND QP,
	// middles included (IBTA 9.3.7); PutHeaders writes it only where the
	// opcode has one, so other QPs pay nothing for it.
	h.XRCETH.XRCSRQ = w.wr.RemoteSRQN & wire.QPNMask
	last = true
	switch w.kind {
	case kindSend, kindWrite:
		off := qp.offsetOf(w, psn)
		first := off == 0
		payload = min(w.length-off, uint32(qp.pmtu))
		last = off+payload == w.length
		h.BTH.Opcode = opcodeFor(class, w.wr.Opcode, first, last)
		if w.kind == kindWrite && first {
			h.RETH = wire.RETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: w.length}
		}
		if last {
			h.Imm = w.wr.Imm
			h.InvRKey = w.wr.InvRKey
			// SE only on the last packet of a SEND or WRITE_WITH_IMM (IBTA 9.2.3).
			h.BTH.SE = w.wr.Flags&ibv.SendSolicited != 0 && h.BTH.Opcode.Is(wire.MaskSolicited)
		}
	case kindRead:
		off := uint32(psn.Diff(w.firstPSN)) * uint32(qp.pmtu)
		n := min(uint32(readEnd.Diff(psn))*uint32(qp.pmtu), w.length-off)
		h.BTH.Opcode = wire.RCReadRequest
		h.RETH = wire.RETHFields{VA: w.wr.RemoteAddr + uint64(off), RKey: w.wr.RKey, DMALen: n}
	case kindAtomic:
		h.AtomicETH = wire.AtomicETHFields{VA: w.wr.RemoteAddr, RKey: w.wr.RKey}
		if w.wr.Opcode == ibv.WRAtomicCmpAndSwp {
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
	return payload, last
}

// offsetOf returns the offset in w's message of the payload of its
// packet at PSN psn.
func (qp *QP) offsetOf(w *sendWQE, psn wire.PSN) uint32 {
	return uint32(psn.Diff(w.firstPSN)) * uint32(qp.pmtu)
}

// emitRequest builds the packet of h (PSN h.BTH.PSN) and its payload
// bytes of w into out, from the application's memory where they lie when
// it can (payloadView).
func (qp *QP) emitRequest(w *sendWQE, h *wire.Headers, payload uint32, out transport.Output) error {
	b, hdr := qp.startPacket(out, h)
	off := qp.offsetOf(w, h.BTH.PSN)
	so, view, err := qp.payloadView(w, out, off, payload)
	if err == nil && view == nil && payload > 0 {
		err = qp.gather(w, b[hdr:hdr+int(payload)], off)
	}
	if err != nil {
		return err
	}
	if view != nil {
		qp.finishSplitPacket(so, b, hdr, view)
	} else {
		qp.finishPacket(out, b, hdr, int(payload))
	}
	return nil
}

// minSplitPayload is the smallest payload a request packet (or READ
// response) sends from the application's memory where it lies
// (transport.SplitOutput) rather than copied into the packet. Not tuned:
// copying a small payload costs less than two more iovecs for the kernel
// to walk; large ones are where the copy showed in profiles
// (docs/performance.md, "rc.minSplitPayload: why 512 bytes").
const minSplitPayload = 512

// payloadView returns the next n bytes of w's message where they lie in
// the application's memory, and out as the SplitOutput to send them
// with, when the packet can be sent from there: an
// RC (or XRC) QP, whose WQE completes only once the packet is
// acknowledged, so the memory stays as it is until the packet is written
// (a UC WQE completes when sent, before the batch is written, and the
// application could reuse its buffer under the send); an Output that
// sends split datagrams; no inline data; n at least minSplitPayload; the
// bytes in one piece (mem.Table.ViewAt). A nil view: gather a copy. An
// error is a gather's (a refused SGE).
func (qp *QP) payloadView(w *sendWQE, out transport.Output, off, n uint32) (transport.SplitOutput, []byte, error) {
	if !qp.isRC() || w.wr.InlineData != nil || (w.kind != kindSend && w.kind != kindWrite) {
		return nil, nil, nil
	}
	so := splitOutput(out, int(n))
	if so == nil {
		return nil, nil, nil
	}
	b, _, err := qp.cfg.Mem.ViewAt(qp.cfg.PD, w.sgl, uint64(off), int(n))
	return so, b, err
}

// splitOutput returns out as a SplitOutput when a packet with n payload
// bytes goes to it with its payload where it lies: out is one that says
// so, and n is at least minSplitPayload; nil otherwise.
func splitOutput(out transport.Output, n int) transport.SplitOutput {
	if n < minSplitPayload {
		return nil
	}
	if so, ok := out.(transport.SplitOutput); ok && so.SendsSplit() {
		return so
	}
	return nil
}

// gather copies the WQE's message bytes [off, off+len(dst)) into dst from
// its inline data or its SGEs, checking each SGE against the MR table.
func (qp *QP) gather(w *sendWQE, dst []byte, off uint32) error {
	if w.wr.InlineData != nil {
		copy(dst, w.inline[off:])
		return nil
	}
	return qp.cfg.Mem.GatherAt(qp.cfg.PD, w.sgl, uint64(off), dst)
}
