package nic

// The send batch: the output a pass over a QP builds its packets into,
// in preallocated buffers, written to the link in batches (one sendmmsg
// or GSO send), and the pool of outputs of the goroutines that run QPs
// without being processors.

import (
	"sync"
	"syscall"

	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/internal/transport/rc"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// txBatch is a processor's output: datagrams built in place in
// preallocated buffers and written to the link in batches.
//
// Send errors: the link marks each datagram it could not send (Datagram.
// Err); write counts each as send_err, as rxe_net.c rxe_xmit_packet
// counts RXE_CNT_SEND_ERR for every packet rxe_send fails, and every
// other one as sent_pkts (with its bytes), as rxe_xmit_packet counts
// RXE_CNT_SENT_PKTS once rxe_send took it: a packet a closed or down link
// refused is not counted sent. RC needs nothing more (an RC packet lost
// here is recovered by the retransmit timer like one lost on the wire).
// For UD and UC, which do not resend, txBatch is a transport.Flusher:
// those transports flush after each pass and get the errno of each
// datagram they queued.
type txBatch struct {
	link link.Link
	ctr  *transport.Counters
	dgs  []link.Datagram
	bufs [][]byte
	n    int
	// split: the link takes datagrams with a Payload (SendSplit).
	split bool
	// ect: congestion control is on (Config.CC): every datagram but a
	// CNP leaves ECN-capable, ECT(0).
	ect bool
	// mark is the first datagram in dgs that the current Process call
	// queued; errs holds the results of that call's datagrams already
	// flushed.
	mark int
	errs []syscall.Errno
	// held are the QPs whose packets are queued here: each stays taken
	// (qpEntry.running) until they are written. again are the QPs
	// released with work pending, for finish.
	held  []heldQP
	again []*qpEntry
	spare []*qpEntry // again's other buffer
	// later, when set, takes a QP released with more work instead of its
	// processor (the poll reader's: NIC.deferRunLocked), reporting whether
	// it took it.
	later func(*qpEntry) bool
}

// heldQP is a QP a pass was made over; more is what its Process said.
type heldQP struct {
	e    *qpEntry
	more bool
}

// maxInlinePasses bounds the passes finish makes over a QP; what remains
// after them goes to the QP's processor, so that a post or a receive
// batch does a bounded amount of work (STYLE.md 8).
const maxInlinePasses = 4

var (
	_ transport.Output      = (*txBatch)(nil)
	_ transport.Flusher     = (*txBatch)(nil)
	_ transport.SplitOutput = (*txBatch)(nil)
)

func (t *txBatch) init(lk link.Link, ctr *transport.Counters, ect bool) {
	t.link = lk
	t.ctr = ctr
	t.ect = ect
	bs := max(lk.BatchSize(), 1)
	t.dgs = make([]link.Datagram, bs)
	t.bufs = make([][]byte, bs)
	for i := range t.bufs {
		t.bufs[i] = make([]byte, link.MaxDatagram)
	}
	t.errs = make([]syscall.Errno, 0, 2*bs)
	t.split = link.CanSendSplit(lk)
}

// begin starts a QP's Process call: Flush reports from here.
func (t *txBatch) begin() {
	t.mark = t.n
	t.errs = t.errs[:0]
}

// Buf returns the buffer for the next datagram, flushing a full batch.
func (t *txBatch) Buf() []byte {
	if t.n == len(t.dgs) {
		t.flush()
	}
	return t.bufs[t.n]
}

// Send queues Buf()[:n].
func (t *txBatch) Send(n int, e *wire.Encap) { t.SendSplit(n, 0, nil, e) }

// SendsSplit reports whether the link takes a payload where it lies
// (link.CanSendSplit).
func (t *txBatch) SendsSplit() bool { return t.split }

// SendSplit queues Buf()[:split], payload, Buf()[split:n]; with a nil
// payload, Buf()[:n] (Send).
func (t *txBatch) SendSplit(n, split int, payload []byte, e *wire.Encap) {
	d := &t.dgs[t.n]
	d.Encap = *e
	d.Buf = t.bufs[t.n][:n]
	if t.ect && n > 0 && wire.Opcode(d.Buf[0]) != wire.CNP {
		// The traffic class is masked by the ICRC: no recomputation.
		d.Encap.TrafficClass = wire.WithECN(e.TrafficClass, wire.ECNECT0)
	}
	d.Payload = payload
	d.Split = split
	d.Err = 0
	t.n++
}

// Flush writes the queued datagrams and returns the errno of each one
// the current Process call queued, in order (0: sent).
func (t *txBatch) Flush() []syscall.Errno {
	t.flush()
	return t.errs
}

// finish flushes, then makes the passes the QPs released with pending
// work need, flushing after each, up to maxInlinePasses; a QP whose
// transport said more, or still pending after them, goes to its
// processor.
func (t *txBatch) finish() {
	for pass := 1; ; pass++ {
		t.flush()
		if len(t.again) == 0 {
			return
		}
		// A pass below may flush (a full batch) and release QPs with
		// pending work of their own: they go to the fresh list, for the
		// next round.
		again := t.again
		t.again = t.spare[:0]
		for _, e := range again {
			if pass >= maxInlinePasses {
				e.Wake()
			} else {
				e.run(t)
			}
		}
		clear(again)
		t.spare = again[:0]
	}
}

// flush writes the queued datagrams, then releases the QPs that built
// them.
func (t *txBatch) flush() {
	t.write()
	for i, h := range t.held {
		h.e.running.Store(false)
		switch {
		case h.more:
			if t.later == nil || !t.later(h.e) {
				h.e.Wake()
			}
		case h.e.pending.Load():
			t.again = append(t.again, h.e)
		}
		t.held[i] = heldQP{}
	}
	t.held = t.held[:0]
}

// gsoPair reports whether a, a datagram queued after b, can go out
// before it so that the two leave in one UDP GSO send: a is longer (a
// link joins a run of equal datagrams and a shorter last one, not a
// shorter first one), they go to one destination, and their order does
// not matter to the receiver: one is a response (an ACK, a read
// response) and the other a request, or they are for two QPs. That is a
// round trip's turn: the ACK of the peer's request and the
// application's answer (reader.holdForAnswer, the poll lease's
// deferral). On loopback the two then cross the kernel as one buffer
// and the peer's GRO socket wakes once for both (docs/performance.md,
// "nic.gsoPair: the ACK and the answer in one GSO send").
func gsoPair(a, b *link.Datagram) bool {
	if a.Len() <= b.Len() || len(a.Buf) < wire.BTHLen || len(b.Buf) < wire.BTHLen {
		return false
	}
	ea, eb := &a.Encap, &b.Encap
	if ea.Dst != eb.Dst || ea.DstPort != eb.DstPort || ea.TrafficClass != eb.TrafficClass || ea.HopLimit != eb.HopLimit {
		return false
	}
	ha, hb := wire.BTH(a.Buf), wire.BTH(b.Buf)
	return ha.Opcode().Is(wire.MaskResponse) != hb.Opcode().Is(wire.MaskResponse) || ha.DestQP() != hb.DestQP()
}

// anyPending reports whether a QP held here has work pending: a post or
// a wake-up that found it taken (qpEntry.run).
func (t *txBatch) anyPending() bool {
	for _, h := range t.held {
		if h.e.pending.Load() {
			return true
		}
	}
	return false
}

// requestsInFlight is a handler whose requester can say how many of its
// requests await the peer's response (rc.QP.RequestsInFlight).
type requestsInFlight interface{ RequestsInFlight() int }

var _ requestsInFlight = (*rc.QP)(nil)

// awaitsOwnRequest reports whether a QP this batch holds has exactly one
// request of its own in flight: the mark of a ping-pong or an RPC whose
// application may be waiting for that request's completion before it
// answers what the batch brought (reader.holdForAnswer). A stream has
// more than one in flight, or none.
func (t *txBatch) awaitsOwnRequest() bool {
	for _, h := range t.held {
		if q, ok := h.e.h.(requestsInFlight); ok && q.RequestsInFlight() == 1 {
			return true
		}
	}
	return false
}

// repass makes another pass, into this batch, over each held QP with
// work pending, before the batch is written (reader.holdForAnswer). A
// QP stays taken throughout: it leaves held for its pass (a pass that
// fills the batch flushes it and releases what is held) and goes back
// with what the new pass said.
func (t *txBatch) repass() {
	var again [maxInlineQPs]*qpEntry
	k := 0
	for i := 0; i < len(t.held); {
		if e := t.held[i].e; e.pending.Load() && k < len(again) {
			again[k] = e
			k++
			t.held = append(t.held[:i], t.held[i+1:]...)
			continue
		}
		i++
	}
	for _, e := range again[:k] {
		e.pending.Store(false)
		t.begin()
		more := e.h.Process(t)
		t.held = append(t.held, heldQP{e, more})
	}
}

func (t *txBatch) write() {
	if t.n == 0 {
		return
	}
	swap := t.n == 2 && gsoPair(&t.dgs[1], &t.dgs[0])
	if swap {
		t.dgs[0], t.dgs[1] = t.dgs[1], t.dgs[0]
	}
	t.link.WriteBatch(t.dgs[:t.n])
	if swap {
		t.dgs[0], t.dgs[1] = t.dgs[1], t.dgs[0]
	}
	var pkts, bytes uint64
	for i := range t.n {
		d := &t.dgs[i]
		e := d.Err
		if e != 0 {
			t.ctr.SendErr.Add(1)
		} else {
			pkts++
			bytes += uint64(d.Len())
		}
		d.Payload = nil // the application's memory: not kept past the write
		if i >= t.mark {
			t.errs = append(t.errs, e)
		}
	}
	if pkts > 0 {
		t.ctr.SentPkts.Add(pkts)
		t.ctr.SentBytes.Add(bytes)
	}
	t.n, t.mark = 0, 0
}

// txPool keeps the outputs of the goroutines that run QPs without being
// processors: the receive goroutine, posting goroutines, Progress.
type txPool struct {
	mu   sync.Mutex
	free []*txBatch // guarded by mu
}

// maxFreeTx bounds the idle outputs kept (each holds a batch of
// datagram buffers).
const maxFreeTx = 8

func (n *NIC) getTx() *txBatch {
	n.txs.mu.Lock()
	if k := len(n.txs.free); k > 0 {
		t := n.txs.free[k-1]
		n.txs.free = n.txs.free[:k-1]
		n.txs.mu.Unlock()
		return t
	}
	n.txs.mu.Unlock()
	t := new(txBatch)
	t.init(n.cfg.Link, &n.ctr, n.cfg.CC != nil)
	return t
}

func (n *NIC) putTx(t *txBatch) {
	n.txs.mu.Lock()
	if len(n.txs.free) < maxFreeTx {
		n.txs.free = append(n.txs.free, t)
	}
	n.txs.mu.Unlock()
}
