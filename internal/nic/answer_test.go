package nic

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// feedLink hands out the datagrams sent on in, one per ReadBatch, and
// records what each WriteBatch wrote (the first byte of each datagram).
type feedLink struct {
	addr   netip.Addr
	in     chan link.Datagram
	closed chan struct{}
	once   sync.Once
	mu     sync.Mutex
	writes [][]byte // guarded by mu
}

func (l *feedLink) ReadBatch(msgs []link.Datagram) (int, error) {
	select {
	case d := <-l.in:
		return take(msgs, d), nil
	case <-l.closed:
		return 0, link.ErrLinkClosed
	}
}

// take puts d, fed to the link, into msgs[0] as a read does, and returns 1.
func take(msgs []link.Datagram, d link.Datagram) int {
	msgs[0].Encap = d.Encap
	msgs[0].Buf = msgs[0].Buf[:copy(msgs[0].Buf[:cap(msgs[0].Buf)], d.Buf)]
	msgs[0].ICRC = link.ICRCUnchecked
	return 1
}

func (l *feedLink) WriteBatch(msgs []link.Datagram) (int, error) {
	w := make([]byte, len(msgs))
	for i, m := range msgs {
		w[i] = m.Buf[0]
	}
	l.mu.Lock()
	l.writes = append(l.writes, w)
	l.mu.Unlock()
	return len(msgs), nil
}

func (l *feedLink) written() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.writes...)
}

func (l *feedLink) BatchSize() int        { return 8 }
func (l *feedLink) LocalAddr() netip.Addr { return l.addr }
func (l *feedLink) SrcPort() uint16       { return 0 }
func (l *feedLink) MTU() int              { return 0 }
func (l *feedLink) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// answerQP is a transport that acknowledges each packet it is given with
// a one-byte datagram 'A', and sends 'P' for each post (transport.RunNow).
type answerQP struct {
	got    atomic.Int32 // packets delivered
	acked  atomic.Int32 // packets acknowledged (written by Process only)
	posts  atomic.Int32
	posted int32 // posts sent (Process only)
	// inflight is what RequestsInFlight says: the requests of its own
	// awaiting the peer's response.
	inflight atomic.Int32
}

func (q *answerQP) RequestsInFlight() int { return int(q.inflight.Load()) }

func (q *answerQP) Deliver(p *transport.RxPacket) bool {
	q.got.Add(1)
	p.Release()
	return true
}

func (q *answerQP) Process(out transport.Output) bool {
	emit := func(c byte) {
		b := out.Buf()
		b[0] = c
		out.Send(1, &wire.Encap{})
	}
	for ; q.acked.Load() < q.got.Load(); q.acked.Add(1) {
		emit('A')
	}
	for ; q.posted < q.posts.Load(); q.posted++ {
		emit('P')
	}
	return false
}

func (q *answerQP) Close() {}

// answerSetup opens a NIC on a feedLink with one answerQP, and returns a
// function that feeds it an RDMA WRITE_ONLY (an answerable packet).
func answerSetup(t *testing.T) (*NIC, *feedLink, *answerQP, func(), func()) {
	t.Helper()
	l := newFeedLink()
	n, q, feed, post := answerSetupOn(t, l, l)
	return n, l, q, feed, post
}

func newFeedLink() *feedLink {
	return &feedLink{addr: netip.MustParseAddr("10.0.0.2"), in: make(chan link.Datagram), closed: make(chan struct{})}
}

// answerSetupOn is answerSetup on lk, which reads what is fed to l.
func answerSetupOn(t *testing.T, lk link.Link, l *feedLink) (*NIC, *answerQP, func(), func()) {
	t.Helper()
	return answerSetupWith(t, Config{Link: lk, Processors: 1}, l)
}

// answerSetupWith is answerSetupOn with the NIC's whole Config.
func answerSetupWith(t *testing.T, cfg Config, l *feedLink) (*NIC, *answerQP, func(), func()) {
	t.Helper()
	addr := l.addr
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	q := &answerQP{}
	qpn, err := n.RegisterQP(ibv.QPTypeRC, func(uint32, transport.Waker) (Transport, error) { return q, nil })
	if err != nil {
		t.Fatal(err)
	}
	qe := n.lookup(qpn)
	e := wire.Encap{Src: netip.MustParseAddr("10.0.0.1"), Dst: addr, SrcPort: 0xC000, DstPort: wire.UDPPort, HopLimit: 64}
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PKey: wire.DefaultPKey, DestQP: qpn, AckReq: true},
		RETH: wire.RETHFields{DMALen: 1}}
	b := make([]byte, link.MaxDatagram)
	k, err := wire.Build(b, &e, &h, []byte{1})
	if err != nil {
		t.Fatal(err)
	}
	feed := func() { l.in <- link.Datagram{Encap: e, Buf: b[:k]} }
	post := func() {
		q.posts.Add(1)
		n.run(qe, transport.RunNow) // what an RC post to an idle queue asks
	}
	return n, q, feed, post
}

// waitWrites waits for the link to have written k batches.
func waitWrites(t *testing.T, l *feedLink, k int) [][]byte {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if w := l.written(); len(w) >= k {
			return w
		}
	}
	t.Fatalf("the link wrote %q, want %d batches", l.written(), k)
	return nil
}

// The receive goroutine holds the ACK of a WRITE for the application's
// answer: the application, woken by WaitActivity, posts while the ACK is
// still unwritten, and the ACK and the answer leave in one batch, in that
// order. Its polls before the post do not read the link (the peer waits
// for those ACKs); once the batch is written a poll reads it again.
// (answerWait is raised so the test does not depend on how fast its
// goroutines are scheduled.)
func TestAnswerLeavesWithTheACK(t *testing.T) {
	defer func(w time.Duration, s int) { answerWait, answerSpins = w, s }(answerWait, answerSpins)
	answerWait, answerSpins = time.Minute, 1<<30
	fl := newFeedLink()
	l := &plainPollLink{feedLink: fl}
	n, q, feed, post := answerSetupOn(t, l, fl)
	defer n.Close()
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Acknowledged, not only delivered, and held: the reader has
			// run the QP and holds its batch until written. (Acknowledged
			// alone could be seen before the hold began, by a goroutine
			// scheduled late, whose polls then rightly read the link.)
			// WaitActivity reports activity, not that ready holds: a
			// token left by an earlier round's activity (one that came
			// while that round's ready already held) wakes it early.
			held := func() bool { return q.acked.Load() >= int32(i) && n.holding.Load() }
			for !held() {
				if !n.WaitActivity(ctx, time.Minute, held) {
					t.Errorf("round %d: WaitActivity timed out", i)
					return
				}
			}
			before := l.tries.Load()
			for range 3 {
				if k := n.Progress(); k != 0 {
					t.Errorf("round %d: Progress while the batch is held = %d", i, k)
				}
			}
			if d := l.tries.Load() - before; d != 0 {
				t.Errorf("round %d: %d polls read the link while the receive goroutine held its batch", i, d)
			}
			post()
		}()
		feed()
		<-done
		wantBatch(t, fl, i, "AP") // the ACK and the answer together
		awaitCond(t, "the batch's end", func() bool { return !n.holding.Load() })
		before := l.tries.Load()
		n.Progress()
		if l.tries.Load() != before+1 {
			t.Errorf("round %d: a poll after the batch was written did not read the link", i)
		}
	}
	wantAnswers(t, n, 5, 0)
}

// wantBatch checks that the link's i-th batch wrote want.
func wantBatch(t *testing.T, l *feedLink, i int, want string) {
	t.Helper()
	if w := waitWrites(t, l, i); string(w[i-1]) != want {
		t.Fatalf("batch %d: batches written %q, want %q last", i, w, want)
	}
}

// wantAnswers checks the NIC's answer_joined and answer_missed.
func wantAnswers(t *testing.T, n *NIC, joined, missed uint64) {
	t.Helper()
	if j, m := n.ctr.AnswerJoined.Load(), n.ctr.AnswerMissed.Load(); j != joined || m != missed {
		t.Errorf("AnswerJoined %d, AnswerMissed %d: want %d and %d", j, m, joined, missed)
	}
}

// Without an answer the ACK leaves alone after answerWait, and misses in
// a row turn the hold off for 1, 3, 7, ... batches: a one-way stream is
// seldom held.
func TestAnswerMissesBackOff(t *testing.T) {
	defer func(w time.Duration) { answerWait = w }(answerWait)
	answerWait = 100 * time.Microsecond
	n, l, _, feed, _ := answerSetup(t)
	defer n.Close()
	// Holds at batches 1, 3, 7 and 15 (after 0, 1, 3 and 7 skipped).
	for i := 1; i <= 15; i++ {
		feed()
		wantBatch(t, l, i, "A") // the ACK alone
	}
	wantAnswers(t, n, 0, 4)
}

// A miss while the QP has one request of its own in flight does not
// back off: a ping-pong's split turn, whose application waits for that
// request's completion before it answers. With none or more in flight
// (no requester, a stream) misses back off as before.
func TestAnswerMissWaitingOnOwnRequest(t *testing.T) {
	defer func(w time.Duration) { answerWait = w }(answerWait)
	answerWait = 100 * time.Microsecond
	n, l, q, feed, _ := answerSetup(t)
	defer n.Close()
	q.inflight.Store(1)
	for i := 1; i <= 5; i++ {
		feed()
		wantBatch(t, l, i, "A")
	}
	wantAnswers(t, n, 0, 5) // every batch held
	// Two in flight: a stream. Holds at batches 6, 8 (after 1 skipped)
	// and 12 (after 3).
	q.inflight.Store(2)
	for i := 6; i <= 12; i++ {
		feed()
		wantBatch(t, l, i, "A")
	}
	wantAnswers(t, n, 0, 8)
}

// Only the end of a SEND or WRITE to this NIC is worth waiting for: what
// the application may answer at once.
func TestAnswerable(t *testing.T) {
	for _, c := range []struct {
		op   wire.Opcode
		want bool
	}{
		{wire.RCSendOnly, true}, {wire.RCSendLast, true}, {wire.RCSendLastImm, true}, {wire.RCSendFirst, false},
		{wire.RCWriteOnly, true}, {wire.RCWriteLastImm, true}, {wire.RCWriteMiddle, false},
		{wire.UCSendOnly, true}, {wire.RCReadRequest, false}, {wire.RCReadResponseOnly, false},
		{wire.RCAck, false}, {wire.RCAtomicAck, false}, {wire.RCCompareSwap, false},
	} {
		var p wire.Packet
		p.Opcode = c.op
		p.Info = c.op.Info()
		if got := answerable(&p); got != c.want {
			t.Errorf("answerable(%v) = %v, want %v", c.op, got, c.want)
		}
	}
}
