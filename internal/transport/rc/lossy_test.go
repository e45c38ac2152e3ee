package rc_test

// RC with impairment on every packet both ways, requests, responses and
// ACKs alike: every operation completes with its data checked, and what a
// loss costs stays bounded (issue 35: a READ retry storm that received 60
// response packets for each one needed).

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

// lossy is one run of the lossy tests: count WRs of op of size bytes
// each (8 for the atomics), all posted at once, through imp.
type lossy struct {
	op    ibv.WROpcode
	size  int
	count int
}

// lossyRun is what a run cost: the packets its transfer needed and the
// packets the receiving side of the data received (the requester for a
// READ or an atomic, the responder for a SEND or WRITE), the go-back-N
// retries started and the datagrams the fabric lost.
type lossyRun struct {
	needed, received uint64
	retries, early   uint64
	lost, reordered  uint64 // by the fabric
	took             time.Duration
}

func (r lossyRun) ratio() float64 { return float64(r.received) / float64(r.needed) }

// runLossy runs c through imp on a pair at path MTU 1024, checks every
// completion and every byte, and returns what it cost.
func runLossy(t *testing.T, seed int64, c lossy, imp fabric.Impairment) lossyRun {
	return runLossyOn(t, seed, c, imp, lossyPath{})
}

// lossyPath is what runLossyOn changes from runLossy's pair.
type lossyPath struct {
	// rate drains every packet to the requester at rate bytes a second
	// (a fabric.Bottleneck without a limit; 0: none): a responder slower
	// than the link, whose answers queue up behind one another as rxe's
	// do in an emulated guest, where the answer to a request waits for
	// the answers to every request sent before it.
	rate int64
	// psn is the requester's first PSN (its sq_psn and the responder's
	// rq_psn), 0 as ibv_rc_pingpong's are not; perftest's are random.
	psn uint32
}

// runLossyOn is runLossy on path.
func runLossyOn(t *testing.T, seed int64, c lossy, imp fabric.Impairment, path lossyPath) lossyRun {
	n := tt.NewNet(t, seed)
	size := c.size
	if c.op == ibv.WRAtomicFetchAndAdd || c.op == ibv.WRAtomicCmpAndSwp {
		size = 8
	}
	buf := max(size*c.count, 64)
	a, b := newPair(t, n, opts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, bufSize: 2 * buf, maxWR: 512, sqPSN: path.psn})
	fill(a.buf, int(seed))
	fill(b.buf, int(seed)+1)
	const counter = 0 // the atomics' target in b's buffer
	if c.op == ibv.WRAtomicFetchAndAdd || c.op == ibv.WRAtomicCmpAndSwp {
		binaryPut(b.buf[counter:], 0)
	}
	if c.op == ibv.WRSend {
		for i := range c.count {
			b.postRecv(recvWR(b, uint64(i), buf+i*size, size))
		}
	}
	n.Fabric().SetImpairment(imp)
	if path.rate > 0 {
		n.Fabric().SetBottleneck(a.node.Addr(), fabric.Bottleneck{Rate: path.rate})
	}
	start := n.Now()
	for i := range c.count {
		off := i * size
		var w ibv.SendWR
		switch c.op {
		case ibv.WRSend:
			w = sendWR(a, uint64(i), ibv.WRSend, off, size)
		case ibv.WRRDMAWrite:
			w = rdmaWR(a, b, uint64(i), c.op, off, buf+off, size)
		case ibv.WRRDMARead:
			w = rdmaWR(a, b, uint64(i), c.op, buf+off, off, size)
		case ibv.WRAtomicFetchAndAdd:
			w = rdmaWR(a, b, uint64(i), c.op, off, counter, 8)
			w.CompareAdd = 1
		case ibv.WRAtomicCmpAndSwp:
			// Each swaps i for i+1: they succeed in order, only once each.
			w = rdmaWR(a, b, uint64(i), c.op, off, counter, 8)
			w.CompareAdd, w.Swap = uint64(i), uint64(i+1)
		}
		a.post(w)
	}
	for i, wc := range a.waitWCFor(c.count, 10*time.Minute) {
		if wc.Status != ibv.WCSuccess || wc.WRID != uint64(i) {
			t.Fatalf("seed %d: completion %d: %+v, want wr_id %d successful", seed, i, wc, i)
		}
	}
	run := lossyRun{took: n.Now().Sub(start)}
	pkts := uint64(max((size+1023)/1024, 1) * c.count)
	switch c.op {
	case ibv.WRSend:
		for i, wc := range b.waitWCFor(c.count, time.Minute) {
			if wc.Status != ibv.WCSuccess || wc.WRID != uint64(i) || wc.ByteLen != uint32(size) {
				t.Fatalf("seed %d: receive %d: %+v", seed, i, wc)
			}
		}
		checkBytes(t, "received", b.buf[buf:2*buf], a.buf[:buf])
		run.needed, run.received = pkts, b.ctr().RcvdPkts.Load()
	case ibv.WRRDMAWrite:
		checkBytes(t, "written", b.buf[buf:2*buf], a.buf[:buf])
		run.needed, run.received = pkts, b.ctr().RcvdPkts.Load()
	case ibv.WRRDMARead:
		checkBytes(t, "read", a.buf[buf:2*buf], b.buf[:buf])
		run.needed, run.received = pkts, a.ctr().RcvdPkts.Load()
	case ibv.WRAtomicFetchAndAdd, ibv.WRAtomicCmpAndSwp:
		// Executed once each, in order: the counter moved by count and
		// WR i saw i before it (C9-106: a duplicate is replayed, never
		// executed again).
		if got := u64(b.buf[counter:]); got != uint64(c.count) {
			t.Errorf("seed %d: counter %d after %d atomics, want %d", seed, got, c.count, c.count)
		}
		for i := range c.count {
			if got := u64(a.buf[i*8:]); got != uint64(i) {
				t.Fatalf("seed %d: atomic %d returned %d, want %d", seed, i, got, i)
			}
		}
		run.needed, run.received = pkts, a.ctr().RcvdPkts.Load()
	}
	run.retries = a.ctr().CompleterRetryErr.Load()
	run.early = a.ctr().EarlyRetries.Load()
	st := n.Fabric().Stats()
	run.lost, run.reordered = st.DropImpairment.Packets, st.Reordered.Packets
	t.Logf("seed %d: %v ×%d of %d B: %d packets received for %d needed (%.2f); %d retries, %d early, %d timeouts, %d re-asks for %d datagrams lost; %v",
		seed, c.op, c.count, size, run.received, run.needed, run.ratio(), run.retries, run.early,
		a.ctr().Timeouts.Load(), a.ctr().Reasked.Load(), run.lost, run.took)
	return run
}

// impair is loss on every packet, with 1% duplication and 5% of packets
// held back to be overtaken (the bed's netem: loss, duplicate, reorder),
// over 50 µs each way.
func impair(loss float64) fabric.Impairment {
	return fabric.Impairment{Loss: loss, Duplicate: 0.01, Reorder: 0.05, Delay: 50 * time.Microsecond,
		ReorderTimeout: 200 * time.Microsecond}
}

// TestLossAmplification: what a loss costs. The failing run
// (softnic reading 64 KiB from ib_read_bw at 3% loss, 1% duplication,
// 5% reordering on every packet) received some 60 response packets for
// every one it needed: a READ whose response went missing asked again for
// the rest of it and every READ behind it, and every late response of
// the earlier burst started yet another retry. Here, the same
// impairment on 64 READs of 64 KiB: at most 1.5 packets received for
// each needed (16.5 before), and at most one go-back-N retry for each
// datagram lost or overtaken (a packet the responder must then drop,
// IBTA 9.7.5.1.2). SENDs and WRITEs too: at most 1.5 (10.5 before; 2.1-2.4
// while the window grew back fast after every loss, completer.growLocked;
// 1.54-1.67 while the responder dropped every request behind a gap, so
// that each request overtaken on the way cost a go-back-N as a loss
// does, reorder.go).
func TestLossAmplification(t *testing.T) {
	for _, c := range []struct {
		lossy
		most float64
	}{
		{lossy{ibv.WRRDMARead, 65536, 64}, 1.5},
		{lossy{ibv.WRRDMAWrite, 65536, 64}, 1.5},
		{lossy{ibv.WRSend, 65536, 32}, 1.5},
	} {
		t.Run(fmt.Sprint(c.op), func(t *testing.T) {
			for seed := int64(1); seed <= 3; seed++ {
				synctest.Test(t, func(t *testing.T) {
					r := runLossy(t, seed, c.lossy, impair(0.03))
					if r.ratio() > c.most {
						t.Errorf("seed %d: %.2f packets received for each needed, want at most %.1f", seed, r.ratio(), c.most)
					}
					if r.retries > r.lost+r.reordered {
						t.Errorf("seed %d: %d retries for %d datagrams lost and %d overtaken: more than one a loss",
							seed, r.retries, r.lost, r.reordered)
					}
				})
			}
		})
	}
}

// TestLossGoBackNCost: what a lost SEND or WRITE packet costs at 3%
// loss on every packet both ways: at most 1.5 packets received for each
// needed. The responder drops every packet behind a gap (IBTA
// 9.7.5.1.2), so each loss costs the requester's window, and the window
// must stay near what the loss rate allows: grown back by about one PSN
// a round trip once at half its size at the last loss, and cut to what
// was acknowledged between two losses (completer.growLocked,
// lossLocked). A window that doubled back within a few round trips,
// down to no less than 16, received 1.68-1.73 for WRITEs and 1.85-1.88
// for SENDs over these seeds.
func TestLossGoBackNCost(t *testing.T) {
	imp := fabric.Impairment{Loss: 0.03, Delay: 50 * time.Microsecond}
	for _, c := range []lossy{{ibv.WRRDMAWrite, 65536, 64}, {ibv.WRSend, 65536, 32}} {
		t.Run(fmt.Sprint(c.op), func(t *testing.T) {
			for seed := int64(1); seed <= 3; seed++ {
				synctest.Test(t, func(t *testing.T) {
					if r := runLossy(t, seed, c, imp); r.ratio() > 1.5 {
						t.Errorf("seed %d: %.2f packets received for each needed, want at most 1.5", seed, r.ratio())
					}
				})
			}
		})
	}
}

// TestReadReasksOncePerReply: a READ's holes are asked for once the
// responder has ended its reply, all in one request, not each as it is
// found, and not again before the answer to the last request for them
// is overdue. Every packet here is delayed by its own 0-200 µs
// (jitter), so a reply's responses arrive interleaved and its holes
// appear one by one while it still streams; a re-ask goes from the
// READ's first missing response (rxe's duplicate_request refuses one
// that begins before the last), so asking at each new hole asked for the
// first one again every time: 3.65-4.31 packets received for each
// needed over these seeds; asking at the reply's end, 2.30-2.50; and
// not before the last ask's answer is overdue, 1.63-1.92 (at most 2.1).
func TestReadReasksOncePerReply(t *testing.T) {
	imp := fabric.Impairment{Loss: 0.03, Duplicate: 0.01, Jitter: 200 * time.Microsecond}
	for seed := int64(1); seed <= 3; seed++ {
		synctest.Test(t, func(t *testing.T) {
			r := runLossy(t, seed, lossy{ibv.WRRDMARead, 65536, 64}, imp)
			if r.ratio() > 2.1 {
				t.Errorf("seed %d: %.2f packets received for each needed, want at most 2.1", seed, r.ratio())
			}
		})
	}
}

// TestLossEverywhere: every RC operation, 1 B to 1 MiB, many outstanding,
// at 1%, 3% and 8% loss with duplication and reordering on every packet
// both ways: every run completes, in order, with its data checked.
func TestLossEverywhere(t *testing.T) {
	ops := []ibv.WROpcode{ibv.WRSend, ibv.WRRDMAWrite, ibv.WRRDMARead, ibv.WRAtomicFetchAndAdd, ibv.WRAtomicCmpAndSwp}
	sizes := []struct{ size, count int }{{1, 64}, {4096, 32}, {65536, 8}, {1 << 20, 2}}
	for _, loss := range []float64{0.01, 0.03, 0.08} {
		for _, op := range ops {
			for _, s := range sizes {
				if (op == ibv.WRAtomicFetchAndAdd || op == ibv.WRAtomicCmpAndSwp) && s.size != 1 {
					continue
				}
				t.Run(fmt.Sprintf("loss=%v/%v/%d", loss, op, s.size), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { runLossy(t, 7, lossy{op, s.size, s.count}, impair(loss)) })
				})
			}
		}
	}
}

// TestReadReasksMoveForward: every request a READ's responses are asked
// with starts at or after the one before it, however the responses are
// lost, duplicated or reordered. rxe's responder moves a READ's resource
// to each part asked again and refuses a part that starts before it
// (rxe_resp.c duplicate_request), so a requester that asked for a later
// part first could never again get an earlier one (requester.readRange).
func TestReadReasksMoveForward(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		synctest.Test(t, func(t *testing.T) {
			n := tt.NewNet(t, seed)
			rec := n.Recorder()
			a, b := newPair(t, n, opts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, bufSize: 2 << 20, maxWR: 512})
			n.Fabric().SetImpairment(impair(0.08))
			const size, count = 65536, 16
			for i := range count {
				a.post(rdmaWR(a, b, uint64(i), ibv.WRRDMARead, (1<<20)+i*size, i*size, size))
			}
			for i, wc := range a.waitWCFor(count, 10*time.Minute) {
				if wc.Status != ibv.WCSuccess {
					t.Fatalf("seed %d: READ %d: %v", seed, i, wc.Status)
				}
			}
			checkBytes(t, "read", a.buf[1<<20:1<<20+count*size], b.buf[:count*size])
			last := map[int]wire.PSN{} // each READ's last request
			asked := 0
			for _, p := range rec.Match(ops(a, wire.RCReadRequest)) {
				psn := p.Wire.PSN()
				i := int(psn) / (size / 1024) // the READ: PSNs from 0, 64 a READ
				if prev, ok := last[i]; ok && psn.Before(prev) {
					t.Fatalf("seed %d: READ %d asked from PSN %d after PSN %d", seed, i, psn, prev)
				}
				last[i] = psn
				asked++
			}
			if asked <= count {
				t.Errorf("seed %d: %d READ requests for %d READs: the loss did not bite", seed, asked, count)
			}
		})
	}
}

// TestReadsIntoOneBuffer: READs that all write one buffer (perftest's
// read_bw reads into one) under 3% loss, duplication and reordering on
// every packet: the buffer ends with the last READ's data, as in order,
// though the responses of later READs came before a lost one of an
// earlier READ (they are held for their turn, heldSet), and the loss
// costs no more than for READs into buffers of their own.
func TestReadsIntoOneBuffer(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		synctest.Test(t, func(t *testing.T) {
			n := tt.NewNet(t, seed)
			const size, count = 65536, 32
			a, b := newPair(t, n, opts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, bufSize: count * size, maxWR: 512})
			fill(b.buf, int(seed))
			n.Fabric().SetImpairment(impair(0.03))
			for i := range count {
				a.post(rdmaWR(a, b, uint64(i), ibv.WRRDMARead, 0, i*size, size))
			}
			for i, wc := range a.waitWCFor(count, 10*time.Minute) {
				if wc.Status != ibv.WCSuccess {
					t.Fatalf("seed %d: READ %d: %v", seed, i, wc.Status)
				}
			}
			checkBytes(t, "the buffer after the last READ", a.buf[:size], b.buf[(count-1)*size:])
			got, needed := a.ctr().RcvdPkts.Load(), uint64(count*size/1024)
			t.Logf("seed %d: %d READs of %d B into one buffer: %d packets received for %d needed (%.2f)",
				seed, count, size, got, needed, float64(got)/float64(needed))
			if r := float64(got) / float64(needed); r > 1.5 {
				t.Errorf("seed %d: %.2f packets received for each needed, want at most 1.5", seed, r)
			}
		})
	}
}

// TestReadsFromSlowResponder: READs from a responder slower than the
// link, whose answers queue up (rxe in an emulated guest answers a few
// thousand packets a second, and a request waits there behind the
// answers to every request before it), under 3% loss, 1% duplication and
// 5% reordering on every packet: at most 1.5 packets received for each
// needed. The round trip a READ measures is mostly that queue, which
// grows from nothing at the first READ to a window's worth of answers. A
// READ timed only while no retry was under way, and only to the
// acknowledgement of its first PSN, kept the first READ's round trip,
// taken before any queue had built, for the whole run under steady loss,
// and the early retry, two such round trips after the last progress, went
// back over answers still queued, again and again: 4.1-7.5 packets
// received for each needed over these seeds (1.7-1.8 at 5 MB/s); now
// 1.23-1.41.
func TestReadsFromSlowResponder(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		synctest.Test(t, func(t *testing.T) {
			r := runLossyOn(t, seed, lossy{ibv.WRRDMARead, 65536, 64}, impair(0.03), lossyPath{rate: 12e6})
			if r.ratio() > 1.5 {
				t.Errorf("seed %d: %.2f packets received for each needed, want at most 1.5", seed, r.ratio())
			}
		})
	}
}

// TestReadHoleWhileAnswersCome: the first response of the first of 16
// READs of 64 KiB is lost, from a responder whose answers queue up (2 MB/s
// toward the requester: a window's worth takes a quarter of a second,
// four local ACK timeouts at timeout 14). The responses behind the hole
// keep coming, and each shows the responder at work: none lets the
// retransmit timer expire, and the hole is asked for alone, once. With
// only in-order progress pushing the timer, it expired 67 ms into the
// reply and the go-back-N asked again for every READ in flight, their
// answers still queued.
func TestReadHoleWhileAnswersCome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		const size, count = 65536, 16
		a, b := newPair(t, n, opts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, bufSize: 2 * count * size, maxWR: 64})
		fill(b.buf, 1)
		n.Fabric().SetBottleneck(a.node.Addr(), fabric.Bottleneck{Rate: 2e6})
		n.Fabric().AddFilter(fabric.DropNth(1, ops(b, wire.RCReadResponseFirst)))
		for i := range count {
			a.post(rdmaWR(a, b, uint64(i), ibv.WRRDMARead, count*size+i*size, i*size, size))
		}
		for i, wc := range a.waitWCFor(count, time.Minute) {
			if wc.Status != ibv.WCSuccess || wc.WRID != uint64(i) {
				t.Fatalf("completion %d: %+v, want wr_id %d successful", i, wc, i)
			}
		}
		checkBytes(t, "read", a.buf[count*size:], b.buf[:count*size])
		ctr := a.ctr()
		if got := ctr.Timeouts.Load(); got != 0 {
			t.Errorf("%d local ACK timeouts while the responses behind the hole came", got)
		}
		if got, want := ctr.RcvdPkts.Load(), uint64(count*size/1024); got != want || ctr.Reasked.Load() != 1 {
			t.Errorf("%d packets received after %d re-asks, want %d after 1: the lost one asked for once (%d retries, %d early)",
				got, ctr.Reasked.Load(), want, ctr.CompleterRetryErr.Load(), ctr.EarlyRetries.Load())
		}
	})
}

// TestReadsFromAnyPSN: TestLossAmplification's READs, from first PSNs
// all over the 24-bit space, the upper half too, where perftest's random
// PSNs fall in every other run: at most 1.5 packets received for each
// needed from every one. An empty re-ask range left at PSN 0 (a new QP's,
// or one a go-back-N emptied) took every PSN of the upper half for one
// before its end (24-bit PSNs compare within half their space), and from
// then on every READ was asked for again as soon as it was sent: softnic
// read_bw against ib_read_bw at 3% loss on every packet received 1.9-2.0
// packets for each needed in the runs whose PSNs started in the upper
// half, 1.3-1.4 in the others; here 1.59-1.88 before, whatever the
// seed or PSN now.
func TestReadsFromAnyPSN(t *testing.T) {
	for _, psn := range []uint32{0x400000, 0x800000, 0xc00000, 0xfff800} {
		t.Run(fmt.Sprintf("%#x", psn), func(t *testing.T) {
			for seed := int64(1); seed <= 2; seed++ {
				synctest.Test(t, func(t *testing.T) {
					r := runLossyOn(t, seed, lossy{ibv.WRRDMARead, 65536, 64}, impair(0.03), lossyPath{psn: psn})
					if r.ratio() > 1.5 {
						t.Errorf("seed %d: %.2f packets received for each needed, want at most 1.5", seed, r.ratio())
					}
				})
			}
		})
	}
}
