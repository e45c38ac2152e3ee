package nic

import (
	"testing"
	"testing/synctest"
	"time"
)

// A TimerSlot hands back the timer it was given, re-armed; a second
// Start while the first timer is out gets a new one; and a timer stopped
// before it fired, then started again, fires once, at its new time.
func TestTimerSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s TimerSlot
		a := s.Start(time.Hour)
		b := s.Start(time.Second) // a is out: a new timer
		if a == b {
			t.Fatal("two Starts with the slot empty returned one timer")
		}
		start := time.Now()
		<-b.C
		if d := time.Since(start); d != time.Second {
			t.Errorf("the timer fired after %v, want 1s", d)
		}
		s.Done(a) // stopped an hour early
		s.Done(b) // the slot holds a already
		c := s.Start(2 * time.Second)
		if c != a {
			t.Errorf("Start after Done returned %p, want the timer given back first (%p)", c, a)
		}
		start = time.Now()
		<-c.C
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("the reused timer fired after %v, want 2s", d)
		}
		select {
		case <-c.C:
			t.Error("the reused timer fired twice")
		case <-time.After(2 * time.Hour):
		}
		s.Done(c)
	})
}
