package cm

// SetNotify has f called each time the channel's queue turns from empty
// to not empty (f(true)) and back (f(false)), and once at once with its
// state now; nil stops the calls. softnic's librdmacm keeps the
// channel's file descriptor readable exactly while an event waits, as
// the kernel's rdma_cm file polls (ucma.c ucma_poll: readable while the
// file's event list is not empty). f runs with the CM's lock held: it
// must not call the CM.
func (ch *EventChannel) SetNotify(f func(ready bool)) {
	if ch == nil || ch.c == nil {
		return
	}
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	ch.onReady = f
	ch.ready = len(ch.q) > 0
	if f != nil {
		f(ch.ready)
	}
}

// changed tells SetNotify's function when the queue's emptiness changed.
// c.mu held.
func (ch *EventChannel) changed() {
	r := len(ch.q) > 0
	if r == ch.ready {
		return
	}
	ch.ready = r
	if ch.onReady != nil {
		ch.onReady(r)
	}
}
