package clock

import "time"

// Real is the wall clock: Now is time.Now and AfterFunc is time.AfterFunc,
// so callbacks run in their own goroutines. Inside a testing/synctest
// bubble it runs on the bubble's fake time. The zero value is ready to use.
type Real struct{}

var _ Clock = Real{}

// New returns the wall clock.
func New() Real { return Real{} }

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc returns time.AfterFunc(d, f); a *time.Timer already has the
// Stop and Reset methods of Timer.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
