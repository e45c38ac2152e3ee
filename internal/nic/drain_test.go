package nic

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic/cq"
)

// TestDrainCQMarker: an armed marker takes the first flushed completion
// with its wr_id and opcode, and only that one; a wait whose context ends
// first returns the context's error and leaves the marker armed, so its
// completion is still kept from the application when it comes late.
func TestDrainCQMarker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, err := cq.New(16, cq.MaxCQE)
		if err != nil {
			t.Fatal(err)
		}
		d := &drainCQ{cq: q}
		push := func(wc ibv.WorkCompletion) {
			t.Helper()
			if !d.Push(&wc, false) {
				t.Fatalf("Push(%+v) = false", wc)
			}
		}
		marker := ibv.WorkCompletion{WRID: ibv.DrainWRID, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRDMAWrite}

		// Nothing armed: a marker-like completion is the application's.
		push(marker)
		m := d.arm(ibv.WCRDMAWrite)
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		if err := waitFor(ctx, m.done); err != context.DeadlineExceeded {
			t.Fatalf("wait with an expiring context: %v, want %v", err, context.DeadlineExceeded)
		}
		// Not the marker: another opcode, another wr_id, a success.
		other := marker
		other.Opcode = ibv.WCSend
		push(other)
		other = marker
		other.WRID = 1
		push(other)
		other = marker
		other.Status = ibv.WCSuccess
		push(other)
		// The marker, late: taken, once.
		push(marker)
		if err := waitFor(t.Context(), m.done); err != nil {
			t.Fatalf("wait after the marker completed: %v", err)
		}
		push(marker)
		if n := d.armed.Load(); n != 0 {
			t.Fatalf("%d markers still armed", n)
		}
		wcs := make([]ibv.WorkCompletion, 16)
		if n := q.Poll(wcs); n != 6-1 {
			t.Fatalf("CQ holds %d completions, want 5 (the marker's taken out): %+v", n, wcs[:n])
		}

		// A marker whose WR was never posted is disarmed.
		m = d.arm(ibv.WCRecv)
		d.disarm(m)
		push(ibv.WorkCompletion{WRID: ibv.DrainWRID, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv})
		if n := q.Poll(wcs); n != 1 {
			t.Fatalf("after a disarm the CQ got %d completions, want 1", n)
		}
	})
}
