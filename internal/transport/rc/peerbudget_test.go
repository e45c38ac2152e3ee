package rc_test

// The budget of packets in flight toward one peer (rc.PeerBudget): many
// QPs toward a receiver whose socket buffer holds less than their
// windows together, one QP alone, and the fair share of each.

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport/rc"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

// manyPairs makes k connected pairs of QPs, the a ends on one node at
// 10.0.0.1, the b ends on one node at 10.0.0.2, each a attached to
// budget (nil: none).
func manyPairs(t *testing.T, n *tt.Net, k int, o opts, budget *rc.PeerBudget) (as, bs []*end) {
	t.Helper()
	o.defaults()
	na, nb := n.Node("10.0.0.1"), n.Node("10.0.0.2")
	for range k {
		a, b := newEndOn(t, n, na, o), newEndOn(t, n, nb, o)
		connect(t, a, nb.Addr(), b.qpn(), o, o.sqPSN, o.rqPSN)
		connect(t, b, na.Addr(), a.qpn(), o, o.rqPSN, o.sqPSN)
		if budget != nil {
			a.setBudget(budget)
		}
		as, bs = append(as, a), append(bs, b)
	}
	return as, bs
}

// writeAll posts count WRITEs of size bytes on every a end, each into
// the same offsets of its b end's buffer, after filling each a end's
// buffer with a pattern of its own.
func writeAll(as, bs []*end, count, size int) {
	for i, a := range as {
		fill(a.buf[:count*size], i)
		for j := range count {
			a.post(rdmaWR(a, bs[i], uint64(j), ibv.WRRDMAWrite, j*size, j*size, size))
		}
	}
}

// checkWrites waits for every a end's count completions, successful and
// in order, and checks the bytes each b end received.
func checkWrites(t *testing.T, n *tt.Net, as, bs []*end, count, size int, limit time.Duration) {
	t.Helper()
	n.RunUntil("every WRITE completed", limit, func() bool {
		for _, a := range as {
			if a.cq.Len() < count {
				return false
			}
		}
		return true
	})
	for i, a := range as {
		for j, wc := range a.cq.Take(count) {
			if wc.Status != ibv.WCSuccess || wc.WRID != uint64(j) {
				t.Fatalf("QP %d: completion %d: %+v, want wr_id %d successful", i, j, wc, j)
			}
		}
		checkBytes(t, fmt.Sprintf("QP %d's writes", i), bs[i].buf[:count*size], a.buf[:count*size])
	}
}

// manyQPsRecvBuffer is the receiver's socket buffer in the tests of many
// QPs: some 230 datagrams at path MTU 1024, less than half a window of
// one QP.
const manyQPsRecvBuffer = 256 << 10

// Many QPs toward one peer whose socket buffer holds less than their
// windows together (write_bw -q 1000 between two softnic processes):
// without a budget each sends its window at once, the receiver's buffer
// overflows, and the go-back-N of every QP at the same moment overflows
// it again, until QPs time out together and exhaust their retries. With
// the budget, what is in flight toward the peer never exceeds what its
// buffer holds: nothing is dropped, nothing times out, and every WRITE
// lands.
func TestManyQPsWithinPeerBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const qps, count, size = 64, 4, 16 << 10
		n := tt.NewNet(t, 1)
		// 100 PSNs of 1024 bytes: under half the receiver's buffer.
		budget := rc.NewPeerBudget(100 * (1024 + rc.PSNCost))
		as, bs := manyPairs(t, n, qps, opts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, bufSize: count * size}, budget)
		bs[0].node.Endpoint().SetRecvBuffer(manyQPsRecvBuffer)
		writeAll(as, bs, count, size)
		checkWrites(t, n, as, bs, count, size, time.Minute)
		ctr := as[0].ctr()
		dropped := bs[0].node.Endpoint().Stats().DropQueueFull.Packets
		t.Logf("%d QPs × %d WRITEs of %d B: %d datagrams dropped by the receiver's buffer, %d timeouts, %d retries, %v",
			qps, count, size, dropped, ctr.Timeouts.Load(), ctr.CompleterRetryErr.Load(), n.Since(tt.Epoch))
		if dropped != 0 {
			t.Errorf("the receiver's buffer dropped %d datagrams, want none", dropped)
		}
		if got := ctr.Timeouts.Load(); got != 0 {
			t.Errorf("%d timeouts, want none", got)
		}
		if free := budget.Free(); free != budget.Limit() {
			t.Errorf("budget free %d after every WRITE completed, want all %d", free, budget.Limit())
		}
	})
}

// One QP alone keeps its whole window under the budget the engine gives
// it by default (nic.DefaultPeerBudget, 4 MiB): at path MTU 4096 it
// sends MaxUnackedPSNs packets before the first ACK comes back, as
// without a budget.
func TestOneQPKeepsItsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 1024 * 4096
		n := tt.NewNet(t, 1)
		budget := rc.NewPeerBudget(4 << 20)
		a, b := manyPairs(t, n, 1, opts{mtu: ibv.MTU4096, timeout: 14, retry: 7, rnr: 7, bufSize: size}, budget)
		// The ACKs take a millisecond: everything the window lets go
		// leaves before the first one comes.
		n.Fabric().SetPathImpairment(b[0].node.Addr(), a[0].node.Addr(), fabric.Impairment{Delay: time.Millisecond})
		rec := n.Recorder()
		writeAll(a, b, 1, size)
		n.Settle()
		if got := rec.Count(from(a[0])); got != rc.MaxUnackedPSNs {
			t.Errorf("the QP sent %d packets before the first ACK, want its window, %d", got, rc.MaxUnackedPSNs)
		}
		if got, want := budget.Free(), budget.Limit()-rc.MaxUnackedPSNs*(4096+rc.PSNCost); got != want {
			t.Errorf("budget free %d with a window in flight, want %d", got, want)
		}
		checkWrites(t, n, a, b, 1, size, time.Second)
		if got := a[0].ctr().Timeouts.Load(); got != 0 {
			t.Errorf("%d timeouts, want none", got)
		}
	})
}

// QPs that share a budget too small for them all take turns: each
// progresses while the others send, none is passed over, and a QP that
// comes late, when the budget is spent and others wait, is served within
// one turn of those waiting, long before any of them finishes.
func TestPeerBudgetFairShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const qps, count, size = 16, 32, 4 << 10
		n := tt.NewNet(t, 1)
		// 48 PSNs of 1024 bytes: three QPs' grants at most.
		budget := rc.NewPeerBudget(48 * (1024 + rc.PSNCost))
		as, bs := manyPairs(t, n, qps+1, opts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, bufSize: count * size}, budget)
		n.Fabric().SetImpairment(fabric.Impairment{Delay: 10 * time.Microsecond})
		early, late := as[:qps], as[qps:]
		writeAll(early, bs[:qps], count, size)
		n.Settle()
		if w := budget.Waiting(); w < qps/2 {
			t.Fatalf("%d QPs wait for the budget after the first burst, want most of %d", w, qps)
		}
		writeAll(late, bs[qps:], 1, size)
		// Every step of fake time: how many WRITEs each early QP
		// completed, when the late one completed, and how far the
		// slowest early QP was when the first finished.
		done := make([]int, qps)
		lateAt, firstDone := -1, -1
		slowest := 0
		steps := 0
		n.RunUntil("every WRITE completed", time.Second, func() bool {
			steps++
			for i, a := range early {
				done[i] = a.cq.Len()
			}
			if lateAt < 0 && late[0].cq.Len() == 1 {
				lateAt = steps
			}
			lo, hi := count, 0
			for _, d := range done {
				lo, hi = min(lo, d), max(hi, d)
			}
			if firstDone < 0 && hi == count {
				firstDone, slowest = steps, lo
			}
			return lo == count && lateAt >= 0
		})
		t.Logf("the late QP done at step %d, the first early QP at step %d, the slowest then at %d of %d WRITEs",
			lateAt, firstDone, slowest, count)
		if lateAt >= firstDone {
			t.Errorf("the late QP completed at step %d, not before the first early QP finished (step %d)", lateAt, firstDone)
		}
		if slowest < count/2 {
			t.Errorf("when the first QP finished its %d WRITEs the slowest had %d, want at least half", count, slowest)
		}
		checkWrites(t, n, early, bs[:qps], count, size, time.Second)
		checkWrites(t, n, late, bs[qps:], 1, size, time.Second)
		if got := as[0].ctr().Timeouts.Load(); got != 0 {
			t.Errorf("%d timeouts, want none", got)
		}
	})
}

// A timeout's go-back-N takes from the budget too: when everything in
// flight toward the peer was lost, the QPs that time out together resend
// no more than the budget, which the receiver's buffer holds, and the
// QPs that waited for the budget meanwhile go on once the resends are
// acknowledged. Without the budget each QP would resend up to
// RetryUnackedPSNs at the same moment and overflow the buffer again.
func TestPeerBudgetBoundsTheGoBackN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const qps, count, size = 32, 2, 16 << 10
		n := tt.NewNet(t, 1)
		budget := rc.NewPeerBudget(100 * (1024 + rc.PSNCost))
		as, bs := manyPairs(t, n, qps, opts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, bufSize: count * size}, budget)
		recv := bs[0].node.Endpoint()
		recv.SetRecvBuffer(manyQPsRecvBuffer)
		// Every request is lost for the first 10 ms.
		lost := true
		remove := n.Fabric().AddFilter(fabric.DropIf(fabric.And(from(as[0]), func(*fabric.Packet) bool { return lost })))
		defer remove()
		writeAll(as, bs, count, size)
		n.Run(10 * time.Millisecond)
		lost = false
		checkWrites(t, n, as, bs, count, size, time.Minute)
		ctr := as[0].ctr()
		t.Logf("%d timeouts, %d retries, %d datagrams dropped by the receiver's buffer, %v",
			ctr.Timeouts.Load(), ctr.CompleterRetryErr.Load(), recv.Stats().DropQueueFull.Packets, n.Since(tt.Epoch))
		if got := recv.Stats().DropQueueFull.Packets; got != 0 {
			t.Errorf("the receiver's buffer dropped %d datagrams, want none", got)
		}
		// Only the QPs that held the budget when the requests were lost
		// time out, once each.
		if got, most := ctr.Timeouts.Load(), uint64(budget.Limit()/(1024+rc.PSNCost)/16); got == 0 || got > most {
			t.Errorf("%d timeouts, want 1 to %d (the QPs the budget let send)", got, most)
		}
	})
}

// A QP that stops in the middle of a message for the budget asks for an
// acknowledgement with the last packet its share covers: only one lets
// it, or the QPs waiting, go on; without it the QP would wait for its
// retransmit timer.
func TestPeerBudgetEdgeAsksForAnACK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		budget := rc.NewPeerBudget(5 * (1024 + rc.PSNCost))
		a, b := manyPairs(t, n, 1, opts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, bufSize: 16 << 10}, budget)
		n.Fabric().SetPathImpairment(b[0].node.Addr(), a[0].node.Addr(), fabric.Impairment{Delay: time.Millisecond})
		rec := n.Recorder()
		writeAll(a, b, 1, 16<<10)
		n.Settle()
		sent := rec.Match(from(a[0]))
		if len(sent) != 5 {
			t.Fatalf("the QP sent %d packets within a budget of 5 PSNs, want 5", len(sent))
		}
		for i, p := range sent {
			tt.Check(t, &p, tt.PSN(wire.PSN(i)), tt.AckReq(i == 4))
		}
		checkWrites(t, n, a, b, 1, 16<<10, time.Second)
		if got := a[0].ctr().Timeouts.Load(); got != 0 {
			t.Errorf("%d timeouts, want none", got)
		}
	})
}
