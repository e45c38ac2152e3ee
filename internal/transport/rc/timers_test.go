package rc

import (
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// The retransmit deadline is the time of the pass that armed or pushed
// it plus the timeout: an ACK halfway pushes it out, so the timer firing
// at the first deadline re-arms for the rest instead of retrying, and the
// retry comes one timeout after the ACK's pass (rxe_req.c mod_timer;
// rxe_comp.c: progress restarts the timer).
func TestRetryDeadlineFromPassTime(t *testing.T) {
	h := newHarness(t) // timeout 14: 4.096 µs × 2^14
	timeout := time.Duration(4096<<14) * time.Nanosecond
	h.post(h.wr(1, ibv.WRSend, 0, 10), h.wr(2, ibv.WRSend, 0, 10))
	check(t, "requests", h.process(), "RC_SEND_ONLY/0", "RC_SEND_ONLY/1")

	h.clk.Advance(timeout / 2)
	h.respond(wire.RCAck, 0, wire.AckUnlimited, nil)
	check(t, "ACK of the first SEND", h.process())
	wantStatuses(t, h.completions(), ibv.WCSuccess)

	h.clk.Advance(timeout / 2) // the timer armed by the first pass fires
	check(t, "at the first deadline", h.process())
	if got := h.ctr.Timeouts.Load(); got != 0 {
		t.Fatalf("timeouts %d at the first deadline, want 0 (the ACK pushed it out)", got)
	}

	h.clk.Advance(timeout/2 - time.Nanosecond)
	check(t, "just before the pushed deadline", h.process())
	h.clk.Advance(time.Nanosecond)
	check(t, "at the pushed deadline: the unacknowledged SEND again", h.process(), "RC_SEND_ONLY/1")
	if got := h.ctr.Timeouts.Load(); got != 1 {
		t.Errorf("timeouts %d, want 1", got)
	}
}
