package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Manual is a clock that moves only when told to, for deterministic tests
// (quic-go's mocked clocks; gvisor faketime.ManualClock). Timers fire
// synchronously, in deadline order, in the goroutine that calls Advance,
// Set or AdvanceToNext; timers with the same deadline fire in the order
// they were armed. While a timer's callback runs, Now returns the timer's
// deadline.
//
// A Manual is safe for concurrent use. Callbacks run without the clock's
// lock held, so they may read the time and arm, stop or reset timers.
type Manual struct {
	mu     sync.Mutex
	now    time.Time  // guarded by mu
	seq    uint64     // guarded by mu; arming order, the tie-breaker
	timers manualHeap // guarded by mu
}

var _ Clock = (*Manual)(nil)

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start}
}

// Now returns the clock's current time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms a timer that calls f once the clock has been advanced by
// at least d. A timer with d <= 0 fires at the next Advance (even
// Advance(0)), Set or AdvanceToNext, never inside AfterFunc itself.
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	t := &manualTimer{c: c, f: f, idx: -1}
	c.mu.Lock()
	c.armLocked(t, d)
	c.mu.Unlock()
	return t
}

func (c *Manual) armLocked(t *manualTimer, d time.Duration) {
	t.when = c.now.Add(d)
	t.seq = c.seq
	c.seq++
	if t.idx >= 0 {
		heap.Fix(&c.timers, t.idx)
	} else {
		heap.Push(&c.timers, t)
	}
}

// Advance moves the clock forward by d, firing every timer due at or
// before the new time in deadline order. Timers armed by those callbacks
// that fall due within the span fire too. It panics if d is negative.
func (c *Manual) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Manual.Advance with a negative duration")
	}
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.advanceTo(target)
}

// Set moves the clock to t. Moving forward fires timers as Advance does;
// moving backward fires nothing, and pending timers keep their deadlines.
func (c *Manual) Set(t time.Time) {
	c.mu.Lock()
	if t.Before(c.now) {
		c.now = t
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.advanceTo(t)
}

// NextDeadline returns the earliest deadline among pending timers, and
// false when no timer is pending.
func (c *Manual) NextDeadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].when, true
}

// AdvanceToNext moves the clock to the earliest pending deadline (or
// leaves it where it is, if that deadline has passed) and fires every
// timer due by then, including ones their callbacks arm for that instant.
// It reports whether any timer was pending. `for c.AdvanceToNext() {}`
// runs a simulation until it goes quiet.
func (c *Manual) AdvanceToNext() bool {
	next, ok := c.NextDeadline()
	if !ok {
		return false
	}
	c.advanceTo(next)
	return true
}

// Pending returns the number of armed timers that have not fired.
func (c *Manual) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// advanceTo fires timers due at or before target, one at a time and
// without the lock, then leaves the clock at target (never moving it back).
func (c *Manual) advanceTo(target time.Time) {
	for {
		c.mu.Lock()
		if len(c.timers) == 0 || c.timers[0].when.After(target) {
			if target.After(c.now) {
				c.now = target
			}
			c.mu.Unlock()
			return
		}
		t := heap.Pop(&c.timers).(*manualTimer)
		if t.when.After(c.now) {
			c.now = t.when
		}
		f := t.f
		c.mu.Unlock()
		f()
	}
}

// manualTimer is a Timer of a Manual clock.
type manualTimer struct {
	c    *Manual
	f    func()
	when time.Time // guarded by c.mu
	seq  uint64    // guarded by c.mu
	idx  int       // index in c.timers, -1 when not pending; guarded by c.mu
}

// Stop disarms the timer and reports whether it was pending.
func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.idx < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.idx)
	return true
}

// Reset re-arms the timer to fire d after the clock's current time, whether
// or not it has fired or been stopped, and reports whether it was pending.
func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	pending := t.idx >= 0
	t.c.armLocked(t, d)
	return pending
}

// manualHeap orders timers by deadline, then arming order.
type manualHeap []*manualTimer

func (h manualHeap) Len() int { return len(h) }

func (h manualHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}

func (h manualHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

func (h *manualHeap) Push(x any) {
	t := x.(*manualTimer)
	t.idx = len(*h)
	*h = append(*h, t)
}

func (h *manualHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}
