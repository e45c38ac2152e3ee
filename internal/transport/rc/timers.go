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
	if qp.retryTimer == nil {
		qp.retryTimer = qp.cfg.Clock.AfterFunc(qp.timeout, qp.onRetryTimer)
	} else {
		qp.retryTimer.Reset(qp.timeout)
	}
}

func (qp *QP) stopRetryLocked() {
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
		if left := qp.retryDeadline.Sub(now); left > 0 {
			qp.retryTimer.Reset(left) // progress pushed the deadline out
		} else {
			qp.retryArmed = false
			if qp.isRC() && (qp.state == ibv.QPStateRTS || qp.state == ibv.QPStateSQD) && !qp.req.rnrWait {
				qp.cfg.Counters.Timeouts.Add(1)
				qp.comp.triggerRetryLocked(qp, true)
			}
		}
	}
	if qp.rnrFired.Swap(false) && qp.req.rnrWait {
		qp.req.rnrWait = false
		qp.req.needRetry = true
	}
}
