package clock

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestManualNowAndAdvance(t *testing.T) {
	c := NewManual(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now() = %v, want %v", got, t0)
	}
	c.Advance(1500 * time.Millisecond)
	if got, want := c.Now(), t0.Add(1500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Now() after Advance = %v, want %v", got, want)
	}
}

func TestManualAdvanceNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Advance(-1) did not panic")
		}
	}()
	NewManual(t0).Advance(-1)
}

func TestManualFiresInDeadlineOrder(t *testing.T) {
	c := NewManual(t0)
	var got []string
	arm := func(name string, d time.Duration) {
		c.AfterFunc(d, func() {
			got = append(got, fmt.Sprintf("%s@%v", name, c.Now().Sub(t0)))
		})
	}
	arm("c", 3*time.Second)
	arm("a", 1*time.Second)
	arm("b1", 2*time.Second)
	arm("b2", 2*time.Second) // same deadline: arming order
	arm("late", 10*time.Second)
	if got, want := c.Pending(), 5; got != want {
		t.Fatalf("Pending() = %d, want %d", got, want)
	}
	c.Advance(5 * time.Second)
	want := []string{"a@1s", "b1@2s", "b2@2s", "c@3s"}
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if got, want := c.Now(), t0.Add(5*time.Second); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
	if got, want := c.Pending(), 1; got != want {
		t.Fatalf("Pending() = %d, want %d", got, want)
	}
}

func TestManualDeadlineIsInclusive(t *testing.T) {
	c := NewManual(t0)
	fired := false
	c.AfterFunc(time.Second, func() { fired = true })
	c.Advance(time.Second - 1)
	if fired {
		t.Fatal("timer fired 1ns early")
	}
	c.Advance(1)
	if !fired {
		t.Fatal("timer did not fire at its deadline")
	}
}

func TestManualZeroAndNegativeDelay(t *testing.T) {
	c := NewManual(t0)
	var got []int
	c.AfterFunc(0, func() { got = append(got, 0) })
	c.AfterFunc(-time.Second, func() { got = append(got, -1) })
	if len(got) != 0 {
		t.Fatal("AfterFunc fired synchronously")
	}
	c.Advance(0)
	if want := []int{-1, 0}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if !c.Now().Equal(t0) {
		t.Fatalf("Advance(0) moved the clock to %v", c.Now())
	}
}

func TestManualStop(t *testing.T) {
	c := NewManual(t0)
	fired := 0
	tm := c.AfterFunc(time.Second, func() { fired++ })
	if !tm.Stop() {
		t.Error("Stop() of a pending timer = false, want true")
	}
	if tm.Stop() {
		t.Error("second Stop() = true, want false")
	}
	if got := c.Pending(); got != 0 {
		t.Errorf("Pending() = %d, want 0", got)
	}
	c.Advance(2 * time.Second)
	if fired != 0 {
		t.Errorf("stopped timer fired %d times", fired)
	}

	tm = c.AfterFunc(time.Second, func() { fired++ })
	c.Advance(time.Second)
	if tm.Stop() {
		t.Error("Stop() after firing = true, want false")
	}
	if fired != 1 {
		t.Errorf("fired %d times, want 1", fired)
	}
}

func TestManualStopAmongMany(t *testing.T) {
	c := NewManual(t0)
	var got []int
	var timers []Timer
	for i := range 10 {
		timers = append(timers, c.AfterFunc(time.Duration(i+1)*time.Second, func() { got = append(got, i) }))
	}
	for _, i := range []int{0, 3, 9, 5} {
		if !timers[i].Stop() {
			t.Errorf("Stop() of timer %d = false", i)
		}
	}
	c.Advance(time.Minute)
	if want := []int{1, 2, 4, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

func TestManualReset(t *testing.T) {
	c := NewManual(t0)
	var at []time.Duration
	tm := c.AfterFunc(5*time.Second, func() { at = append(at, c.Now().Sub(t0)) })

	if !tm.Reset(2 * time.Second) { // earlier
		t.Error("Reset() of a pending timer = false, want true")
	}
	c.Advance(3 * time.Second)
	if want := []time.Duration{2 * time.Second}; !slices.Equal(at, want) {
		t.Fatalf("fired at %v, want %v", at, want)
	}
	if tm.Reset(time.Second) { // fired: re-arms
		t.Error("Reset() of a fired timer = true, want false")
	}
	if got := c.Pending(); got != 1 {
		t.Fatalf("Pending() after re-arming = %d, want 1", got)
	}
	if !tm.Reset(4 * time.Second) { // later
		t.Error("Reset() of a re-armed timer = false, want true")
	}
	c.Advance(3 * time.Second) // now 6s, due at 7s
	if len(at) != 1 {
		t.Fatalf("fired early: %v", at)
	}
	c.Advance(time.Second)
	if want := []time.Duration{2 * time.Second, 7 * time.Second}; !slices.Equal(at, want) {
		t.Fatalf("fired at %v, want %v", at, want)
	}

	tm.Stop()
	if tm.Reset(time.Second) {
		t.Error("Reset() of a stopped timer = true, want false")
	}
	c.Advance(time.Second)
	if len(at) != 3 {
		t.Fatalf("stopped-then-reset timer did not fire: %v", at)
	}
}

func TestManualResetReordersTies(t *testing.T) {
	c := NewManual(t0)
	var got []string
	a := c.AfterFunc(time.Second, func() { got = append(got, "a") })
	c.AfterFunc(time.Second, func() { got = append(got, "b") })
	a.Reset(time.Second) // same deadline, armed after b now
	c.Advance(time.Second)
	if want := []string{"b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

func TestManualRearmFromCallback(t *testing.T) {
	c := NewManual(t0)
	var at []time.Duration
	var tm Timer
	tm = c.AfterFunc(time.Second, func() {
		at = append(at, c.Now().Sub(t0))
		tm.Reset(time.Second) // periodic
	})
	c.Advance(3500 * time.Millisecond)
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if !slices.Equal(at, want) {
		t.Fatalf("periodic timer fired at %v, want %v", at, want)
	}
	if got := c.Pending(); got != 1 {
		t.Fatalf("Pending() = %d, want 1", got)
	}
	if d, ok := c.NextDeadline(); !ok || !d.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("NextDeadline() = %v, %v, want %v, true", d, ok, t0.Add(4*time.Second))
	}
}

func TestManualNewTimerFromCallback(t *testing.T) {
	c := NewManual(t0)
	var got []string
	c.AfterFunc(time.Second, func() {
		got = append(got, "outer")
		// Due within the span: fires in this Advance, before "last".
		c.AfterFunc(500*time.Millisecond, func() { got = append(got, "inner") })
		// Due at the same instant as the outer one: fires right after it.
		c.AfterFunc(0, func() { got = append(got, "now") })
		// Beyond the span: stays pending.
		c.AfterFunc(time.Hour, func() { got = append(got, "beyond") })
	})
	c.AfterFunc(1600*time.Millisecond, func() { got = append(got, "last") })
	c.Advance(2 * time.Second)
	if want := []string{"outer", "now", "inner", "last"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if got := c.Pending(); got != 1 {
		t.Fatalf("Pending() = %d, want 1", got)
	}
}

func TestManualCallbackStopsOther(t *testing.T) {
	c := NewManual(t0)
	var got []string
	var b Timer
	c.AfterFunc(time.Second, func() {
		got = append(got, "a")
		if !b.Stop() {
			t.Error("Stop() from a callback = false, want true")
		}
	})
	b = c.AfterFunc(2*time.Second, func() { got = append(got, "b") })
	c.Advance(3 * time.Second)
	if want := []string{"a"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

func TestManualNextDeadlineAndAdvanceToNext(t *testing.T) {
	c := NewManual(t0)
	if _, ok := c.NextDeadline(); ok {
		t.Fatal("NextDeadline() on an idle clock reported a deadline")
	}
	if c.AdvanceToNext() {
		t.Fatal("AdvanceToNext() on an idle clock = true")
	}
	if !c.Now().Equal(t0) {
		t.Fatal("AdvanceToNext() on an idle clock moved time")
	}
	var got []string
	c.AfterFunc(3*time.Second, func() { got = append(got, "c") })
	c.AfterFunc(1*time.Second, func() {
		got = append(got, "a")
		c.AfterFunc(0, func() { got = append(got, "a'") }) // same instant
	})
	c.AfterFunc(1*time.Second, func() { got = append(got, "b") })
	if d, ok := c.NextDeadline(); !ok || !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDeadline() = %v, %v, want %v, true", d, ok, t0.Add(time.Second))
	}
	if !c.AdvanceToNext() {
		t.Fatal("AdvanceToNext() = false")
	}
	if want := []string{"a", "b", "a'"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if got, want := c.Now(), t0.Add(time.Second); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
	for c.AdvanceToNext() {
	}
	if want := []string{"a", "b", "a'", "c"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if got, want := c.Now(), t0.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
}

func TestManualSet(t *testing.T) {
	c := NewManual(t0)
	fired := 0
	c.AfterFunc(2*time.Second, func() { fired++ })
	c.Set(t0.Add(time.Second))
	if fired != 0 {
		t.Fatal("Set before the deadline fired the timer")
	}
	c.Set(t0.Add(-time.Hour)) // backward: no firing, deadline kept
	if got := c.Now(); !got.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("Now() after Set backward = %v", got)
	}
	if d, _ := c.NextDeadline(); !d.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("deadline moved to %v", d)
	}
	c.Set(t0.Add(2 * time.Second))
	if fired != 1 {
		t.Fatalf("Set to the deadline fired %d times, want 1", fired)
	}
	if got := c.Now(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("Now() = %v", got)
	}
}

// TestManualCallbackWithoutLock checks that every method may be called
// from a callback (they would deadlock if callbacks ran under the lock).
func TestManualCallbackWithoutLock(t *testing.T) {
	c := NewManual(t0)
	done := false
	c.AfterFunc(time.Second, func() {
		_ = c.Now()
		_ = c.Pending()
		_, _ = c.NextDeadline()
		c.AfterFunc(time.Minute, func() {}).Stop()
		c.Advance(0) // nested advance
		done = true
	})
	c.Advance(time.Second)
	if !done {
		t.Fatal("callback did not run")
	}
}

func TestManualConcurrent(t *testing.T) {
	c := NewManual(t0)
	const workers, perWorker = 8, 500
	var fired, armed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				d := time.Duration(1+(w*perWorker+i)%97) * time.Millisecond
				tm := c.AfterFunc(d, func() { fired.Add(1) })
				switch i % 3 {
				case 0:
					if tm.Stop() {
						continue // disarmed before firing
					}
				case 1:
					if !tm.Reset(d) {
						armed.Add(1) // fired already, and re-armed
					}
				}
				armed.Add(1)
				_ = c.Now()
				_ = c.Pending()
			}
		}()
	}
	stop := make(chan struct{})
	advDone := make(chan struct{})
	go func() {
		defer close(advDone)
		for {
			select {
			case <-stop:
				return
			default:
				c.Advance(time.Millisecond)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-advDone
	c.Advance(time.Second) // everything still armed is due by now
	if got := c.Pending(); got != 0 {
		t.Fatalf("Pending() = %d after draining, want 0", got)
	}
	if got, want := fired.Load(), armed.Load(); got != want {
		t.Fatalf("fired %d timers, want %d (armed and not stopped)", got, want)
	}
}

func TestManualConcurrentAdvance(t *testing.T) {
	c := NewManual(t0)
	const n = 1000
	var fired atomic.Int64
	for i := range n {
		c.AfterFunc(time.Duration(i)*time.Microsecond, func() { fired.Add(1) })
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(10 * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if got := fired.Load(); got != n {
		t.Fatalf("fired %d, want %d", got, n)
	}
	if got, want := c.Now(), t0.Add(4000*time.Microsecond); got.Before(t0.Add(1000*time.Microsecond)) || got.After(want) {
		t.Fatalf("Now() = %v, outside [1ms, 4ms] after t0", got.Sub(t0))
	}
}

func BenchmarkManualAfterFuncAdvance(b *testing.B) {
	c := NewManual(t0)
	f := func() {}
	tm := c.AfterFunc(time.Hour, f)
	b.ReportAllocs()
	for b.Loop() {
		tm.Reset(time.Microsecond)
		c.Advance(time.Microsecond)
	}
}
