package nic

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// Run to completion. A packet is handled on the goroutine that read it,
// and a post of a one-packet request to an idle queue runs the requester
// on the goroutine that posted: the QP's transport runs wherever the work
// appeared (qpEntry.run), and the processors take what those goroutines
// leave (timers, work beyond a bounded pass, a read batch spread over
// many QPs, the backlog of a busy send queue, UD sends). A round trip then
// crosses no goroutine on its way through the NIC: the receive goroutine
// reads the request, the responder answers it and the answer is written
// before the next read; an application polling its CQ reads the link
// itself (Progress). rxe made the same choice in the kernel and then
// half unmade it: its responder ran in the softirq that took the packet
// when nothing was queued before it (rxe_resp.c rxe_resp_queue_pkt:
// rxe_run_task unless must_sched), its requester in the context of the
// post; later kernels schedule both on workqueues (rxe_sched_task),
// because inline work kept every QP of a many-QP load on one CPU at a
// small cost to a single QP's latency. softnic decides per read batch
// (maxInlineQPs) and per post (a one-packet request to an idle queue).

// reader reads batches of datagrams from the link and handles them: each
// is checked and delivered to its QP (receive), then every QP that got
// packets is run once on the reader's goroutine, and what they built is
// written in one batch: the ACKs of a whole read batch leave together.
type reader struct {
	n    *NIC
	msgs []link.Datagram
	pkts []*transport.RxPacket
	// dirty: msgs[:dirty] need a buffer before the next read (the last
	// read filled them and the QPs may own their packets); a link fills
	// only the msgs it returns (link.Link), so the rest keep theirs.
	dirty   int
	touched []*qpEntry
	out     *txBatch
	// active: a datagram of this batch may write the application's
	// memory (noteActivity). answerable: one ended a SEND or WRITE to
	// this NIC (holdForAnswer).
	active     bool
	answerable bool
	// hold: this reader may hold a batch's ACKs for the application's
	// answer (holdForAnswer); only the receive goroutine's does. misses
	// counts the holds in a row that caught no answer, skip the batches
	// left to pass without a hold after them.
	hold   bool
	misses int
	skip   int
	// deferAck: this reader (Progress's) may leave an answerable batch's
	// output unwritten for the application's answer (the poll lease);
	// deferred: it holds such output now, and the QPs that built it.
	deferAck bool
	deferred bool
}

func (n *NIC) newReader() *reader {
	bs := max(n.cfg.Link.BatchSize(), 1)
	return &reader{
		n:       n,
		msgs:    make([]link.Datagram, bs),
		pkts:    make([]*transport.RxPacket, bs),
		dirty:   bs,
		touched: make([]*qpEntry, 0, bs),
		out:     n.getTx(),
	}
}

// release returns the reader's packets and output.
func (r *reader) release() {
	for i, p := range r.pkts {
		if p != nil {
			p.Release()
			r.pkts[i] = nil
		}
	}
	r.dirty = len(r.msgs) // no slot has a buffer now
	r.n.putTx(r.out)
	r.out = nil
}

// read reads one batch with readBatch and handles it. It returns the
// datagrams read, and false when the link failed (closed).
func (r *reader) read(readBatch func([]link.Datagram) (int, error)) (int, bool) {
	n := r.n
	cnt, ok := r.deliver(readBatch)
	if !ok {
		return 0, false
	}
	inline := len(r.touched) <= maxInlineQPs
	r.runTouched(inline)
	if inline && r.answerable && cnt >= readAheadMin && r.out.n > 0 {
		cnt += r.readAhead()
	}
	// The batch ended a SEND or WRITE and has ACKs to send: the
	// application may answer with them (the receive goroutine's hold, a
	// poll's deferral).
	waitAnswer := inline && r.answerable && r.out.n > 0
	held := r.hold && waitAnswer && r.holdForAnswer()
	if r.deferAck && waitAnswer && n.lease.parked.Load() {
		r.deferred = true
		n.lease.deferred.Store(true)
	} else {
		r.out.finish()
	}
	if held {
		n.holding.Store(false)
	}
	r.answerable = false
	if r.active {
		r.active = false
		n.noteActivity()
	}
	return cnt, true
}

// deliver reads one batch with readBatch and hands each datagram to its
// QP (receive), noting the QPs in r.touched. It returns the datagrams
// read, and false when the link failed (closed).
func (r *reader) deliver(readBatch func([]link.Datagram) (int, error)) (int, bool) {
	n := r.n
	// Only the slots the last read filled: refilling all of them made
	// every empty poll cost a pass over the whole batch.
	for i := range r.dirty {
		if r.pkts[i] == nil {
			r.pkts[i] = n.rxPool.Get().(*transport.RxPacket)
		}
		r.msgs[i].Buf = r.pkts[i].Buffer()
		r.msgs[i].Loan = nil
		r.msgs[i].ICRC = link.ICRCUnchecked // what a link that says nothing means
	}
	cnt, err := readBatch(r.msgs)
	r.dirty = cnt
	if err != nil {
		r.dirty = len(r.msgs)
		return 0, false
	}
	var seq uint64
	if cnt > 0 {
		seq = r.msgs[0].Seq
		n.awaitTurn(seq)
	}
	for i := 0; i < cnt; i++ {
		p := r.pkts[i]
		p.Data = r.msgs[i].Buf
		if l := r.msgs[i].Loan; l != nil {
			p.SetLoan(l) // in the link's buffer (link.Lend)
		}
		if n.receive(r, p, &r.msgs[i]) {
			r.pkts[i] = nil // the QP owns it now
		} else {
			p.DropLoan()
		}
	}
	if seq != 0 {
		n.endTurn(seq + uint64(cnt))
	}
	return cnt, true
}

// runTouched runs each QP the batch delivered to, into r.out, on this
// goroutine when inline, else on its processor, and empties r.touched.
func (r *reader) runTouched(inline bool) {
	for i, e := range r.touched {
		if inline {
			e.run(r.out)
		} else {
			e.Wake()
		}
		r.touched[i] = nil
	}
	r.touched = r.touched[:0]
}

// readAhead reads once more, without waiting, before the batch's output
// (its ACKs) is written, and handles what it finds into the same output:
// the next burst of a stream that arrived while this one was handled.
// Its requests then leave one ACK send for both bursts, and the peer
// reads one datagram (a GSO pair) instead of two: in send_bw's bursts
// (perftest posts a hundred SENDs at each completion, and the NIC sends
// them as a few GSO sends) the responder sent an ACK after each, a
// system call on its side and a read on the requester's between the
// bursts. It runs only after a batch of readAheadMin datagrams or more
// that ended SENDs or WRITEs (read), whose output is their ACKs: a
// ping-pong's turn brings one or two datagrams, and its ACK must not
// wait for an empty read; a READ requester's output is its next
// requests, which leave at once as before. A QP the batch holds takes the new packets in
// another pass into the same output (txBatch.repass); more QPs than
// maxInlineQPs go to their processors, as in read. The read is
// serialized with Progress's (link.Poller: TryReadBatch callers take
// turns): the receive goroutine skips it while a poll runs, which reads
// the link itself. It returns the datagrams it read.
func (r *reader) readAhead() int {
	n := r.n
	if n.poll == nil {
		return 0
	}
	if r.hold {
		// The receive goroutine's reader; Progress's holds progMu already.
		if !n.progMu.TryLock() {
			return 0
		}
		defer n.progMu.Unlock()
	}
	cnt, ok := r.deliver(n.poll.TryReadBatch)
	if !ok || cnt == 0 {
		return 0
	}
	inline := len(r.touched) <= maxInlineQPs
	r.runTouched(inline)
	if inline {
		r.out.repass()
	}
	return cnt
}

// awaitTurn waits until the batches the link numbered before seq
// (link.Datagram.Seq) are delivered: the receive goroutine and Progress
// read the link side by side, and each must hand its packets to their
// QPs in the link's order, or a QP would see its PSNs out of order (a UC
// message lost, an RC NAK and a resend). The reader ahead is between its
// read and the end of its delivery loop, which never waits, so this
// yields until it is done. seq 0 (a link that does not number its
// datagrams) waits for nothing; so does every batch while the turn is
// unset, on a link that numbers datagrams but cannot say from where
// (link.NextSeq; New starts the turn there). The wait is
// bounded by maxTurnWait, in case a batch numbered before never comes
// here: its packets then arrive out of order, as they may on any
// network, and the transports cope (an RC sequence NAK, C9-109; a lost
// UC message); the turn then moves past it (endTurn), so it costs one
// wait. It is long enough for a reader ahead that is off its CPU on a
// busy machine (docs/performance.md, "nic.awaitTurn: maxTurnWait, why
// 100 ms").
func (n *NIC) awaitTurn(seq uint64) {
	if seq == 0 {
		return
	}
	var start time.Time
	for i := 1; ; i++ {
		if t := n.rxTurn.Load(); t == 0 || t >= seq {
			return
		}
		if i%64 == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > maxTurnWait {
				n.ctr.RxTurnTimeout.Add(1)
				return
			}
		}
		runtime.Gosched()
	}
}

// endTurn records that the datagrams numbered before next are delivered;
// the turn only moves forward.
func (n *NIC) endTurn(next uint64) {
	for {
		t := n.rxTurn.Load()
		if t >= next || n.rxTurn.CompareAndSwap(t, next) {
			return
		}
	}
}

// maxTurnWait bounds awaitTurn (a safety net: it is never reached while
// every batch read is delivered).
const maxTurnWait = 100 * time.Millisecond

// holdForAnswer gives the application a moment to answer what this batch
// brought (the end of a SEND or WRITE) before the batch's ACKs are
// written. In a ping-pong (write_lat, send_lat, an RPC) the ACK of the
// peer's request and the application's reply then leave in one sendmmsg,
// and the peer reads both in one recvmmsg: a syscall and a wake-up fewer
// on each side of every half round trip. The batch's QPs stay taken
// (qpEntry.running) while the reader waits, so a post to one of them
// only marks it pending (qpEntry.run) and returns; the reader then makes
// that pass into the same batch (txBatch.repass). The application is
// told first (noteActivity; a completion has notified its channel
// already).
//
// The wait is bounded by answerWait, in yields of the reader's goroutine
// (so the application runs even with GOMAXPROCS=1) and in wall time (not
// the NIC's clock: it bounds a spin, it is no protocol timer). The ACK is
// late by at most answerWait, far below any transport timeout (4.096 µs
// × 2^timeout). After k misses in a row the next 2^k-1 batches (at most
// 2^answerBackoff-1) pass without a hold, so an answer that comes late
// now and then costs little, and a stream that never answers is held in
// one batch of 64.
//
// A miss on a QP with one request of its own in flight
// (txBatch.awaitsOwnRequest) does not count towards the backoff: that
// is a ping-pong's turn whose two datagrams, the peer's request and the
// ACK of this side's request, arrived apart, the request first (the
// peer sent them as one GSO pair, longer first: txBatch.write), and an
// application that waits for its request's completion before it answers
// (perftest's write_lat does) cannot answer until the ACK is read. It
// answers the next turn at once, which a backoff would have passed
// without a hold: its ACK and answer sent apart again, two sends and
// two wake-ups more (docs/performance.md, "nic.holdForAnswer: answerWait
// and the backoff").
//
// It reports whether it held the batch; n.holding is then set, for read
// to clear once the batch is written.
//
// Deliberately unlike rxe, whose responder sends the ACK at once from the
// softirq that took the request (rxe_resp.c send_ack): in the kernel a
// send and a wake-up cost far less than a sendmmsg and a thread's
// wake-up do here.
func (r *reader) holdForAnswer() bool {
	if r.skip > 0 {
		r.skip--
		return false
	}
	n := r.n
	n.holding.Store(true) // until read writes the batch
	r.active = false
	n.noteActivity()
	start := time.Now()
	for i := 0; !r.out.anyPending(); i++ {
		if i >= answerSpins || time.Since(start) >= answerWait {
			n.ctr.AnswerMissed.Add(1)
			if !r.out.awaitsOwnRequest() {
				r.misses++
				r.skip = 1<<min(r.misses, answerBackoff) - 1
			}
			return true
		}
		runtime.Gosched()
	}
	r.misses = 0
	n.ctr.AnswerJoined.Add(1)
	r.out.repass()
	return true
}

// The bounds of holdForAnswer: how long it waits (in time and in
// yields), and the backoff after misses in a row (a power of two).
// answerWait covers nearly every answer of a ping-pong
// (docs/performance.md, "nic.holdForAnswer: answerWait and the
// backoff"). Variables for the tests.
var (
	answerWait  = 20 * time.Microsecond
	answerSpins = 1000
)

const answerBackoff = 6

// maxInlineQPs is the most QPs a read batch may carry for the reader to
// run them itself. A batch spread over more QPs is many flows at once,
// where throughput is the figure: the processors run them, in parallel
// with the reader and with each other (rxe's move from rxe_run_task to
// rxe_sched_task, for the same reason). Few QPs in a batch is a
// conversation, where latency is: the reader answers it without a
// hand-off. Run inline, a 1000-QP write_bw lost half its bandwidth
// (docs/performance.md, "nic.maxInlineQPs: why 4").
const maxInlineQPs = 4

// readAheadMin is the fewest datagrams a read batch brings for the
// reader to read once more before it writes the batch's output
// (readAhead): a stream's burst. A ping-pong's or an RPC's turn brings
// one or two datagrams (the request, and the ACK of this side's last
// one), whose ACK must leave at once; a stream's burst tens, over which
// a read that finds nothing costs little.
const readAheadMin = 16

// writesMemory reports whether handling p may write the application's
// memory: anything but a bare ACK, whose news (a completion) is in the
// CQ. Only those wake a WaitActivity: in a WRITE ping-pong each side gets
// an ACK just before the peer's WRITE, and waking the waiter for it cost
// a wake-up per message.
func writesMemory(p *wire.Packet) bool {
	return !p.Is(wire.MaskAck) || p.Is(wire.MaskAtomic)
}

// answerable reports whether p ends a SEND or WRITE request: a message
// the application may answer at once (holdForAnswer).
func answerable(p *wire.Packet) bool {
	return p.Is(wire.MaskRequest|wire.MaskEnd) && (p.Is(wire.MaskSend) || p.Is(wire.MaskWrite))
}

// touch notes that e got a packet in this batch; writes and answer are
// writesMemory and answerable of it.
func (r *reader) touch(e *qpEntry, writes, answer bool) {
	if writes {
		r.active = true
	}
	if answer {
		r.answerable = true
	}
	// A batch mostly carries one or two QPs' packets: the last one noted
	// is the likeliest.
	for i := len(r.touched) - 1; i >= 0; i-- {
		if r.touched[i] == e {
			return
		}
	}
	r.touched = append(r.touched, e)
}

// run does what a QP's transport asked after an application's call
// (transport.Run): a pass at once on the calling goroutine (kick), a pass
// on the QP's processor or, while an application busy-polls, at its next
// poll (deferRun), or nothing.
func (n *NIC) run(e *qpEntry, r transport.Run) {
	switch r {
	case transport.RunNow:
		n.kick(e)
	case transport.RunLater:
		if !n.deferRun(e) {
			e.Wake()
		}
	}
}

// kick is a post's doorbell (transport.RunNow): it runs e on the posting
// goroutine and writes what it built before the post returns.
func (n *NIC) kick(e *qpEntry) {
	if n.closed.Load() {
		e.Wake()
		return
	}
	out := n.getTx()
	e.run(out)
	out.finish()
	n.putTx(out)
	// A poll deferred its ACKs for this answer (pollLease): e, if it is
	// one of their QPs, only marked itself pending above, and the flush
	// runs it into the same batch. TryLock: a post made while another
	// goroutine polls leaves the flush to that poll.
	if n.lease.deferred.Load() && n.progMu.TryLock() {
		n.flushDeferredLocked()
		n.progMu.Unlock()
	}
}

// Progress reads what has arrived on the link without waiting and
// handles it on the calling goroutine, as the receive goroutine would: an
// application that polls an empty CQ drives the NIC itself (the progress
// call of UCX, the rx burst of DPDK), and a busy-polling application
// never waits for another goroutine. It returns the datagrams it read: 0
// when nothing was there, when the link cannot be read without waiting,
// when another goroutine is in Progress already (one at a time: the
// receive goroutine reads meanwhile), or while the receive goroutine
// holds a batch's ACKs for the application's answer (holdForAnswer). On
// a link that prefers it, polls in a row lease the link (pollLease): the
// receive goroutine steps off it, and a poll may leave the ACKs of what
// it read for the application's answer.
func (n *NIC) Progress() int {
	if n.poll == nil || n.closed.Load() {
		return 0
	}
	if n.lease.renew() {
		link.WakeRead(n.cfg.Link)
	}
	if !n.progMu.TryLock() {
		return 0
	}
	defer n.progMu.Unlock()
	if n.prog == nil {
		n.prog = n.newReader()
		n.prog.deferAck = true
		n.prog.out.later = n.deferRunLocked
	}
	n.flushDeferredLocked() // no answer came before this poll
	if n.holding.Load() {
		// The receive goroutine is in the middle of a batch and reads
		// again once its ACKs are written: in a ping-pong the peer waits
		// for them, and a read now would be a system call that finds
		// nothing.
		return 0
	}
	cnt, _ := n.prog.read(n.poll.TryReadBatch)
	return cnt
}

// activity is what WaitActivity blocks on: a token the goroutines that
// handle received datagrams leave when someone waits.
type activity struct {
	waiters atomic.Int32
	c       chan struct{} // holds a token after activity
	timer   TimerSlot
}

// noteActivity wakes a WaitActivity: received datagrams that may write
// the application's memory were handled.
// The check of waiters comes after the handling, and a waiter counts
// itself before it looks at what it waits for, so either the waiter sees
// the result or this sees the waiter.
func (n *NIC) noteActivity() {
	if n.act.waiters.Load() > 0 {
		select {
		case n.act.c <- struct{}{}:
		default:
		}
	}
}

// WaitActivity blocks until received datagrams have been handled (by a
// reader, or by a processor's pass), d has passed or ctx ends, and
// reports whether it was the device's work. ready is
// checked once the waiter is counted: if it holds, WaitActivity returns
// true at once, so that activity between the caller's last look and the
// wait is not missed. Meant for one waiter: with several, one activity
// may wake only one of them.
func (n *NIC) WaitActivity(ctx context.Context, d time.Duration, ready func() bool) bool {
	n.act.waiters.Add(1)
	defer n.act.waiters.Add(-1)
	if ready() {
		return true
	}
	n.EndPoll() // the receive goroutine reads the link while this sleeps
	t := n.act.timer.Start(d)
	defer n.act.timer.Done(t)
	select {
	case <-n.act.c:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	case <-n.done:
		return false
	}
}
