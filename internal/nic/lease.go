package nic

import (
	"sync/atomic"
	"time"
)

// The poll lease. While an application busy-polls (Progress, which every
// poll of an empty CQ calls), the receive goroutine steps off the link:
// it waits on a timer instead of the socket, so a datagram that arrives
// wakes no second thread and meets no second reader, and the poll that
// finds it handles it on the application's goroutine. It sees the lease
// only between two reads, though: one already waiting on the socket
// stays there until it wins a datagram from the polls (its ACKs then
// leave alone). So on a NIC whose application says it busy-polls
// (Config.BusyPoll) the link asks the lease whenever it finds the socket
// empty, and its read then returns with nothing (link.SetReadYield,
// held), counted in PollLeaseStepOffs: at a wake-up for a datagram a
// poll took first, for free. With GOMAXPROCS 1 that wake-up may never
// come while the application spins (Go's scheduler polls the network
// only when its run queues are empty, or every 10 ms), so once a lease
// has lasted leaseWake with that goroutine still on the link, one poll
// asks the link to wake it (link.WakeRead), once a lease. A NIC without
// Config.BusyPoll asks neither: asking every NIC, after 100 µs of any
// polling, was tried and taken back: it cost blocking waits their
// latency (docs/performance.md, "nic.pollLease: who steps off, and
// leaseGap"). The receive goroutine takes the link back when
// the application blocks in one of softnic's waits (EndPoll:
// CompChannel.GetEvent, CQ.Wait, WaitActivity) or when no poll has come
// for leaseTime (an application that stopped polling without blocking
// here: its datagrams then wait at most that long). It is Linux's preferred busy polling (SO_PREFER_BUSY_POLL,
// "net: Introduce preferred busy-polling", with napi_defer_hard_irqs and
// gro_flush_timeout): while the application polls, the queue's interrupts
// stay off, and a watchdog timer hands the queue back to the softirq when
// the polling stops. rxe has nothing of the kind: it runs in the softirq.
//
// Only a link that prefers it has a lease (link.PreferBusyPoll: a UDP
// socket, not the fabric), and only busy polling takes the lease: a poll
// that comes more than leaseGap after the one before (an application
// that polls now and then) leaves the receive goroutine on the link, or
// every datagram would wait for the next poll and a fast stream would
// overflow the socket between two. leaseGap is long enough that a
// preempted poller keeps its lease (same section).
//
// The lease also lets a poll leave its ACKs unwritten for a moment
// (reader.deferAck): the application, which a poll returns to, usually
// answers what it found at once (a ping-pong, an RPC), and its post then
// writes the ACKs with the answer in one batch (NIC.kick). The deferred
// output is written by whichever comes first: a post, the next poll, the
// application blocking (EndPoll), the QP's destruction, Close, or the
// receive goroutine taking the link back when the lease runs out. A poll
// defers only while the receive goroutine waits on the lease's timer
// (pollLease.parked), so that timer bounds the delay. For the same
// reason, and bounded the same way, a post that leaves its pass to the
// QP's processor (transport.RunLater) leaves it to the next poll instead
// while the receive goroutine is parked (deferRun): nothing wakes
// another thread while the application polls.
type pollLease struct {
	on    bool // the link prefers it (link.PreferBusyPoll)
	epoch time.Time
	// last is when the last poll came (now), until when the lease ends
	// (0: no lease).
	last, until atomic.Int64
	// parked: the receive goroutine waits in awaitLease. deferred: the
	// poll reader holds output (reader.deferred), or posts left passes
	// for the next poll (NIC.later).
	parked, deferred atomic.Bool
	// stepOff: the NIC's application busy-polls (Config.BusyPoll), and
	// the link steps off for the lease (link.SetReadYield). begun is
	// when this lease began (now); woke: a poll of it asked the link to
	// wake its reader (link.WakeRead).
	stepOff bool
	begun   atomic.Int64
	woke    atomic.Bool
	wake    chan struct{} // EndPoll's wake-up of awaitLease
	timer   *time.Timer   // awaitLease's (receive goroutine only)
}

func newPollLease(on bool) *pollLease {
	return &pollLease{on: on, epoch: time.Now(), wake: make(chan struct{}, 1)}
}

// now is the lease's clock: wall time, not the NIC's clock (it bounds how
// long the receive goroutine stays off the link, no protocol timer), as
// nanoseconds since epoch.
func (l *pollLease) now() int64 { return int64(time.Since(l.epoch)) }

// The lease's bounds: how long it lasts after a poll, and how soon the
// next poll must come for polling to count as busy. Variables for the
// tests.
//
// leaseTime outlasts the preemptions of a poller on a busy host: a
// poller that loses its lease to one sends the receive goroutine back to
// the socket, where every datagram wakes its thread until a poll of the
// next lease steps it off again (docs/performance.md, "nic.leaseTime:
// 1 ms"). The price: an application that stops polling without blocking
// in one of softnic's waits has what arrives wait up to leaseTime for the
// receive goroutine.
var (
	leaseTime = time.Millisecond
	leaseGap  = 200 * time.Microsecond
	leaseWake = 100 * time.Microsecond
)

// held reports whether an application holds the lease (the link's read
// yield, link.SetReadYield). A lease past its end still counts until the
// receive goroutine sees it run out in awaitLease, which ends it.
func (l *pollLease) held() bool { return l.until.Load() != 0 }

// renew is a poll's: a poll within leaseGap of the one before extends
// the lease to leaseTime from now. It reports whether this poll should
// ask the link to wake its reader (link.WakeRead): the lease steps the
// reader off (stepOff), has lasted leaseWake, the receive goroutine is
// not on the lease's timer yet, and no poll of this lease asked before.
func (l *pollLease) renew() bool {
	if !l.on {
		return false
	}
	t := l.now()
	if prev := l.last.Swap(t); t-prev > int64(leaseGap) {
		return false
	}
	if l.until.Swap(t+int64(leaseTime)) == 0 {
		l.begun.Store(t)
		l.woke.Store(false)
		return false
	}
	return l.stepOff && t-l.begun.Load() >= int64(leaseWake) && !l.parked.Load() && !l.woke.Swap(true)
}

// readYield is the link's read yield (link.SetReadYield) on a NIC whose
// application busy-polls: the receive goroutine's read found the socket
// empty; it steps off while the lease is held.
func (n *NIC) readYield() bool {
	if !n.lease.held() {
		return false
	}
	n.ctr.PollLeaseStepOffs.Add(1)
	return true
}

// EndPoll ends the application's lease on the link: it is about to
// block. What a poll deferred is written now, and the receive goroutine
// goes back to the link.
func (n *NIC) EndPoll() {
	l := n.lease
	n.flushDeferred()
	if l.until.Load() == 0 {
		return
	}
	l.until.Store(0)
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// awaitLease is the receive goroutine's: it waits while the application
// holds the lease, and reports false when the NIC closed meanwhile. On
// its way out it writes what a poll deferred.
func (n *NIC) awaitLease() bool {
	l := n.lease
	if l.until.Load() == 0 {
		return true
	}
	defer func() {
		// Unconditionally under progMu: a poll that saw parked before
		// the Store may be deferring right now.
		l.parked.Store(false)
		n.progMu.Lock()
		n.flushDeferredLocked()
		n.progMu.Unlock()
	}()
	for {
		u := l.until.Load()
		if u == 0 {
			return true // EndPoll
		}
		d := time.Duration(u - l.now())
		if d <= 0 {
			// Polls stopped without a block: the lease runs out.
			l.until.CompareAndSwap(u, 0)
			n.ctr.PollLeaseExpired.Add(1)
			return true
		}
		l.parked.Store(true)
		if l.timer == nil {
			l.timer = time.NewTimer(d)
		} else {
			l.timer.Reset(d)
		}
		select {
		case <-l.timer.C:
		case <-l.wake:
			l.timer.Stop()
		case <-n.done:
			l.timer.Stop()
			return false
		}
	}
}

// flushDeferred writes what a poll deferred (flushDeferredLocked).
func (n *NIC) flushDeferred() {
	if !n.lease.deferred.Load() {
		return
	}
	n.progMu.Lock()
	n.flushDeferredLocked()
	n.progMu.Unlock()
}

// flushDeferredLocked writes the poll reader's deferred output, under
// progMu, after a pass over each of its QPs that a post marked pending
// meanwhile (txBatch.repass): the answer leaves with the ACKs. Then it
// makes the passes posts left for this moment (deferRun), into the same
// output.
func (n *NIC) flushDeferredLocked() {
	r := n.prog
	if r == nil || !r.deferred && len(n.later) == 0 {
		return
	}
	n.lease.deferred.Store(false)
	if r.deferred {
		r.deferred = false
		if r.out.anyPending() {
			n.ctr.AnswerJoined.Add(1)
			r.out.repass()
		} else {
			n.ctr.AnswerMissed.Add(1)
		}
	}
	n.runLaterLocked(r.out)
	r.out.finish()
}

// deferRun takes a post's transport.RunLater (a pass over the QP's send
// queue that the post did not make itself: RC with work outstanding)
// while the application holds the lease and the receive goroutine waits
// on the lease's timer: the pass waits for the application's next poll
// instead of waking the QP's processor. An application that polls in a
// loop (ibv_poll_cq in a C program's thread) then runs the engine on its
// own thread, posts and polls alike, and no other thread is woken for a
// post: a processor's wake-up is a goroutine made runnable on another P,
// a thread woken on another CPU (docs/performance.md, "softnic's
// libibverbs: the context switches of the engine's second P"). The delay
// is bounded as a poll's deferred ACKs are: the next poll, a post's
// kick, EndPoll, the QP's destruction, or the receive goroutine leaving
// awaitLease when the lease runs out (leaseTime) makes the pass
// (flushDeferredLocked). It reports whether it took the QP: not when no
// lease is held, nor while another goroutine polls (progMu taken), which
// leaves the QP to its processor.
func (n *NIC) deferRun(e *qpEntry) bool {
	if !n.lease.parked.Load() || !n.progMu.TryLock() {
		return false
	}
	ok := n.deferRunLocked(e)
	n.progMu.Unlock()
	return ok
}

// deferRunLocked is deferRun under progMu. It is also the poll reader's
// txBatch.later: a QP the poll's output releases with more work (its
// pass ran out of budget) waits for the next poll too, while the lease
// holds. awaitLease clears parked before it takes progMu to flush, so a
// QP taken here is always run by someone. A QP already scheduled (on its
// processor, or here) is taken without being queued twice.
func (n *NIC) deferRunLocked(e *qpEntry) bool {
	if n.prog == nil || !n.lease.parked.Load() || n.closed.Load() {
		return false
	}
	if e.scheduled.CompareAndSwap(false, true) {
		n.later = append(n.later, e)
		n.lease.deferred.Store(true)
	}
	return true
}

// runLaterLocked makes the passes deferRunLocked left, into out; a pass
// that leaves more work queues its QP again (txBatch.later) for the next
// poll, or, once the lease has ended, on its processor.
func (n *NIC) runLaterLocked(out *txBatch) {
	if len(n.later) == 0 {
		return
	}
	later := n.later
	n.later = nil
	for _, e := range later {
		e.scheduled.Store(false)
		e.run(out)
	}
	clear(later)
	if n.later == nil {
		n.later = later[:0]
	}
}
