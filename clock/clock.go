// Package clock is softnic's injectable time source (STYLE.md 10): the
// engine reads time and sets timers only through a Clock, so tests can run
// it on a Manual clock and step time deterministically.
package clock

import "time"

// Clock is a source of time and timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or, for Manual, in the
	// goroutine that advances time) once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer made by AfterFunc.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it was pending.
	Stop() bool
	// Reset re-arms the timer to fire d from now; it reports whether it was pending.
	Reset(d time.Duration) bool
}
