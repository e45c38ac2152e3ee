package nic

import (
	"sync/atomic"
	"time"
)

// TimerSlot keeps one stopped wall-clock timer for a blocking wait to use
// again, so that a wait per message (WaitActivity, a completion channel's
// GetEventTimeout) allocates nothing. One slot: a wait that finds it
// empty, another using its timer, makes its own. Not a sync.Pool, which
// under the race detector drops a quarter of what it is given; and owned
// by an object (a NIC, a channel), not by a package, as a timer made in a
// testing/synctest bubble must not be used outside it. Wall time, not the
// NIC's clock: it bounds an application's wait, no protocol timer.
type TimerSlot struct{ t atomic.Pointer[time.Timer] }

// Start returns a timer that fires after d: the slot's, or a new one.
// Give it back with Done.
func (s *TimerSlot) Start(d time.Duration) *time.Timer {
	t := s.t.Swap(nil)
	if t == nil {
		return time.NewTimer(d)
	}
	t.Reset(d)
	return t
}

// Done stops t, a timer Start returned, and keeps it for the next Start
// unless the slot holds one already. (Since Go 1.23 a stopped timer's
// channel holds no stale value.)
func (s *TimerSlot) Done(t *time.Timer) {
	t.Stop()
	s.t.CompareAndSwap(nil, t)
}
