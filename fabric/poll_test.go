package fabric

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

func rxMsgs(n int) []link.Datagram {
	msgs := make([]link.Datagram, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 0, link.MaxDatagram)
	}
	return msgs
}

// TestTryReadBatch: an empty endpoint gives 0 and no error; datagrams
// another endpoint wrote come out in order, as ReadBatch gives them, as
// many as fit; after Close, ErrLinkClosed.
func TestTryReadBatch(t *testing.T) {
	_, _, a, b := pair(t, Config{})
	if !link.CanPoll(b) {
		t.Fatal("link.CanPoll false for an Endpoint")
	}
	msgs := rxMsgs(2)
	if n, err := b.TryReadBatch(msgs); n != 0 || err != nil {
		t.Fatalf("TryReadBatch on an empty endpoint = %d, %v; want 0, nil", n, err)
	}
	sendSeq(t, a, addrB, 3)
	want := newEncap(addrA, addrB)
	var got []link.Datagram
	for _, wantN := range []int{2, 1, 0} {
		n, err := b.TryReadBatch(msgs)
		if n != wantN || err != nil {
			t.Fatalf("TryReadBatch = %d, %v; want %d, nil", n, err, wantN)
		}
		got = append(got, msgs[:n]...)
		for i := range msgs[:n] {
			m := &msgs[i]
			if m.Encap != want || m.ICRC != link.ICRCUnchecked || wire.CheckICRC(&m.Encap, m.Buf) != nil {
				t.Fatalf("datagram %+v, ICRC %v: want the Encap sent, unchecked, and a good ICRC", m.Encap, m.ICRC)
			}
		}
		if wantN > 0 {
			msgs = rxMsgs(2)
		}
	}
	if ps := psns(t, got); len(ps) != 3 || ps[0] != 0 || ps[1] != 1 || ps[2] != 2 {
		t.Fatalf("PSNs %v, want 0 1 2", ps)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, m := range [][]link.Datagram{msgs, nil} {
		if n, err := b.TryReadBatch(m); n != 0 || !errors.Is(err, link.ErrLinkClosed) {
			t.Fatalf("TryReadBatch(%d) after Close = %d, %v; want ErrLinkClosed", len(m), n, err)
		}
	}
}

// TestTryReadBatchBesideBlockedReader: with a reader durably blocked in
// ReadBatch (synctest), TryReadBatch returns at once (were it to wait,
// the bubble would deadlock), and the two readers together get every
// datagram exactly once, each reader some of every round of writes.
// Close ends both.
func TestTryReadBatchBesideBlockedReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Config{})
		defer f.Close()
		a, _ := f.Attach(addrA)
		b, _ := f.Attach(addrB)
		// Unbuffered: after one ReadBatch the reader waits for the test
		// to take what it got, so it cannot take a whole round alone.
		fromReader := make(chan wire.PSN)
		done := make(chan error, 1)
		go func() {
			msgs := rxMsgs(4)
			for {
				n, err := b.ReadBatch(msgs)
				if err != nil {
					done <- err
					return
				}
				for _, p := range psns(t, msgs[:n]) {
					fromReader <- p
				}
			}
		}()
		synctest.Wait() // the reader is durably blocked in ReadBatch
		msgs := rxMsgs(3)
		if n, err := b.TryReadBatch(msgs); n != 0 || err != nil {
			t.Fatalf("TryReadBatch beside a blocked ReadBatch = %d, %v; want 0, nil", n, err)
		}
		const total = 40
		seen := make(map[wire.PSN]bool)
		take := func(p wire.PSN) {
			if p >= total || seen[p] {
				t.Fatalf("PSN %d received twice or never sent", p)
			}
			seen[p] = true
		}
		byTry := 0
		for i := range total / 5 {
			e := newEncap(addrA, addrB)
			for j := range 5 {
				psn := wire.PSN(i*5 + j)
				pkt := build(t, &e, wire.RCSendOnly, psn, payload(int(psn), 64))
				if _, err := a.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}}); err != nil {
					t.Fatal(err)
				}
			}
			n, err := b.TryReadBatch(msgs)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range psns(t, msgs[:n]) {
				take(p)
			}
			byTry += n
			// Let the reader take what is left, until it blocks in
			// ReadBatch on an empty queue.
			for drained := false; !drained; {
				synctest.Wait()
				select {
				case p := <-fromReader:
					take(p)
				default:
					drained = true
				}
			}
		}
		if len(seen) != total || queued(b) != 0 {
			t.Fatalf("received %d of %d datagrams, %d still queued", len(seen), total, queued(b))
		}
		// Each round of 5: the reader takes at most 4 before it waits
		// for the test, and TryReadBatch at most 3.
		if byTry < total/5 || byTry > total-total/5 {
			t.Fatalf("TryReadBatch took %d of %d: want each reader to get some of every round", byTry, total)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, link.ErrLinkClosed) {
			t.Fatalf("blocked ReadBatch after Close: %v", err)
		}
		if n, err := b.TryReadBatch(msgs); n != 0 || !errors.Is(err, link.ErrLinkClosed) {
			t.Fatalf("TryReadBatch after Close = %d, %v", n, err)
		}
	})
}
