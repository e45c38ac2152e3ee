package rc

// The NIC-wide budget of what its RC requesters have in flight toward one
// peer (PeerBudget), and each QP's share of it (flight).

import (
	"net/netip"
	"sync"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// PSNCost is what the budget charges a PSN beyond its path MTU of
// payload: its headers (IP, UDP, BTH, RETH, ICRC: under 100 bytes) and
// part of the receiving kernel's own cost of a datagram, the sk_buff it
// charges to the socket's buffer beside the data (its truesize), which
// the kernel's doubling of the buffer asked for covers the rest of
// (socket(7), SO_RCVBUF).
const PSNCost = 256

// PeerBudget bounds the bytes the RC requesters of a NIC may have in
// flight toward one peer address, whatever the number of QPs: each PSN
// a requester sends beyond its oldest unacknowledged one (a READ's
// response PSNs included, which the peer sends back) holds its path MTU
// plus PSNCost of the budget until the acknowledgement or the response
// that retires it. A QP's own window (MaxUnackedPSNs) bounds one QP;
// without a budget a thousand QPs toward one peer may together have a
// thousand windows in flight, far beyond what the peer's UDP socket
// buffer holds: the buffer overflows, every QP loses packets and times
// out at once, and the go-back-N of all of them, at the same moment,
// overflows it again. With it, what the peer's socket must hold is
// bounded by the budget, which a NIC sizes from the socket buffer a
// softnic peer sets (package nic, DefaultPeerBudget).
//
// Fair shares: a QP that finds the budget spent, or others waiting for
// it, waits in line (first come, first served) and is woken when what
// the acknowledgements of all the QPs return covers what it asked for
// (grantLocked); what a QP's acknowledgements return goes to those
// waiting before the QP may take it again (QP.startFlightLocked), so no
// QP starves while others send. A go-back-N resends within what the QP
// holds, so many QPs timing out at once resend no more than the budget.
// A QP alone takes what it lacks at once and never waits: the budget
// binds only when the QPs toward one peer want more than it together.
//
// rxe has no such budget: each QP has its RXE_MAX_UNACKED_PSNS in flight
// whatever the others do. The IBTA leaves how much a requester keeps
// outstanding to it, bounding it only by half the PSN space; nothing on
// the wire changes.
type PeerBudget struct {
	limit int
	mu    sync.Mutex
	free  int // guarded by mu: bytes neither held nor granted
	// head and tail are the QPs waiting, oldest first, linked through
	// their flight.prev and flight.next; guarded by mu.
	head, tail *QP
}

// NewPeerBudget returns a budget of limit bytes in flight (at least one
// PSN at the largest path MTU).
func NewPeerBudget(limit int) *PeerBudget {
	limit = max(limit, 4096+PSNCost)
	return &PeerBudget{limit: limit, free: limit}
}

// Limit returns the budget's size in bytes.
func (b *PeerBudget) Limit() int { return b.limit }

// Free returns the bytes no QP holds or was granted.
func (b *PeerBudget) Free() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.free
}

// Waiting returns the number of QPs waiting for the budget.
func (b *PeerBudget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := 0
	for q := b.head; q != nil; q = q.flight.next {
		k++
	}
	return k
}

// flight is a QP's share of its peer's budget (SetBudget).
type flight struct {
	b    *PeerBudget // guarded by the QP's mu
	held int         // guarded by the QP's mu: bytes the QP holds
	// keep: the requester stopped in this pass for the budget or its
	// pacer (congestion control), and keeps what it holds and was
	// granted for the pass the grant or the pacer's timer wakes it for
	// (endFlightLocked). acked is the completer's PSN when the QP last
	// gave back what acknowledgements retired (startFlightLocked). Both
	// guarded by the QP's mu.
	keep  bool
	acked wire.PSN
	// granted is what the budget set aside for the QP while it waited,
	// which it adds to held when it next runs; need and want are what
	// it waits for (at least need, want if there is as much), waiting
	// whether it is in line, prev and next its neighbours there. All
	// guarded by b.mu.
	granted    int
	need, want int
	waiting    bool
	prev, next *QP
}

// SetBudget makes b the budget the QP's requests take from (nil: none),
// giving back what it held of the one before. The engine calls it when
// the QP's path is set (its peer address: PeerAddr).
func (qp *QP) SetBudget(b *PeerBudget) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	qp.leaveBudgetLocked()
	qp.flight.b = b
	qp.flight.acked = qp.comp.psn
}

// leaveBudgetLocked gives back all the QP holds and was granted, and
// leaves the line.
func (qp *QP) leaveBudgetLocked() {
	f := &qp.flight
	b := f.b
	if b == nil {
		return
	}
	b.mu.Lock()
	b.unlinkLocked(qp)
	n := f.held + f.granted
	f.held, f.granted = 0, 0
	b.putLocked(n)
	b.mu.Unlock()
	f.b = nil
}

// psnCostLocked is what one of the QP's PSNs holds of the budget.
func (qp *QP) psnCostLocked() int { return qp.pmtu + PSNCost }

// sendingLocked reports whether the requester may send: an RC or XRC
// QP in RTS or SQD.
func (qp *QP) sendingLocked() bool {
	return qp.isRC() && (qp.state == ibv.QPStateRTS || qp.state == ibv.QPStateSQD)
}

// inFlightLocked is the bytes of budget the QP's PSNs in flight hold:
// those the requester sent beyond the oldest unacknowledged one, in a
// state where it sends; none otherwise (a QP in ERR, RESET or RTR).
func (qp *QP) inFlightLocked() int {
	if !qp.sendingLocked() {
		return 0
	}
	return max(int(qp.req.psn.Diff(qp.comp.psn)), 0) * qp.psnCostLocked()
}

// startFlightLocked gives back, before the requester sends, what the
// acknowledgements since its last pass retired: the QPs waiting take it
// first, and the QP, its turn over, goes to the back of the line if it
// asks again. What it took for packets it has not sent yet it keeps: a
// pass that ends at its bound (budget) goes on with it, and a go-back-N
// resends with what its lost packets held. A QP that no longer sends (ERR,
// RESET) gives back everything.
func (qp *QP) startFlightLocked() {
	f := &qp.flight
	b := f.b
	if b == nil {
		return
	}
	need := qp.inFlightLocked()
	retired := max(int(qp.comp.psn.Diff(f.acked)), 0) * qp.psnCostLocked()
	f.acked = qp.comp.psn
	f.keep = false
	if !qp.sendingLocked() {
		qp.endFlightLocked(false)
		return
	}
	if n := min(retired, f.held-need); n > 0 {
		b.mu.Lock()
		f.held -= n
		b.unlinkLocked(qp)
		b.putLocked(n)
		b.mu.Unlock()
	}
}

// endFlightLocked settles the QP's share after the requester's pass.
// Unless the pass stopped at its bound with more to send (left), for the
// budget or for its pacer (flight.keep), it gives back what the QP holds
// beyond its PSNs in flight and what it was granted, and leaves the
// line. A QP that stopped in the middle of a message keeps what it took
// for the rest: the packet it stopped after asked for an
// acknowledgement only if the budget's edge was there
// (atFlightEdgeLocked).
func (qp *QP) endFlightLocked(left bool) {
	f := &qp.flight
	b := f.b
	if b == nil || qp.sendingLocked() && (left || f.keep) {
		return
	}
	need := qp.inFlightLocked()
	b.mu.Lock()
	b.unlinkLocked(qp)
	f.held += f.granted
	f.granted = 0
	if f.held > need {
		n := f.held - need
		f.held = need
		b.putLocked(n)
	}
	b.mu.Unlock()
}

// takeFlightLocked reports whether the QP holds budget for its PSNs in
// flight up to end (not included), the PSN after the packet the
// requester is about to send, taking what it lacks from the budget, and
// more for the packets after it, up to want PSNs beyond the oldest
// unacknowledged one. When it cannot (the budget is spent, or other QPs
// wait for it first), the QP waits in line and is woken
// (Config.Waker) once it was granted what it lacks.
func (qp *QP) takeFlightLocked(end wire.PSN, want int32) bool {
	f := &qp.flight
	b := f.b
	if b == nil {
		return true
	}
	cost := qp.psnCostLocked()
	base := qp.comp.psn
	need := max(int(end.Diff(base)), 1) * cost
	if need > b.limit && qp.req.psn == base {
		// A READ larger than the whole budget goes alone, once the QP
		// holds the whole of it.
		need = b.limit
	}
	if need <= f.held {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f.held += f.granted
	f.granted = 0
	if need <= f.held {
		if b.unlinkLocked(qp) {
			b.grantLocked()
		}
		return true
	}
	lack := need - f.held
	more := max(min(int(want)*cost, b.limit)-f.held, lack)
	if (b.head == nil || b.head == qp) && b.free >= lack {
		g := min(more, b.free)
		b.free -= g
		f.held += g
		if b.unlinkLocked(qp) {
			b.grantLocked() // the next in line may be served too
		}
		return true
	}
	f.need, f.want = lack, more
	f.keep = true
	if !f.waiting {
		f.waiting = true
		f.prev, f.next = b.tail, nil
		if b.tail != nil {
			b.tail.flight.next = qp
		} else {
			b.head = qp
		}
		b.tail = qp
	}
	return false
}

// atFlightEdgeLocked reports whether the packet the requester is about
// to send at its PSN is the last its share of the budget covers: it then
// asks for an acknowledgement (AckReq), as at its window's edge, since
// only one lets it, or the QPs waiting, go on.
func (qp *QP) atFlightEdgeLocked() bool {
	f := &qp.flight
	if f.b == nil {
		return false
	}
	return (int(qp.req.psn.Diff(qp.comp.psn))+2)*qp.psnCostLocked() > f.held
}

// putLocked returns n bytes to the budget and serves the line; b.mu is
// held.
func (b *PeerBudget) putLocked(n int) {
	b.free += n
	b.grantLocked()
}

// grantLocked sets aside for the QPs waiting, first in line first, what
// each asked for, and wakes them; b.mu is held. A grant waits until the
// budget has what the QP asked for (a quarter of the budget at most), or
// at least what it lacks for its next packet if that is more: a QP woken
// for a few PSNs would send them alone, and the wake-ups, a hand-off to
// its processor each, not the budget, would bound the transfer. The
// first in line waits with the others behind it, so a QP that needs much
// (a large READ) is not passed over for ever by QPs that need little.
func (b *PeerBudget) grantLocked() {
	for b.head != nil {
		q := b.head
		f := &q.flight
		if b.free < max(f.need, min(f.want, b.limit/4)) {
			return
		}
		g := min(f.want, b.free)
		b.free -= g
		f.granted += g
		b.unlinkLocked(q)
		q.cfg.Waker.Wake()
	}
}

// unlinkLocked takes q out of the line if it is in it and reports
// whether it was at its head; b.mu is held.
func (b *PeerBudget) unlinkLocked(q *QP) (wasHead bool) {
	f := &q.flight
	if !f.waiting {
		return false
	}
	wasHead = b.head == q
	if f.prev != nil {
		f.prev.flight.next = f.next
	} else {
		b.head = f.next
	}
	if f.next != nil {
		f.next.flight.prev = f.prev
	} else {
		b.tail = f.prev
	}
	f.prev, f.next, f.waiting = nil, nil, false
	return wasHead
}

// PeerAddr returns the address of the QP's peer, its path's destination
// (the budget the engine gives it is that address's: SetBudget); false
// before a path was set. Safe from any goroutine.
func (qp *QP) PeerAddr() (netip.Addr, bool) {
	if p := qp.peerAddr.Load(); p != nil {
		return *p, true
	}
	return netip.Addr{}, false
}
