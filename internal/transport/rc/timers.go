package rc

// The QP's timers: the retransmit timer and the RNR timer. Callbacks only
// set a flag and wake the QP (STYLE.md 9); the processor acts on them in
// timersLocked. Nothing here reads the clock: the processor pass passes
// its time in (STYLE.md 10); the RNR timer table is rnrTimeout.

import (
	"time"

	"github.com/softnic/softnic/ibv"
)

// armRetryLocked starts the retransmit timer at time now if it is not
// running (rxe_req.c: mod_timer when not pending). Progress only pushes
// the deadline; the timer re-arms itself for the remainder when it fires
// early, so the common path never touches the timer.
func (qp *QP) armRetryLocked(now time.Time) {
	if qp.timeout == 0 {
		return // timeout 0: no retransmit timer at all (rxe_qp.c)
	}
	if qp.retryArmed {
		return
	}
	qp.retryDeadline = now.Add(qp.timeout)
	qp.retryArmed = true
	qp.resetTimerLocked(now, qp.timeout)
}

// resetTimerLocked makes the retransmit timer fire d after now.
func (qp *QP) resetTimerLocked(now time.Time, d time.Duration) {
	qp.timerAt = now.Add(d)
	if qp.retryTimer == nil {
		qp.retryTimer = qp.cfg.Clock.AfterFunc(d, qp.onRetryTimer)
	} else {
		qp.retryTimer.Reset(d)
	}
}

// minProbeTimeout bounds the early retry's timeout from below
// (armProbeLocked): a round trip measured on an idle loopback is a few
// µs, and a retry sooner than a scheduler's hiccup only resends packets.
const minProbeTimeout = 100 * time.Microsecond

// armProbeLocked arms the early retry after a request sent or an
// acknowledgement received at now, while losses keep the window small
// (completer.win below MaxUnackedPSNs) or responses are missing behind
// some received (completer.holesLocked), and a round trip has been
// measured: if no acknowledgement moves within two round trips, the
// requester goes back to the oldest unacknowledged PSN as the retransmit
// timer would, but without spending a retry or counting a timeout. With
// a small window the last packets in flight are often the lost ones,
// nothing behind them makes the responder NAK, and a NAK that was lost
// is never sent again (the responder NAKs a gap once, IBTA 9.7.5.1.2),
// so waiting for the local ACK timeout (67 ms at timeout 14) would cost
// most of the time a lossy transfer takes. The retransmit timer keeps its
// meaning: the local ACK timeout after which a retry is spent, and the
// peer declared dead when none is left (9.7.6.1.3). The timeout is two
// round trips (RACK-TLP, RFC 8985 7.2), or the round trip and four times
// its variation if that is longer (RFC 6298's RTO), doubled for each
// early retry since the last progress (6298 5.5's backoff): a silent peer
// is not flooded while the retransmit timer decides it is dead. The
// common path, a window at its full size, never arms it.
func (qp *QP) armProbeLocked(now time.Time) {
	c := &qp.comp
	if qp.timeout == 0 || c.srtt == 0 || c.win >= MaxUnackedPSNs && !c.holesLocked() || !qp.retryArmed || qp.req.rnrWait {
		return
	}
	pto := max(2*c.srtt, c.srtt+4*c.rttvar, minProbeTimeout) << c.probes
	qp.probeAt, qp.probeArmed = now.Add(pto), true
	if qp.probeAt.Before(qp.timerAt) {
		qp.resetTimerLocked(now, pto)
	}
}

func (qp *QP) stopRetryLocked() {
	qp.probeArmed = false
	if qp.retryArmed {
		qp.retryArmed = false
		qp.retryTimer.Stop()
	}
}

func (qp *QP) armRNRLocked(d time.Duration) {
	if qp.rnrTimer == nil {
		qp.rnrTimer = qp.cfg.Clock.AfterFunc(d, qp.onRNRTimer)
	} else {
		qp.rnrTimer.Reset(d)
	}
}

func (qp *QP) stopTimersLocked() {
	qp.stopRetryLocked()
	if qp.rnrTimer != nil {
		qp.rnrTimer.Stop()
	}
	qp.pace.Stop()
	qp.stopReorderLocked()
	qp.req.rnrWait = false
}

// Timer callbacks only set a flag and wake the QP (STYLE.md 9).
func (qp *QP) onRetryTimer() { qp.timerFired.Store(true); qp.cfg.Waker.Wake() }
func (qp *QP) onRNRTimer()   { qp.rnrFired.Store(true); qp.cfg.Waker.Wake() }

// noWaker is the Waker of a QP made without one (Config.Waker).
type noWaker struct{}

func (noWaker) Wake() {}

// timersLocked acts on the timers fired by time now.
func (qp *QP) timersLocked(now time.Time) {
	if qp.timerFired.Swap(false) && qp.retryArmed {
		if qp.probeArmed && !now.Before(qp.probeAt) {
			// Due: the early retry, unless an RNR wait holds the
			// requester (its timer resumes it).
			qp.probeArmed = false
			if !qp.req.rnrWait {
				qp.comp.earlyRetryLocked(qp)
			}
		}
		if left := qp.retryDeadline.Sub(now); left > 0 {
			// Progress pushed the deadline out, or the probe came first.
			if qp.probeArmed && qp.probeAt.Before(qp.retryDeadline) {
				left = qp.probeAt.Sub(now)
			}
			qp.resetTimerLocked(now, left)
		} else {
			qp.retryArmed = false
			if qp.isRC() && (qp.state == ibv.QPStateRTS || qp.state == ibv.QPStateSQD) && !qp.req.rnrWait {
				qp.cfg.Counters.Timeouts.Add(1)
				qp.comp.triggerRetryLocked(qp, true, now)
			}
		}
	}
	if qp.rnrFired.Swap(false) && qp.req.rnrWait {
		qp.req.rnrWait = false
		qp.req.needRetry = true
	}
}
