package nic

// Asynchronous events (ibv_get_async_event): the NIC's queue of them, which
// the transports' events (QP fatal, SQ drained, ...), the CQs' overruns,
// the SRQs' limits and the port's activation fill, and its readers.

import (
	"context"

	"github.com/softnic/softnic/ibv"
)

// GetAsyncEvent takes the oldest queued asynchronous event, waiting for
// one until ctx ends (ibv_get_async_event). Once the NIC is closed and
// its queue is empty it fails with ErrClosed. It shares the queue with
// AsyncEvents: each event is returned once, by one of them.
func (n *NIC) GetAsyncEvent(ctx context.Context) (ibv.AsyncEvent, error) {
	for {
		n.asyncMu.Lock()
		if len(n.async) > 0 {
			ev := n.async[0]
			n.async[0] = ibv.AsyncEvent{}
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
			return ibv.AsyncEvent{}, ErrClosed
		}
		select {
		case <-n.asyncC:
		case <-n.done:
		case <-ctx.Done():
			return ibv.AsyncEvent{}, ctx.Err()
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
func (n *NIC) dropAsync(drop func(*ibv.AsyncEvent) bool) {
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
	n.dropAsync(func(e *ibv.AsyncEvent) bool { return e.Other == obj })
}

// postEvent posts an event of type t about qp.
func (qp *QP) postEvent(t ibv.AsyncEventType) {
	qp.n.postAsync(ibv.AsyncEvent{Type: t, QPN: qp.qpn, Other: qp.ctx})
}

// postAsync queues an asynchronous event.
func (n *NIC) postAsync(ev ibv.AsyncEvent) {
	n.asyncMu.Lock()
	if len(n.async) < 4096 {
		n.async = append(n.async, ev)
	}
	n.asyncMu.Unlock()
	n.signalAsync()
}

// PostAsync queues an asynchronous event from another part of the engine.
func (n *NIC) PostAsync(ev ibv.AsyncEvent) { n.postAsync(ev) }

// AsyncEvents returns and clears the queued asynchronous events.
func (n *NIC) AsyncEvents() []ibv.AsyncEvent {
	n.asyncMu.Lock()
	defer n.asyncMu.Unlock()
	evs := n.async
	n.async = nil
	return evs
}

// AsyncReady is signalled when events are queued.
func (n *NIC) AsyncReady() <-chan struct{} { return n.asyncC }
