package cq

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

func newCQ(t testing.TB, cqe int) *CQ {
	t.Helper()
	c, err := New(cqe, MaxCQE)
	if err != nil {
		t.Fatalf("New(%d): %v", cqe, err)
	}
	return c
}

func wc(id uint64) *ibv.WorkCompletion {
	return &ibv.WorkCompletion{WRID: id, Opcode: ibv.WCRecv, ByteLen: uint32(id)}
}

func errWC(id uint64) *ibv.WorkCompletion {
	return &ibv.WorkCompletion{WRID: id, Status: ibv.WCWRFlushErr}
}

func TestNewCapacity(t *testing.T) {
	for _, tt := range []struct{ cqe, want int }{
		{1, 1}, {2, 3}, {3, 3}, {4, 7}, {100, 127}, {127, 127}, {128, 255}, {16384, 32767}, {MaxCQE, MaxCQE},
	} {
		c := newCQ(t, tt.cqe)
		if got := c.Cap(); got != tt.want {
			t.Errorf("New(%d).Cap() = %d, want %d", tt.cqe, got, tt.want)
		}
	}
	for _, tt := range []struct{ cqe, max int }{{0, MaxCQE}, {-1, MaxCQE}, {MaxCQE + 1, MaxCQE}, {11, 10}, {1, 0}} {
		if _, err := New(tt.cqe, tt.max); !errors.Is(err, errno.Invalid) {
			t.Errorf("New(%d, %d): got %v, want errno.Invalid", tt.cqe, tt.max, err)
		}
	}
}

// TestOrder pushes and polls in uneven batches so the ring wraps many times.
func TestOrder(t *testing.T) {
	c := newCQ(t, 7)
	out := make([]ibv.WorkCompletion, 5)
	var next, want uint64
	for round := 0; round < 100; round++ {
		for i := 0; i < 1+round%7 && c.Len() < c.Cap(); i++ {
			if !c.Push(wc(next), false) {
				t.Fatalf("Push %d failed with %d queued", next, c.Len())
			}
			next++
		}
		n := c.Poll(out[:1+round%5])
		for _, w := range out[:n] {
			if w.WRID != want || w.ByteLen != uint32(want) {
				t.Fatalf("polled WRID %d, want %d", w.WRID, want)
			}
			want++
		}
	}
	for n := c.Poll(out); n > 0; n = c.Poll(out) {
		for _, w := range out[:n] {
			if w.WRID != want {
				t.Fatalf("polled WRID %d, want %d", w.WRID, want)
			}
			want++
		}
	}
	if want != next {
		t.Fatalf("polled %d completions, pushed %d", want, next)
	}
	if n := c.Poll(out); n != 0 {
		t.Fatalf("Poll on empty CQ = %d, want 0", n)
	}
	if n := c.Poll(nil); n != 0 {
		t.Fatalf("Poll(nil) = %d, want 0", n)
	}
}

func TestOverflow(t *testing.T) {
	c := newCQ(t, 3)
	var handler atomic.Int32
	c.SetOverflowHandler(func() {
		handler.Add(1)
		_ = c.Len() // runs outside the lock
	})
	for i := range 3 {
		if !c.Push(wc(uint64(i)), false) {
			t.Fatalf("Push %d failed below capacity", i)
		}
	}
	if c.Overflowed() {
		t.Fatal("Overflowed before overrun")
	}
	if c.Push(wc(3), false) {
		t.Fatal("Push on a full CQ succeeded")
	}
	if c.Push(wc(4), false) {
		t.Fatal("Push on an overrun CQ succeeded")
	}
	if got := handler.Load(); got != 1 {
		t.Fatalf("overflow handler ran %d times, want 1", got)
	}
	if !c.Overflowed() {
		t.Fatal("Overflowed = false after overrun")
	}
	out := make([]ibv.WorkCompletion, 8)
	if n := c.Poll(out); n != 3 || out[0].WRID != 0 || out[2].WRID != 2 {
		t.Fatalf("Poll after overrun = %d (%v), want the 3 queued completions", n, out[:n])
	}
	if c.Push(wc(5), false) {
		t.Fatal("Push after polling an overrun CQ succeeded")
	}
	if got := handler.Load(); got != 1 {
		t.Fatalf("overflow handler ran %d times, want 1", got)
	}
	if err := c.ReqNotify(false); !errors.Is(err, ErrOverflow) {
		t.Errorf("ReqNotify on overrun CQ: got %v, want ErrOverflow", err)
	}
	if err := c.Resize(100); !errors.Is(err, ErrOverflow) {
		t.Errorf("Resize on overrun CQ: got %v, want ErrOverflow", err)
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("Destroy overrun CQ: %v", err)
	}
}

type push struct {
	wc        *ibv.WorkCompletion
	solicited bool
}

// TestNotify checks ibv_req_notify_cq(3): one event per arm, for any new
// completion or, solicited-only, for a solicited or unsuccessful one.
func TestNotify(t *testing.T) {
	const (
		none = iota
		next
		sol
	)
	tests := []struct {
		name   string
		before []push // pushed before arming
		arms   []int  // ReqNotify calls in order
		pushes []push
		want   int // events
	}{
		{"not armed", nil, nil, []push{{wc(1), false}, {wc(2), true}, {errWC(3), false}}, 0},
		{"armed once, three completions", nil, []int{next}, []push{{wc(1), false}, {wc(2), false}, {wc(3), true}}, 1},
		{"armed twice before a completion", nil, []int{next, next}, []push{{wc(1), false}, {wc(2), false}}, 1},
		{"solicited-only ignores unsolicited successes", nil, []int{sol}, []push{{wc(1), false}, {wc(2), false}}, 0},
		{"solicited-only fires on solicited", nil, []int{sol}, []push{{wc(1), false}, {wc(2), true}, {wc(3), true}}, 1},
		{"solicited-only fires on error", nil, []int{sol}, []push{{wc(1), false}, {errWC(2), false}, {errWC(3), false}}, 1},
		{"solicited-only after next stays next", nil, []int{next, sol}, []push{{wc(1), false}}, 1},
		{"next after solicited-only widens", nil, []int{sol, next}, []push{{wc(1), false}}, 1},
		{"queued before arming does not fire", []push{{wc(0), true}, {errWC(0), false}}, []int{next}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCQ(t, 15)
			ch := NewChannel()
			ch.Attach(c)
			var events int
			c.SetNotifier(func() {
				events++
				_ = c.Len() // runs outside the lock
			})
			for _, p := range tt.before {
				c.Push(p.wc, p.solicited)
			}
			for _, a := range tt.arms {
				if err := c.ReqNotify(a == sol); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range tt.pushes {
				if !c.Push(p.wc, p.solicited) {
					t.Fatal("Push failed")
				}
			}
			if events != tt.want {
				t.Errorf("notifier ran %d times, want %d", events, tt.want)
			}
			var got int
			for {
				if _, ok := ch.TryGet(); !ok {
					break
				}
				got++
			}
			if got != tt.want {
				t.Errorf("channel got %d events, want %d", got, tt.want)
			}
		})
	}
}

func TestNotifyRearm(t *testing.T) {
	c := newCQ(t, 15)
	var events int
	c.SetNotifier(func() { events++ })
	for i := range 5 {
		if err := c.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		c.Push(wc(uint64(2*i)), false)
		c.Push(wc(uint64(2*i+1)), false)
		if events != i+1 {
			t.Fatalf("after arm %d: %d events, want %d", i+1, events, i+1)
		}
		c.Poll(make([]ibv.WorkCompletion, 2))
	}
}

func TestChannelSharedByTwoCQs(t *testing.T) {
	ch := NewChannel()
	a, b := newCQ(t, 7), newCQ(t, 7)
	ch.Attach(a)
	ch.Attach(b)
	ch.Attach(b) // again: no-op
	if a.Channel() != ch || b.Channel() != ch {
		t.Fatal("Channel() does not report the attached channel")
	}
	for _, c := range []*CQ{a, b} {
		if err := c.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
	}
	a.Push(wc(1), false)
	b.Push(wc(2), false)
	a.Push(wc(3), false) // a is disarmed: no second event
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range []*CQ{a, b} {
		got, err := ch.Get(ctx)
		if err != nil || got != want {
			t.Fatalf("Get = %p, %v; want %p", got, err, want)
		}
	}
	if c, ok := ch.TryGet(); ok {
		t.Fatalf("TryGet = %p, want no event", c)
	}
	if a.UnackedEvents() != 1 || b.UnackedEvents() != 1 {
		t.Fatalf("unacked events %d, %d; want 1, 1", a.UnackedEvents(), b.UnackedEvents())
	}
	if err := a.Destroy(); !errors.Is(err, errno.Busy) {
		t.Fatalf("Destroy with unacked event: got %v, want errno.Busy", err)
	}
	if err := ch.Ack(a, 2); !errors.Is(err, errno.Invalid) {
		t.Fatalf("Ack beyond delivered: got %v, want errno.Invalid", err)
	}
	if err := ch.Ack(a, 1); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); !errors.Is(err, errno.Busy) {
		t.Fatalf("Close with CQs attached: got %v, want errno.Busy", err)
	}
	if err := a.Destroy(); err != nil {
		t.Fatalf("Destroy after ack: %v", err)
	}
	// An event queued for b is dropped by b's Destroy.
	b.ReqNotify(false)
	b.Push(wc(4), false)
	ch.Ack(b, 1)
	if err := b.Destroy(); err != nil {
		t.Fatal(err)
	}
	if c, ok := ch.TryGet(); ok {
		t.Fatalf("TryGet after Destroy = %p, want no event", c)
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := ch.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: got %v, want ErrClosed", err)
	}
	if _, err := ch.Get(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: got %v, want ErrClosed", err)
	}
}

func TestChannelGetBlocks(t *testing.T) {
	ch := NewChannel()
	c := newCQ(t, 7)
	ch.Attach(c)
	c.ReqNotify(true)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := ch.Get(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get with no event: got %v, want DeadlineExceeded", err)
	}

	got := make(chan *CQ)
	go func() {
		c, err := ch.Get(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	time.Sleep(10 * time.Millisecond)
	c.Push(wc(1), true)
	select {
	case g := <-got:
		if g != c {
			t.Fatalf("Get = %p, want %p", g, c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get did not wake")
	}
	ch.Ack(c, 1)

	// A Get blocked when the channel closes returns ErrClosed.
	c.Destroy()
	errc := make(chan error)
	go func() {
		_, err := ch.Get(context.Background())
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked Get after Close: got %v, want ErrClosed", err)
	}
}

func TestChannelSelect(t *testing.T) {
	ch := NewChannel()
	cqs := []*CQ{newCQ(t, 7), newCQ(t, 7), newCQ(t, 7)}
	for _, c := range cqs {
		ch.Attach(c)
		c.ReqNotify(false)
		c.Push(wc(0), false)
	}
	var got []*CQ
	timeout := time.After(5 * time.Second)
	for len(got) < len(cqs) {
		select {
		case <-ch.C():
			if c, ok := ch.TryGet(); ok {
				got = append(got, c)
			}
		case <-timeout:
			t.Fatalf("select loop got %d events, want %d", len(got), len(cqs))
		}
	}
	for i := range cqs {
		if got[i] != cqs[i] {
			t.Errorf("event %d from %p, want %p", i, got[i], cqs[i])
		}
	}
}

func TestChannelGrowsAndMoves(t *testing.T) {
	ch1, ch2 := NewChannel(), NewChannel()
	var cqs []*CQ
	for range 20 { // more events than the initial ring
		c := newCQ(t, 3)
		ch1.Attach(c)
		c.ReqNotify(false)
		c.Push(wc(0), false)
		cqs = append(cqs, c)
	}
	// Moving cqs[0] to ch2 drops its event on ch1.
	ch2.Attach(cqs[0])
	cqs[0].ReqNotify(false)
	cqs[0].Push(wc(1), false)
	for i := 1; i < len(cqs); i++ {
		c, ok := ch1.TryGet()
		if !ok || c != cqs[i] {
			t.Fatalf("ch1 event %d: got %p, %v; want %p", i, c, ok, cqs[i])
		}
		ch1.Ack(c, 1)
		c.Destroy()
	}
	if c, ok := ch1.TryGet(); ok {
		t.Fatalf("ch1 has an extra event from %p", c)
	}
	if c, ok := ch2.TryGet(); !ok || c != cqs[0] {
		t.Fatalf("ch2: got %p, %v; want %p", c, ok, cqs[0])
	}
	if err := ch1.Close(); err != nil {
		t.Fatalf("ch1.Close after its CQs left: %v", err)
	}
	if err := ch2.Close(); !errors.Is(err, errno.Busy) {
		t.Fatalf("ch2.Close with a CQ: got %v, want errno.Busy", err)
	}
}

func TestResize(t *testing.T) {
	c := newCQ(t, 7)
	out := make([]ibv.WorkCompletion, 16)
	// Wrap the ring first so Resize must unwrap it.
	for i := range 5 {
		c.Push(wc(uint64(100+i)), false)
	}
	c.Poll(out[:5])
	for i := range 6 {
		c.Push(wc(uint64(i)), false)
	}
	for _, tt := range []struct {
		cqe, cap int
		err      error
	}{
		{5, 0, errno.Invalid},
		{0, 0, errno.Invalid},
		{MaxCQE + 1, 0, errno.Invalid},
		{6, 7, nil},
		{20, 31, nil},
		{100, 127, nil},
		{6, 7, nil},
	} {
		err := c.Resize(tt.cqe)
		if !errors.Is(err, tt.err) || (err != nil) != (tt.err != nil) {
			t.Fatalf("Resize(%d): got %v, want %v", tt.cqe, err, tt.err)
		}
		if err == nil && c.Cap() != tt.cap {
			t.Fatalf("Resize(%d): Cap = %d, want %d", tt.cqe, c.Cap(), tt.cap)
		}
		if c.Len() != 6 {
			t.Fatalf("Resize(%d): Len = %d, want 6", tt.cqe, c.Len())
		}
	}
	c.Push(wc(6), false)
	if c.Push(wc(7), false) {
		t.Fatal("Push beyond the resized capacity succeeded")
	}
	n := c.Poll(out)
	if n != 7 {
		t.Fatalf("Poll = %d, want 7", n)
	}
	for i, w := range out[:n] {
		if w.WRID != uint64(i) {
			t.Fatalf("completion %d has WRID %d after resizes", i, w.WRID)
		}
	}
}

func TestRefsAndDestroy(t *testing.T) {
	c := newCQ(t, 1)
	c.Ref()
	c.Ref()
	if c.Refs() != 2 {
		t.Fatalf("Refs = %d, want 2", c.Refs())
	}
	if err := c.Destroy(); !errors.Is(err, errno.Busy) {
		t.Fatalf("Destroy with refs: got %v, want errno.Busy", err)
	}
	c.Unref()
	c.Unref()
	if err := c.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := c.Destroy(); !errors.Is(err, errno.Invalid) {
		t.Fatalf("second Destroy: got %v, want errno.Invalid", err)
	}
	if c.Push(wc(1), false) {
		t.Fatal("Push on destroyed CQ succeeded")
	}
	if err := c.ReqNotify(false); !errors.Is(err, errno.Invalid) {
		t.Fatalf("ReqNotify on destroyed CQ: got %v, want errno.Invalid", err)
	}
	if err := c.Resize(4); !errors.Is(err, errno.Invalid) {
		t.Fatalf("Resize on destroyed CQ: got %v, want errno.Invalid", err)
	}
	if n := c.Poll(make([]ibv.WorkCompletion, 1)); n != 0 {
		t.Fatalf("Poll on destroyed CQ = %d", n)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Unref below zero did not panic")
		}
	}()
	c.Unref()
}

// TestConcurrentPushPoll runs many pushers against one poller through a
// small ring; pushers take a credit per slot so the CQ never overruns.
// Each pusher's completions must come out in its order.
func TestConcurrentPushPoll(t *testing.T) {
	const (
		pushers = 8
		each    = 20000
	)
	c := newCQ(t, 63)
	ch := NewChannel()
	ch.Attach(c)
	var notified atomic.Int64
	c.SetNotifier(func() { notified.Add(1) })
	credits := make(chan struct{}, c.Cap())
	for range c.Cap() {
		credits <- struct{}{}
	}
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range each {
				<-credits
				w := ibv.WorkCompletion{WRID: uint64(p)<<32 | uint64(i)}
				if i%100 == 99 {
					w.Status = ibv.WCRemAccessErr
				}
				if !c.Push(&w, i%10 == 0) {
					t.Errorf("pusher %d: Push %d failed", p, i)
					return
				}
			}
		})
	}
	next := make([]uint32, pushers)
	out := make([]ibv.WorkCompletion, 16)
	for total := 0; total < pushers*each; {
		c.ReqNotify(total%2 == 0)
		n := c.Poll(out)
		for _, w := range out[:n] {
			p, i := w.WRID>>32, uint32(w.WRID)
			if i != next[p] {
				t.Fatalf("pusher %d: got completion %d, want %d", p, i, next[p])
			}
			next[p]++
			credits <- struct{}{}
		}
		total += n
		for {
			ev, ok := ch.TryGet()
			if !ok {
				break
			}
			ch.Ack(ev, 1)
		}
	}
	wg.Wait()
	if c.Len() != 0 || c.Overflowed() {
		t.Fatalf("Len = %d, Overflowed = %v after draining", c.Len(), c.Overflowed())
	}
	t.Logf("%d notifications", notified.Load())
}

func TestNoAllocs(t *testing.T) {
	c := newCQ(t, 255)
	ch := NewChannel()
	ch.Attach(c)
	var n int
	c.SetNotifier(func() { n++ })
	w := wc(1)
	out := make([]ibv.WorkCompletion, 4)
	allocs := testing.AllocsPerRun(1000, func() {
		c.ReqNotify(false)
		c.Push(w, false)
		c.Push(w, true)
		c.Poll(out)
		ch.TryGet()
		ch.Ack(c, 1)
	})
	if allocs != 0 {
		t.Fatalf("Push+Poll allocated %v times per run, want 0", allocs)
	}
}

func BenchmarkPushPoll(b *testing.B) {
	c := newCQ(b, 1023)
	w := wc(1)
	out := make([]ibv.WorkCompletion, 1)
	b.ReportAllocs()
	for b.Loop() {
		c.Push(w, false)
		c.Poll(out)
	}
}

func BenchmarkPushPollBatch16(b *testing.B) {
	c := newCQ(b, 1023)
	w := wc(1)
	out := make([]ibv.WorkCompletion, 16)
	b.ReportAllocs()
	for b.Loop() {
		for range 16 {
			c.Push(w, false)
		}
		c.Poll(out)
	}
}

func BenchmarkPushParallel(b *testing.B) {
	c := newCQ(b, MaxCQE)
	out := make([]ibv.WorkCompletion, 64)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if c.Poll(out) == 0 {
				runtime.Gosched()
			}
		}
	}()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := wc(1)
		for pb.Next() {
			for c.Len() > MaxCQE/2 {
				runtime.Gosched()
			}
			if !c.Push(w, false) {
				b.Error("overrun")
				return
			}
		}
	})
	stop.Store(true)
	<-done
}

// TestRemove: Remove takes out exactly the completions it is told to,
// keeps the rest in order with their stamps across the ring's wrap, and
// the CQ goes on taking and giving completions after it.
func TestRemove(t *testing.T) {
	c := newCQ(t, 7) // a ring of 8
	clk := clock.NewManual(time.Unix(0, 0))
	c.Stamp(clk)
	out := make([]ibv.WorkCompletion, 8)
	// Move head and tail on so that the queue wraps the ring.
	for id := range uint64(5) {
		c.Push(wc(100+id), false)
	}
	if n := c.Poll(out[:5]); n != 5 {
		t.Fatalf("Poll = %d, want 5", n)
	}
	for id := range uint64(7) {
		clk.Set(time.Unix(0, int64(id+1)))
		c.Push(wc(id), false)
	}
	odd := func(w *ibv.WorkCompletion) bool { return w.WRID%2 == 1 }
	if n := c.Remove(odd); n != 3 {
		t.Errorf("Remove(odd) = %d, want 3", n)
	}
	if c.Len() != 4 {
		t.Errorf("Len after Remove = %d, want 4", c.Len())
	}
	c.Push(wc(8), false)
	stamps := make([]int64, 8)
	n := c.PollStamped(out, stamps)
	want := []uint64{0, 2, 4, 6, 8}
	if n != len(want) {
		t.Fatalf("PollStamped = %d completions, want %d", n, len(want))
	}
	for k, id := range want {
		if out[k].WRID != id {
			t.Errorf("completion %d: WR %d, want %d", k, out[k].WRID, id)
		}
		if id < 8 && stamps[k] != int64(id+1) {
			t.Errorf("completion %d (WR %d): stamp %d, want %d", k, id, stamps[k], id+1)
		}
	}
	if n := c.Remove(odd); n != 0 {
		t.Errorf("Remove on an empty CQ = %d, want 0", n)
	}
}
