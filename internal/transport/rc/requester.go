package rc

// The requester's loop: which WQE goes out next within the window, the
// initiator depth and fences, and the local operations it executes
// itself (rxe_req.c rxe_requester).

import (
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// requester is the send side (rxe_req.c).
type requester struct {
	idx       uint64   // next WQE to send from
	psn       wire.PSN // next PSN to send
	maxIdx    uint64   // one past the last WQE ever started (PSNs assigned)
	highPSN   wire.PSN // one past the highest PSN ever sent
	noack     int      // packets sent since the last AckReq
	rnrWait   bool     // waiting for the RNR timer
	needRetry bool
	// reaskPSN..reaskEnd are the PSNs whose lost responses the completer
	// asked to have re-asked (completer.reaskLocked); reaskPSN is where
	// the requester stands in them.
	reaskPSN, reaskEnd wire.PSN
	// rttPSN, sent at rttAt with AckReq, is the packet whose ACK gives
	// the next round-trip sample (completer.srtt); rttOn while one is
	// timed.
	rttPSN wire.PSN
	rttAt  time.Time
	rttOn  bool
}

// readRange: a READ whose responses are missing is asked again with one
// request, from its first missing response to the last missing one.
// IBTA 9.7.5.1.5 lets a requester ask again from any PSN of a READ's
// response, for the rest of its length or a part of it, but rxe's
// responder moves the READ's resource to each part asked for
// (rxe_resp.c duplicate_request: "Reset the resource, except length",
// va_org = iova) and from then on refuses a part that starts before it:
// a READ asked again from a PSN could never again be asked for an
// earlier one. So every request of a READ starts at its first missing
// response, which only moves forward; the responses between two missing
// ones come twice.
//
// reask adds the PSNs from..end to those whose missing responses the
// requester asks again. With none left to ask, from..end is the range
// as it is: the ends of an empty one are compared with nothing, for
// 24-bit PSNs compare only within half their space of each other, and an
// empty range at PSN 0 (a new QP's, or one a go-back-N emptied) made
// every PSN of the upper half come before its end: the range then
// stretched to the end of the space, and every READ was asked for again
// as soon as it was sent.
func (r *requester) reask(from, end wire.PSN) {
	if !r.reaskPSN.Before(r.reaskEnd) {
		r.reaskPSN, r.reaskEnd = from, end
		return
	}
	if from.Before(r.reaskPSN) {
		r.reaskPSN = from
	}
	if end.After(r.reaskEnd) {
		r.reaskEnd = end
	}
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
func (qp *QP) requesterLocked(out transport.Output, now time.Time) bool {
	if qp.state != ibv.QPStateRTS && qp.state != ibv.QPStateSQD {
		return false
	}
	// What the acknowledgements of this pass retired goes to the QPs
	// waiting for the peer's budget first (PeerBudget).
	qp.startFlightLocked()
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
	sent := qp.reaskRequestsLocked(out, now)
	for ; sent < budget; sent++ {
		if !qp.sq.valid(r.idx) {
			qp.checkDrainedLocked()
			return false
		}
		w := qp.sq.at(r.idx)
		if w.kind == kindLocal && w.state != wqePosted {
			// Executed already (a retry rewound past it): never twice. A
			// failed one stops the requester until the completer reaches it
			// and moves the QP to ERR (rxe_req.c req_error).
			if w.status != ibv.WCSuccess {
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
		if qp.isRC() && r.psn.Diff(qp.comp.psn) >= qp.windowLocked() {
			return false // window full (MaxUnackedPSNs, rxe's RXE_MAX_UNACKED_PSNS)
		}
		if qp.isRC() && !qp.takeFlightLocked(qp.packetEndLocked(w), min(r.psn.Diff(qp.comp.psn)+budget, qp.windowLocked())) {
			return false // the peer's budget is spent: the grant wakes the QP
		}
		if qp.rp != nil {
			if d := qp.rp.Wait(now); d > 0 {
				// Over its rate (congestion control): the QP waits for
				// its pacer's timer, and its processor runs others.
				qp.pace.Arm(qp.cfg.Clock, d, qp.cfg.Waker)
				qp.flight.keep = true
				return false
			}
		}
		qp.sendPacketLocked(w, out, now)
	}
	return qp.sq.valid(r.idx)
}

// packetEndLocked is the PSN after the next packet of w: a READ
// request's takes every PSN of its responses.
func (qp *QP) packetEndLocked(w *sendWQE) wire.PSN {
	if w.kind == kindRead {
		return w.lastPSN.Next()
	}
	return qp.req.psn.Next()
}

// reaskRequestsLocked sends again the requests of the responses the
// completer found lost (requester.reask): for a READ, one request from
// its first missing response to the last missing one asked for
// (readRange), and an atomic, FLUSH or ATOMIC WRITE request as it was
// (its response is replayed, never re-executed: C9-106, oA19-28). PSNs of SENDs and WRITEs are passed over: their
// acknowledgement is cumulative, and a lost one is resent by the go-back-N
// a NAK or the timer starts. It returns the packets it sent, at most
// budget.
func (qp *QP) reaskRequestsLocked(out transport.Output, now time.Time) int {
	r, c := &qp.req, &qp.comp
	sent := 0
	for sent < budget && r.reaskPSN.Before(r.reaskEnd) {
		h := r.reaskPSN
		if h.Before(c.psn) {
			h = c.psn
		}
		if !h.Before(r.reaskEnd) || !h.Before(r.psn) {
			// From r.psn on, a go-back-N under way (retryLocked) sends
			// the requests again by itself: asking here too would draw
			// each reply twice.
			break
		}
		_, w := qp.wqeAtLocked(h)
		switch {
		case w == nil:
			r.reaskPSN = r.reaskEnd
		case !w.needsResponse():
			r.reaskPSN = w.lastPSN.Next()
		case c.ahead.has(c.psn, h):
			r.reaskPSN = h.Next()
		default:
			end := w.lastPSN.Next()
			if r.reaskEnd.Before(end) {
				end = r.reaskEnd
			}
			from := h
			if w.kind == kindRead {
				// From the READ's first missing response to the last
				// missing one asked for, in one request (readRange).
				first := w.firstPSN
				if first.Before(c.psn) {
					first = c.psn
				}
				from = qp.nextMissingLocked(first, end)
				end = qp.lastMissingLocked(h, end).Next()
			} else {
				end = h.Next()
			}
			qp.sendRequestLocked(w, from, end, out, now)
			qp.armRetryLocked(now)
			r.reaskPSN = end
			sent++
		}
	}
	return sent
}

// windowLocked is how many PSNs past the oldest unacknowledged one the
// requester may send: MaxUnackedPSNs, less after losses
// (completer.lossLocked).
func (qp *QP) windowLocked() int32 { return qp.comp.win }

// canStartLocked decides whether WQE w may start now and assigns its PSNs.
func (qp *QP) canStartLocked(w *sendWQE) bool {
	r := &qp.req
	if w.state == wqePosted {
		// A WQE a retry rewound (index below maxIdx) is in flight, not
		// new: SQD lets it go out again (IBTA 10.3.1: WRs in progress
		// complete; rxe req_retry resets them to posted and sends them in
		// SQD too).
		if qp.state == ibv.QPStateSQD && r.idx >= r.maxIdx {
			qp.checkDrainedLocked()
			return false // SQD: finish what started, start nothing new
		}
		if w.wr.Flags&ibv.SendFence != 0 && qp.outstandingRdAtomicLocked() > 0 {
			return false // IBV_SEND_FENCE waits for prior READs and atomics
		}
		if w.wr.Opcode == ibv.WRLocalInv && !qp.allDoneBeforeLocked(r.idx) {
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
		w.sendOff, w.aheadSafe = 0, false
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
	fail := ibv.WCLocQPOpErr
	switch w.wr.Opcode {
	case ibv.WRLocalInv:
		// An MR or a type-2 window, told apart by the key's index
		// (rxe_invalidate_mr / rxe_invalidate_mw).
		err = tbl.Invalidate(pd, qpn, w.wr.InvRKey)
	case ibv.WRRegMR:
		mr, ok := w.reg.MR.(*mem.MR)
		if !ok {
			mr, err = tbl.MRByKey(w.reg.MRLKey)
		}
		if err == nil {
			err = tbl.RegFast(pd, mr, w.reg.Key, w.reg.IOVA, w.reg.Length, w.reg.Access)
		}
	case ibv.WRBindMW:
		fail = ibv.WCMWBindErr
		var mw *mem.MW
		if mw, err = tbl.MWByKey(w.bind.MWHandle); err == nil {
			b := &w.bind
			_, err = tbl.BindMW(mw, qpn, pd, b.MRLKey, b.Addr, b.Length, b.Access, b.NewRKey)
		}
	}
	w.state = wqePending
	w.status = ibv.WCSuccess
	if err != nil {
		w.status = fail
		qp.cfg.Counters.SendErr.Add(1)
	} else {
		qp.req.idx++
	}
	qp.completeLocalsLocked()
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

// startedLocked counts the WQEs the requester started and that have not
// completed: every WQE below maxIdx was started, including those a retry
// rewound to posted, and counts until completed (what SQD waits for,
// checkDrainedLocked, and what an application may wait for,
// RequestsInFlight).
func (qp *QP) startedLocked() int {
	k := 0
	for i := qp.sq.headIdx; i < qp.sq.tailIdx && i < qp.req.maxIdx; i++ {
		if qp.sq.at(i).state != wqeDone {
			k++
		}
	}
	return k
}

// checkDrainedLocked reports the SQ-drained event once the QP is in SQD
// and nothing it started is outstanding (IBTA 10.3.1 SQD; IBV_EVENT_SQ_DRAINED;
// startedLocked).
func (qp *QP) checkDrainedLocked() {
	if qp.state != ibv.QPStateSQD || qp.sqDrained {
		return
	}
	if qp.startedLocked() > 0 {
		return
	}
	qp.sqDrained = true
	if qp.attr.EnSQDAsyncNotify {
		qp.events.Add(ibv.EventSQDrained)
	}
}
