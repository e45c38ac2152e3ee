package transport

import "sync"

// AsyncEvent is an affiliated asynchronous event a transport raises about
// its QP, the same for RC, UC and UD. The engine turns each into the
// public ibv_event_type (nic.AsyncEventType); EventQPFatal also raises
// IBV_EVENT_QP_LAST_WQE_REACHED for a QP on an SRQ.
type AsyncEvent uint8

const (
	// EventQPFatal: the QP moved to ERR (IBV_EVENT_QP_FATAL when it went
	// there on its own: retries exhausted, a CQ overrun, a receive WQE
	// the memory table refused).
	EventQPFatal AsyncEvent = iota + 1
	// EventSQDrained: the QP is in SQD with EnSQDAsyncNotify and its send
	// queue has nothing in flight (IBV_EVENT_SQ_DRAINED).
	EventSQDrained
	// EventQPReqErr: the responder detected an invalid request
	// (IBV_EVENT_QP_REQ_ERR).
	EventQPReqErr
	// EventQPAccessErr: the responder refused a remote access
	// (IBV_EVENT_QP_ACCESS_ERR).
	EventQPAccessErr
)

// EventQueue holds the events a QP raises while its lock is held until
// Deliver reports them with the lock released.
type EventQueue struct {
	evs []AsyncEvent
}

// Add queues ev; the caller holds the QP's lock.
func (q *EventQueue) Add(ev AsyncEvent) { q.evs = append(q.evs, ev) }

// Deliver takes the queued events under mu, then passes each to report
// with mu released. A nil report drops them.
func (q *EventQueue) Deliver(mu *sync.Mutex, report func(AsyncEvent)) {
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
