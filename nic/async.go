package nic

import (
	"context"
	"fmt"
)

// Which object an asynchronous event is about (the union element of
// struct ibv_async_event): none for port and device events.
const (
	evDevice uint8 = iota // device or port: no object
	evQP
	evCQ
	evSRQ
	evWQ
)

// asyncEventInfo is the ibv_event_type table: each event's enum name and
// the kind of object it is about.
var asyncEventInfo = [...]struct {
	name string
	obj  uint8
}{
	EventCQErr:            {"CQ_ERR", evCQ},
	EventQPFatal:          {"QP_FATAL", evQP},
	EventQPReqErr:         {"QP_REQ_ERR", evQP},
	EventQPAccessErr:      {"QP_ACCESS_ERR", evQP},
	EventCommEst:          {"COMM_EST", evQP},
	EventSQDrained:        {"SQ_DRAINED", evQP},
	EventPathMig:          {"PATH_MIG", evQP},
	EventPathMigErr:       {"PATH_MIG_ERR", evQP},
	EventDeviceFatal:      {"DEVICE_FATAL", evDevice},
	EventPortActive:       {"PORT_ACTIVE", evDevice},
	EventPortErr:          {"PORT_ERR", evDevice},
	EventLIDChange:        {"LID_CHANGE", evDevice},
	EventPKeyChange:       {"PKEY_CHANGE", evDevice},
	EventSMChange:         {"SM_CHANGE", evDevice},
	EventSRQErr:           {"SRQ_ERR", evSRQ},
	EventSRQLimitReached:  {"SRQ_LIMIT_REACHED", evSRQ},
	EventQPLastWQEReached: {"QP_LAST_WQE_REACHED", evQP},
	EventClientReregister: {"CLIENT_REREGISTER", evDevice},
	EventGIDChange:        {"GID_CHANGE", evDevice},
	EventWQFatal:          {"WQ_FATAL", evWQ},
}

// String returns the event type's enum name without its IBV_EVENT_
// prefix ("QP_FATAL", "SRQ_LIMIT_REACHED").
func (t AsyncEventType) String() string {
	if int(t) < len(asyncEventInfo) {
		return asyncEventInfo[t].name
	}
	return fmt.Sprintf("AsyncEventType(%d)", uint8(t))
}

// IsQPEvent reports whether the event is about a QP (element.qp): its
// AsyncEvent carries the QP's number and object.
func (t AsyncEventType) IsQPEvent() bool {
	return int(t) < len(asyncEventInfo) && asyncEventInfo[t].obj == evQP
}

// String describes the event for logs: its type and its object.
func (e AsyncEvent) String() string {
	switch {
	case e.Type.IsQPEvent():
		return fmt.Sprintf("%v QP %#x", e.Type, e.QPN)
	case e.Other != nil:
		return fmt.Sprintf("%v %T", e.Type, e.Other)
	}
	return e.Type.String()
}

// GetAsyncEvent takes the oldest queued asynchronous event, waiting for
// one until ctx ends (ibv_get_async_event). Once the NIC is closed and
// its queue is empty it fails with ErrClosed. It shares the queue with
// AsyncEvents: each event is returned once, by one of them.
func (n *NIC) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	for {
		n.asyncMu.Lock()
		if len(n.async) > 0 {
			ev := n.async[0]
			n.async[0] = AsyncEvent{}
			n.async = n.async[1:]
			more := len(n.async) > 0
			n.asyncMu.Unlock()
			if more {
				n.signalAsync() // the next waiter
			}
			return ev, nil
		}
		n.asyncMu.Unlock()
		if n.closed.Load() {
			return AsyncEvent{}, ErrClosed
		}
		select {
		case <-n.asyncC:
		case <-n.done:
		case <-ctx.Done():
			return AsyncEvent{}, ctx.Err()
		}
	}
}

func (n *NIC) signalAsync() {
	select {
	case n.asyncC <- struct{}{}:
	default:
	}
}

// dropAsync removes the queued events drop selects: those of an object
// being destroyed, which the kernel's uverbs frees with the object
// (ib_uverbs_release_uevent) so that no event outlives its object.
func (n *NIC) dropAsync(drop func(*AsyncEvent) bool) {
	n.asyncMu.Lock()
	defer n.asyncMu.Unlock()
	k := 0
	for i := range n.async {
		if !drop(&n.async[i]) {
			n.async[k] = n.async[i]
			k++
		}
	}
	clear(n.async[k:])
	n.async = n.async[:k]
}

// DropAsyncFor removes the queued events whose Other is obj (a CQ or
// SRQ being destroyed; see dropAsync).
func (n *NIC) DropAsyncFor(obj any) {
	if obj == nil {
		return
	}
	n.dropAsync(func(e *AsyncEvent) bool { return e.Other == obj })
}

// postEvent posts an event of type t about qp.
func (qp *QP) postEvent(t AsyncEventType) {
	qp.n.postAsync(AsyncEvent{Type: t, QPN: qp.qpn, Other: qp.ctx})
}
