package verbs_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// waitResult is what a CQ.Wait in a goroutine returned.
type waitResult struct {
	wc  ibv.WorkCompletion
	n   int
	err error
}

// goWait starts cq.Wait(ctx) for one completion in a goroutine.
func goWait(ctx context.Context, cq *verbs.CQ) <-chan waitResult {
	res := make(chan waitResult, 1)
	go func() {
		var wc [1]ibv.WorkCompletion
		n, err := cq.Wait(ctx, wc[:])
		res <- waitResult{wc[0], n, err}
	}()
	return res
}

// blocked fails the test unless the Wait behind res is still waiting
// once every goroutine of the bubble is idle.
func blocked(t *testing.T, res <-chan waitResult) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-res:
		t.Fatalf("Wait returned %d, %+v, %v before a completion came", r.n, r.wc, r.err)
	default:
	}
}

// TestCQWait: a Wait on an empty CQ blocks until the peer's SEND lands,
// then returns its receive completion; with and without a completion
// channel, and the channel's events are acknowledged (the CQ can be
// destroyed afterwards).
func TestCQWait(t *testing.T) {
	for _, ch := range []bool{false, true} {
		name := "no channel"
		if ch {
			name = "channel"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				a, b := apiPair(t, f, apiCfg{ch: ch}, apiCfg{ch: ch})
				for i := range 3 { // the second and third Waits reuse the arming
					res := goWait(context.Background(), b.rcq)
					blocked(t, res)
					must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: uint64(100 + i), SGList: []ibv.SGE{b.mr.SGE(0, 64)}}))
					must2(t)(a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}}))
					r := <-res
					if r.err != nil || r.n != 1 || r.wc.WRID != uint64(100+i) || r.wc.Opcode != ibv.WCRecv || r.wc.Status != ibv.WCSuccess {
						t.Fatalf("Wait %d = %d, %+v, %v; want the receive of WR %d", i, r.n, r.wc, r.err, 100+i)
					}
				}
				if ch {
					// Wait took and acknowledged the events it caused: none is left.
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					if c, err := b.ch.GetEvent(ctx); !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("GetEvent after Wait = %p, %v; want no event left", c, err)
					}
				}
				must(t, a.qp.Destroy())
				must(t, b.qp.Destroy())
				if err := b.rcq.Destroy(); err != nil {
					t.Fatalf("Destroy after Wait: %v (Wait must acknowledge the channel's events)", err)
				}
			})
		})
	}
}

// TestCQWaitQueued: completions already queued are returned at once,
// even with a context that has ended, as many as fit.
func TestCQWaitQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, _ := apiPair(t, f, apiCfg{}, apiCfg{})
		for i := range 3 {
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: a.mr.Addr(), RKey: 0}))
		}
		synctest.Wait()
		time.Sleep(time.Minute) // let every retry and NAK play out
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wc := make([]ibv.WorkCompletion, 2)
		n, err := a.scq.Wait(ctx, wc)
		if n != 2 || err != nil {
			t.Fatalf("Wait = %d, %v; want the 2 first of 3 queued completions", n, err)
		}
		n, err = a.scq.Wait(ctx, wc)
		if n != 1 || err != nil {
			t.Fatalf("second Wait = %d, %v; want the third completion", n, err)
		}
		// A completion with an error status is returned like any other:
		// the WRITEs used rkey 0, which names no region of the peer.
		if wc[0].Status != ibv.WCRemAccessErr && wc[0].Status != ibv.WCWRFlushErr {
			t.Errorf("completion %+v, want a remote access error or a flush", wc[0])
		}
		if n, err = a.scq.Wait(ctx, wc); n != 0 || !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait on an empty CQ with a cancelled context = %d, %v; want context.Canceled", n, err)
		}
	})
}

// TestCQWaitCancel: a blocked Wait returns the context's error, wrapped,
// when the context is cancelled or its deadline passes (on fake time).
func TestCQWaitCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		dev := apiOpen(t, f, apiAddrA)
		cq, err := dev.CreateCQ(4, nil)
		must(t, err)

		ctx, cancel := context.WithCancel(context.Background())
		res := goWait(ctx, cq)
		blocked(t, res)
		cancel()
		if r := <-res; r.n != 0 || !errors.Is(r.err, context.Canceled) || r.err == context.Canceled {
			t.Fatalf("Wait after cancel = %d, %v; want context.Canceled, wrapped", r.n, r.err)
		}

		start := time.Now()
		ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var wc [4]ibv.WorkCompletion
		n, err := cq.Wait(ctx, wc[:])
		if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait with a 3 s deadline = %d, %v; want context.DeadlineExceeded", n, err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("Wait returned after %v of fake time, want 3s", d)
		}
	})
}

// TestCQWaitErrors: a CQ overrun lets Wait return what it holds, then
// fails it with EINVAL; destroying the CQ under a blocked Wait ends it
// with EINVAL; misuse is EINVAL.
func TestCQWaitErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		// A send CQ of one entry: the second signaled WRITE overruns it.
		a, _ := apiPair(t, f, apiCfg{sendCQE: 1}, apiCfg{})
		for i := range 2 {
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()}))
		}
		synctest.Wait()
		var wc [4]ibv.WorkCompletion
		if n, err := a.scq.Wait(context.Background(), wc[:]); n != 1 || err != nil || wc[0].WRID != 0 {
			t.Fatalf("Wait on the overrun CQ = %d, %+v, %v; want WR 0's completion", n, wc[0], err)
		}
		if n, err := a.scq.Wait(context.Background(), wc[:]); n != 0 || !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("Wait on the drained overrun CQ = %d, %v; want EINVAL", n, err)
		}

		cq, err := a.dev.CreateCQ(4, nil)
		must(t, err)
		res := goWait(context.Background(), cq)
		blocked(t, res)
		must(t, cq.Destroy())
		if r := <-res; r.n != 0 || !errors.Is(r.err, verbs.EINVAL) {
			t.Fatalf("Wait on a CQ destroyed under it = %d, %v; want EINVAL", r.n, r.err)
		}

		// A channel shared by two CQs: Wait would take the other's events.
		ch := a.dev.CreateCompChannel()
		c1, err := a.dev.CreateCQ(4, ch)
		must(t, err)
		c2, err := a.dev.CreateCQ(4, ch)
		must(t, err)
		if _, err := c1.Wait(context.Background(), wc[:]); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("Wait on a CQ sharing its channel: %v, want EINVAL", err)
		}
		must(t, c2.Destroy())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c1.Wait(ctx, wc[:]); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait on the channel's only CQ: %v, want context.DeadlineExceeded", err)
		}

		for _, tc := range []struct {
			name string
			err  error
		}{
			{"nil CQ", func() error { _, err := (*verbs.CQ)(nil).Wait(context.Background(), wc[:]); return err }()},
			{"nil context", func() error { _, err := c1.Wait(nil, wc[:]); return err }()}, //lint:ignore SA1012 the misuse under test
			{"no room", func() error { _, err := c1.Wait(context.Background(), nil); return err }()},
		} {
			if !errors.Is(tc.err, verbs.EINVAL) {
				t.Errorf("Wait with %s: %v, want EINVAL", tc.name, tc.err)
			}
		}
	})
}

// TestCQWaitTwoWaiters: two goroutines blocked on one CQ both return when
// two completions arrive, one each.
func TestCQWaitTwoWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{}, apiCfg{})
		r1, r2 := goWait(context.Background(), b.rcq), goWait(context.Background(), b.rcq)
		blocked(t, r1)
		blocked(t, r2)
		for i := range 2 {
			must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: uint64(100 + i), SGList: []ibv.SGE{b.mr.SGE(0, 64)}}))
		}
		for i := range 2 {
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}}))
		}
		got := map[uint64]bool{}
		for _, r := range []waitResult{<-r1, <-r2} {
			if r.err != nil || r.n != 1 {
				t.Fatalf("Wait = %d, %v", r.n, r.err)
			}
			got[r.wc.WRID] = true
		}
		if !got[100] || !got[101] {
			t.Errorf("the waiters got %v, want WRs 100 and 101", got)
		}
	})
}

// TestCQAll: the iterator yields completions in order as they come;
// breaking out leaves the rest on the CQ; a cancelled context ends it
// with the error.
func TestCQAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{}, apiCfg{})
		for i := range 5 {
			must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{b.mr.SGE(0, 64)}}))
		}
		go func() {
			for i := range 5 {
				a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}})
				time.Sleep(time.Millisecond)
			}
		}()
		var seen []uint64
		for wc, err := range b.rcq.All(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, wc.WRID)
			if len(seen) == 3 {
				break
			}
		}
		if len(seen) != 3 || seen[0] != 0 || seen[1] != 1 || seen[2] != 2 {
			t.Fatalf("All yielded %v, want 0 1 2", seen)
		}
		synctest.Wait()
		time.Sleep(time.Second)
		if got := waitWC(t, b.rcq, 2); got[0].WRID != 3 || got[1].WRID != 4 {
			t.Fatalf("after the loop the CQ holds %+v, want WRs 3 and 4", got)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var errs []error
		for _, err := range b.rcq.All(ctx) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
			t.Fatalf("All on an idle CQ yielded %v, want one context.DeadlineExceeded", errs)
		}
	})
}

// TestCQWaitAllocs: Wait with completions queued does not allocate.
func TestCQWaitAllocs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, _ := apiPair(t, f, apiCfg{cap: ibv.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}, apiCfg{})
		const n = 40
		for i := range n {
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, 8)}, RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()}))
		}
		time.Sleep(time.Second)
		ctx := context.Background()
		var wc [1]ibv.WorkCompletion
		if allocs := testing.AllocsPerRun(n-1, func() {
			if k, err := a.scq.Wait(ctx, wc[:]); k != 1 || err != nil {
				t.Fatalf("Wait = %d, %v", k, err)
			}
		}); allocs != 0 {
			t.Errorf("Wait allocates %v times per call, want 0", allocs)
		}
	})
}

// TestGetEventTimeoutAllocs: GetEventTimeout reuses its timer, so that a
// wait per message allocates nothing (a context.WithTimeout per wait
// allocated a context and a timer, 6-8% of write_lat's CPU on a guest).
func TestGetEventTimeoutAllocs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{}, apiCfg{ch: true})
		const n = 40
		for i := range n {
			must(t, b.rcq.ReqNotify(false))
			must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{b.mr.SGE(0, 16)}}))
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 16)}}))
			waitWC(t, b.rcq, 1)
		}
		ctx := context.Background()
		got := 0
		if allocs := testing.AllocsPerRun(n-1, func() {
			c, err := b.ch.GetEventTimeout(ctx, time.Second)
			if c != b.rcq || err != nil {
				t.Fatalf("GetEventTimeout = %p, %v; want the receive CQ", c, err)
			}
			got++
		}); allocs != 0 {
			t.Errorf("GetEventTimeout allocates %v times per call, want 0", allocs)
		}
		must(t, b.rcq.AckEvents(got))
		if c, err := b.ch.GetEventTimeout(ctx, 0); !errors.Is(err, verbs.ETIMEDOUT) {
			t.Errorf("GetEventTimeout(0) with no event queued = %p, %v; want ETIMEDOUT", c, err)
		}
	})
}
