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
	// retrying is set when a retry was started and no acknowledgement or
	// response has moved psn since: further NAKs of the same loss event
	// start no new retry (rxe comp.started_retry, which only
	// reset_retry_counters clears: an ACK or a response, not a NAK's
	// implied acknowledgement).
	retrying bool
	// retryFrom and retryHigh are c.psn and the requester's highPSN when
	// the retry under way began, at retryAt: the PSNs it resends. A PSN
	// sequence NAK for one of them within a round trip (srtt) of retryAt
	// tells of the responder's view before the resent packets reached
	// it: the same loss event, or a packet that was only late.
	retryFrom, retryHigh wire.PSN
	retryAt              time.Time
	retryTimed           bool // the retry gave its round-trip sample
	// win is the requester's window (windowLocked): MaxUnackedPSNs until
	// a loss, cut at each loss a go-back-N answers and grown back by what
	// acknowledgements cover (lossLocked, growLocked). ssthresh is what
	// the last costly loss left it (MaxUnackedPSNs before any): below it
	// the window grows fast, from it on by one PSN a window's worth (RFC
	// 5681 3.1: slow start and congestion avoidance); grown counts the
	// PSNs acknowledged toward that one. delivered counts the PSNs
	// acknowledged since the last costly loss, at most MaxUnackedPSNs.
	win, ssthresh, grown, delivered int32
	// probes counts the early retries since the last progress: each
	// doubles the next one's timeout (QP.armProbeLocked).
	probes uint8
	// srtt and rttvar are the smoothed round trip and its variation,
	// from a request with AckReq to the ACK that covers it (RFC 6298
	// 2.2-2.3, Karn's rule: never across a retry; requester.rttPSN); 0
	// until measured.
	srtt, rttvar time.Duration
	// acked is one past the highest PSN the responder acknowledged
	// (cumulatively: an ACK's PSN, a NAK's PSN less one, a response's
	// PSN less one, IBTA 9.7.5.1.3): every SEND and WRITE before it was
	// executed, whatever response of a READ before it is still missing.
	acked wire.PSN
	// ahead are the response PSNs received beyond psn (selective
	// acceptance, see acceptLocked); askedTo is where the last re-ask of
	// their holes ended (reaskLocked); dupacks counts the responses and
	// ACKs since psn last moved.
	ahead   aheadSet
	held    heldSet // READ responses received ahead, waiting to be placed
	askedTo wire.PSN
	dupacks int
}

// startAt sets every PSN of the completer to psn (a new send PSN, or a
// reset).
func (c *completer) startAt(psn wire.PSN) {
	c.psn, c.acked, c.askedTo, c.retryFrom, c.retryHigh = psn, psn, psn, psn, psn
	c.ahead = aheadSet{}
	c.held.clear()
	c.dupacks = 0
	c.win, c.ssthresh, c.grown, c.delivered = MaxUnackedPSNs, MaxUnackedPSNs, 0, 0
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

// reaskDupThresh is how many responses and ACKs must arrive without the
// oldest unanswered PSN moving before the holes behind them are re-asked:
// TCP's DupThresh (RFC 6675 2: three duplicate acknowledgements), which
// tells a lost response from one a little reordered.
const reaskDupThresh = 3

// responseLocked processes one response packet, received in the pass at
// time now: ACK, NAK, READ response or atomic ACK.
//
// Responses beyond the oldest unanswered PSN are kept, not dropped: a
// READ response's payload is placed where its PSN says (the offset of
// its packet in the READ, as the responder sends it) and an atomic's
// result is stored, and the PSN is marked received (ahead). The WQE
// still completes in order, once every PSN before its last has come
// (advanceLocked). A response that went missing is then re-asked alone
// (reaskLocked), not with everything after it: IBTA 9.7.5.1.5 lets a
// requester ask a READ again from any PSN of its response, for the rest
// of its length or a part of it, and a responder answers a READ request
// that repeats a part of an earlier one from that part (rxe_resp.c
// duplicate_request: "the same as the previous one or a subset of it").
// rxe's own completer instead drops every READ response beyond the one
// it expects and waits for the retransmit timer (rxe_comp.c check_psn:
// COMPST_DONE), so one lost response costs a timeout and every READ
// sent after it; softnic does better where the wire allows it. Out of
// order acceptance is the requester's own business: the data lands in
// its memory at the offsets the PSNs give, and completions keep their
// order.
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
	isAck := p.Opcode == wire.RCAck
	if isAck && !syn.IsACK() {
		c.nakLocked(qp, psn, syn, now)
		return
	}
	if p.Is(wire.MaskRead) && !syn.IsACK() {
		qp.failLocked(qp.sq.headIdx, ibv.WCBadRespErr)
		return
	}
	if isAck {
		// An ACK acknowledges every request up to its PSN (coalesced
		// ACKs, IBTA 9.7.5.1.3), a SEND or WRITE in part too.
		c.ackTo(psn.Next())
	} else {
		// A response acknowledges every request before it.
		c.ackTo(psn)
		if !c.acceptLocked(qp, p, psn, now) {
			return // dropped, or a bad response moved the QP to ERR
		}
	}
	before := c.psn
	progress, ok := c.advanceLocked(qp)
	if !ok {
		return
	}
	if progress {
		c.dupacks = 0
		c.sampleRTTLocked(qp, now)
		c.growLocked(before)
		c.progressLocked(qp, now, true)
		if c.psn == qp.req.highPSN || !c.holesLocked() {
			return
		}
	} else {
		c.dupacks++
		if !isAck {
			c.aliveLocked(qp, now)
		}
	}
	// Something beyond the oldest unanswered response came: re-ask the
	// responses that must be lost, those at least reaskDupThresh
	// received responses ago, or all of them once the last outstanding
	// PSN was answered (nothing more is on its way to tell them apart).
	if c.dupacks >= reaskDupThresh || !psn.Next().Before(qp.req.highPSN) {
		c.reaskLocked(qp, !psn.Next().Before(qp.req.highPSN), now)
	}
}

// aliveLocked runs when a response beyond the oldest unanswered PSN came
// at now, and c.psn did not move: the responder is answering the
// requests, in their order, and what it left out is the re-ask's to
// recover (reaskLocked), so the retransmit timer's deadline and the
// early retry are pushed out as progress pushes them (progressLocked),
// but no retry counter is restored: a response out of order is not the
// forward progress IBTA 9.7.6.1.3 restores them on. The local ACK timeout
// is a time without an answer (9.7.6.1.3); a responder slower than the
// link keeps a window's worth of answers queued, and with only in-order
// progress pushing it the timer expired while the answers behind a lost
// one still came, and its go-back-N asked again for every READ in flight,
// whose answers were still on their way. (rxe's completer keeps no
// response beyond the one it expects, rxe_comp.c check_psn, so none
// waits behind a hole there.) When the responses stop, the timer runs
// out one timeout after the last of them.
func (c *completer) aliveLocked(qp *QP, now time.Time) {
	if qp.retryArmed {
		qp.retryDeadline = now.Add(qp.timeout)
	}
	qp.armProbeLocked(now)
}

// sampleRTTLocked takes a round-trip sample when an ACK or a response
// moved c.psn: past the PSN the requester timed (requester.rttPSN), or,
// while a retry is under way, past the first PSN it resent (timed from
// the retry's start: the responder had dropped the original, having NAKed
// it, so the acknowledgement is the resent packet's; under constant loss
// Karn's rule alone would leave no sample). Not when that PSN is a
// READ's: a READ request the responder did not drop (one only overtaken
// by the request it NAKed, IBTA 9.7.5.1.2) is answered in its turn, and
// its first response, come after the retry began, is as likely the
// original's answer as the resent one's; READs time themselves
// (timeReadLocked).
func (c *completer) sampleRTTLocked(qp *QP, now time.Time) {
	r := &qp.req
	var sample time.Duration
	switch {
	case c.retrying && !c.retryTimed && c.psn.After(c.retryFrom):
		c.retryTimed = true
		if _, w := qp.wqeAtLocked(c.retryFrom); w != nil && w.kind == kindRead {
			return
		}
		sample = now.Sub(c.retryAt)
	case r.rttOn && c.psn.After(r.rttPSN):
		r.rttOn = false
		sample = now.Sub(r.rttAt)
	default:
		return
	}
	c.addSample(sample)
}

// timeReadLocked takes the round-trip sample of READ w at the first of
// its responses to come, in order or ahead of a hole (acceptLocked):
// from its request to that response, if the request was never sent again
// (Karn's rule: the answer could be the second request's), whatever the
// completer waits for before it and whether a retry is under way.
// A responder slower than the link answers each request after every
// request before it (rxe_resp.c: one request at a time from the QP's
// req_pkts, a READ's reply whole before the next), so the round trip a
// READ measures is mostly that queue, which is what the answer to the
// next re-ask will wait behind (askedLongAgo) and what the early retry
// must not fire within (QP.armProbeLocked). Timing only requests sent
// while no retry was under way, to the acknowledgement of their first
// PSN, kept the first READ's round trip, taken before any queue had
// built, for a whole run under steady loss.
func (c *completer) timeReadLocked(w *sendWQE, now time.Time) {
	if w.askedAt.IsZero() {
		c.addSample(now.Sub(w.sentAt))
	}
	w.sentAt = time.Time{}
}

// addSample folds a round-trip sample into srtt and rttvar: srtt = 7/8
// srtt + 1/8 sample and rttvar = 3/4 rttvar + 1/4 |srtt - sample| (RFC
// 6298 2.3), the first sample as it is, its variation half of it (2.2).
func (c *completer) addSample(sample time.Duration) {
	if c.srtt == 0 {
		c.srtt, c.rttvar = sample, sample/2
		return
	}
	d := c.srtt - sample
	if d < 0 {
		d = -d
	}
	c.rttvar += (d - c.rttvar) / 4
	c.srtt += (sample - c.srtt) / 8
}

// growLocked grows the window by the PSNs an acknowledgement covered
// since before, up to MaxUnackedPSNs: below ssthresh by half of them,
// about half again a round trip (TCP's slow start, RFC 5681 3.1, at half
// its pace), from ssthresh on by one PSN for each window's worth
// acknowledged, about one a round trip (congestion avoidance). A window
// that no loss ever cut stays at MaxUnackedPSNs, and one a timeout cut
// below ssthresh is back there in a few round trips; but under losses
// that keep coming the window gains about one PSN a round trip between
// them, so it stays near what the loss rate allows (TCP's window under
// random loss p is about 1.2/sqrt(p) segments, RFC 3649's response
// function) rather than grow back in a few round trips to where the next
// loss halves it: every packet in flight behind a lost one is sent again
// (lossLocked), so what each loss costs is the window.
func (c *completer) growLocked(before wire.PSN) {
	n := c.psn.Diff(before)
	if n <= 0 {
		return
	}
	c.delivered = min(c.delivered+n, MaxUnackedPSNs)
	if c.win < c.ssthresh {
		c.win = min(c.win+max(n/2, 1), c.ssthresh)
		return
	}
	for c.grown += n; c.grown >= c.win && c.win < MaxUnackedPSNs; {
		c.grown -= c.win
		c.win++
	}
	if c.win == MaxUnackedPSNs {
		c.grown = 0
	}
}

// lossLocked cuts the window at a loss the go-back-N answers (a PSN
// sequence NAK, an early retry, a timeout; nakLocked starts one
// go-back-N for one loss event), never below minUnackedPSNs, and to at
// most RetryUnackedPSNs after a timeout.
//
// A go-back-N from a SEND or WRITE is costly: the responder dropped
// every packet behind the lost one (IBTA 9.7.5.1.2) and each is sent
// again, so under steady loss the window bounds what a loss costs.
// There ssthresh becomes half the window (RFC 5681 3.1: half the flight
// size) and so does the window, which after a NAK or an early retry is
// also at most the PSNs acknowledged since the last such loss: a window
// larger than what the path delivers between two losses resends more at
// each than it delivers, and halving alone would take a loss for each
// halving to come down from MaxUnackedPSNs, each costing the window it
// had. It grows back fast to ssthresh (growLocked), so a path that lost
// one packet early is soon back at half its window. A timeout is not
// capped so: no acknowledgement came, and the go-back-N it starts sends
// at most RetryUnackedPSNs (TCP's window after a retransmit timeout is
// below ssthresh too).
//
// A go-back-N from a READ costs little: the responses beyond a lost one
// are kept (acceptLocked), and the go-back-N asks only for the missing
// ones (retryLocked). There the window is halved and grows back fast
// (growLocked below ssthresh), which is left as it was.
//
// The IBTA sets what is resent (from the oldest unacknowledged PSN) and
// leaves how much a requester sends at once to it; rxe keeps its 128
// (RXE_MAX_UNACKED_PSNS) whatever is lost.
func (c *completer) lossLocked(qp *QP, timeout bool) {
	if _, w := qp.wqeAtLocked(c.psn); w != nil && w.kind == kindRead {
		c.win = max(c.win/2, minUnackedPSNs)
	} else {
		c.ssthresh = max(c.win/2, minUnackedPSNs)
		c.win = c.ssthresh
		if !timeout {
			c.win = max(min(c.win, c.delivered), minUnackedPSNs)
		}
		c.delivered = 0
	}
	c.grown = 0
	if timeout {
		c.win = min(c.win, RetryUnackedPSNs)
	}
}

// ackTo records that the responder acknowledged every PSN before end.
func (c *completer) ackTo(end wire.PSN) {
	if end.After(c.acked) {
		c.acked = end
	}
}

// wqeAtLocked returns the started WQE whose PSNs hold psn and its index,
// or nil: the WQEs from the head up to the last one started (including
// those a retry rewound, whose PSNs stay as they were).
func (qp *QP) wqeAtLocked(psn wire.PSN) (uint64, *sendWQE) {
	for i := qp.sq.headIdx; i < qp.req.maxIdx && qp.sq.valid(i); i++ {
		w := qp.sq.at(i)
		if w.state == wqeDone || w.kind == kindLocal {
			continue
		}
		if psn.Before(w.firstPSN) {
			return 0, nil
		}
		if !psn.After(w.lastPSN) {
			return i, w
		}
	}
	return 0, nil
}

// acceptLocked takes the READ response, atomic ACK or empty READ
// response (FLUSH, ATOMIC WRITE) p with PSN psn, at or beyond c.psn,
// received at now: its payload or result goes to its WQE, psn is marked
// received, and a READ's first response to come times it. It
// reports false when p is dropped (a PSN already received, one beyond
// the window ahead, a response that answers no WQE there) or, at c.psn,
// when p does not fit its WQE: a bad response that moves the QP to ERR
// (rxe_comp.c check_ack: COMPST_ERROR, IB_WC_BAD_RESP_ERR).
func (c *completer) acceptLocked(qp *QP, p *wire.Packet, psn wire.PSN, now time.Time) bool {
	ctr := qp.cfg.Counters
	if c.ahead.has(c.psn, psn) || psn.Diff(c.psn) >= aheadWindow {
		ctr.DropResponse.Add(1)
		return false
	}
	i, w := qp.wqeAtLocked(psn)
	bad := func(st ibv.WCStatus) bool {
		if psn == c.psn {
			qp.failLocked(i, st)
		} else {
			ctr.DropResponse.Add(1)
		}
		return false
	}
	if w == nil || !w.needsResponse() {
		if w == nil {
			i = qp.sq.headIdx
		}
		return bad(ibv.WCBadRespErr)
	}
	switch w.kind {
	case kindAtomic:
		ack := p.AtomicAckETH()
		if ack == nil || psn != w.firstPSN {
			return bad(ibv.WCBadRespErr)
		}
		// The result reaches memory when the atomic completes, in order
		// (advanceLocked).
		w.orig = ack.Orig()
	case kindRead:
		if !p.Is(wire.MaskRead | wire.MaskResponse) {
			return bad(ibv.WCBadRespErr)
		}
		off := uint32(psn.Diff(w.firstPSN)) * uint32(qp.pmtu)
		want := min(uint32(qp.pmtu), w.length-off)
		// The READ's last packet ends it (LAST or ONLY); one inside it
		// may end a part a re-ask asked for (a responder's replay of a
		// sub-range ends with LAST, rxe_resp.c read_reply).
		if uint32(len(p.Payload)) != want || psn == w.lastPSN && !p.Is(wire.MaskEnd) {
			return bad(ibv.WCBadRespErr)
		}
		if psn != c.psn && !qp.aheadSafeLocked(i, w) {
			// An earlier READ or atomic still to complete writes where
			// this one does: its data must not land before theirs, so
			// it is held until its turn (advanceLocked), or, with no
			// room to hold it, dropped and asked again.
			if !c.held.put(psn, p.Payload, qp.pmtu) {
				ctr.DropResponse.Add(1)
				return false
			}
			break
		}
		if err := qp.cfg.Mem.Scatter(qp.cfg.PD, w.sgl, uint64(off), p.Payload); err != nil {
			qp.failLocked(i, ibv.WCLocProtErr)
			return false
		}
	case kindFlush, kindAtomicWrite:
		// Both are answered by a zero-length RDMA READ RESPONSE ONLY
		// (IBA A19; rxe_comp.c check_ack completes FLUSH and ATOMIC_WRITE
		// WQEs on it).
		if p.Opcode != wire.RCReadResponseOnly || len(p.Payload) != 0 || psn != w.firstPSN {
			return bad(ibv.WCBadRespErr)
		}
	}
	c.ahead.add(psn)
	if w.kind == kindRead && !w.sentAt.IsZero() {
		c.timeReadLocked(w, now)
	}
	return true
}

// aheadSafeLocked reports whether a response to WQE i (w) may be placed
// before the responses of the WQEs ahead of it: no earlier READ or
// atomic still to complete has a local SGE that overlaps one of w's (in
// the same MR), so placing it now leaves memory as placing it in order
// would. Overlap through two MRs over the same memory is not seen.
func (qp *QP) aheadSafeLocked(i uint64, w *sendWQE) bool {
	if w.aheadSafe {
		return true
	}
	for j := qp.sq.headIdx; j < i; j++ {
		e := qp.sq.at(j)
		if e.state == wqeDone || (e.kind != kindRead && e.kind != kindAtomic) {
			continue
		}
		for _, a := range e.sgl {
			for _, b := range w.sgl {
				if a.LKey == b.LKey && a.Addr < b.Addr+uint64(b.Length) && b.Addr < a.Addr+uint64(a.Length) {
					return false
				}
			}
		}
	}
	w.aheadSafe = true // earlier WQEs only complete: it stays so
	return true
}

// advanceLocked walks the send queue from its head completing what is
// acknowledged or answered, in order: a SEND or WRITE whose last PSN is
// before c.acked (and, in part, one c.acked reaches into: the requester
// resumes there after a retry), a READ, atomic, FLUSH or ATOMIC WRITE
// once every PSN of its response has been received, an executed local
// operation once everything before it has completed (rxe_comp.c: a done
// WQE completes when it reaches the head). progress reports whether
// c.psn moved; ok is false when a failed local operation moved the QP to
// ERR.
func (c *completer) advanceLocked(qp *QP) (progress, ok bool) {
	for i := qp.sq.headIdx; i < qp.req.maxIdx && qp.sq.valid(i); i++ {
		w := qp.sq.at(i)
		if w.state == wqeDone {
			continue
		}
		if w.kind == kindLocal {
			if w.state != wqePending {
				return progress, true
			}
			if !qp.completeLocalLocked(w) {
				return progress, false
			}
			continue
		}
		if w.needsResponse() {
			for !c.psn.After(w.lastPSN) && c.ahead.has(c.psn, c.psn) {
				if data, ok := c.held.take(c.psn); ok {
					// Held for its turn (acceptLocked): it is now.
					off := uint64(c.psn.Diff(w.firstPSN)) * uint64(qp.pmtu)
					err := qp.cfg.Mem.Scatter(qp.cfg.PD, w.sgl, off, data)
					c.held.free(data)
					if err != nil {
						qp.failLocked(i, ibv.WCLocProtErr)
						return progress, false
					}
				}
				c.ahead.del(c.psn)
				c.psn = c.psn.Next()
				progress = true
			}
			if !c.psn.After(w.lastPSN) {
				if progress {
					qp.req.catchUp(qp, i, w, c.psn)
				}
				return progress, true
			}
			if w.kind == kindAtomic {
				if err := qp.putAtomicResult(w); err != nil {
					qp.failLocked(i, ibv.WCLocProtErr)
					return progress, false
				}
			}
			c.completeLocked(qp, i, w)
			continue
		}
		if w.lastPSN.Before(c.acked) {
			c.completeLocked(qp, i, w)
			progress = true
			continue
		}
		if c.acked.After(c.psn) && c.acked.After(w.firstPSN) {
			c.psn = c.acked // part of a multi-packet message
			qp.req.catchUp(qp, i, w, c.psn)
			progress = true
		}
		return progress, true
	}
	return progress, true
}

// holesLocked reports whether a response beyond c.psn has been received:
// c.psn's is then missing (every PSN in the set is beyond c.psn, which
// deletes it as it passes).
func (c *completer) holesLocked() bool { return !c.ahead.empty() }

// reaskLocked asks the requester to send again the requests of the
// responses that must have been lost, from c.psn (or where the last
// re-ask ended) up to the last one that, with all, is not yet answered,
// or else has reaskDupThresh responses received after it or an ACK of a
// later PSN (RFC 6675 IsLost, with an ACK as the responder's word that
// it answered everything before). The requester asks each such run of
// missing responses again with one request (requester.reaskLocked). A
// response is re-asked once this way; if that is lost too, the
// retransmit timer recovers it.
func (c *completer) reaskLocked(qp *QP, all bool, now time.Time) {
	from := c.psn
	if c.askedTo.After(from) {
		from = c.askedTo
	}
	end := from
	for h := from; h.Before(qp.req.highPSN); h = h.Next() {
		if c.ahead.has(c.psn, h) {
			continue
		}
		lost := all || h.Before(c.acked)
		if !lost {
			n := 0
			for q, ok := c.ahead.next(c.psn, h.Next(), qp.req.highPSN); ok && n < reaskDupThresh; q, ok = c.ahead.next(c.psn, q.Next(), qp.req.highPSN) {
				n++
			}
			lost = n >= reaskDupThresh
		}
		if lost {
			_, w := qp.wqeAtLocked(h)
			lost = (all || c.replyEndedLocked(qp, w)) && c.askedLongAgo(w, now)
		}
		if !lost {
			break
		}
		end = h.Next()
	}
	if !end.After(from) {
		return
	}
	c.askedTo = end
	qp.req.reask(from, end)
}

// replyEndedLocked reports whether the responder has ended the reply
// of w, the WQE missing response h belongs to, so that asking for h now asks for
// every hole of it at once: true unless h is a READ's whose last response
// has not come and no response after its last PSN has. An ACK or NAK
// past the READ does not count: the responder sends it after the reply,
// but it is one small packet that overtakes the reply's responses where
// the network reorders, and the holes it would call lost are late. A
// READ is asked again from its first missing response
// (requester.reaskRequestsLocked: rxe's duplicate_request moves the
// READ's start, res->read.va_org, to where a re-ask begins and refuses
// one that begins before it); re-asking
// each hole as soon as it is found while the reply still streams would
// ask for the first one again with every later one, and a responder
// that answers a re-ask only after the reply in progress (rxe_resp.c
// get_req: RESPST_READ_REPLY while qp->resp.res is set) leaves the first
// hole open long enough for the later ones to be found.
func (c *completer) replyEndedLocked(qp *QP, w *sendWQE) bool {
	if w == nil || w.kind != kindRead || c.ahead.has(c.psn, w.lastPSN) {
		return true
	}
	_, beyond := c.ahead.next(c.psn, w.lastPSN.Next(), qp.req.highPSN)
	return beyond
}

// askedLongAgo reports whether the answer to the last request for
// w's missing responses is overdue: more than a retransmission timeout
// (RFC 6298: srtt + 4 rttvar, at least minProbeTimeout) since a request
// for h's WQE last went out. A go-back-N sends a READ again from its
// first missing response, and the holes the original reply left behind
// are the new request's to fill: asking again before its reply can have
// come draws that reply twice, and a responder slower than the network
// (rxe in a guest) queues every replay behind the others, so that each
// came later than the last and was asked for again (6-9 packets
// received for each one needed). Until a round trip is measured, every
// hole may be asked for.
func (c *completer) askedLongAgo(w *sendWQE, now time.Time) bool {
	if c.srtt == 0 || w == nil || w.askedAt.IsZero() {
		return true
	}
	return now.Sub(w.askedAt) >= max(c.srtt+4*c.rttvar, minProbeTimeout)
}

// completeLocked completes WQE i successfully and moves the acknowledged
// PSN past it.
func (c *completer) completeLocked(qp *QP, i uint64, w *sendWQE) {
	if next := w.lastPSN.Next(); next.After(c.psn) {
		for p := c.psn; !c.ahead.empty() && p.Before(next); p = p.Next() {
			c.ahead.del(p)
		}
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

// progressLocked runs after an acknowledgement or a response moved the
// completer forward: the retry counters are restored (forward progress,
// IBTA 9.7.5.2.8 and 9.7.6.1.3), completed WQEs retired, and the
// retransmit timer pushed out (to now plus the timeout) or stopped. An
// ACK or a response (ack) also ends the retry under way, as rxe's
// reset_retry_counters does; a NAK's implied acknowledgement does not:
// the loss it reports is the retry's own or a new one (nakLocked).
func (c *completer) progressLocked(qp *QP, now time.Time, ack bool) {
	if ack {
		c.retrying = false
	}
	c.retryCnt = qp.attr.RetryCnt
	c.rnrRetry = qp.attr.RNRRetry
	c.probes = 0
	qp.retireLocked()
	if qp.outstandingLocked() {
		if qp.retryArmed {
			qp.retryDeadline = now.Add(qp.timeout)
		} else {
			qp.armRetryLocked(now)
		}
		qp.armProbeLocked(now)
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
	c.ackTo(psn)
	progress, ok := c.advanceLocked(qp)
	if !ok {
		return
	}
	target := qp.sq.tailIdx
	for i := qp.sq.headIdx; i < qp.req.maxIdx && qp.sq.valid(i); i++ {
		if qp.sq.at(i).state != wqeDone {
			target = i
			break
		}
	}
	if progress {
		c.progressLocked(qp, now, false)
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
			if c.retrying && psn.Before(c.retryHigh) && (!psn.After(c.retryFrom) || now.Sub(c.retryAt) < c.srtt) {
				// About a packet the retry under way sends again, from
				// the responder's view before any resent packet could
				// have reached it (a repeated NAK, or one for a packet
				// that was only late and whose followers the responder
				// dropped): one retry for one loss event (rxe_comp.c
				// started_retry ignores every NAK until an ACK). Later
				// than a round trip, the NAK is about the resent packets:
				// one of them was lost, and waiting for the timer would
				// cost a timeout where rxe's retries never end.
				return
			}
			c.triggerRetryLocked(qp, false, now)
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
func (c *completer) triggerRetryLocked(qp *QP, timeout bool, now time.Time) {
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
	c.lossLocked(qp, timeout)
	c.retryFrom, c.retryHigh, c.retryAt, c.retryTimed = c.psn, qp.req.highPSN, now, false
	qp.req.rttOn = false // Karn's rule: no sample across a retry
	qp.req.needRetry = true
}

// earlyRetryLocked starts the go-back-N of the early retry
// (QP.armProbeLocked): like a timeout's, but no retry is spent.
func (c *completer) earlyRetryLocked(qp *QP) {
	if !qp.outstandingLocked() {
		return
	}
	c.lossLocked(qp, false)
	c.probes = min(c.probes+1, 10)
	c.retrying = true
	c.retryFrom, c.retryHigh, c.retryTimed = c.psn, qp.req.highPSN, true
	qp.req.rttOn = false
	qp.req.needRetry = true
	qp.cfg.Counters.EarlyRetries.Add(1)
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
			// From the first response missing; the requester asks for
			// the runs still missing (sendPacketLocked).
			if r.psn.Before(w.firstPSN) {
				r.psn = w.firstPSN
			}
		default:
			r.psn = w.firstPSN
		}
	}
	// The go-back-N asks again for everything the re-asks would.
	qp.comp.askedTo = qp.comp.psn
	r.reaskPSN, r.reaskEnd = qp.comp.psn, qp.comp.psn
	if !first {
		qp.cfg.Counters.Retransmits.Add(1)
	}
}

// outstandingLocked reports whether sent packets await acknowledgement.
func (qp *QP) outstandingLocked() bool { return qp.comp.psn.Before(qp.req.highPSN) }
