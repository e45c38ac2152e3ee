package rc

// The responder's reorder window: requests that arrive beyond the
// expected PSN are kept for their turn instead of dropped, and the gap is
// NAKed only if it does not close within a short window.

import (
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// reorderWindow is how long the responder waits, holding the requests
// received beyond the expected PSN, for the one missing before it NAKs
// the gap (PSN sequence error, IBTA 9.7.5.1.2, C9-109); maxHeldRequests
// is how many a QP holds and how far beyond the expected PSN, and
// maxHeldRequestBytes the bytes all QPs of the process hold at most. A
// request beyond those bounds is not held, and the gap is NAKed at once.
//
// Deliberately unlike rxe, which NAKs the first request beyond the
// expected PSN and drops it and every one after until the requester's
// go-back-N brings the missing one (rxe_resp.c check_psn:
// RESPST_ERR_PSN_OUT_OF_SEQ, then RESPST_CLEANUP while sent_psn_nak).
// softnic's responder holds them, NAK or not (but for the READ requests
// a NAK drops, dropHeldReadsLocked), and executes them in order once the
// missing request has come: what an IBTA responder does
// when the network delivers those requests after the missing one, which
// a network that reorders (RoCE over paths that do not keep order,
// netem's reorder) may do. The requester sees acknowledgements a
// responder could have sent: the gap NAKed once, then an ACK past the
// requests held, which moves its go-back-N on (requester.catchUp); the
// copies it sent again meanwhile are duplicates, answered as such
// (duplicateLocked). A request overtaken by the next one then costs no
// go-back-N at all, where it cost one as a loss does, and a lost one
// costs only what the requester sent again before the ACK past the held
// requests reached it (docs/performance.md, "rc.reorderWindow").
//
// The window delays the NAK of a real loss by its length, so it is
// short: on the fabric, where a request is overtaken by the next one
// only, 1 ns to 50 µs gave the same ratios, the longer windows longer
// transfers. A request overtaken by many, or by much (netem's reorder
// sends some packets ahead of those delayed), comes after the NAK; it is
// still held, and executed when the gap closes. The requester's early
// retry (QP.armProbeLocked) bounds the delay from its side.
const reorderWindow = 25 * time.Microsecond

const (
	maxHeldRequests     = 64
	maxHeldRequestBytes = 64 << 20
)

// heldBytes is what every QP's held requests take (maxHeldRequestBytes).
var heldBytes atomic.Int64

// heldRequest is one request received beyond the expected PSN: a copy of
// its packet, parsed again over the copy.
type heldRequest struct {
	pkt wire.Packet
	buf []byte
}

// holdLocked keeps request p, received at now beyond the expected PSN,
// for its turn, and reports whether it did: not one further than
// maxHeldRequests from the expected PSN, nor beyond maxHeldRequests held
// or maxHeldRequestBytes. A request held already is dropped (a
// duplicate of it; counted only as out of sequence, as rxe counts it).
// The first one held opens the reorder window (watchGapLocked).
func (r *responder) holdLocked(qp *QP, p *wire.Packet, now time.Time) bool {
	psn := p.PSN()
	if psn.Diff(r.psn) > maxHeldRequests {
		return false
	}
	i := len(r.held)
	for i > 0 && r.held[i-1].pkt.PSN().After(psn) {
		i--
	}
	if i > 0 && r.held[i-1].pkt.PSN() == psn {
		return true
	}
	if len(r.held) == maxHeldRequests {
		return false
	}
	n := int64(len(p.Raw))
	if heldBytes.Add(n) > maxHeldRequestBytes {
		heldBytes.Add(-n)
		return false
	}
	h := heldRequest{buf: append([]byte(nil), p.Raw...)}
	if wire.Parse(h.buf, &h.pkt) != nil {
		heldBytes.Add(-n)
		return false // parsed once already: cannot happen
	}
	r.held = append(r.held, heldRequest{})
	copy(r.held[i+1:], r.held[i:])
	r.held[i] = h
	qp.cfg.Counters.HeldRequests.Add(1)
	r.watchGapLocked(qp, now, len(r.held) == 1)
	return true
}

// replayLocked executes, in order, the held requests whose turn has come
// (the expected PSN reached them), until one is missing or a READ's reply
// must be sent before the next request (Process), and drops those the
// expected PSN passed. Those left behind a new gap get a new window;
// none left stops the timer. With none held (the common case, once a
// packet in Process) it is a length check, inlined.
func (r *responder) replayLocked(qp *QP, out transport.Output, now time.Time) {
	if len(r.held) != 0 {
		r.replayHeldLocked(qp, out, now)
	}
}

func (r *responder) replayHeldLocked(qp *QP, out transport.Output, now time.Time) {
	for len(r.held) > 0 && !r.reading() && qp.state >= ibv.QPStateRTR && qp.state != ibv.QPStateErr {
		h := r.held[0]
		if h.pkt.PSN().After(r.psn) {
			break
		}
		// Popped first: executing it may drop the rest (a NAK).
		r.popHeld()
		if h.pkt.PSN() == r.psn {
			r.requestLocked(qp, &h.pkt, out, now)
		}
	}
	r.watchGapLocked(qp, now, false)
}

// watchGapLocked opens a reorder window at now for the gap in front of
// the held requests when it is a new one (first: the first request held
// since none was; else the expected PSN moved since the last window
// opened), unless that gap was NAKed already; with none held it stops
// the timer.
func (r *responder) watchGapLocked(qp *QP, now time.Time, first bool) {
	switch {
	case len(r.held) == 0:
		qp.stopReorderLocked()
	case first || r.gap != r.psn:
		r.gap = r.psn
		if !r.sentNak {
			qp.armReorderLocked(now)
		}
	}
}

// dropHeldReadsLocked drops the held READ requests when the gap in front
// of them is NAKed: the requester's go-back-N asks each again, and a READ
// executed now would be answered twice, now and for the copy as a
// duplicate (duplicateLocked replays it, as it must for a response lost).
// The replay stops at each READ dropped until its copy comes.
func (r *responder) dropHeldReadsLocked() {
	kept := r.held[:0]
	for _, h := range r.held {
		if h.pkt.Is(wire.MaskRead) {
			heldBytes.Add(-int64(len(h.buf)))
			continue
		}
		kept = append(kept, h)
	}
	clear(r.held[len(kept):])
	r.held = kept
}

// popHeld drops the first held request.
func (r *responder) popHeld() {
	heldBytes.Add(-int64(len(r.held[0].buf)))
	r.held[0] = heldRequest{}
	r.held = r.held[1:]
	if len(r.held) == 0 {
		r.held = nil
	}
}

// dropHeldLocked drops every held request (a NAK that is not a PSN
// sequence error went out, or the QP went to ERR).
func (r *responder) dropHeldLocked(qp *QP) {
	for len(r.held) > 0 {
		r.popHeld()
	}
	qp.stopReorderLocked()
}

// reorderTimerLocked NAKs the gap in front of the held requests once
// reorderWindow has passed without it closing, as an out-of-sequence
// request that could not be held is (nakGapLocked); the requests stay
// held. Each was counted in out_of_sequence as it came. With none held
// it reads no atomic: a flag a timer left set is read when one is.
func (r *responder) reorderTimerLocked(qp *QP, out transport.Output, now time.Time) {
	if len(r.held) == 0 || !qp.reorderFired.Swap(false) {
		return
	}
	if left := qp.reorderAt.Sub(now); left > 0 {
		qp.resetReorderLocked(left)
		return
	}
	r.nakGapLocked(qp, out)
}

// armReorderLocked opens a reorder window at now.
func (qp *QP) armReorderLocked(now time.Time) {
	qp.reorderAt = now.Add(reorderWindow)
	qp.resetReorderLocked(reorderWindow)
}

func (qp *QP) resetReorderLocked(d time.Duration) {
	if qp.reorderTimer == nil {
		qp.reorderTimer = qp.cfg.Clock.AfterFunc(d, qp.onReorderTimer)
	} else {
		qp.reorderTimer.Reset(d)
	}
}

func (qp *QP) stopReorderLocked() {
	if qp.reorderTimer != nil {
		qp.reorderTimer.Stop()
	}
}

// onReorderTimer only sets a flag and wakes the QP (STYLE.md 9).
func (qp *QP) onReorderTimer() { qp.reorderFired.Store(true); qp.cfg.Waker.Wake() }
