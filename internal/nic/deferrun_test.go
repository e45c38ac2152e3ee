package nic

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// budgetQP is a transport that sends one 'P' a pass for each post, and
// says more while posts remain: an RC send queue with work outstanding,
// whose post returns transport.RunLater. It ignores what it is given.
type budgetQP struct {
	posts  atomic.Int32
	posted int32 // sent (Process only)
}

func (q *budgetQP) Deliver(p *transport.RxPacket) bool {
	p.Release()
	return true
}

func (q *budgetQP) Process(out transport.Output) bool {
	if q.posted < q.posts.Load() {
		b := out.Buf()
		b[0] = 'P'
		out.Send(1, &wire.Encap{})
		q.posted++
	}
	return q.posted < q.posts.Load()
}

func (q *budgetQP) Close() {}

// deferSetup is leaseSetup with a budgetQP beside the answerQP, and a
// function that posts k WRs to it the way an RC post to a busy send
// queue does (transport.RunLater).
func deferSetup(t *testing.T, lease time.Duration) (*NIC, *pollFeedLink, *qpEntry, func()) {
	t.Helper()
	n, l, _, feed, _ := leaseSetup(t, lease, time.Hour)
	q := &budgetQP{}
	qpn, err := n.RegisterQP(ibv.QPTypeRC, func(uint32, transport.Waker) (Transport, error) { return q, nil })
	if err != nil {
		t.Fatal(err)
	}
	e := n.lookup(qpn)
	takeLease(t, n, l, feed)
	post := func(k int) {
		q.posts.Add(int32(k))
		n.run(e, transport.RunLater)
	}
	return n, l, e, func() { post(3) }
}

// laterQPs returns the QPs waiting for the next poll (NIC.later).
func laterQPs(n *NIC) []*qpEntry {
	n.progMu.Lock()
	defer n.progMu.Unlock()
	return append([]*qpEntry(nil), n.later...)
}

// wantLater checks that e, and only e, waits for the next poll, or
// nothing when e is nil.
func wantLater(t *testing.T, n *NIC, e *qpEntry, when string) {
	t.Helper()
	got := laterQPs(n)
	switch {
	case e == nil && len(got) != 0:
		t.Fatalf("%s: %d QPs wait for the next poll, want none", when, len(got))
	case e != nil && (len(got) != 1 || got[0] != e):
		t.Fatalf("%s: QPs waiting for the next poll %v, want the posted QP's alone", when, got)
	}
}

// While the application holds the lease, a post whose pass is left to
// the QP's processor (RunLater) waits for the next poll instead, and
// each poll makes one pass, writing its packet before it returns: no
// processor is woken. Once the application blocks (EndPoll) the rest
// goes to the processor.
func TestPostWaitsForTheNextPoll(t *testing.T) {
	n, l, e, post := deferSetup(t, time.Hour)
	batches := len(l.written())
	post() // three WRs, one pass each
	wantLater(t, n, e, "after the post")
	if !e.scheduled.Load() {
		t.Fatal("the QP is not marked scheduled: a Wake would queue it on its processor too")
	}
	if w := l.written(); len(w) != batches {
		t.Fatalf("written before any poll: %q", w[batches:])
	}
	for i := 1; i <= 2; i++ {
		n.Progress()
		// Written by the poll itself, before it returned.
		if w := l.written(); len(w) != batches+i || string(w[len(w)-1]) != "P" {
			t.Fatalf("after poll %d: batches %q, want %d, the last \"P\"", i, w, batches+i)
		}
		wantLater(t, n, e, "after a poll with WRs left") // more: the next poll again
	}
	n.EndPoll() // the application blocks: the lease ends
	wantBatch(t, l.feedLink, batches+3, "P")
	awaitCond(t, "the last pass to finish", func() bool { return !e.running.Load() && !e.scheduled.Load() })
	wantLater(t, n, nil, "after EndPoll")
	if w := l.written(); len(w) != batches+3 {
		t.Errorf("batches %q, want %d", w, batches+3)
	}
}

// With the lease held but no poll coming, the post's pass is made when
// the lease runs out: the receive goroutine, leaving the lease's timer,
// makes it, and what remains goes to the processor. Nothing is lost,
// and the delay is bounded by leaseTime.
func TestDeferredPostLeavesWhenTheLeaseRunsOut(t *testing.T) {
	n, l, e, post := deferSetup(t, time.Hour)
	batches := len(l.written())
	post()
	wantLater(t, n, e, "after the post")
	// No poll. The lease's end, made now rather than in an hour: its
	// timer fires past it (awaitLease).
	n.lease.until.Store(1)
	n.lease.wake <- struct{}{}
	awaitCond(t, "the three WRs to leave", func() bool { return sentSince(l, batches) == 3 })
	if x := n.ctr.PollLeaseExpired.Load(); x != 1 {
		t.Errorf("PollLeaseExpired = %d, want 1", x)
	}
	wantLater(t, n, nil, "after the lease ran out")
}

// Without a lease a RunLater post wakes the processor as before.
func TestPostWithoutLeaseWakesTheProcessor(t *testing.T) {
	n, l, _, post := deferSetup(t, time.Hour)
	n.EndPoll()
	awaitCond(t, "the receive goroutine to leave the lease", func() bool { return !n.lease.parked.Load() })
	batches := len(l.written())
	post()
	wantLater(t, n, nil, "after the post")
	awaitCond(t, "the processor to send the three WRs", func() bool { return sentSince(l, batches) == 3 })
}

// sentSince returns the datagrams l wrote in its batches from the first'th on.
func sentSince(l *pollFeedLink, first int) int {
	k := 0
	for _, b := range l.written()[first:] {
		k += len(b)
	}
	return k
}
