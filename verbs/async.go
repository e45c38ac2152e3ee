package verbs

import (
	"context"
	"fmt"
	"sync"

	"github.com/softnic/softnic/ibv"
)

// Asynchronous events
//
// A Device queues the asynchronous events of its objects, and
// GetAsyncEvent takes them one at a time (ibv_get_async_event). The event
// types softnic raises, each exactly once per occurrence:
//
//   - EventPortActive: when the device is opened on a link that is up
//     (rxe_enable_driver's rxe_set_port_state), and whenever the link
//     comes back up after a fall (rxe_port_up on NETDEV_UP or
//     NETDEV_CHANGE).
//   - EventPortErr: when the device is opened on a link that is down,
//     and whenever the link goes down (rxe_port_down: the interface set
//     down or losing its carrier, or the link closed under the device);
//     each counts link_downed. See QueryPort.
//   - EventCQErr: a CQ overran (Other is the *CQ); the QP whose
//     completion was lost goes to ERR and raises EventQPFatal.
//   - EventQPFatal: a QP went to ERR on its own: retries or RNR retries
//     exhausted, a NAK, a local error, a CQ overrun. Not raised when a
//     Modify (or a drain) moves it there.
//   - EventQPReqErr, EventQPAccessErr: the QP's responder refused a
//     request as invalid or for its access rights (IBTA 11.6.3.1: the
//     invalid request and access violation errors), then went to ERR
//     (and raised EventQPFatal).
//   - EventSQDrained: a QP moved to SQD with QPAttrEnSQDAsyncNotify has
//     nothing outstanding left.
//   - EventQPLastWQEReached: a QP on an SRQ entered ERR (once per stay
//     in ERR): it takes no more WQEs from the SRQ.
//   - EventSRQLimitReached: an armed SRQ fell below its limit (Other is
//     the *SRQ); once per arming.
//
// QP events carry the QP's number in QPN and the *QP in Other. softnic
// never raises EventPathMig or EventPathMigErr: RoCE has no alternate
// path (QPAttrAltPath is refused) and QP.Modify accepts
// QPAttrPathMigState only with 0 (IBV_MIG_MIGRATED), so migration is
// never armed. Nor does it raise EventCommEst (rxe does not either),
// EventSRQErr, EventWQFatal, EventDeviceFatal or the LID, P_Key, SM and
// GID change events: nothing in softnic produces them.
//
// Every event GetAsyncEvent returns must be acknowledged with
// AckAsyncEvent; until then the QP, CQ, SRQ or WQ it is about cannot be
// destroyed (EBUSY, where ibv_destroy_* would wait). Destroying an object
// drops its events still queued, as the kernel does. AsyncEvents, the
// older batch interface, takes events from the same queue without
// needing acknowledgements.

// asyncAcks counts the events GetAsyncEvent returned and AckAsyncEvent
// has not acknowledged, per object (nil for port events).
type asyncAcks struct {
	mu      sync.Mutex
	unacked map[any]int // guarded by mu
}

// GetAsyncEvent waits for the device's next asynchronous event and
// returns it (ibv_get_async_event); ctx bounds the wait, and its error is
// returned as is when it ends first. Once the device is closed and no
// event is left it fails with ENODEV. Acknowledge each event with
// AckAsyncEvent.
func (d *Device) GetAsyncEvent(ctx context.Context) (ibv.AsyncEvent, error) {
	if !d.ok() {
		return ibv.AsyncEvent{}, errNil("Device")
	}
	if ctx == nil {
		return ibv.AsyncEvent{}, errNilCtx
	}
	ev, err := d.n.GetAsyncEvent(ctx)
	if err != nil {
		return ibv.AsyncEvent{}, err
	}
	d.acks.mu.Lock()
	if d.acks.unacked == nil {
		d.acks.unacked = make(map[any]int)
	}
	d.acks.unacked[ev.Other]++
	d.acks.mu.Unlock()
	return ev, nil
}

// AckAsyncEvent acknowledges an event GetAsyncEvent returned
// (ibv_ack_async_event). Acknowledging more events about an object than
// were returned is EINVAL.
func (d *Device) AckAsyncEvent(ev ibv.AsyncEvent) error {
	if !d.ok() {
		return errNil("Device")
	}
	d.acks.mu.Lock()
	defer d.acks.mu.Unlock()
	n := d.acks.unacked[ev.Other]
	if n == 0 {
		return fmt.Errorf("%w: %v was not returned by GetAsyncEvent, or already acknowledged", EINVAL, ev)
	}
	if n == 1 {
		delete(d.acks.unacked, ev.Other)
	} else {
		d.acks.unacked[ev.Other] = n - 1
	}
	return nil
}

// asyncBusy refuses to destroy obj while events about it are not
// acknowledged.
func (d *Device) asyncBusy(obj any) error {
	if !d.ok() {
		return nil
	}
	d.acks.mu.Lock()
	n := d.acks.unacked[obj]
	d.acks.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("%w: %d asynchronous events about it not acknowledged", EBUSY, n)
	}
	return nil
}
