package nic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/softnic/softnic/link"
)

// pollFeedLink is a feedLink that can be polled (TryReadBatch takes a
// datagram fed to it without waiting), prefers busy polling, and counts
// the ReadBatch calls: the times the receive goroutine went to the link.
type pollFeedLink struct {
	*feedLink
	reads   atomic.Int32
	reading atomic.Bool // a ReadBatch is waiting
}

func (l *pollFeedLink) ReadBatch(msgs []link.Datagram) (int, error) {
	l.reads.Add(1)
	l.reading.Store(true)
	defer l.reading.Store(false)
	return l.feedLink.ReadBatch(msgs)
}

func (l *pollFeedLink) TryReadBatch(msgs []link.Datagram) (int, error) { return l.tryRead(msgs) }

// tryRead is TryReadBatch on a feedLink: a datagram fed to it, if any.
func (l *feedLink) tryRead(msgs []link.Datagram) (int, error) {
	select {
	case d := <-l.in:
		return take(msgs, d), nil
	case <-l.closed:
		return 0, link.ErrLinkClosed
	default:
		return 0, nil
	}
}

func (l *pollFeedLink) PreferBusyPoll() bool { return true }

// leaseSetup is answerSetup on a pollFeedLink, with the lease's bounds
// set for the test (restored at its end).
func leaseSetup(t *testing.T, lease, gap time.Duration) (*NIC, *pollFeedLink, *answerQP, func(), func()) {
	t.Helper()
	lt, lg := leaseTime, leaseGap
	t.Cleanup(func() { leaseTime, leaseGap = lt, lg })
	leaseTime, leaseGap = lease, gap
	l := &pollFeedLink{feedLink: newFeedLink()}
	n, q, feed, post := answerSetupOn(t, l, l.feedLink)
	t.Cleanup(func() { n.Close() })
	return n, l, q, feed, post
}

// awaitCond waits until cond holds (what the test's goroutines are to do,
// not a timing assertion: the bound only ends a test that hangs).
func awaitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// pollIn feeds a datagram from another goroutine and polls until the QP
// has got it.
func pollIn(n *NIC, q *answerQP, feed func()) {
	want := q.got.Load() + 1
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		feed()
	}()
	for q.got.Load() < want {
		n.Progress()
	}
	<-fed
}

// takeLease starts busy polling and polls until the receive goroutine
// has stepped off the link (waits on the lease's timer). That goroutine
// sees the lease only after its ReadBatch returns: it is fed a datagram
// while no poll runs, which only it can read.
func takeLease(t *testing.T, n *NIC, l *pollFeedLink, feed func()) {
	t.Helper()
	awaitCond(t, "the receive goroutine on the link", l.reading.Load)
	n.Progress()
	n.Progress() // a second poll within leaseGap: busy polling
	if n.lease.until.Load() == 0 {
		t.Fatal("two polls in a row took no lease")
	}
	feed()
	awaitCond(t, "the receive goroutine to step off the link", func() bool { n.Progress(); return n.lease.parked.Load() })
}

// While an application busy-polls, the receive goroutine stays off the
// link and the polls read every datagram; when the application blocks
// (EndPoll), the receive goroutine goes back to the link and reads
// without any poll.
func TestLeaseKeepsTheReceiverOffTheLink(t *testing.T) {
	n, l, q, feed, post := leaseSetup(t, time.Hour, time.Hour)
	takeLease(t, n, l, feed)
	reads := l.reads.Load()
	for range 20 {
		pollIn(n, q, feed)
		post() // the answer, which also writes the deferred ACK
	}
	if r := l.reads.Load(); r != reads {
		t.Errorf("the receive goroutine went to the link %d times while the application polled", r-reads)
	}
	n.EndPoll()
	awaitCond(t, "the receive goroutine to go back to the link", func() bool { return l.reads.Load() > reads })
	got := q.got.Load()
	feed() // no poll: only the receive goroutine can read it
	awaitCond(t, "the receive goroutine to read a datagram", func() bool { return q.got.Load() > got })
	if e := n.ctr.PollLeaseExpired.Load(); e != 0 {
		t.Errorf("PollLeaseExpired = %d: the lease was ended, not run out", e)
	}
}

// Polls further apart than leaseGap are no busy polling: they take no
// lease, and the receive goroutine stays on the link.
func TestLeaseNotForOccasionalPolls(t *testing.T) {
	n, _, _, _, _ := leaseSetup(t, time.Hour, time.Nanosecond)
	for range 5 {
		n.Progress() // each more than a nanosecond after the one before
	}
	if u := n.lease.until.Load(); u != 0 {
		t.Errorf("polls more than leaseGap (1 ns) apart took a lease (until %d)", u)
	}
}

// A fabric-like link (no PreferBusyPoll) has no lease at all.
func TestLeaseOnlyWhereTheLinkPrefersIt(t *testing.T) {
	l := newFeedLink()
	n, _, _, _ := answerSetupOn(t, &plainPollLink{feedLink: l}, l)
	defer n.Close()
	for range 5 {
		n.Progress()
	}
	if u := n.lease.until.Load(); u != 0 {
		t.Errorf("busy polls of a link that does not prefer it took a lease (until %d)", u)
	}
}

// plainPollLink can be polled but does not prefer busy polling; it
// counts the polls that reached it.
type plainPollLink struct {
	*feedLink
	tries atomic.Int32
}

func (l *plainPollLink) TryReadBatch(msgs []link.Datagram) (int, error) {
	l.tries.Add(1)
	return l.tryRead(msgs)
}

// When the polls stop without a block, the lease runs out and the
// receive goroutine takes the link back by itself, counted in
// PollLeaseExpired.
func TestLeaseRunsOut(t *testing.T) {
	n, l, q, feed, _ := leaseSetup(t, 100*time.Millisecond, time.Hour)
	takeLease(t, n, l, feed)
	reads := l.reads.Load()
	// No more polls.
	awaitCond(t, "the lease to run out", func() bool { return l.reads.Load() > reads })
	if e := n.ctr.PollLeaseExpired.Load(); e != 1 {
		t.Errorf("PollLeaseExpired = %d, want 1", e)
	}
	got := q.got.Load()
	feed()
	awaitCond(t, "the receive goroutine to read a datagram", func() bool { return q.got.Load() > got })
}

// A poll that reads the end of a WRITE leaves its ACK unwritten for the
// application's answer: a post then writes both in one batch, ACK first.
// Without a post the ACK goes with the next poll, when the application
// blocks (EndPoll), or when the QP is destroyed, and never twice.
func TestPollDefersTheACKForTheAnswer(t *testing.T) {
	n, l, q, feed, post := leaseSetup(t, time.Hour, time.Hour)
	takeLease(t, n, l, feed)
	batches := len(l.written())
	// The receive goroutine may have held the first datagram's ACK.
	j0, m0 := n.ctr.AnswerJoined.Load(), n.ctr.AnswerMissed.Load()

	// The answer: ACK and post in one batch.
	pollIn(n, q, feed)
	if w := l.written(); len(w) != batches {
		t.Fatalf("the poll wrote %q before the answer", w[batches:])
	}
	post()
	batches++
	wantBatch(t, l.feedLink, batches, "AP")
	wantAnswers(t, n, j0+1, m0)

	// No answer: the next poll writes the ACK alone.
	pollIn(n, q, feed)
	n.Progress()
	batches++
	wantBatch(t, l.feedLink, batches, "A")
	wantAnswers(t, n, j0+1, m0+1)

	// The application blocks.
	pollIn(n, q, feed)
	n.WaitActivity(context.Background(), time.Nanosecond, func() bool { return false })
	batches++
	wantBatch(t, l.feedLink, batches, "A")
	wantAnswers(t, n, j0+1, m0+2)

	// The QP is destroyed with the ACK deferred: its transport holds it
	// (taken) until the ACK is written, and destruction must not wait
	// for the lease to run out (an hour).
	takeLease(t, n, l, feed)
	batches = len(l.written())
	pollIn(n, q, feed)
	if !n.lease.deferred.Load() {
		t.Fatal("the poll deferred no ACK")
	}
	n.UnregisterQP(firstQPN)
	batches++
	wantBatch(t, l.feedLink, batches, "A")
	if w := l.written(); len(w) != batches {
		t.Errorf("batches written %q, want %d", w, batches)
	}
}

// Close writes what a poll deferred before it closes the link, as it
// lets the processors write what they built.
func TestCloseWritesTheDeferredACK(t *testing.T) {
	n, l, q, feed, _ := leaseSetup(t, time.Hour, time.Hour)
	takeLease(t, n, l, feed)
	batches := len(l.written())
	pollIn(n, q, feed)
	if !n.lease.deferred.Load() {
		t.Fatal("the poll deferred no ACK")
	}
	n.Close()
	wantBatch(t, l.feedLink, batches+1, "A")
}

// A busy poll holding the lease allocates nothing: the lease's clock
// read and renewal are on every empty poll of a CQ.
func TestLeasePollAllocatesNothing(t *testing.T) {
	n, l, _, feed, _ := leaseSetup(t, time.Hour, time.Hour)
	takeLease(t, n, l, feed)
	if a := testing.AllocsPerRun(1000, func() { n.Progress() }); a != 0 {
		t.Errorf("a poll allocates %v times", a)
	}
	if !n.lease.parked.Load() {
		t.Error("the receive goroutine left the lease during the polls")
	}
}

// yieldLink is a pollFeedLink with a read yield (link.SetReadYield) and
// WakeRead, as the UDP link has: its ReadBatch asks the yield when it
// finds nothing fed, and again at each WakeRead, which it counts.
type yieldLink struct {
	*pollFeedLink
	wake  chan struct{}
	wakes atomic.Int32
	yield atomic.Pointer[func() bool]
}

func newYieldLink() *yieldLink {
	return &yieldLink{pollFeedLink: &pollFeedLink{feedLink: newFeedLink()}, wake: make(chan struct{}, 1)}
}

func (l *yieldLink) SetReadYield(f func() bool) bool { l.yield.Store(&f); return true }

func (l *yieldLink) WakeRead() bool {
	l.wakes.Add(1)
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return true
}

// reading is set only while ReadBatch waits, after it asked the yield:
// a test that saw it knows the next ask needs a wake-up or a datagram.
func (l *yieldLink) ReadBatch(msgs []link.Datagram) (int, error) {
	l.reads.Add(1)
	for {
		select {
		case d := <-l.in:
			return take(msgs, d), nil
		default:
		}
		if y := l.yield.Load(); y != nil && (*y)() {
			return 0, nil
		}
		l.reading.Store(true)
		select {
		case d := <-l.in:
			l.reading.Store(false)
			return take(msgs, d), nil
		case <-l.closed:
			l.reading.Store(false)
			return 0, link.ErrLinkClosed
		case <-l.wake:
			l.reading.Store(false)
		}
	}
}

// On a NIC whose application busy-polls (Config.BusyPoll), a receive
// goroutine waiting on the link when the polling begins steps off it
// with no datagram to wake it: a lease younger than leaseWake asks
// nothing; past it one poll wakes the link's reader (once a lease),
// whose read, asking the yield, returns empty (PollLeaseStepOffs), and
// the receive goroutine waits on the lease's timer while the polls read
// and defer their ACKs for each answer (AnswerJoined). After EndPoll it
// reads again, and the next lease wakes it again. A NIC without
// Config.BusyPoll sets no yield and never wakes the reader, however
// long it is polled.
func TestLeaseStepsOffForBusyPolling(t *testing.T) {
	lt, lg, lw := leaseTime, leaseGap, leaseWake
	t.Cleanup(func() { leaseTime, leaseGap, leaseWake = lt, lg, lw })
	leaseTime, leaseGap, leaseWake = time.Hour, time.Hour, time.Hour
	l := newYieldLink()
	n, q, feed, post := answerSetupWith(t, Config{Link: l, Processors: 1, BusyPoll: true}, l.feedLink)
	t.Cleanup(func() { n.Close() })
	if l.yield.Load() == nil || !n.lease.stepOff {
		t.Fatal("a busy-polling NIC set no read yield on its link")
	}
	awaitCond(t, "the receive goroutine on the link", l.reading.Load)

	for range 100 {
		n.Progress()
	}
	if n.lease.until.Load() == 0 {
		t.Fatal("polls in a row took no lease")
	}
	if w := l.wakes.Load(); w != 0 || n.lease.parked.Load() {
		t.Fatalf("a lease younger than leaseWake woke the reader %d times (parked %v)", w, n.lease.parked.Load())
	}

	leaseWake = 0
	awaitCond(t, "the receive goroutine to step off the link", func() bool { n.Progress(); return n.lease.parked.Load() })
	for range 100 {
		n.Progress()
	}
	if w, s := l.wakes.Load(), n.ctr.PollLeaseStepOffs.Load(); w != 1 || s == 0 {
		t.Errorf("woke the reader %d times, PollLeaseStepOffs %d; want 1 and at least 1", w, s)
	}
	reads, joined := l.reads.Load(), n.ctr.AnswerJoined.Load()
	for range 5 {
		pollIn(n, q, feed)
		post() // the answer, which writes the deferred ACK with it
	}
	if r := l.reads.Load(); r != reads {
		t.Errorf("the receive goroutine went to the link %d times while the application polled", r-reads)
	}
	if j := n.ctr.AnswerJoined.Load() - joined; j != 5 {
		t.Errorf("AnswerJoined rose by %d over 5 answers, want 5", j)
	}

	n.EndPoll()
	awaitCond(t, "the receive goroutine to go back to the link", func() bool { return l.reads.Load() > reads && l.reading.Load() })
	awaitCond(t, "the receive goroutine to step off the link again", func() bool { n.Progress(); return n.lease.parked.Load() })
	if w := l.wakes.Load(); w != 2 {
		t.Errorf("woke the reader %d times after a second lease, want 2", w)
	}

	// Without Config.BusyPoll: no yield, no wake-up.
	l2 := newYieldLink()
	n2, _, _, _ := answerSetupOn(t, l2, l2.feedLink)
	t.Cleanup(func() { n2.Close() })
	awaitCond(t, "the receive goroutine on the link", l2.reading.Load)
	for range 1000 {
		n2.Progress()
	}
	if l2.yield.Load() != nil || l2.wakes.Load() != 0 || n2.lease.parked.Load() {
		t.Errorf("a NIC without BusyPoll: yield set %v, %d wake-ups, parked %v; want none",
			l2.yield.Load() != nil, l2.wakes.Load(), n2.lease.parked.Load())
	}
}
