package clock

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestRealInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Clock = New()
		start := c.Now()
		fired := make(chan time.Duration, 4)
		tm := c.AfterFunc(time.Second, func() { fired <- time.Since(start) })

		if !tm.Reset(2 * time.Second) {
			t.Error("Reset() of a pending timer = false, want true")
		}
		time.Sleep(3 * time.Second)
		if got := <-fired; got != 2*time.Second {
			t.Errorf("fired after %v, want 2s", got)
		}
		if tm.Stop() {
			t.Error("Stop() after firing = true, want false")
		}
		if tm.Reset(time.Second) {
			t.Error("Reset() after firing = true, want false")
		}
		if !tm.Stop() {
			t.Error("Stop() of a re-armed timer = false, want true")
		}
		time.Sleep(2 * time.Second)
		select {
		case d := <-fired:
			t.Errorf("stopped timer fired after %v", d)
		default:
		}
		if got := c.Now().Sub(start); got != 5*time.Second {
			t.Errorf("Now() advanced %v, want 5s", got)
		}
	})
}

func TestRealZeroValue(t *testing.T) {
	var c Real
	if c.Now().IsZero() {
		t.Fatal("Real{}.Now() is zero")
	}
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) })
	<-done
}
