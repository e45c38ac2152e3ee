package fabric

import (
	"bytes"
	"errors"
	"math/bits"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

func TestDeliveryPreservesEncap(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	e := newEncap(addrA, addrB)
	e.ID = 0x1234
	e.TrafficClass = 0x02
	e.UDPChecksum = 0xBEEF
	pkt := build(t, &e, wire.RCWriteOnly, 7, payload(1, 100))
	sent := bytes.Clone(pkt)
	n, err := a.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}})
	if n != 1 || err != nil {
		t.Fatalf("WriteBatch = %d, %v, want 1, nil", n, err)
	}
	clear(pkt) // the fabric copied it

	msgs := []link.Datagram{{Buf: make([]byte, 0, link.MaxDatagram), ICRC: link.ICRCBad}}
	n, err = b.ReadBatch(msgs)
	if n != 1 || err != nil {
		t.Fatalf("ReadBatch = %d, %v, want 1, nil", n, err)
	}
	got := msgs[0]
	if got.Encap != e {
		t.Errorf("Encap = %+v, want %+v", got.Encap, e)
	}
	if !bytes.Equal(got.Buf, sent) {
		t.Errorf("Buf differs from what was sent")
	}
	if got.ICRC != link.ICRCUnchecked {
		t.Errorf("ICRC = %v, want %v", got.ICRC, link.ICRCUnchecked)
	}
	if err := wire.CheckICRC(&got.Encap, got.Buf); err != nil {
		t.Errorf("CheckICRC: %v", err)
	}
	st := f.Stats()
	want := Counter{1, uint64(len(sent))}
	if st.Sent != want || st.Delivered != want || st.Dropped() != (Counter{}) {
		t.Errorf("fabric stats %+v, want 1 sent, 1 delivered, none dropped", st)
	}
	if got := a.Stats().Sent; got != want {
		t.Errorf("sender Sent = %+v, want %+v", got, want)
	}
	if got := b.Stats().Delivered; got != want {
		t.Errorf("receiver Delivered = %+v, want %+v", got, want)
	}
	if got := a.Stats().Delivered; got != (Counter{}) {
		t.Errorf("sender Delivered = %+v, want zero", got)
	}
}

func TestSrcFilledAndMappedAddresses(t *testing.T) {
	f, _, a, _ := pair(t, Config{})
	c, err := f.Attach(netip.MustParseAddr("::ffff:10.0.0.3")) // IPv4-mapped form
	if err != nil {
		t.Fatal(err)
	}
	e := newEncap(netip.Addr{}, addrC) // Src unset, Dst plain IPv4
	want := e
	want.Src = addrA
	pkt := build(t, &want, wire.RCSendOnly, 1, nil)
	if _, err := a.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}}); err != nil {
		t.Fatal(err)
	}
	got := drain(t, c)
	if len(got) != 1 {
		t.Fatalf("received %d datagrams, want 1", len(got))
	}
	if got[0].Encap != want {
		t.Errorf("Encap = %+v, want %+v", got[0].Encap, want)
	}
	if err := wire.CheckICRC(&got[0].Encap, got[0].Buf); err != nil {
		t.Errorf("CheckICRC: %v", err)
	}

	// And the other way: plain IPv4 endpoint, mapped destination.
	e = newEncap(netip.MustParseAddr("::ffff:10.0.0.3"), netip.MustParseAddr("::ffff:10.0.0.1"))
	pkt = build(t, &e, wire.RCSendOnly, 2, nil)
	if _, err := c.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}}); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, a); len(got) != 1 || got[0].Encap != e {
		t.Fatalf("mapped destination: got %d datagrams %+v", len(got), got)
	}
}

func TestAttachErrors(t *testing.T) {
	f := New(Config{})
	if _, err := f.Attach(addrA); err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Addr{addrA, netip.MustParseAddr("::ffff:10.0.0.1")} {
		if _, err := f.Attach(a); !errors.Is(err, ErrAddrInUse) {
			t.Errorf("Attach(%v) again: err = %v, want ErrAddrInUse", a, err)
		}
	}
	if _, err := f.Attach(netip.Addr{}); err == nil {
		t.Error("Attach(invalid) succeeded")
	}
	f.Close()
	if _, err := f.Attach(addrB); !errors.Is(err, ErrClosed) {
		t.Errorf("Attach after Close: err = %v, want ErrClosed", err)
	}
}

func TestAddressReusableAfterClose(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	b.Close()
	b2, err := f.Attach(addrB)
	if err != nil {
		t.Fatalf("Attach after the old endpoint closed: %v", err)
	}
	sendSeq(t, a, addrB, 1)
	if got := len(drain(t, b2)); got != 1 {
		t.Fatalf("new endpoint received %d, want 1", got)
	}
}

func TestNoRoute(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	sendSeq(t, a, addrC, 3)
	// Mixed families cannot be routed either.
	e := newEncap(addrA, addr6B)
	if _, err := a.WriteBatch([]link.Datagram{{Encap: e, Buf: make([]byte, 32)}}); err != nil {
		t.Fatal(err)
	}
	// Nor can an unset destination.
	if _, err := a.WriteBatch([]link.Datagram{{Buf: make([]byte, 32)}}); err != nil {
		t.Fatal(err)
	}
	if got := f.Stats().DropNoRoute.Packets; got != 5 {
		t.Errorf("fabric DropNoRoute = %d, want 5", got)
	}
	if got := a.Stats().DropNoRoute.Packets; got != 5 {
		t.Errorf("sender DropNoRoute = %d, want 5", got)
	}
	if got := f.Stats().Delivered.Packets; got != 0 {
		t.Errorf("Delivered = %d, want 0", got)
	}
	if got := queued(b); got != 0 {
		t.Errorf("bystander got %d datagrams", got)
	}
}

func TestOversizeDropped(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	e := newEncap(addrA, addrB)
	a.WriteBatch([]link.Datagram{{Encap: e, Buf: make([]byte, link.MaxDatagram+1)}})
	a.WriteBatch([]link.Datagram{{Encap: e, Buf: make([]byte, link.MaxDatagram)}})
	if got := f.Stats().DropOversize.Packets; got != 1 {
		t.Errorf("DropOversize = %d, want 1", got)
	}
	if got := drain(t, b); len(got) != 1 || len(got[0].Buf) != link.MaxDatagram {
		t.Errorf("MaxDatagram-sized datagram not delivered whole")
	}
}

func TestQueueOverflow(t *testing.T) {
	f, _, a, b := pair(t, Config{QueueLen: 4})
	sendSeq(t, a, addrB, 10)
	st := b.Stats()
	if st.Delivered.Packets != 4 || st.DropQueueFull.Packets != 6 {
		t.Errorf("receiver stats Delivered %d DropQueueFull %d, want 4 and 6",
			st.Delivered.Packets, st.DropQueueFull.Packets)
	}
	if got := f.Stats().DropQueueFull.Packets; got != 6 {
		t.Errorf("fabric DropQueueFull = %d, want 6", got)
	}
	if got, want := psns(t, drain(t, b)), []wire.PSN{0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("received PSNs %v, want %v", got, want)
	}
	// The queue has room again.
	sendSeq(t, a, addrB, 1)
	if got := queued(b); got != 1 {
		t.Errorf("after draining, queued %d, want 1", got)
	}
}

// A receive buffer bounds the bytes queued, as a socket's does: what
// arrives beyond it is dropped and counted, and reading makes room.
func TestRecvBufferOverflow(t *testing.T) {
	_, _, a, b := pair(t, Config{})
	sendSeq(t, a, addrB, 1)
	size := len(drain(t, b)[0].Buf) // every datagram of sendSeq has this size
	b.SetRecvBuffer(3*size + size/2)
	sendSeq(t, a, addrB, 10)
	st := b.Stats()
	if st.Delivered.Packets != 1+3 || st.DropQueueFull.Packets != 7 {
		t.Errorf("receiver stats Delivered %d DropQueueFull %d, want 4 and 7",
			st.Delivered.Packets, st.DropQueueFull.Packets)
	}
	if got, want := psns(t, drain(t, b)), []wire.PSN{0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("received PSNs %v, want %v", got, want)
	}
	sendSeq(t, a, addrB, 4)
	if got := queued(b); got != 3 {
		t.Errorf("after draining, queued %d, want 3", got)
	}
	b.SetRecvBuffer(0) // the queue's length alone again
	sendSeq(t, a, addrB, 4)
	if got := queued(b); got != 7 {
		t.Errorf("without a receive buffer, queued %d, want 7", got)
	}
}

func TestReadBatchPartialAndTruncate(t *testing.T) {
	_, _, a, b := pair(t, Config{})
	sendSeq(t, a, addrB, 3)
	msgs := make([]link.Datagram, 2)
	msgs[0].Buf = make([]byte, 0, link.MaxDatagram)
	msgs[1].Buf = make([]byte, 10) // too small: truncated
	n, err := b.ReadBatch(msgs)
	if n != 2 || err != nil {
		t.Fatalf("ReadBatch = %d, %v, want 2, nil", n, err)
	}
	if len(msgs[1].Buf) != 10 {
		t.Errorf("truncated Buf has %d bytes, want 10", len(msgs[1].Buf))
	}
	if got := queued(b); got != 1 {
		t.Errorf("queued after a 2-datagram read = %d, want 1", got)
	}
	if n, err := b.ReadBatch(nil); n != 0 || err != nil {
		t.Errorf("ReadBatch(nil) = %d, %v, want 0, nil", n, err)
	}
}

func TestCloseUnblocksReadBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Config{})
		defer f.Close()
		a, _ := f.Attach(addrA)
		b, _ := f.Attach(addrB)
		errc := make(chan error, 2)
		for range 2 { // two blocked readers
			go func() {
				msgs := []link.Datagram{{Buf: make([]byte, 0, link.MaxDatagram)}}
				_, err := b.ReadBatch(msgs)
				errc <- err
			}()
		}
		synctest.Wait() // both durably blocked in ReadBatch
		select {
		case err := <-errc:
			t.Fatalf("ReadBatch returned %v before Close", err)
		default:
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := <-errc; !errors.Is(err, link.ErrLinkClosed) {
				t.Errorf("ReadBatch after Close: err = %v, want ErrLinkClosed", err)
			}
		}
		if err := b.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := b.WriteBatch([]link.Datagram{{}}); !errors.Is(err, link.ErrLinkClosed) {
			t.Errorf("WriteBatch after Close: err = %v, want ErrLinkClosed", err)
		}
		if _, err := b.ReadBatch(make([]link.Datagram, 1)); !errors.Is(err, link.ErrLinkClosed) {
			t.Errorf("ReadBatch after Close: err = %v, want ErrLinkClosed", err)
		}
		// Datagrams to a closed endpoint have no route.
		sendSeq(t, a, addrB, 1)
		if got := f.Stats().DropNoRoute.Packets; got != 1 {
			t.Errorf("DropNoRoute = %d, want 1", got)
		}
	})
}

func TestReadBatchWakesOnDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Config{})
		defer f.Close()
		a, _ := f.Attach(addrA)
		b, _ := f.Attach(addrB)
		got := make(chan wire.PSN)
		go func() {
			msgs := []link.Datagram{{Buf: make([]byte, 0, link.MaxDatagram)}}
			for {
				n, err := b.ReadBatch(msgs)
				if err != nil {
					close(got)
					return
				}
				for _, p := range psns(t, msgs[:n]) {
					got <- p
				}
			}
		}()
		for i := range 5 {
			synctest.Wait()
			sendSeq(t, a, addrB, 1)
			if p := <-got; p != 0 {
				t.Fatalf("round %d: PSN %d, want 0", i, p)
			}
		}
		f.Close()
		if _, ok := <-got; ok {
			t.Fatal("reader kept going after Fabric.Close")
		}
	})
}

func TestFabricCloseClosesEndpoints(t *testing.T) {
	f, mc, a, b := pair(t, Config{})
	f.SetImpairment(Impairment{Delay: time.Second})
	sendSeq(t, a, addrB, 3)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.WriteBatch([]link.Datagram{{}}); !errors.Is(err, link.ErrLinkClosed) {
		t.Errorf("WriteBatch after Fabric.Close: err = %v", err)
	}
	if _, err := b.ReadBatch(make([]link.Datagram, 1)); !errors.Is(err, link.ErrLinkClosed) {
		t.Errorf("ReadBatch after Fabric.Close: err = %v", err)
	}
	if got := mc.Pending(); got != 0 {
		t.Errorf("%d clock timers still pending after Close", got)
	}
	mc.Advance(time.Hour) // nothing to fire, nothing to crash
}

// lossPattern sends n datagrams A->B with 10% loss and returns the PSNs
// that arrived, while noise goroutines send on other paths.
func lossPattern(t *testing.T, seed int64, n int, noise bool) []wire.PSN {
	f, _, a, b := pair(t, Config{Seed: seed})
	f.SetImpairment(Impairment{Loss: 0.1})
	var wg sync.WaitGroup
	if noise {
		c, _ := f.Attach(addrC)
		wg.Go(func() {
			sendSeq(t, c, addrB, 500)
			sendSeq(t, b, addrC, 500)
		})
	}
	e := newEncap(addrA, addrB)
	pkt := build(t, &e, wire.RCSendOnly, 0, payload(0, 16))
	var got []wire.PSN
	collect := func() {
		for _, m := range drain(t, b) {
			if m.Encap.Src == addrA {
				got = append(got, psns(t, []link.Datagram{m})...)
			}
		}
	}
	for i := range n {
		wire.BTH(pkt).SetPSN(wire.PSN(i))
		wire.SetICRC(&e, pkt)
		a.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}})
		if i%256 == 255 {
			collect()
		}
	}
	wg.Wait()
	collect()
	return got
}

func TestLossSeededAndDeterministic(t *testing.T) {
	const n = 10000
	first := lossPattern(t, 1, n, false)
	second := lossPattern(t, 1, n, true) // other traffic must not matter
	if !slices.Equal(first, second) {
		t.Fatal("same seed, different loss pattern")
	}
	lost := n - len(first)
	if lost < 800 || lost > 1200 {
		t.Errorf("lost %d of %d at 10%% loss, want about 1000", lost, n)
	}
	t.Logf("seed 1: lost %d of %d", lost, n)
	if other := lossPattern(t, 2, n, false); slices.Equal(first, other) {
		t.Error("seeds 1 and 2 gave the same loss pattern")
	}
	// Order is preserved; only gaps.
	if !slices.IsSorted(first) {
		t.Error("loss reordered datagrams")
	}
}

func TestLossStatsAndReverseDirection(t *testing.T) {
	f, _, a, b := pair(t, Config{Seed: 3})
	f.SetPathImpairment(addrA, addrB, Impairment{Loss: 1})
	sendSeq(t, a, addrB, 10)
	sendSeq(t, b, addrA, 10)
	if got := f.Stats().DropImpairment.Packets; got != 10 {
		t.Errorf("DropImpairment = %d, want 10", got)
	}
	if got := a.Stats().DropImpairment.Packets; got != 10 {
		t.Errorf("sender DropImpairment = %d, want 10", got)
	}
	if got := queued(a); got != 10 {
		t.Errorf("reverse direction delivered %d, want 10", got)
	}
	// A clean path override beats a lossy fabric-wide setting.
	f.SetImpairment(Impairment{Loss: 1})
	f.SetPathImpairment(addrA, addrB, Impairment{})
	sendSeq(t, a, addrB, 5)
	if got := queued(b); got != 5 {
		t.Errorf("clean override: delivered %d, want 5", got)
	}
	f.ClearPathImpairment(addrA, addrB)
	sendSeq(t, a, addrB, 5)
	if got := queued(b); got != 5 {
		t.Errorf("after ClearPathImpairment: queued %d, want still 5", got)
	}
}

func TestDuplicate(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	f.SetImpairment(Impairment{Duplicate: 1})
	sendSeq(t, a, addrB, 3)
	got := drain(t, b)
	if want := []wire.PSN{0, 0, 1, 1, 2, 2}; !slices.Equal(psns(t, got), want) {
		t.Fatalf("PSNs %v, want %v", psns(t, got), want)
	}
	for _, m := range got {
		if err := wire.CheckICRC(&m.Encap, m.Buf); err != nil {
			t.Errorf("duplicate fails ICRC: %v", err)
		}
	}
	st := f.Stats()
	if st.Duplicated.Packets != 3 || st.Delivered.Packets != 6 || st.Sent.Packets != 3 {
		t.Errorf("stats %+v, want 3 sent, 3 duplicated, 6 delivered", st)
	}
}

func TestDuplicateProbability(t *testing.T) {
	f, _, a, b := pair(t, Config{Seed: 9, QueueLen: 4000})
	f.SetImpairment(Impairment{Duplicate: 0.25})
	sendSeq(t, a, addrB, 2000)
	got := psns(t, drain(t, b))
	extra := len(got) - 2000
	if extra < 400 || extra > 600 {
		t.Errorf("%d duplicates of 2000 at 25%%, want about 500", extra)
	}
	if !slices.IsSorted(got) {
		t.Error("duplicates out of place")
	}
}

func TestReorderNeverLoses(t *testing.T) {
	const n = 1000
	f, mc, a, b := pair(t, Config{Seed: 5, QueueLen: n})
	f.SetImpairment(Impairment{Reorder: 0.3})
	sendSeq(t, a, addrB, n)
	mc.Advance(time.Millisecond) // release a datagram held at the very end
	got := psns(t, drain(t, b))
	if len(got) != n {
		t.Fatalf("received %d of %d", len(got), n)
	}
	swaps := 0
	for i := 1; i < n; i++ {
		if got[i] < got[i-1] {
			swaps++
		}
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	for i, p := range sorted {
		if p != wire.PSN(i) {
			t.Fatalf("PSN %d missing or duplicated", i)
		}
	}
	held := f.Stats().Reordered.Packets
	if swaps == 0 || held == 0 {
		t.Fatalf("no reordering at 30%%: %d swaps, %d held", swaps, held)
	}
	// A held datagram lands right after its successor.
	for i := 1; i < n; i++ {
		if got[i] < got[i-1] && got[i-1] != got[i]+1 {
			t.Errorf("datagram %d delivered after %d: moved by more than one", got[i], got[i-1])
		}
	}
	t.Logf("%d datagrams held, %d swaps", held, swaps)
}

func TestReorderTimeout(t *testing.T) {
	f, mc, a, b := pair(t, Config{})
	f.SetImpairment(Impairment{Reorder: 1, ReorderTimeout: 5 * time.Millisecond})
	sendSeq(t, a, addrB, 1) // held; nothing follows
	if got := queued(b); got != 0 {
		t.Fatalf("held datagram delivered at once")
	}
	mc.Advance(5*time.Millisecond - 1)
	if got := queued(b); got != 0 {
		t.Fatalf("held datagram delivered before its timeout")
	}
	mc.Advance(1)
	if got := queued(b); got != 1 {
		t.Fatalf("held datagram not delivered at its timeout")
	}
}

func TestFilterReorderSwaps(t *testing.T) {
	f, mc, a, b := pair(t, Config{})
	f.AddFilter(OnMatch(IndexIs(2), Reorder))
	sendSeq(t, a, addrB, 5)
	if want, got := []wire.PSN{0, 1, 3, 2, 4}, psns(t, drain(t, b)); !slices.Equal(got, want) {
		t.Fatalf("PSNs %v, want %v", got, want)
	}
	if mc.AdvanceToNext() { // the stale timeout fires and finds nothing
		if got := queued(b); got != 0 {
			t.Fatalf("stale reorder timeout delivered %d datagrams", got)
		}
	}
}

func TestCorrupt(t *testing.T) {
	f, _, a, b := pair(t, Config{Seed: 11})
	f.SetImpairment(Impairment{Corrupt: 1})
	e := newEncap(addrA, addrB)
	var sent [][]byte
	for i := range 50 {
		pkt := build(t, &e, wire.RCWriteOnly, wire.PSN(i), payload(i, 200))
		sent = append(sent, pkt)
		a.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}})
	}
	got := drain(t, b)
	if len(got) != len(sent) {
		t.Fatalf("received %d, want %d", len(got), len(sent))
	}
	positions := map[int]bool{}
	for i, m := range got {
		diff := 0
		for j := range m.Buf {
			if d := bits.OnesCount8(m.Buf[j] ^ sent[i][j]); d != 0 {
				diff += d
				positions[j] = true
			}
		}
		if diff != 1 {
			t.Errorf("datagram %d: %d bits differ, want 1", i, diff)
		}
		if err := wire.CheckICRC(&m.Encap, m.Buf); !errors.Is(err, wire.ErrBadICRC) {
			t.Errorf("datagram %d: CheckICRC = %v, want ErrBadICRC", i, err)
		}
	}
	if len(positions) < 10 {
		t.Errorf("corruption hit only %d distinct bytes in 50 datagrams", len(positions))
	}
	if got := f.Stats().Corrupted.Packets; got != 50 {
		t.Errorf("Corrupted = %d, want 50", got)
	}
}

func TestDelayOnManualClock(t *testing.T) {
	f, mc, a, b := pair(t, Config{})
	f.SetImpairment(Impairment{Delay: 10 * time.Millisecond})
	sendSeq(t, a, addrB, 3)
	if got := queued(b); got != 0 {
		t.Fatalf("delivered %d before any time passed", got)
	}
	mc.Advance(10*time.Millisecond - 1)
	if got := queued(b); got != 0 {
		t.Fatalf("delivered %d before the delay elapsed", got)
	}
	mc.Advance(1)
	if got, want := psns(t, drain(t, b)), []wire.PSN{0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("PSNs %v, want %v", got, want)
	}
	if got := f.Stats().Delayed.Packets; got != 3 {
		t.Errorf("Delayed = %d, want 3", got)
	}
	if got := mc.Pending(); got != 0 {
		t.Errorf("timer still pending with nothing queued")
	}
}

func TestDelayJitterOnManualClock(t *testing.T) {
	const n = 200
	f, mc, a, b := pair(t, Config{Seed: 4, QueueLen: n})
	f.SetImpairment(Impairment{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond})
	sendSeq(t, a, addrB, n)
	mc.Advance(10*time.Millisecond - 1)
	if got := queued(b); got != 0 {
		t.Fatalf("delivered %d before the base delay", got)
	}
	mc.Advance(2500 * time.Microsecond)
	mid := queued(b)
	if mid == 0 || mid == n {
		t.Errorf("halfway through the jitter %d of %d delivered, want some", mid, n)
	}
	mc.Advance(2500 * time.Microsecond)
	got := psns(t, drain(t, b))
	if len(got) != n {
		t.Fatalf("after Delay+Jitter %d of %d delivered", len(got), n)
	}
	if slices.IsSorted(got) {
		t.Error("jitter of 5ms on back-to-back datagrams reordered nothing")
	}
}

func TestDelayWithRealClockInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(Config{}) // clock.Real: the bubble's fake time
		defer f.Close()
		a, _ := f.Attach(addrA)
		b, _ := f.Attach(addrB)
		f.SetPathImpairment(addrA, addrB, Impairment{Delay: 50 * time.Millisecond})
		start := time.Now()
		sendSeq(t, a, addrB, 2)
		msgs := make([]link.Datagram, 4)
		for i := range msgs {
			msgs[i].Buf = make([]byte, 0, link.MaxDatagram)
		}
		// Each datagram has a timer of its own; the two fire at the same
		// fake instant, but the reader may wake between their deliveries,
		// so it reads until it has both.
		for got := 0; got < 2; {
			n, err := b.ReadBatch(msgs) // durably blocked until a timer fires
			if err != nil || n < 1 || got+n > 2 {
				t.Fatalf("ReadBatch = %d, %v after %d datagrams, want 2 in all", n, err, got)
			}
			got += n
			if at := time.Since(start); at != 50*time.Millisecond {
				t.Errorf("datagram arrived after %v, want 50ms", at)
			}
		}
	})
}

func TestFilterDelayAndDuplicate(t *testing.T) {
	f, mc, a, b := pair(t, Config{})
	f.SetImpairment(Impairment{Loss: 1}) // filters' verdicts bypass this
	f.AddFilter(OnMatch(PSNIs(0), Delay(time.Second)))
	f.AddFilter(OnMatch(PSNIs(1), Duplicate))
	f.AddFilter(OnMatch(Not(Or(PSNIs(0), PSNIs(1))), Delay(time.Millisecond)))
	sendSeq(t, a, addrB, 3)
	if got, want := psns(t, drain(t, b)), []wire.PSN{1, 1}; !slices.Equal(got, want) {
		t.Fatalf("at once: PSNs %v, want %v", got, want)
	}
	mc.Advance(time.Millisecond)
	if got, want := psns(t, drain(t, b)), []wire.PSN{2}; !slices.Equal(got, want) {
		t.Fatalf("after 1ms: PSNs %v, want %v", got, want)
	}
	mc.Advance(time.Second)
	if got, want := psns(t, drain(t, b)), []wire.PSN{0}; !slices.Equal(got, want) {
		t.Fatalf("after 1s: PSNs %v, want %v", got, want)
	}
}

// writeMessage sends an RC RDMA WRITE of n packets (FIRST, MIDDLE..., LAST)
// with PSNs from psn.
func writeMessage(t *testing.T, a *Endpoint, dst netip.Addr, psn wire.PSN, n int) {
	e := newEncap(a.LocalAddr(), dst)
	const pmtu = 256
	var msgs []link.Datagram
	for i := range n {
		op := wire.RCWriteMiddle
		switch i {
		case 0:
			op = wire.RCWriteFirst
		case n - 1:
			op = wire.RCWriteLast
		}
		msgs = append(msgs, link.Datagram{Encap: e, Buf: build(t, &e, op, psn.Add(uint32(i)), payload(i, pmtu))})
	}
	if _, err := a.WriteBatch(msgs); err != nil {
		t.Fatal(err)
	}
}

func TestDropNth(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	remove := f.AddFilter(DropNth(3, OpcodeIs(wire.RCWriteMiddle)))
	writeMessage(t, a, addrB, 100, 10) // FIRST 100, MIDDLE 101..108, LAST 109
	got := psns(t, drain(t, b))
	want := []wire.PSN{100, 101, 102, 104, 105, 106, 107, 108, 109}
	if !slices.Equal(got, want) {
		t.Fatalf("PSNs %v, want %v (the third MIDDLE, 103, lost)", got, want)
	}
	if got := f.Stats().DropFilter.Packets; got != 1 {
		t.Errorf("DropFilter = %d, want 1", got)
	}
	// It fires once.
	writeMessage(t, a, addrB, 200, 10)
	if got := len(drain(t, b)); got != 10 {
		t.Errorf("second message: %d of 10 delivered", got)
	}
	remove()
	remove() // idempotent

	// Combined matchers, scoped to one direction.
	f.AddFilter(DropIf(And(From(addrB), To(addrA), OpcodeIs(wire.RCWriteFirst, wire.RCWriteLast))))
	writeMessage(t, a, addrB, 300, 4)
	writeMessage(t, b, addrA, 400, 4)
	if got := psns(t, drain(t, b)); len(got) != 4 {
		t.Errorf("A->B: %v, want all 4", got)
	}
	if got, want := psns(t, drain(t, a)), []wire.PSN{401, 402}; !slices.Equal(got, want) {
		t.Errorf("B->A: %v, want %v", got, want)
	}
}

func TestMatchers(t *testing.T) {
	e := newEncap(addrA, addrB)
	pkt := build(t, &e, wire.RCWriteMiddle, 77, payload(0, 64))
	p := &Packet{Src: addrA, Dst: addrB, Encap: e, Data: pkt, Index: 5, Parsed: true}
	if err := wire.Parse(pkt, &p.Wire); err != nil {
		t.Fatal(err)
	}
	unparsed := &Packet{Src: addrA, Dst: addrB, Data: []byte{1, 2, 3}}
	mapped := netip.MustParseAddr("::ffff:10.0.0.1")
	for _, tc := range []struct {
		name string
		m    Matcher
		want bool
	}{
		{"nil", nil, true},
		{"OpcodeIs", OpcodeIs(wire.RCSendOnly, wire.RCWriteMiddle), true},
		{"OpcodeIs other", OpcodeIs(wire.RCWriteFirst), false},
		{"MaskIs write middle", MaskIs(wire.MaskWrite | wire.MaskMiddle), true},
		{"MaskIs ack", MaskIs(wire.MaskAck), false},
		{"PSNIs", PSNIs(77), true},
		{"PSNIs other", PSNIs(78), false},
		{"DestQPIs", DestQPIs(0x22), true},
		{"DestQPIs other", DestQPIs(0x23), false},
		{"From", From(addrA), true},
		{"From mapped", From(mapped), true},
		{"From other", From(addrB), false},
		{"To", To(addrB), true},
		{"IndexIs", IndexIs(5), true},
		{"IndexIs other", IndexIs(4), false},
		{"And", And(From(addrA), PSNIs(77)), true},
		{"And false", And(From(addrA), PSNIs(1)), false},
		{"And empty", And(), true},
		{"Or", Or(PSNIs(1), PSNIs(77)), true},
		{"Or empty", Or(), false},
		{"Not", Not(PSNIs(77)), false},
	} {
		if got := tc.m.match(p); got != tc.want {
			t.Errorf("%s: match = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, m := range []Matcher{OpcodeIs(wire.RCWriteMiddle), MaskIs(0), PSNIs(0), DestQPIs(0)} {
		if m(unparsed) {
			t.Errorf("a header matcher matched an unparsed datagram")
		}
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{
		Pass: "Pass", Drop: "Drop", Duplicate: "Duplicate", Corrupt: "Corrupt",
		Reorder: "Reorder", Delay(time.Second): "Delay(1s)", Delay(0): "Pass",
	} {
		if got := a.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func TestFirstActingFilterWinsAllCount(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	f.AddFilter(DropNth(1, nil))
	second := OnNth(2, nil, Drop) // counts the datagram the first filter dropped
	f.AddFilter(second)
	sendSeq(t, a, addrB, 4)
	if got, want := psns(t, drain(t, b)), []wire.PSN{2, 3}; !slices.Equal(got, want) {
		t.Fatalf("PSNs %v, want %v", got, want)
	}
}

func TestFilterCorrupt(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	f.AddFilter(OnMatch(PSNIs(1), Corrupt))
	sendSeq(t, a, addrB, 3)
	for i, m := range drain(t, b) {
		err := wire.CheckICRC(&m.Encap, m.Buf)
		if (i == 1) != (err != nil) {
			t.Errorf("datagram %d: CheckICRC = %v", i, err)
		}
	}
}

func TestTap(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	var seen []Packet
	remove := f.Tap(func(p Packet) { seen = append(seen, p.Clone()) })
	f.AddFilter(DropIf(PSNIs(1)))
	sendSeq(t, a, addrB, 3)
	sendSeq(t, a, addrC, 1) // no route: still tapped
	a.WriteBatch([]link.Datagram{{Encap: newEncap(addrA, addrB), Buf: []byte{1, 2, 3}}})
	if len(seen) != 5 {
		t.Fatalf("tap saw %d datagrams, want 5", len(seen))
	}
	for i, p := range seen[:3] {
		if !p.Parsed || p.Wire.PSN() != wire.PSN(i) || p.Index != uint64(i) || p.Src != addrA || p.Dst != addrB {
			t.Errorf("tapped %d: %v", i, p)
		}
		if err := wire.CheckICRC(&p.Encap, p.Data); err != nil {
			t.Errorf("tapped %d: %v", i, err)
		}
	}
	if p := seen[3]; p.Dst != addrC || p.Index != 0 {
		t.Errorf("unroutable datagram tapped as %v", p)
	}
	if p := seen[4]; p.Parsed || p.Index != 3 || !bytes.Equal(p.Data, []byte{1, 2, 3}) {
		t.Errorf("garbage datagram tapped as %v", p)
	}
	if got := len(drain(t, b)); got != 3 { // PSN 0, 2 and the garbage
		t.Errorf("delivered %d, want 3", got)
	}
	remove()
	sendSeq(t, a, addrB, 1)
	if len(seen) != 5 {
		t.Errorf("removed tap still called")
	}
}

func TestPacketString(t *testing.T) {
	e := newEncap(addrA, addrB)
	p := Packet{Src: addrA, Dst: addrB, Data: build(t, &e, wire.RCSendOnly, 9, nil), Parsed: true}
	wire.Parse(p.Data, &p.Wire)
	if got, want := p.String(), "10.0.0.1->10.0.0.2 #0 RC_SEND_ONLY qp=0x22 psn=9 len=16"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestConcurrentTraffic(t *testing.T) {
	const senders, perSender = 4, 2000
	mc := clock.NewManual(t0)
	f := New(Config{Seed: 1, QueueLen: senders * perSender * 2, Clock: mc})
	defer f.Close()
	f.SetImpairment(Impairment{Loss: 0.05, Duplicate: 0.05, Reorder: 0.05, Delay: time.Microsecond, Jitter: time.Microsecond})
	f.Tap(func(Packet) {})
	f.AddFilter(DropNth(10, nil))
	rx, _ := f.Attach(addrA)
	var wg sync.WaitGroup
	for s := range senders {
		ep, err := f.Attach(netip.AddrFrom4([4]byte{10, 1, 0, byte(s)}))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { sendSeq(t, ep, addrA, perSender) })
	}
	got := make(chan int)
	go func() {
		n := 0
		msgs := make([]link.Datagram, 16)
		for i := range msgs {
			msgs[i].Buf = make([]byte, 0, link.MaxDatagram)
		}
		for {
			k, err := rx.ReadBatch(msgs)
			if err != nil {
				got <- n
				return
			}
			n += k
		}
	}()
	// Advance time while the senders run, then past every delay and
	// reorder timeout.
	advDone := make(chan struct{})
	go func() {
		defer close(advDone)
		for range 1000 {
			mc.Advance(time.Microsecond)
		}
	}()
	wg.Wait()
	<-advDone
	mc.Advance(time.Second)
	if st := f.Stats(); st.Delivered.Packets+st.Dropped().Packets != st.Sent.Packets+st.Duplicated.Packets {
		t.Errorf("unaccounted datagrams: %+v", st)
	}
	st := f.Stats()
	rx.Close()
	n := <-got
	if uint64(n) > st.Delivered.Packets {
		t.Errorf("read %d, more than the %d delivered", n, st.Delivered.Packets)
	}
	if st.Sent.Packets != senders*perSender {
		t.Errorf("Sent = %d, want %d", st.Sent.Packets, senders*perSender)
	}
}

// TestSteadyStateAllocs checks the datapath allocates nothing once the
// free list is warm, with and without hooks.
func TestSteadyStateAllocs(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		f, _, a, b := pair(t, Config{})
		if hooked {
			f.Tap(func(Packet) {})
			f.AddFilter(DropIf(PSNIs(1 << 20)))
			f.SetImpairment(Impairment{Corrupt: 0.5, Duplicate: 0.5})
		}
		e := newEncap(addrA, addrB)
		tx := make([]link.Datagram, 8)
		rx := make([]link.Datagram, 16)
		for i := range tx {
			tx[i] = link.Datagram{Encap: e, Buf: build(t, &e, wire.RCSendOnly, wire.PSN(i), payload(i, 1024))}
		}
		for i := range rx {
			rx[i].Buf = make([]byte, 0, link.MaxDatagram)
		}
		round := func() {
			a.WriteBatch(tx)
			for queued(b) > 0 {
				b.ReadBatch(rx)
			}
		}
		round()
		if n := testing.AllocsPerRun(100, round); n != 0 {
			t.Errorf("hooks %v: %v allocations per round, want 0", hooked, n)
		}
	}
}
