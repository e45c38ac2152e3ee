package rc

import (
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// completer handles acknowledgements and responses (rxe_comp.c).
type completer struct {
	psn      wire.PSN // oldest PSN not yet acknowledged or answered
	retryCnt uint8    // transport retries left; 7 is seven, not infinite
	rnrRetry uint8    // RNR retries left (7 = infinite)
	// retrying is set when a retry was started and nothing progressed
	// since; further NAKs then start no new retry (rxe comp.started_retry).
	retrying bool
}

// rnrTimeout is the RNR NAK timer table of IBTA 9.7.5.2.8 (Table 45):
// the delay a requester waits after an RNR NAK whose timer field is i.
// rxe's rnrnak_usec has 61410 for entry 25, a typo for 61440.
var rnrTimeout = [32]time.Duration{
	655360 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond,
	40 * time.Microsecond, 60 * time.Microsecond, 80 * time.Microsecond, 120 * time.Microsecond,
	160 * time.Microsecond, 240 * time.Microsecond, 320 * time.Microsecond, 480 * time.Microsecond,
	640 * time.Microsecond, 960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond,
	2560 * time.Microsecond, 3840 * time.Microsecond, 5120 * time.Microsecond, 7680 * time.Microsecond,
	10240 * time.Microsecond, 15360 * time.Microsecond, 20480 * time.Microsecond, 30720 * time.Microsecond,
	40960 * time.Microsecond, 61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond,
	163840 * time.Microsecond, 245760 * time.Microsecond, 327680 * time.Microsecond, 491520 * time.Microsecond,
}

// RNRTimeout returns the delay of RNR timer index i (0..31).
func RNRTimeout(i uint8) time.Duration { return rnrTimeout[i&31] }

// responseLocked processes one response packet, received in the pass at
// time now: ACK, NAK, READ response or atomic ACK.
func (c *completer) responseLocked(qp *QP, p *wire.Packet, now time.Time) {
	ctr := qp.cfg.Counters
	psn := p.PSN()
	// Only PSNs sent and not yet answered can be answered now; anything
	// else is a stale duplicate or a ghost (rxe_comp.c check_psn).
	if psn.Before(c.psn) || !psn.Before(qp.req.highPSN) {
		ctr.DropResponse.Add(1)
		return
	}
	syn := wire.AckUnlimited
	if a := p.AETH(); a != nil {
		syn = a.Syndrome()
	}
	if p.Opcode == wire.RCAck && !syn.IsACK() {
		c.nakLocked(qp, psn, syn, now)
		return
	}
	if p.Is(wire.MaskRead) && !syn.IsACK() {
		qp.failLocked(qp.sq.headIdx, ibv.WCBadRespErr)
		return
	}
	// A SEND or WRITE is acknowledged by an ACK of its last PSN or
	// beyond, and implicitly by any response to a later PSN (coalesced
	// ACKs, IBTA 9.7.5.1.3); only an ACK acknowledges part of one.
	isAck := p.Opcode == wire.RCAck
	end := psn
	if isAck {
		end = psn.Next()
	}
	i, w, progress, ok := c.ackWalkLocked(qp, end, isAck)
	if !ok {
		return // a local operation failed: the QP is in ERR
	}
	if w != nil && w.needsResponse() {
		// READ or atomic: only its own response completes it. An ACK or
		// a response beyond it means its response was lost: retry
		// (rxe_comp.c: COMPST_ERROR_RETRY from check_psn).
		switch {
		case isAck || w.lastPSN.Before(psn):
			if !psn.Before(w.firstPSN) {
				c.triggerRetryLocked(qp, false)
			}
		case psn != c.psn:
			if psn.After(c.psn) {
				c.triggerRetryLocked(qp, false) // a read response went missing
			}
		default:
			if c.answerLocked(qp, i, w, p) {
				progress = true
			}
		}
	}
	if progress {
		c.progressLocked(qp, now)
	}
}

// ackWalkLocked walks the send queue from its head acknowledging WQEs: a
// SEND or WRITE whose last PSN is before end completes, an executed local
// operation completes once everything before it has (rxe_comp.c: a done
// WQE completes when it reaches the head), and with partial a SEND or
// WRITE that end reaches into is acknowledged up to end (the requester
// resumes there after a retry). It stops at the first WQE it cannot
// complete and returns it with its index, or w nil when it walked past
// every WQE started; progress reports whether the acknowledged PSN moved.
// ok is false when a failed local operation moved the QP to ERR.
func (c *completer) ackWalkLocked(qp *QP, end wire.PSN, partial bool) (i uint64, w *sendWQE, progress, ok bool) {
	for i = qp.sq.headIdx; i < qp.req.maxIdx && qp.sq.valid(i); i++ {
		w = qp.sq.at(i)
		if w.state == wqeDone {
			continue
		}
		if w.kind == kindLocal {
			if w.state != wqePending {
				return i, w, progress, true
			}
			if !qp.completeLocalLocked(w) {
				return i, w, progress, false
			}
			continue
		}
		if w.needsResponse() {
			return i, w, progress, true
		}
		if w.lastPSN.Before(end) {
			c.completeLocked(qp, i, w)
			progress = true
			continue
		}
		if partial && end.After(c.psn) && end.After(w.firstPSN) {
			c.psn = end // part of a multi-packet message
			qp.req.catchUp(qp, i, w, end)
			progress = true
		}
		return i, w, progress, true
	}
	return i, nil, progress, true
}

// answerLocked applies a READ response or atomic ACK at the expected PSN
// to w (rxe_comp.c check_ack, do_read, do_atomic).
func (c *completer) answerLocked(qp *QP, i uint64, w *sendWQE, p *wire.Packet) bool {
	switch w.kind {
	case kindAtomic:
		ack := p.AtomicAckETH()
		if ack == nil {
			qp.failLocked(i, ibv.WCBadRespErr)
			return false
		}
		w.orig = ack.Orig()
		if err := qp.putAtomicResult(w); err != nil {
			qp.failLocked(i, ibv.WCLocProtErr)
			return false
		}
		c.psn = c.psn.Next()
		c.completeLocked(qp, i, w)
		return true
	case kindRead:
		if !p.Is(wire.MaskRead | wire.MaskResponse) {
			qp.failLocked(i, ibv.WCBadRespErr)
			return false
		}
		off := uint32(p.PSN().Diff(w.firstPSN)) * uint32(qp.pmtu)
		want := min(uint32(qp.pmtu), w.length-off)
		end := off+want == w.length
		if uint32(len(p.Payload)) != want || p.Is(wire.MaskEnd) != end {
			qp.failLocked(i, ibv.WCBadRespErr)
			return false
		}
		if err := qp.cfg.Mem.Scatter(qp.cfg.PD, w.sgl, uint64(off), p.Payload); err != nil {
			qp.failLocked(i, ibv.WCLocProtErr)
			return false
		}
		w.recvOff = off + want
		c.psn = c.psn.Next()
		if end {
			c.completeLocked(qp, i, w)
		}
		return true
	case kindFlush, kindAtomicWrite:
		// Both are answered by a zero-length RDMA READ RESPONSE ONLY
		// (IBA A19; rxe_comp.c check_ack completes FLUSH and ATOMIC_WRITE
		// WQEs on it).
		if p.Opcode != wire.RCReadResponseOnly || len(p.Payload) != 0 {
			qp.failLocked(i, ibv.WCBadRespErr)
			return false
		}
		c.psn = c.psn.Next()
		c.completeLocked(qp, i, w)
		return true
	}
	return false
}

// completeLocked completes WQE i successfully and moves the acknowledged
// PSN past it.
func (c *completer) completeLocked(qp *QP, i uint64, w *sendWQE) {
	if next := w.lastPSN.Next(); next.After(c.psn) {
		c.psn = next
	}
	qp.req.catchUp(qp, i+1, nil, c.psn)
	w.status = ibv.WCSuccess
	qp.completeSendLocked(w, false)
}

// catchUp moves the requester forward when acknowledgements cover what a
// retry rewound it to send again: WQE index i at PSN psn.
func (r *requester) catchUp(qp *QP, i uint64, w *sendWQE, psn wire.PSN) {
	if r.idx > i || (r.idx == i && !psn.After(r.psn)) {
		return
	}
	r.idx, r.psn = i, psn
	if w != nil {
		w.state = wqeInFlight
		w.sendOff = uint32(psn.Diff(w.firstPSN)) * uint32(qp.pmtu)
	}
}

// progressLocked runs after an acknowledgement moved the completer
// forward: retry counters are restored, completed WQEs retired, and the
// retransmit timer pushed out (to now plus the timeout) or stopped.
func (c *completer) progressLocked(qp *QP, now time.Time) {
	c.retrying = false
	c.retryCnt = qp.attr.RetryCnt
	c.rnrRetry = qp.attr.RNRRetry
	qp.retireLocked()
	if qp.outstandingLocked() {
		if qp.retryArmed {
			qp.retryDeadline = now.Add(qp.timeout)
		} else {
			qp.armRetryLocked(now)
		}
	} else {
		qp.stopRetryLocked()
	}
	qp.checkDrainedLocked()
}

// nakLocked handles an RNR NAK or a NAK (rxe_comp.c check_ack, AETH cases).
func (c *completer) nakLocked(qp *QP, psn wire.PSN, syn wire.Syndrome, now time.Time) {
	ctr := qp.cfg.Counters
	switch {
	case syn.Type() == wire.SyndromeReserved:
		// Not an ACK, RNR NAK or NAK: trust nothing in it, not even the
		// acknowledgement its PSN would imply.
		ctr.DropResponse.Add(1)
		return
	case syn.Type() == wire.SyndromeRNRNAK && qp.req.rnrWait:
		// Nothing was sent since the RNR NAK that started this wait, so
		// this one is a duplicate of it (or older): it must not spend a
		// second RNR retry nor restart the timer.
		ctr.DropResponse.Add(1)
		return
	}
	// A NAK acknowledges every packet before its PSN (IBTA 9.7.5.1.3);
	// an error it reports is the WQE's it stopped at.
	target, w, progress, ok := c.ackWalkLocked(qp, psn, true)
	if !ok {
		return
	}
	if w == nil {
		target = qp.sq.tailIdx
	}
	if progress {
		c.progressLocked(qp, now)
	}
	switch syn.Type() {
	case wire.SyndromeRNRNAK:
		ctr.RcvdRNRErr.Add(1)
		if c.rnrRetry == 0 {
			ctr.RetryRNRExceededErr.Add(1)
			qp.failLocked(target, ibv.WCRNRRetryExcErr)
			return
		}
		if c.rnrRetry != 7 { // 7 means retry forever (IBTA 9.7.5.2.8)
			c.rnrRetry--
		}
		qp.req.rnrWait = true
		qp.stopRetryLocked()
		qp.armRNRLocked(RNRTimeout(syn.Value()))
	case wire.SyndromeNAK:
		if syn == wire.NakPSNSequence {
			ctr.RcvdSeqErr.Add(1)
			c.triggerRetryLocked(qp, false)
			return
		}
		// Every other NAK fails the WQE with its code's status, from
		// the table the responder NAKs by (transport.NAKStatus).
		qp.failLocked(target, transport.NAKStatus(syn))
	}
}

// triggerRetryLocked asks the requester to go back to the oldest
// unacknowledged PSN, spending one retry (rxe_comp.c COMPST_ERROR_RETRY).
//
// The transport retry counter counts retries: retry_cnt N allows exactly
// N retransmissions after the first transmission, and when the next
// local ACK timeout (or sequence error) finds it at zero the oldest WR
// completes with RETRY_EXC_ERR (IBTA Vol 1 9.7.6.1.3, transport timer
// and retry counter; only the RNR retry counter has an "infinite" value,
// 9.7.5.2.8). A peer that stopped answering is therefore declared dead
// (retry_cnt+1) × 4.096 µs × 2^timeout after the first transmission.
// This deliberately differs from rxe, whose completer skips the
// decrement at 7 (rxe_comp.c COMPST_ERROR_RETRY: "if
// (qp->comp.retry_cnt != 7) qp->comp.retry_cnt--") and so retries for
// ever; hardware NICs and the kernel's other software transports
// (hfi1_restart_rc, qib_restart_rc: s_retry-- with no special value)
// give up after seven.
func (c *completer) triggerRetryLocked(qp *QP, timeout bool) {
	if !timeout && c.retrying {
		return // a retry is already under way
	}
	if !qp.outstandingLocked() {
		return
	}
	if c.retryCnt == 0 {
		qp.cfg.Counters.RetryExceededErr.Add(1)
		qp.failLocked(qp.sq.headIdx, ibv.WCRetryExcErr)
		return
	}
	c.retryCnt-- // 7 too: seven retries, not infinite (see above)
	qp.cfg.Counters.CompleterRetryErr.Add(1)
	c.retrying = true
	qp.req.needRetry = true
}

// failLocked completes WQE i (or the oldest incomplete one) with st, moves
// the QP to ERR and flushes the rest.
func (qp *QP) failLocked(i uint64, st ibv.WCStatus) {
	for ; qp.sq.valid(i); i++ {
		if w := qp.sq.at(i); w.state != wqeDone {
			w.status = st
			qp.completeSendLocked(w, true)
			break
		}
	}
	qp.toErrorLocked()
}

// retryLocked rewinds the requester to the oldest unacknowledged PSN:
// go-back-N that resumes a partly acknowledged SEND or WRITE in its
// middle and re-asks a partly answered READ for the rest (rxe_req.c
// req_retry, retry_first_write_send).
func (qp *QP) retryLocked() {
	r := &qp.req
	r.needRetry = false
	r.noack = 0
	first := true
	for i := qp.sq.headIdx; i < r.maxIdx && qp.sq.valid(i); i++ {
		w := qp.sq.at(i)
		if w.state == wqeDone || w.kind == kindLocal {
			// Local operations executed already are never executed
			// again; the requester steps over them.
			continue
		}
		if !first {
			w.state = wqePosted
			continue
		}
		first = false
		r.idx = i
		r.psn = qp.comp.psn
		w.state = wqeInFlight
		switch w.kind {
		case kindSend, kindWrite:
			w.sendOff = uint32(r.psn.Diff(w.firstPSN)) * uint32(qp.pmtu)
		case kindRead:
			r.psn = w.firstPSN.Add(w.recvOff / uint32(qp.pmtu))
		default:
			r.psn = w.firstPSN
		}
	}
	if !first {
		qp.cfg.Counters.Retransmits.Add(1)
	}
}

// outstandingLocked reports whether sent packets await acknowledgement.
func (qp *QP) outstandingLocked() bool { return qp.comp.psn.Before(qp.req.highPSN) }
