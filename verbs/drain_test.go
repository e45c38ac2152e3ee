package verbs_test

// Drains (the kernel's ib_drain_sq, ib_drain_rq, ib_drain_qp): every WR
// posted before the drain completes once, successfully or flushed; the
// marker's completion never reaches the CQ; WRs posted after the drain
// are flushed; SRQ-attached QPs wait for LAST_WQE_REACHED.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport/rc"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// checkDrained checks that wcs hold exactly one completion for each of
// ids and nothing else (no marker): first the successful ones, in
// posting order and with opcode op, then the flushed ones. With inOrder
// the flushed ones must be in posting order too. It returns how many
// succeeded.
func checkDrained(t testing.TB, what string, wcs []ibv.WorkCompletion, ids []uint64, op ibv.WCOpcode, inOrder bool) int {
	t.Helper()
	if len(wcs) != len(ids) {
		t.Fatalf("%s: %d completions for %d WRs: %+v", what, len(wcs), len(ids), wcs)
	}
	ok := 0
	for ok < len(wcs) && wcs[ok].Status == ibv.WCSuccess {
		if wc := wcs[ok]; wc.WRID != ids[ok] || wc.Opcode != op {
			t.Fatalf("%s: successful completion %d is %+v, want WR %d with opcode %d", what, ok, wc, ids[ok], op)
		}
		ok++
	}
	left := map[uint64]bool{}
	for _, id := range ids[ok:] {
		left[id] = true
	}
	for i, wc := range wcs[ok:] {
		switch {
		case wc.WRID == ibv.DrainWRID:
			t.Fatalf("%s: the drain marker's completion reached the CQ: %+v", what, wc)
		case wc.Status != ibv.WCWRFlushErr:
			t.Fatalf("%s: completion %+v after %d successes, want %q", what, wc, ok, ibv.WCWRFlushErr)
		case !left[wc.WRID]:
			t.Fatalf("%s: flushed completion for WR %d, which is not due one (twice, or never posted)", what, wc.WRID)
		case inOrder && wc.WRID != ids[ok+i]:
			t.Fatalf("%s: flushed completion %d is WR %d, want %d (posting order)", what, ok+i, wc.WRID, ids[ok+i])
		}
		delete(left, wc.WRID)
	}
	return ok
}

func seq(from, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(from + i)
	}
	return ids
}

// noFatal checks that e's device raised no QP_FATAL for e's QP.
func noFatal(t testing.TB, e *end) {
	t.Helper()
	evs, _ := e.dev.AsyncEvents()
	for _, ev := range evs {
		if ev.Type == ibv.EventQPFatal && ev.QPN == e.qp.QPN() {
			t.Errorf("QP_FATAL for a drained QP: %v", ev)
		}
	}
}

// TestDrainSQBusy drains an RC send queue while 128 WRITEs of 16 KiB are
// on a fabric with a millisecond of delay: some have completed, the rest
// are in flight or not started. Every WRITE completes exactly once,
// successfully or flushed, in order; the marker does not reach the CQ;
// WRITEs posted after the drain are flushed; no QP_FATAL is raised.
func TestDrainSQBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 3})
		defer f.Close()
		f.SetImpairment(fabric.Impairment{Delay: time.Millisecond})
		a, b := newPair(t, f, pairOpts{bufSize: 1 << 22, timeout: 14, retry: 7})
		const n, size = 128, 16 << 10
		for i := range n {
			post(t, a, rdmaWR(a, b, uint64(i), ibv.WRRDMAWrite, i*size, i*size, size))
		}
		// Let some complete.
		var wcs []ibv.WorkCompletion
		wcs = append(wcs, waitWC(t, a.cq, 3)...)
		must(t, a.qp.DrainSQ(t.Context()))
		wantState(t, "drained", a, ibv.QPStateErr)
		wcs = append(wcs, pollAll(a.cq)...)
		ok := checkDrained(t, "SQ", wcs, seq(0, n), ibv.WCRDMAWrite, true)
		if ok == n {
			t.Fatalf("all %d WRITEs completed before the drain: it flushed nothing", n)
		}
		t.Logf("%d WRITEs completed, %d flushed", ok, n-ok)

		// After the drain: flushed, not lost.
		for i := range 5 {
			post(t, a, rdmaWR(a, b, uint64(1000+i), ibv.WRRDMAWrite, 0, 0, 8))
		}
		wcs = pollAll(a.cq)
		if got := checkDrained(t, "after", wcs, seq(1000, 5), ibv.WCRDMAWrite, true); got != 0 {
			t.Fatalf("%d WRs posted in ERR succeeded", got)
		}
		noWC(t, a.cq, time.Second)
		noFatal(t, a)
	})
}

// TestDrainSQConcurrentPosts drains while another goroutine keeps
// posting: when DrainSQ returns, every WR posted before it was called
// has its completion in the CQ already; in the end every WR posted,
// before or after, has exactly one.
func TestDrainSQConcurrentPosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 4})
		defer f.Close()
		f.SetImpairment(fabric.Impairment{Delay: 200 * time.Microsecond})
		a, b := newPair(t, f, pairOpts{bufSize: 1 << 20})
		var posted atomic.Int64 // WRs whose PostSend returned
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; {
				select {
				case <-stop:
					return
				default:
				}
				_, err := a.qp.PostSend(rdmaWR(a, b, uint64(i), ibv.WRRDMAWrite, 0, 0, 4096))
				switch {
				case err == nil:
					i++
					posted.Store(int64(i))
				case errors.Is(err, verbs.ENOMEM):
				default:
					t.Errorf("post %d: %v", i, err)
					return
				}
				time.Sleep(10 * time.Microsecond)
			}
		})
		time.Sleep(2 * time.Millisecond)
		before := int(posted.Load())
		must(t, a.qp.DrainSQ(t.Context()))
		wcs := pollAll(a.cq)
		if len(wcs) < before {
			t.Fatalf("%d completions after the drain, want at least the %d WRs posted before it", len(wcs), before)
		}
		checkDrained(t, "before", wcs[:before], seq(0, before), ibv.WCRDMAWrite, true)
		time.Sleep(time.Millisecond)
		close(stop)
		wg.Wait()
		all := int(posted.Load())
		wcs = append(wcs, pollAll(a.cq)...)
		checkDrained(t, "all", wcs, seq(0, all), ibv.WCRDMAWrite, true)
		if all <= before {
			t.Fatalf("nothing posted after the drain (%d before, %d in all)", before, all)
		}
		for _, wc := range wcs[before:] {
			if wc.Status != ibv.WCWRFlushErr {
				t.Fatalf("WR %d posted after the drain: %+v", wc.WRID, wc)
			}
		}
		t.Logf("%d WRs posted before the drain, %d after", before, all-before)
	})
}

// TestDrainRQ drains an RC receive queue while two-packet SENDs arrive:
// each receive completes once, with its message or flushed; the marker
// stays out of the CQ; receives posted afterwards are flushed. (rc
// flushes the WQE a message was arriving into after the WQEs still
// posted, so the flushed receives are checked as a set.)
func TestDrainRQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 5})
		defer f.Close()
		f.SetImpairment(fabric.Impairment{Delay: time.Millisecond})
		a, b := newPair(t, f, pairOpts{bufSize: 1 << 20, timeout: 10, retry: 1, maxWR: 512})
		// The SENDs, of two packets each at MTU 1024, are more than the
		// window of rc.MaxUnackedPSNs PSNs: the later ones are still to
		// come at the drain.
		const sends, size = rc.MaxUnackedPSNs/2 + 100, 2048
		const n = sends + 50
		for i := range n {
			postRecv(t, b, recvWR(b, uint64(i), i*size, size))
		}
		for i := range sends {
			post(t, a, sendWR(a, uint64(i), ibv.WRSend, 0, size))
		}
		wcs := waitWC(t, b.cq, 2)
		must(t, b.qp.DrainRQ(t.Context()))
		wcs = append(wcs, pollAll(b.cq)...)
		ok := checkDrained(t, "RQ", wcs, seq(0, n), ibv.WCRecv, false)
		if ok >= sends {
			t.Fatalf("all %d SENDs arrived before the drain", ok)
		}
		t.Logf("%d receives completed, %d flushed", ok, n-ok)
		postRecv(t, b, recvWR(b, 500, 0, 64), recvWR(b, 501, 64, 64))
		checkDrained(t, "after", pollAll(b.cq), seq(500, 2), ibv.WCRecv, true)
		noWC(t, b.cq, time.Second)
		noFatal(t, b)
	})
}

// TestDrainQPTypes drains both queues of RC, UC and UD QPs with sends
// in flight and receives posted: each WR completes once, the markers do
// not show, and the QP ends in ERR without QP_FATAL.
func TestDrainQPTypes(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 6})
				defer f.Close()
				f.SetImpairment(fabric.Impairment{Delay: time.Millisecond})
				var a, b *end
				send := func(i int) ibv.SendWR { return sendWR(a, uint64(i), ibv.WRSend, 0, 256) }
				if typ == ibv.QPTypeUD {
					ua := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 7})
					ub := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 7})
					a = &end{dev: ua.dev, pd: ua.pd, cq: ua.cq, qp: ua.qp, buf: ua.buf, mr: ua.mr}
					b = &end{dev: ub.dev, pd: ub.pd, cq: ub.cq, qp: ub.qp, buf: ub.buf, mr: ub.mr}
					ah := ua.ahTo(t, ub, 0, 64, 0)
					send = func(i int) ibv.SendWR {
						w := sendWR(a, uint64(i), ibv.WRSend, 0, 256)
						w.AH, w.RemoteQPN, w.RemoteQKey = ah, b.qp.QPN(), 7
						return w
					}
				} else {
					a, b = newPair(t, f, pairOpts{typ: typ, timeout: 14, retry: 7})
				}
				for i := range 32 {
					postRecv(t, a, recvWR(a, uint64(100+i), 4096+i*512, 512))
					postRecv(t, b, recvWR(b, uint64(i), i*512, 512))
				}
				for i := range 64 {
					post(t, a, send(i))
				}
				must(t, a.qp.DrainQP(t.Context()))
				wantState(t, "drained", a, ibv.QPStateErr)
				var sends, recvs []ibv.WorkCompletion
				for _, wc := range pollAll(a.cq) {
					if wc.Opcode&ibv.WCRecv != 0 {
						recvs = append(recvs, wc)
					} else {
						sends = append(sends, wc)
					}
				}
				ok := checkDrained(t, "SQ", sends, seq(0, 64), ibv.WCSend, true)
				t.Logf("%d SENDs completed, %d flushed", ok, 64-ok)
				if got := checkDrained(t, "RQ", recvs, seq(100, 32), ibv.WCRecv, true); got != 0 {
					t.Errorf("%d receives completed with nothing sent to them", got)
				}
				noWC(t, a.cq, time.Second)
				noFatal(t, a)
				// The peer got what left before the drain, intact.
				settle(10 * time.Millisecond)
				if typ != ibv.QPTypeRC {
					for _, wc := range pollAll(b.cq) {
						if wc.Status != ibv.WCSuccess {
							t.Errorf("peer completion %+v", wc)
						}
					}
				}
			})
		})
	}
}

// TestDrainRQSRQ drains the receive side of an RC QP on an SRQ while a
// SEND is half received: as the kernel's __ib_drain_srq, DrainRQ moves
// the QP to ERR and returns once LAST_WQE_REACHED was raised, by which
// time the WQE the QP held is flushed; the SRQ keeps its other WQEs, and
// the application still gets the event, once.
func TestDrainRQSRQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 7})
		defer f.Close()
		s := newSRQServer(t, f, "10.0.0.100", 8, 4096)
		c, sq := rcClient(t, f, "10.0.0.1", s, pairOpts{typ: ibv.QPTypeRC, timeout: 14, retry: 7, rnr: 7})
		s.dev.AsyncEvents()
		// The SEND's last packet never arrives: the server's QP holds
		// WQE 0 with half a message in it.
		f.AddFilter(fabric.DropIf(ops(c, wire.RCSendLast)))
		post(t, c, sendWR(c, 1, ibv.WRSend, 0, 2048))
		waitUntil(t, time.Second, "the SRQ to give a WQE", func() bool { return s.srq.Len() == 7 })
		settle(0)
		if got := pollAll(s.cq); len(got) != 0 {
			t.Fatalf("completions before the drain: %+v", got)
		}
		must(t, sq.DrainRQ(t.Context()))
		if st := sq.State(); st != ibv.QPStateErr {
			t.Fatalf("drained QP in %v", st)
		}
		wcs := pollAll(s.cq)
		if len(wcs) != 1 {
			t.Fatalf("completions after the drain: %+v, want WQE 0 flushed", wcs)
		}
		wantWC(t, wcs[0], 0, ibv.WCWRFlushErr, ibv.WCRecv)
		if n := s.srq.Len(); n != 7 {
			t.Fatalf("%d WQEs left in the SRQ, want 7", n)
		}
		var last, fatal int
		evs, _ := s.dev.AsyncEvents()
		for _, ev := range evs {
			switch {
			case ev.Type == ibv.EventQPLastWQEReached && ev.QPN == sq.QPN():
				last++
			case ev.Type == ibv.EventQPFatal:
				fatal++
			}
		}
		if last != 1 || fatal != 0 {
			t.Fatalf("events %v: want LAST_WQE_REACHED once and no QP_FATAL", evs)
		}
		// Again, already in ERR: the event went out for this stay, the
		// drain returns at once, and no second event.
		must(t, sq.DrainQP(t.Context()))
		if _, last := limitEvents(s.dev, s.srq); len(last) != 0 {
			t.Fatalf("LAST_WQE_REACHED again: %v", last)
		}
	})
}

// TestDrainContext: a context that has ended makes every drain return
// its error at once, leaving the QP in RTS with its work going on; a
// drain with a live deadline then works.
func TestDrainContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 8})
		defer f.Close()
		a, b := newPair(t, f, pairOpts{})
		canceled, cancel := context.WithCancel(t.Context())
		cancel()
		expired, cancel2 := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel2()
		time.Sleep(2 * time.Millisecond)
		for _, c := range []struct {
			ctx  context.Context
			want error
		}{{canceled, context.Canceled}, {expired, context.DeadlineExceeded}} {
			for name, drain := range map[string]func(context.Context) error{
				"DrainSQ": a.qp.DrainSQ, "DrainRQ": a.qp.DrainRQ, "DrainQP": a.qp.DrainQP,
			} {
				if err := drain(c.ctx); err != c.want {
					t.Errorf("%s with an ended context: %v, want %v as is", name, err, c.want)
				}
			}
		}
		wantState(t, "after ended drains", a, ibv.QPStateRTS)
		postRecv(t, b, recvWR(b, 1, 0, 64))
		post(t, a, sendWR(a, 2, ibv.WRSend, 0, 64))
		wantWC(t, waitWC(t, b.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
		wantWC(t, waitWC(t, a.cq, 1)[0], 2, ibv.WCSuccess, ibv.WCSend)

		ctx, cancel3 := context.WithTimeout(t.Context(), time.Second)
		defer cancel3()
		must(t, a.qp.DrainQP(ctx))
		noWC(t, a.cq, 0)
		// Misuse: a QP not made by CreateQP.
		var zero verbs.QP
		if err := zero.DrainQP(ctx); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("DrainQP on a zero QP: %v, want EINVAL", err)
		}
		// A destroyed QP: the modify is refused.
		must(t, a.qp.Destroy())
		if err := a.qp.DrainSQ(ctx); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("DrainSQ on a destroyed QP: %v, want EINVAL", err)
		}
	})
}
