package rc_test

import (
	"flag"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

// rxeWriterSeeds is how many seeds TestRCResponderUnderRxeWriter runs
// each impairment with (go test -run TestRCResponderUnderRxeWriter
// -args -rxewriter.seeds=200 for a longer search).
var rxeWriterSeeds = flag.Int("rxewriter.seeds", 2, "seeds of each impairment TestRCResponderUnderRxeWriter runs")

// TestRCResponderUnderRxeWriter: softnic's responder, holding requests
// beyond a gap (reorder.go), against a model of rxe's requester
// (tt.RxeWriter) through loss, duplication and reordering — the interop
// bed's write_bw sn_server case, one run of which stopped answering
// (docs/performance.md, "rc.reorderWindow"). Every WRITE must land and
// the responder must answer until the last: a transfer that makes no
// progress for two seconds (thirty retransmit timeouts) fails, with the
// responder's state.
func TestRCResponderUnderRxeWriter(t *testing.T) {
	const writes, size = 32, 64 << 10
	for _, v := range []struct {
		name string
		imp  fabric.Impairment
	}{
		// The bed's netem: loss 3% duplicate 1% delay 200us reorder 5%.
		{"netem", fabric.Impairment{Loss: 0.03, Duplicate: 0.01, Reorder: 0.05, Delay: 200 * time.Microsecond,
			ReorderTimeout: 200 * time.Microsecond}},
		{"loss10", fabric.Impairment{Loss: 0.10, Duplicate: 0.02, Reorder: 0.10, Delay: 50 * time.Microsecond}},
	} {
		for seed := int64(1); seed <= int64(*rxeWriterSeeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", v.name, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					runRxeWriter(t, seed, v.imp, writes, size)
				})
			})
		}
	}
}

func runRxeWriter(t *testing.T, seed int64, imp fabric.Impairment, writes, size int) {
	n := tt.NewNet(t, seed)
	total := writes * size / tt.RxeMTU
	// Near the end of the PSN space, so the transfer wraps.
	psn0 := wire.PSN(wire.PSNMask - uint32(total/2))
	b, raw := newRawPeer(t, n, opts{bufSize: writes * size}, uint32(psn0))
	w := &tt.RxeWriter{Send: raw.send, PSN: psn0, Size: size, VA: b.mr.Addr(), RKey: b.mr.RKey(),
		Data: make([]byte, writes*size), Timeout: timeout14}
	fill(w.Data, int(seed))
	n.Fabric().SetImpairment(imp)
	start := n.Now()
	if err := w.Run(n.Run, n.Now, raw.Receive, 2*time.Second); err != nil {
		attr := b.query()
		c := b.ctr()
		t.Fatalf("seed %d: %v; responder %v, rq_psn %d; held_requests %d, out_of_sequence %d, duplicate_request %d, rcvd %d",
			seed, err, attr.State, wire.PSN(attr.RQPSN).Diff(psn0),
			c.HeldRequests.Load(), c.OutOfSequence.Load(), c.DuplicateRequest.Load(), c.RcvdPkts.Load())
	}
	checkBytes(t, "written", b.buf, w.Data)
	c := b.ctr()
	t.Logf("seed %d: %d packets received for %d needed (%.2f), %d retries (%d timeouts), %d WQEs sent again from past their end, %d held, %v",
		seed, c.RcvdPkts.Load(), total, float64(c.RcvdPkts.Load())/float64(total), w.Retries, w.Timeouts,
		w.Renumbered, c.HeldRequests.Load(), n.Since(start))
}
