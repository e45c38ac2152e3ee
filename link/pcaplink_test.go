package link

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/wire"
)

// queueLink is a Link without TryReadBatch: ReadBatch hands out what was
// queued (it never waits: the tests queue first).
type queueLink struct {
	mu     sync.Mutex
	q      []Datagram
	err    error // returned once the queue is empty
	closed bool
}

func (l *queueLink) ReadBatch(msgs []Datagram) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrLinkClosed
	}
	n := 0
	for n < len(msgs) && len(l.q) > 0 {
		d := l.q[0]
		l.q = l.q[1:]
		msgs[n].Encap, msgs[n].ICRC = d.Encap, d.ICRC
		msgs[n].Buf = msgs[n].Buf[:copy(msgs[n].Buf[:cap(msgs[n].Buf)], d.Buf)]
		n++
	}
	if n == 0 {
		return 0, l.err
	}
	return n, nil
}

func (l *queueLink) WriteBatch(msgs []Datagram) (int, error) { return len(msgs), nil }
func (l *queueLink) BatchSize() int                          { return 8 }
func (l *queueLink) LocalAddr() netip.Addr                   { return netip.MustParseAddr("10.0.0.2") }
func (l *queueLink) SrcPort() uint16                         { return 0 }
func (l *queueLink) MTU() int                                { return 1500 }
func (l *queueLink) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return nil
}

// pollLink is a queueLink with TryReadBatch: the same queue, read alike.
type pollLink struct{ queueLink }

func (l *pollLink) TryReadBatch(msgs []Datagram) (int, error) { return l.ReadBatch(msgs) }

// recorder is a DatagramWriter keeping what it is given.
type recorder struct {
	mu   sync.Mutex
	recs []Datagram
}

func (r *recorder) WriteDatagram(_ time.Time, e *wire.Encap, b []byte) error {
	r.mu.Lock()
	r.recs = append(r.recs, Datagram{Encap: *e, Buf: bytes.Clone(b)})
	r.mu.Unlock()
	return nil
}

// guessedIPv4 returns n IPv4 datagrams as a UDP socket hands them over:
// the identification hidden (a wrong guess of 0, ICRCGuessedIPv4ID), and
// the identifications they were sent with.
func guessedIPv4(t *testing.T, n int) (ds []Datagram, ids []uint16) {
	r := newRand(t)
	for range n {
		e := randEncap(r, true)
		e.ID |= 1 // never the guess
		pkt := randPacket(t, r, &e, 1+r.IntN(64))
		ids = append(ids, e.ID)
		e.ID = 0
		ds = append(ds, Datagram{Encap: e, Buf: pkt, ICRC: ICRCGuessedIPv4ID})
	}
	return ds, ids
}

// TestPcapLinkTryReadBatch: over a Poller, TryReadBatch returns what the
// inner link's does and records exactly those datagrams, as ReadBatch
// records them: each IPv4 identification solved before it is written,
// so that the record's ICRC checks. An error passes through, recording
// nothing.
func TestPcapLinkTryReadBatch(t *testing.T) {
	ds, ids := guessedIPv4(t, 5)
	inner := &pollLink{queueLink{q: append([]Datagram(nil), ds...), err: ErrLinkClosed}}
	var w recorder
	p := NewPcapLink(inner, &w)
	if !p.CanPoll() || !CanPoll(p) {
		t.Fatal("a PcapLink over a Poller says it cannot poll")
	}
	if p.PreferBusyPoll() || PreferBusyPoll(p) {
		t.Fatal("a PcapLink over a Poller that does not prefer busy polling says it does")
	}
	msgs := rxBatch(3)
	if n, err := p.TryReadBatch(msgs); n != 3 || err != nil {
		t.Fatalf("TryReadBatch = %d, %v; want 3", n, err)
	}
	got := clone(msgs[:3])
	if n, err := p.ReadBatch(msgs); n != 2 || err != nil {
		t.Fatalf("ReadBatch = %d, %v; want 2", n, err)
	}
	got = append(got, clone(msgs[:2])...)
	if n, err := p.TryReadBatch(msgs); n != 0 || !errors.Is(err, ErrLinkClosed) {
		t.Fatalf("TryReadBatch of an inner link failing = %d, %v; want its ErrLinkClosed", n, err)
	}
	if len(w.recs) != len(ds) {
		t.Fatalf("%d records, want %d", len(w.recs), len(ds))
	}
	for i, rec := range w.recs {
		if !bytes.Equal(rec.Buf, ds[i].Buf) || rec.Encap.ID != ids[i] || rec.Encap != got[i].Encap {
			t.Errorf("record %d: %+v (%d bytes), want identification %d, the Encap returned %+v", i, rec.Encap, len(rec.Buf), ids[i], got[i].Encap)
		}
		if err := wire.CheckICRC(&rec.Encap, rec.Buf); err != nil {
			t.Errorf("record %d: %v", i, err)
		}
		if got[i].ICRC != ICRCGood {
			t.Errorf("datagram %d returned with ICRC %v, want the verdict good", i, got[i].ICRC)
		}
	}
}

// TestPcapLinkTryReadBatchNotPoller: over a link that cannot poll,
// CanPoll says so (through a second wrapper too), TryReadBatch returns 0
// and no error, leaving what is queued for ReadBatch, and records
// nothing; after Close it returns ErrLinkClosed.
func TestPcapLinkTryReadBatchNotPoller(t *testing.T) {
	ds, _ := guessedIPv4(t, 2)
	inner := &queueLink{q: ds}
	var w recorder
	p := NewPcapLink(inner, &w)
	if p.CanPoll() || CanPoll(p) || CanPoll(NewPcapLink(p, &w)) || CanPoll(inner) {
		t.Fatal("CanPoll true over a link without TryReadBatch")
	}
	if p.PreferBusyPoll() || PreferBusyPoll(p) {
		t.Fatal("PreferBusyPoll true over a link without TryReadBatch")
	}
	msgs := rxBatch(4)
	if n, err := p.TryReadBatch(msgs); n != 0 || err != nil {
		t.Fatalf("TryReadBatch = %d, %v; want 0, nil", n, err)
	}
	if len(w.recs) != 0 {
		t.Fatalf("%d records of nothing read", len(w.recs))
	}
	if n, err := p.ReadBatch(msgs); n != 2 || err != nil {
		t.Fatalf("ReadBatch after TryReadBatch = %d, %v; want the 2 queued", n, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.TryReadBatch(msgs); n != 0 || !errors.Is(err, ErrLinkClosed) {
		t.Fatalf("TryReadBatch after Close = %d, %v; want ErrLinkClosed", n, err)
	}
}
