// Package cq implements completion queues: ibv_create_cq(3),
// ibv_poll_cq(3), ibv_req_notify_cq(3), ibv_resize_cq(3) and completion
// channels (ibv_create_comp_channel(3), ibv_get_cq_event(3),
// ibv_ack_cq_events(3)), after rxe's rxe_cq.c and the kernel's uverbs
// completion-event queue.
//
// A CQ is a ring of ibv.WorkCompletion behind one mutex. The engine
// pushes from any goroutine; the consumer polls. Neither allocates.
package cq

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/transport"
)

// MaxCQE is rxe's largest CQ (RXE_MAX_CQE, 1<<RXE_MAX_LOG_CQE - 1).
const MaxCQE = 1<<15 - 1

// The package's errors besides errno's Invalid (a bad argument or a
// destroyed object) and Busy (a CQ still in use by QPs or SRQs, with
// completion events not yet acknowledged, or a channel with CQs
// attached).
var (
	// ErrOverflow reports an overrun CQ (IBTA 11.4.2.1: the CQ is in
	// error and can only be destroyed): EINVAL.
	ErrOverflow = errno.New("cq: completion queue overrun", syscall.EINVAL)
	// ErrClosed reports a closed completion channel: EINVAL.
	ErrClosed = errno.New("cq: channel closed", syscall.EINVAL)
	// ErrTimedOut reports a wait for a channel's event that ran out of
	// time: ETIMEDOUT.
	ErrTimedOut = errno.New("cq: no event in time", syscall.ETIMEDOUT)
)

var _ transport.CQ = (*CQ)(nil)

// arm is a CQ's notification request (the kernel's cq->notify).
type arm uint8

const (
	armNone      arm = iota
	armNext          // IB_CQ_NEXT_COMP: any new completion
	armSolicited     // IB_CQ_SOLICITED: a solicited or unsuccessful one
)

// CQ is a completion queue.
type CQ struct {
	maxCQE int

	mu         sync.Mutex
	ring       []ibv.WorkCompletion // guarded by mu; length a power of two
	mask       uint32               // guarded by mu; len(ring)-1
	head, tail uint32               // guarded by mu; consumer and producer counts
	cqe        int                  // guarded by mu; capacity, len(ring)-1
	arm        arm                  // guarded by mu
	overflowed bool                 // guarded by mu
	destroyed  bool                 // guarded by mu
	notify     func()               // guarded by mu
	onOverflow func()               // guarded by mu
	ch         *Channel             // guarded by mu

	// Moderation (Moderate): an armed CQ's event waits for modCount
	// completions that satisfy the arm, or modPeriod after the first of
	// them, whichever comes first; pending counts them since the arm.
	modCount  int           // guarded by mu; 0: no count bound
	modPeriod time.Duration // guarded by mu; 0: no time bound
	pending   int           // guarded by mu
	modClock  clock.Clock   // guarded by mu
	modTimer  clock.Timer   // guarded by mu; running while pending > 0 and modPeriod > 0

	// stamps, when the CQ records completion times (Stamp), holds each
	// ring slot's time of Push as Unix nanoseconds of stampClock.
	stamps     []int64     // guarded by mu
	stampClock clock.Clock // guarded by mu

	context atomic.Value // the creator's cq_context (ibv_create_cq), returned with events

	dead   atomic.Bool  // destroyed, for the channel
	refs   atomic.Int32 // QPs and SRQs using the CQ
	events atomic.Int64 // completion events handed out by a channel
	acked  atomic.Int64 // of which acknowledged (ibv_ack_cq_events)
}

// SetContext records the creator's context for the CQ (ibv_create_cq's
// cq_context), which consumers of the CQ's events read back with Context.
func (c *CQ) SetContext(v any) { c.context.Store(v) }

// Context returns what SetContext stored, or nil.
func (c *CQ) Context() any { return c.context.Load() }

// ringLen is the ring length for a request of cqe entries: rxe_queue_init
// rounds cqe+1 slots up to a power of two and reports one less, so
// ibv_create_cq(100) gets 127 entries.
func ringLen(cqe int) int { return 1 << bits.Len(uint(cqe)) }

func checkCQE(cqe, maxCQE int) error {
	if cqe <= 0 || cqe > maxCQE {
		return fmt.Errorf("%w: cqe %d not in 1..%d", errno.Invalid, cqe, maxCQE)
	}
	return nil
}

// New creates a CQ for at least cqe completions (ibv_create_cq;
// rxe_cq_chk_attr refuses cqe < 1 and cqe > max_cqe). The capacity is
// rounded as rxe rounds it, to a power of two minus one; Cap reports it.
func New(cqe int, maxCQE int) (*CQ, error) {
	if maxCQE <= 0 {
		return nil, fmt.Errorf("%w: max_cqe %d", errno.Invalid, maxCQE)
	}
	if err := checkCQE(cqe, maxCQE); err != nil {
		return nil, err
	}
	n := ringLen(cqe)
	return &CQ{
		maxCQE: maxCQE,
		ring:   make([]ibv.WorkCompletion, n),
		mask:   uint32(n - 1),
		cqe:    n - 1,
	}, nil
}

// Cap returns the number of completions the CQ holds (ibv_cq.cqe).
func (c *CQ) Cap() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cqe
}

// Len returns the number of completions waiting to be polled.
func (c *CQ) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.tail - c.head)
}

// Overflowed reports whether the CQ has overrun.
func (c *CQ) Overflowed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overflowed
}

// Push adds a completion (rxe_cq_post). solicited marks a receive
// completion of a message with the Solicited Event bit. It returns false
// when the CQ is full: the CQ is then overrun for good (IBTA 11.4.2.1;
// the completion is lost, every later Push fails too) and the overflow
// handler runs once, where the device raises IBV_EVENT_CQ_ERR. When the
// completion satisfies the CQ's notification request, the request is
// consumed, the attached channel gets an event and the notifier runs,
// both outside the lock. Push is safe from many goroutines and does not
// allocate.
func (c *CQ) Push(wc *ibv.WorkCompletion, solicited bool) bool {
	c.mu.Lock()
	if c.destroyed || c.overflowed {
		c.mu.Unlock()
		return false
	}
	if int(c.tail-c.head) == c.cqe {
		c.overflowed = true
		h := c.onOverflow
		c.mu.Unlock()
		if h != nil {
			h()
		}
		return false
	}
	c.ring[c.tail&c.mask] = *wc
	if c.stamps != nil {
		c.stamps[c.tail&c.mask] = c.stampClock.Now().UnixNano()
	}
	c.tail++
	var f func()
	var ch *Channel
	if c.arm == armNext || c.arm == armSolicited && (solicited || wc.Status != ibv.WCSuccess) {
		f, ch = c.moderateLocked()
	}
	c.mu.Unlock()
	c.fire(f, ch)
	return true
}

// moderateLocked counts a completion that satisfies the arm and returns
// what to notify when the event is due: at once without moderation, at
// the modCount-th such completion with a count, else when the period
// started by the first one ends (the timer's expire).
func (c *CQ) moderateLocked() (func(), *Channel) {
	c.pending++
	if c.modCount == 0 && c.modPeriod == 0 || c.modCount > 0 && c.pending >= c.modCount {
		return c.eventLocked()
	}
	if c.modPeriod > 0 && c.pending == 1 {
		if c.modTimer == nil {
			c.modTimer = c.modClock.AfterFunc(c.modPeriod, c.expire)
		} else {
			c.modTimer.Reset(c.modPeriod)
		}
	}
	return nil, nil
}

// eventLocked disarms the CQ for the event it is about to generate and
// returns its notifier and channel.
func (c *CQ) eventLocked() (func(), *Channel) {
	c.arm, c.pending = armNone, 0
	if c.modTimer != nil {
		c.modTimer.Stop()
	}
	return c.notify, c.ch
}

// expire ends a moderation period: the armed CQ's event is due if a
// completion satisfied the arm since.
func (c *CQ) expire() {
	c.mu.Lock()
	var f func()
	var ch *Channel
	if c.arm != armNone && c.pending > 0 && !c.destroyed {
		f, ch = c.eventLocked()
	}
	c.mu.Unlock()
	c.fire(f, ch)
}

// fire generates a completion event, outside the lock.
func (c *CQ) fire(f func(), ch *Channel) {
	if ch != nil {
		ch.post(c)
	}
	if f != nil {
		f()
	}
}

// MaxModCount and MaxModPeriod are the largest moderation Moderate takes
// (ibv_device_attr_ex.cq_mod_caps max_cq_count and max_cq_period, in
// completions and microseconds, as mlx5 reports them).
const (
	MaxModCount  = 1<<16 - 1
	MaxModPeriod = (1<<12 - 1) * time.Microsecond
)

// Moderate sets the CQ's event moderation (ibv_modify_cq with
// IBV_CQ_ATTR_MODERATE): once armed, the CQ generates its event when
// count completions that satisfy the arm have arrived, or period after
// the first of them, whichever comes first; count 0 bounds by time only,
// and count and period both 0 (the default) generate the event at the
// first completion. clk times the period. count above MaxModCount or
// period above MaxModPeriod is EINVAL. It applies from the next
// completion on.
func (c *CQ) Moderate(count int, period time.Duration, clk clock.Clock) error {
	if count < 0 || count > MaxModCount || period < 0 || period > MaxModPeriod {
		return fmt.Errorf("%w: moderation of %d completions or %v not in 0..%d, 0..%v", errno.Invalid,
			count, period, MaxModCount, MaxModPeriod)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.destroyed:
		return fmt.Errorf("%w: CQ destroyed", errno.Invalid)
	case c.overflowed:
		return ErrOverflow
	}
	if c.modTimer != nil && c.modClock != clk {
		c.modTimer.Stop()
		c.modTimer = nil
	}
	c.modCount, c.modPeriod, c.modClock = count, period, clk
	return nil
}

// Stamp makes the CQ record the time of each completion pushed from now
// on, read with clk (ibv_create_cq_ex's completion timestamps); PollStamped
// returns them.
func (c *CQ) Stamp(clk clock.Clock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamps == nil && c.ring != nil {
		c.stamps = make([]int64, len(c.ring))
	}
	c.stampClock = clk
}

// PollStamped is Poll that also returns, in stamps (as long as out), the
// time each completion was pushed as Unix nanoseconds of the clock Stamp
// was given (0 for a completion pushed before Stamp).
func (c *CQ) PollStamped(out []ibv.WorkCompletion, stamps []int64) int {
	c.mu.Lock()
	n := min(len(out), len(stamps), int(c.tail-c.head))
	for k := range n {
		i := c.head & c.mask
		out[k] = c.ring[i]
		stamps[k] = 0
		if c.stamps != nil {
			stamps[k] = c.stamps[i]
		}
		c.head++
	}
	c.mu.Unlock()
	return n
}

// Poll moves up to len(out) completions, oldest first, into out and
// returns how many (ibv_poll_cq). An overrun CQ still gives up the
// completions it holds. Poll does not allocate.
func (c *CQ) Poll(out []ibv.WorkCompletion) int {
	c.mu.Lock()
	n := min(len(out), int(c.tail-c.head))
	if n > 0 {
		i := int(c.head & c.mask)
		k := copy(out[:n], c.ring[i:])
		copy(out[k:n], c.ring)
		c.head += uint32(n)
	}
	c.mu.Unlock()
	return n
}

// ReqNotify arms the CQ (ibv_req_notify_cq): the next completion pushed
// afterwards, or with solicitedOnly the next solicited or unsuccessful
// one, generates one completion event, then the CQ is disarmed. Asking
// for solicited-only while armed for any completion leaves it armed for
// any completion (rxe_req_notify_cq). Completions already queued do not
// generate an event: poll after arming.
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.destroyed:
		return fmt.Errorf("%w: CQ destroyed", errno.Invalid)
	case c.overflowed:
		return ErrOverflow
	case !solicitedOnly:
		c.arm = armNext
	case c.arm != armNext:
		c.arm = armSolicited
	}
	return nil
}

// SetNotifier sets the function a completion event calls, the in-process
// counterpart of the kernel's comp_handler; it runs on the pushing
// goroutine, outside the CQ's lock.
func (c *CQ) SetNotifier(f func()) {
	c.mu.Lock()
	c.notify = f
	c.mu.Unlock()
}

// SetOverflowHandler sets the function an overrun calls once, outside the
// CQ's lock: where the device raises IBV_EVENT_CQ_ERR (rxe_cq_post).
func (c *CQ) SetOverflowHandler(f func()) {
	c.mu.Lock()
	c.onOverflow = f
	c.mu.Unlock()
}

// Resize changes the capacity to at least cqe entries, rounded as New
// rounds it, keeping the queued completions in order (ibv_resize_cq;
// rxe_cq_chk_attr refuses a cqe below the number queued). An overrun CQ
// cannot be resized.
func (c *CQ) Resize(cqe int) error {
	if err := checkCQE(cqe, c.maxCQE); err != nil {
		return err
	}
	ring := make([]ibv.WorkCompletion, ringLen(cqe))
	c.mu.Lock()
	defer c.mu.Unlock()
	switch n := int(c.tail - c.head); {
	case c.destroyed:
		return fmt.Errorf("%w: CQ destroyed", errno.Invalid)
	case c.overflowed:
		return ErrOverflow
	case cqe < n:
		return fmt.Errorf("%w: cqe %d below the %d completions queued", errno.Invalid, cqe, n)
	}
	var stamps []int64
	if c.stamps != nil {
		stamps = make([]int64, len(ring))
		for k := range int(c.tail - c.head) {
			stamps[k] = c.stamps[(c.head+uint32(k))&c.mask]
		}
	}
	n := c.drainLocked(ring)
	c.ring, c.mask, c.cqe, c.stamps = ring, uint32(len(ring)-1), len(ring)-1, stamps
	c.head, c.tail = 0, uint32(n)
	return nil
}

// Remove takes out of the queue every completion for which drop reports
// true, keeping the others in order (with their times, on a stamped CQ),
// and returns how many it removed (libmlx5's __mlx5_cq_clean, run when a
// QP enters RESET). A completion event already generated is not taken
// back.
func (c *CQ) Remove(drop func(*ibv.WorkCompletion) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.head
	for k := c.head; k != c.tail; k++ {
		i := k & c.mask
		if drop(&c.ring[i]) {
			continue
		}
		if j := kept & c.mask; j != i {
			c.ring[j] = c.ring[i]
			if c.stamps != nil {
				c.stamps[j] = c.stamps[i]
			}
		}
		kept++
	}
	n := int(c.tail - kept)
	c.tail = kept
	return n
}

// drainLocked copies every queued completion to out, in order, and returns
// how many; out must have room. It leaves the ring as it is.
func (c *CQ) drainLocked(out []ibv.WorkCompletion) int {
	n := int(c.tail - c.head)
	i := int(c.head & c.mask)
	k := copy(out[:n], c.ring[i:])
	copy(out[k:n], c.ring)
	return n
}

// Ref records a QP or SRQ using the CQ (the kernel's cq->usecnt).
func (c *CQ) Ref() { c.refs.Add(1) }

// Unref drops a reference taken by Ref.
func (c *CQ) Unref() {
	if c.refs.Add(-1) < 0 {
		panic("cq: Unref without Ref")
	}
}

// Refs returns the number of QPs and SRQs using the CQ.
func (c *CQ) Refs() int { return int(c.refs.Load()) }

// UnackedEvents returns the completion events a channel handed out for
// this CQ that were not yet acknowledged with Channel.Ack.
func (c *CQ) UnackedEvents() int { return int(c.events.Load() - c.acked.Load()) }

// Channel returns the completion channel the CQ is attached to, or nil.
func (c *CQ) Channel() *Channel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// Destroy destroys the CQ (ibv_destroy_cq). It fails with errno.Busy while
// QPs or SRQs use the CQ (ib_destroy_cq_user) or completion events are
// unacknowledged (where ibv_destroy_cq would wait for ibv_ack_cq_events).
// Events still queued on the channel for this CQ are dropped.
func (c *CQ) Destroy() error {
	c.mu.Lock()
	switch {
	case c.destroyed:
		c.mu.Unlock()
		return fmt.Errorf("%w: CQ already destroyed", errno.Invalid)
	case c.refs.Load() > 0:
		c.mu.Unlock()
		return fmt.Errorf("%w: CQ used by %d QPs/SRQs", errno.Busy, c.refs.Load())
	case c.UnackedEvents() > 0:
		c.mu.Unlock()
		return fmt.Errorf("%w: %d completion events not acknowledged", errno.Busy, c.UnackedEvents())
	}
	c.destroyed = true
	c.dead.Store(true)
	ch := c.ch
	c.ch, c.notify, c.onOverflow, c.ring, c.stamps = nil, nil, nil, nil, nil
	if c.modTimer != nil {
		c.modTimer.Stop()
	}
	c.head, c.tail = 0, 0
	c.mu.Unlock()
	if ch != nil {
		ch.detach(c)
	}
	return nil
}
