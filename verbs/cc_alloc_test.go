//go:build !race

package verbs_test

// Outside the race detector, whose sync.Pool drops a share of what is
// put back (the engine's receive buffers come from one).

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// TestCCNoAlloc: with congestion control on and every packet marked CE
// (CNPs sent, handled, the requester paced) a WRITE's round trip
// allocates nothing.
func TestCCNoAlloc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		p := ccTestParams()
		p.NPMinTimeBetweenCNPs = 0 // a CNP for every marked packet
		a, b := newPair(t, f, pairOpts{cc: p, timeout: 14, retry: 7})
		f.AddFilter(fabric.OnMatch(fabric.MaskIs(wire.MaskRequest), fabric.MarkCE))
		wrs := []ibv.SendWR{rdmaWR(a, b, 0, ibv.WRRDMAWrite, 0, 0, 4096)}
		ctx := context.Background()
		var wc [1]ibv.WorkCompletion
		round := func() {
			if _, err := a.qp.PostSend(wrs...); err != nil {
				t.Fatal(err)
			}
			if k, err := a.cq.Wait(ctx, wc[:]); k != 1 || err != nil || wc[0].Status != ibv.WCSuccess {
				t.Fatalf("Wait = %d, %v, %+v", k, err, wc[0])
			}
		}
		for range 50 {
			round()
		}
		before := b.dev.Counters().NPCNPSent
		if allocs := testing.AllocsPerRun(100, round); allocs != 0 {
			t.Errorf("a round trip allocates %v times, want 0", allocs)
		}
		if sent := b.dev.Counters().NPCNPSent - before; sent < 100 || a.dev.Counters().RPCNPHandled < sent {
			t.Errorf("%d CNPs sent during the rounds, %d handled in all: the CC paths did not run", sent, a.dev.Counters().RPCNPHandled)
		}
	})
}
