package transport

// Run is what a QP's transport asks the engine to run after an
// application's call gave it work (a post, a modify): nothing, a pass of
// the QP at once on the calling goroutine, or a pass on the QP's
// processor. The transport says it and the engine acts on it (nic's
// run-to-completion rules, nic/run.go): a transport does not call up into
// the engine to be run.
type Run uint8

const (
	// RunNone: the call gave the transport nothing to send.
	RunNone Run = iota
	// RunLater: a pass on the QP's processor, which sends a backlog in
	// batches beside the application (one sendmmsg for many WRs rather
	// than one per post).
	RunLater
	// RunNow: a pass at once on the calling goroutine, when no other
	// goroutine is running the QP, so that the WRs just posted leave
	// before the post returns (run to completion: a small request to an
	// idle send queue).
	RunNow
)

// String names the run.
func (r Run) String() string {
	switch r {
	case RunNone:
		return "none"
	case RunLater:
		return "later"
	case RunNow:
		return "now"
	}
	return "Run(?)"
}

// Waker is the engine's hold on a QP, given to its transport at
// creation: a timer that fires only sets a flag and calls Wake, which
// schedules a pass of the QP on its processor (STYLE.md 9). Wake must
// not block.
type Waker interface {
	Wake()
}
