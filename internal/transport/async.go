package transport

import (
	"sync"

	"github.com/softnic/softnic/ibv"
)

// EventQueue holds the affiliated asynchronous events a QP's transport
// raises while its lock is held, until Deliver reports them with the lock
// released. RC, UC and UD raise the same four, as the public
// ibv_event_type values: EventQPFatal (the QP moved to ERR on its own:
// retries exhausted, a CQ overrun, a receive WQE the memory table refused;
// the engine adds IBV_EVENT_QP_LAST_WQE_REACHED for a QP on an SRQ),
// EventSQDrained (SQD with EnSQDAsyncNotify and nothing in flight),
// EventQPReqErr (the responder detected an invalid request) and
// EventQPAccessErr (it refused a remote access).
type EventQueue struct {
	evs []ibv.AsyncEventType
}

// Add queues ev; the caller holds the QP's lock.
func (q *EventQueue) Add(ev ibv.AsyncEventType) { q.evs = append(q.evs, ev) }

// Deliver takes the queued events under mu, then passes each to report
// with mu released. A nil report drops them.
func (q *EventQueue) Deliver(mu *sync.Mutex, report func(ibv.AsyncEventType)) {
	mu.Lock()
	evs := q.evs
	q.evs = nil
	mu.Unlock()
	if report != nil {
		for _, ev := range evs {
			report(ev)
		}
	}
}
