package nic

import (
	"sync/atomic"
	"testing"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// burstLink is a feedLink whose reads take whole bursts: ReadBatch waits
// for the test to let it read (go), then takes the next burst queued;
// TryReadBatch takes one only if queued, and is counted.
type burstLink struct {
	*feedLink
	bursts chan []link.Datagram
	gate   chan struct{}
	tries  atomic.Int32
}

func newBurstLink() *burstLink {
	return &burstLink{feedLink: newFeedLink(), bursts: make(chan []link.Datagram, 4), gate: make(chan struct{}, 4)}
}

func (l *burstLink) BatchSize() int { return 64 }

func (l *burstLink) ReadBatch(msgs []link.Datagram) (int, error) {
	select {
	case <-l.gate:
	case <-l.closed:
		return 0, link.ErrLinkClosed
	}
	select {
	case b := <-l.bursts:
		return takeBurst(msgs, b), nil
	case <-l.closed:
		return 0, link.ErrLinkClosed
	}
}

func (l *burstLink) TryReadBatch(msgs []link.Datagram) (int, error) {
	l.tries.Add(1)
	select {
	case b := <-l.bursts:
		return takeBurst(msgs, b), nil
	case <-l.closed:
		return 0, link.ErrLinkClosed
	default:
		return 0, nil
	}
}

func takeBurst(msgs []link.Datagram, b []link.Datagram) int {
	for i, d := range b {
		take(msgs[i:], d)
	}
	return len(b)
}

// burstSetup opens a NIC with one answerQP on a burstLink, and returns a
// function that queues a burst of k answerable datagrams on the link.
func burstSetup(t *testing.T) (*NIC, *burstLink, func(k int)) {
	t.Helper()
	l := newBurstLink()
	n, _, feed, _ := answerSetupOn(t, l, l.feedLink)
	t.Cleanup(func() { n.Close() })
	// answerSetupOn's feed sends its WRITE_ONLY on l.in, which no read
	// here takes: the bursts are copies of it.
	go feed()
	proto := <-l.in
	queue := func(k int) {
		b := make([]link.Datagram, k)
		for i := range b {
			b[i] = link.Datagram{Encap: proto.Encap, Buf: proto.Buf}
		}
		l.bursts <- b
	}
	return n, l, queue
}

// A stream's next burst, already arrived when the reader has handled a
// burst, is read before the ACKs are written: the ACKs of both leave in
// one write.
func TestReadAheadJoinsTheNextBurst(t *testing.T) {
	defer func(w int) { answerSpins = w }(answerSpins)
	answerSpins = 0 // no hold for an answer: the ACKs leave at once
	n, l, queue := burstSetup(t)
	queue(readAheadMin)
	queue(5)
	l.gate <- struct{}{}
	w := waitWrites(t, l.feedLink, 1)
	if want := readAheadMin + 5; len(w) != 1 || len(w[0]) != want {
		t.Fatalf("batches written %q, want one of %d ACKs", w, want)
	}
	if got := n.ctr.RcvdPkts.Load(); got != uint64(readAheadMin+5) {
		t.Errorf("RcvdPkts = %d, want %d", got, readAheadMin+5)
	}
}

// A batch smaller than readAheadMin (a ping-pong's turn) is answered at
// once: no read ahead, the next burst is the next read's.
func TestNoReadAheadAfterFewDatagrams(t *testing.T) {
	defer func(w int) { answerSpins = w }(answerSpins)
	answerSpins = 0
	_, l, queue := burstSetup(t)
	queue(readAheadMin - 1)
	queue(3)
	l.gate <- struct{}{}
	l.gate <- struct{}{}
	w := waitWrites(t, l.feedLink, 2)
	if len(w[0]) != readAheadMin-1 || len(w[1]) != 3 {
		t.Fatalf("batches written %q, want %d ACKs, then 3", w, readAheadMin-1)
	}
	if k := l.tries.Load(); k != 0 {
		t.Errorf("%d reads ahead after a batch of %d datagrams", k, readAheadMin-1)
	}
}

// Only a burst that ended SENDs or WRITEs reads ahead: a batch whose
// output is not their ACKs (here the first packets of SENDs, which end
// no message) sends what it built at once.
func TestNoReadAheadWithoutAnswerable(t *testing.T) {
	defer func(w int) { answerSpins = w }(answerSpins)
	answerSpins = 0
	l := newBurstLink()
	n, _, feed, _ := answerSetupOn(t, l, l.feedLink)
	t.Cleanup(func() { n.Close() })
	go feed()
	proto := <-l.in
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendFirst, PKey: wire.DefaultPKey, DestQP: wire.BTH(proto.Buf).DestQP()}}
	b := make([]byte, link.MaxDatagram)
	k, err := wire.Build(b, &proto.Encap, &h, make([]byte, 256))
	if err != nil {
		t.Fatal(err)
	}
	burst := make([]link.Datagram, readAheadMin)
	for i := range burst {
		burst[i] = link.Datagram{Encap: proto.Encap, Buf: b[:k]}
	}
	l.bursts <- burst
	l.bursts <- burst[:2]
	l.gate <- struct{}{}
	l.gate <- struct{}{}
	w := waitWrites(t, l.feedLink, 2)
	if len(w[0]) != readAheadMin || len(w[1]) != 2 {
		t.Fatalf("batches written %q, want %d, then 2", w, readAheadMin)
	}
	if k := l.tries.Load(); k != 0 {
		t.Errorf("%d reads ahead after a batch that ended no SEND or WRITE", k)
	}
}
