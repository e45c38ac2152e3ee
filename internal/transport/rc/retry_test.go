package rc_test

// RNR NAKs, retransmit timeouts and their retry counters (IBTA 9.7.5.2.8,
// 9.7.6.1.3; rxe_comp.c COMPST_RNR_RETRY, COMPST_ERROR_RETRY; rxe_qp.c
// IB_QP_TIMEOUT; rxe-interop-facts.md §2.7).

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

// rnrTable is IBTA Table 45 (rxe rnrnak_usec, whose 61410 for entry 25
// is a typo for 61440), written out here independently of rc.RNRTimeout.
var rnrTable = [32]time.Duration{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
}

func rnrDelay(i uint8) time.Duration { return rnrTable[i] * time.Microsecond }

// rnrNAK matches RNR NAKs from e.
func rnrNAK(e *end) fabric.Matcher { return fabric.And(from(e), tt.IsRNRNAK) }

// checkRNRWaits checks that every retransmission of the request at psn
// left exactly the RNR delay after the RNR NAK before it (the requester
// waits rnrnak_usec[timer] before retrying, and nothing else - a PSN
// sequence NAK or the retransmit timer - shortens the wait), and that
// each RNR NAK names psn.
func checkRNRWaits(t *testing.T, rec *tt.Recorder, a, b *end, psn wire.PSN, delay time.Duration) {
	t.Helper()
	reqs := rec.Match(fabric.And(from(a), fabric.PSNIs(psn), fabric.MaskIs(wire.MaskStart)))
	naks := rec.Match(rnrNAK(b))
	if len(naks) == 0 || len(reqs) < 2 {
		t.Fatalf("%d transmissions of PSN %d and %d RNR NAKs", len(reqs), psn, len(naks))
	}
	for i := range reqs[1:] {
		tt.Check(t, &naks[i], tt.PSN(psn))
		tt.Check(t, &reqs[i+1], tt.At(naks[i].At.Add(delay)))
	}
}

// A SEND that finds no receive WQE is RNR NAKed with 0x20|min_rnr_timer
// and the PSN of the SEND (C9-133; rxe check_resource, RESPST_ERR_RNR);
// the requester retries after the RNR timer until a receive is posted,
// then the message arrives intact. The SEND has three packets, so each
// RNR NAK is followed by a PSN sequence NAK for the packets behind the
// first: that NAK must not cut the RNR wait short (rxe defers need_retry
// while wait_for_rnr_timer is set).
func TestRCRNRRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()

		const size = 2500
		fill(a.buf[:size], 9)
		a.post(sendWR(a, 1, ibv.WRSend, 0, size))
		n.RunUntil("three RNR NAKs", time.Second, func() bool { return rec.Count(rnrNAK(b)) >= 3 })
		b.postRecv(recvWR(b, 50, 100, 4096))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, b.waitWC(1)[0], 50, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "received", b.buf[100:100+size], a.buf[:size])

		naks := rec.Match(rnrNAK(b))
		tt.CheckEach(t, naks, tt.Syndrome(wire.RNRNAK(12))) // 0x20 | min_rnr_timer 12
		// Behind each RNR NAK, one sequence NAK for the rest of the SEND.
		tt.CheckEach(t, rec.Match(fabric.And(from(b), tt.IsNAK, fabric.Not(tt.IsRNRNAK))),
			tt.PSN(0), tt.Syndrome(wire.NakPSNSequence))
		checkRNRWaits(t, rec, a, b, 0, rnrDelay(12))
		wantState(t, "requester", a, ibv.QPStateRTS)
		if got, naks := a.ctr().RcvdRNRErr.Load(), uint64(len(naks)); got != naks {
			t.Errorf("requester rcvd_rnr_err %d, want %d", got, naks)
		}
		if got, naks := b.ctr().SendRNRErr.Load(), uint64(len(naks)); got != naks {
			t.Errorf("responder send_rnr_err %d, want %d", got, naks)
		}
	})
}

// rnr_retry N allows N retries after RNR NAKs: the (N+1)th RNR NAK
// completes the WR with RNR_RETRY_EXC_ERR, the QP goes to ERR and the WRs
// behind it are flushed (rxe COMPST_RNR_RETRY). The responder stays in
// RTS: an RNR NAK is not an error of its QP.
func TestRCRNRRetryExceeded(t *testing.T) {
	for _, rnr := range []uint8{0, 1, 3} {
		t.Run(fmt.Sprint(rnr), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				o := rcOpts
				o.rnr = rnr
				a, b := newPair(t, n, o)
				rec := n.Recorder()

				unsig := sendWR(a, 3, ibv.WRSend, 0, 10)
				unsig.Flags = 0
				a.post(sendWR(a, 1, ibv.WRSend, 0, 10), sendWR(a, 2, ibv.WRRDMAWrite, 0, 10), unsig)
				a.post() // nothing
				wcs := a.waitWC(3)
				wantWC(t, wcs[0], 1, ibv.WCRNRRetryExcErr, ibv.WCSend)
				wantWC(t, wcs[1], 2, ibv.WCWRFlushErr, ibv.WCRDMAWrite)
				wantWC(t, wcs[2], 3, ibv.WCWRFlushErr, ibv.WCSend)
				a.noWC(time.Second)
				wantState(t, "requester", a, ibv.QPStateErr)
				wantState(t, "responder", b, ibv.QPStateRTS)
				if got := rec.Count(fabric.And(ops(a, wire.RCSendOnly), fabric.PSNIs(0))); got != int(rnr)+1 {
					t.Errorf("SEND sent %d times, want %d (rnr_retry %d)", got, rnr+1, rnr)
				}
				if got := rec.Count(rnrNAK(b)); got != int(rnr)+1 {
					t.Errorf("%d RNR NAKs, want %d", got, rnr+1)
				}
				if got := a.ctr().RetryRNRExceededErr.Load(); got != 1 {
					t.Errorf("retry_rnr_exceeded_err %d, want 1", got)
				}
				// Posting in ERR flushes at once.
				a.post(sendWR(a, 4, ibv.WRSend, 0, 10))
				wantWC(t, a.waitWC(1)[0], 4, ibv.WCWRFlushErr, ibv.WCSend)
			})
		})
	}
}

// rnr_retry 7 retries forever (IBTA 9.7.5.2.8): after many RNR rounds a
// posted receive still lets the SEND through.
func TestRCRNRRetryInfinite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		b.modify(ibv.QPAttr{MinRNRTimer: 1}, ibv.QPAttrMinRNRTimer) // 10 µs
		rec := n.Recorder()

		a.post(sendWR(a, 1, ibv.WRSend, 0, 100))
		const rounds = 40
		n.RunUntil("RNR rounds", time.Second, func() bool { return rec.Count(rnrNAK(b)) >= rounds })
		if got := a.pollAll(); len(got) != 0 {
			t.Fatalf("completions during RNR retries: %+v", got)
		}
		b.postRecv(recvWR(b, 8, 0, 100))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, b.waitWC(1)[0], 8, ibv.WCSuccess, ibv.WCRecv)
		checkRNRWaits(t, rec, a, b, 0, rnrDelay(1))
		tt.CheckEach(t, rec.Match(rnrNAK(b)), tt.Syndrome(0x21))
	})
}

// The RNR wait is the table entry of the NAK's timer field, for every
// field value the responder may send (rxe rnrnak_usec).
func TestRCRNRTimerTable(t *testing.T) {
	for _, timer := range []uint8{0, 1, 5, 12, 18, 25, 31} {
		t.Run(rnrDelay(timer).String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				a, b := newPair(t, n, rcOpts)
				b.modify(ibv.QPAttr{MinRNRTimer: timer}, ibv.QPAttrMinRNRTimer)
				rec := n.Recorder()

				a.post(sendWR(a, 1, ibv.WRSend, 0, 64))
				sends := fabric.And(ops(a, wire.RCSendOnly), fabric.PSNIs(0))
				n.RunUntil("a retransmission", 2*time.Second, func() bool { return rec.Count(sends) >= 2 })
				naks := rec.Match(rnrNAK(b))
				tx := rec.Match(sends)
				tt.Check(t, &naks[0], tt.Syndrome(wire.RNRNAK(timer)))
				tt.Check(t, &tx[1], tt.At(naks[0].At.Add(rnrDelay(timer))))
				b.postRecv(recvWR(b, 1, 0, 64))
				wantWC(t, a.waitWCFor(1, 5*time.Second)[0], 1, ibv.WCSuccess, ibv.WCSend)
			})
		})
	}
}

// A peer that never answers: the requester retransmits after each local
// ACK timeout, retry_cnt times, then completes the oldest WR with
// RETRY_EXC_ERR and flushes the rest, signaled or not, and the QP is in
// ERR (IBTA 9.7.6.1.3; rxe COMPST_ERROR_RETRY). retry_cnt 7 is seven
// retries: softnic, unlike rxe, does not retry for ever.
func TestRCRetryExceeded(t *testing.T) {
	for _, retry := range []uint8{0, 3, 6, 7} {
		t.Run(fmt.Sprint(retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				o := rcOpts
				o.retry = retry
				a, b := newPair(t, n, o)
				rec := n.Recorder()
				n.Fabric().AddFilter(fabric.DropIf(from(a)))

				start := n.Now()
				unsig := rdmaWR(a, b, 4, ibv.WRRDMARead, 4096, 0, 100)
				unsig.Flags = 0
				a.post(sendWR(a, 1, ibv.WRSend, 0, 3000), rdmaWR(a, b, 2, ibv.WRRDMAWrite, 0, 0, 100),
					rdmaWR(a, b, 3, ibv.WRRDMARead, 4096, 0, 100), unsig)
				wcs := a.waitWCFor(4, time.Duration(retry+2)*timeout14)
				if got, want := n.Since(start), time.Duration(retry+1)*timeout14; got != want {
					t.Errorf("failed after %v, want %v (retry_cnt %d + 1 timeouts)", got, want, retry)
				}
				wantWC(t, wcs[0], 1, ibv.WCRetryExcErr, ibv.WCSend)
				wantWC(t, wcs[1], 2, ibv.WCWRFlushErr, ibv.WCRDMAWrite)
				wantWC(t, wcs[2], 3, ibv.WCWRFlushErr, ibv.WCRDMARead)
				wantWC(t, wcs[3], 4, ibv.WCWRFlushErr, ibv.WCRDMARead)
				wantState(t, "requester", a, ibv.QPStateErr)
				wantState(t, "responder", b, ibv.QPStateRTS)
				firsts := rec.Match(fabric.And(ops(a, wire.RCSendFirst), fabric.PSNIs(0)))
				if len(firsts) != int(retry)+1 {
					t.Errorf("first packet sent %d times, want retry_cnt+1 = %d", len(firsts), retry+1)
				}
				for i := range firsts {
					tt.Check(t, &firsts[i], tt.At(start.Add(time.Duration(i)*timeout14)))
				}
				if got := rec.Count(ops(a, wire.RCReadRequest)); got != 2*(int(retry)+1) {
					t.Errorf("READ requests sent %d times, want %d", got, 2*(retry+1))
				}
				if got := a.ctr().Timeouts.Load(); got != uint64(retry)+1 {
					t.Errorf("timeouts %d, want %d", got, retry+1)
				}
				if got := a.ctr().RetryExceededErr.Load(); got != 1 {
					t.Errorf("retry_exceeded_err %d, want 1", got)
				}
				a.noWC(2 * timeout14)
			})
		})
	}
}

// A dead responder: everything it sends is lost. The requester's SEND
// goes out exactly retry_cnt+1 times, one local ACK timeout apart (the
// first transmission and retry_cnt retries, IBTA 9.7.6.1.3), and the WR
// completes with RETRY_EXC_ERR (retry_cnt+1) × 4.096 µs × 2^timeout
// after it was posted - for retry_cnt 7 too, which rxe takes as
// "for ever" (rxe_comp.c COMPST_ERROR_RETRY) and softnic, as hardware
// NICs, as seven.
func TestRCRetryDeadResponder(t *testing.T) {
	for _, retry := range []uint8{0, 1, 7} {
		t.Run(fmt.Sprint(retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				o := rcOpts
				o.retry = retry
				a, b := newPair(t, n, o)
				rec := n.Recorder()
				n.Fabric().AddFilter(fabric.DropIf(from(b)))

				b.postRecv(recvWR(b, 1, 0, 64))
				start := n.Now()
				a.post(sendWR(a, 1, ibv.WRSend, 0, 64))
				wcs := a.waitWCFor(1, time.Duration(retry+2)*timeout14)
				want := time.Duration(retry+1) * timeout14
				if got := n.Since(start); got != want {
					t.Errorf("RETRY_EXC_ERR after %v, want %v = (%d+1) × %v", got, want, retry, timeout14)
				}
				wantWC(t, wcs[0], 1, ibv.WCRetryExcErr, ibv.WCSend)
				wantState(t, "requester", a, ibv.QPStateErr)
				sends := rec.Match(ops(a, wire.RCSendOnly))
				if len(sends) != int(retry)+1 {
					t.Fatalf("SEND transmitted %d times, want retry_cnt+1 = %d", len(sends), retry+1)
				}
				for i := range sends {
					tt.Check(t, &sends[i], tt.PSN(0), tt.AckReq(true), tt.At(start.Add(time.Duration(i)*timeout14)))
				}
				if got := a.ctr().RetryExceededErr.Load(); got != 1 {
					t.Errorf("retry_exceeded_err %d, want 1", got)
				}
				// Nothing more leaves the requester once it gave up.
				n.Run(4 * timeout14)
				if got := rec.Count(from(a)); got != int(retry)+1 {
					t.Errorf("%d packets from the requester after it gave up, want %d", got, retry+1)
				}
			})
		})
	}
}

// An answer that arrives before the last retry timed out still completes
// the WR: the responder's first retry_cnt ACKs are lost, the ACK of the
// last retransmission gets through and the SEND succeeds. The progress
// restores the retry counter (rxe_comp.c reset_retry_counters), so the
// next WR again gets retry_cnt full retries before RETRY_EXC_ERR.
func TestRCRetryLastAnswerInTime(t *testing.T) {
	for _, retry := range []uint8{1, 7} {
		t.Run(fmt.Sprint(retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				o := rcOpts
				o.retry = retry
				a, b := newPair(t, n, o)
				rec := n.Recorder()
				acks := ops(b, wire.RCAck)
				n.Fabric().AddFilter(tt.DropFirst(int(retry), acks))

				b.postRecv(recvWR(b, 1, 0, 64), recvWR(b, 2, 64, 64))
				start := n.Now()
				a.post(sendWR(a, 1, ibv.WRSend, 0, 64))
				wantWC(t, a.waitWCFor(1, time.Duration(retry+2)*timeout14)[0], 1, ibv.WCSuccess, ibv.WCSend)
				if got, want := n.Since(start), time.Duration(retry)*timeout14; got != want {
					t.Errorf("SEND completed after %v, want %v (at the last retry)", got, want)
				}
				wantWC(t, b.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
				if got := rec.Count(ops(a, wire.RCSendOnly)); got != int(retry)+1 {
					t.Errorf("SEND transmitted %d times, want %d", got, retry+1)
				}
				wantState(t, "requester", a, ibv.QPStateRTS)

				// The counter is whole again: the next SEND, all of whose
				// ACKs are lost, is transmitted retry_cnt+1 times.
				n.Fabric().AddFilter(fabric.DropIf(acks))
				before := rec.Count(ops(a, wire.RCSendOnly))
				start = n.Now()
				a.post(sendWR(a, 2, ibv.WRSend, 0, 64))
				wantWC(t, a.waitWCFor(1, time.Duration(retry+2)*timeout14)[0], 2, ibv.WCRetryExcErr, ibv.WCSend)
				if got, want := n.Since(start), time.Duration(retry+1)*timeout14; got != want {
					t.Errorf("second SEND failed after %v, want %v", got, want)
				}
				if got := rec.Count(ops(a, wire.RCSendOnly)) - before; got != int(retry)+1 {
					t.Errorf("second SEND transmitted %d times, want %d", got, retry+1)
				}
			})
		})
	}
}

// Timeout 0 means no retransmit timer at all (rxe_qp.c: qp_timeout_jiffies
// 0): a lost last packet stalls the QP until a later request makes the
// responder NAK the gap.
func TestRCTimeoutZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		o := rcOpts
		o.timeout = 0
		a, b := newPair(t, n, o)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(1, ops(a, wire.RCSendOnly)))

		b.postRecv(recvWR(b, 1, 0, 64), recvWR(b, 2, 64, 64))
		a.post(sendWR(a, 1, ibv.WRSend, 0, 64))
		a.noWC(time.Minute)
		if got := rec.Count(from(a)); got != 1 {
			t.Errorf("%d packets sent in a minute, want 1: no retransmit timer", got)
		}
		if got := a.ctr().Timeouts.Load(); got != 0 {
			t.Errorf("timeouts %d, want 0", got)
		}
		a.post(sendWR(a, 2, ibv.WRSend, 64, 64))
		wcs := a.waitWC(2)
		wantWC(t, wcs[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, wcs[1], 2, ibv.WCSuccess, ibv.WCSend)
		tt.CheckSeq(t, "requests", rec.Match(from(a)), "SEND_ONLY/0!", "SEND_ONLY/1!", "SEND_ONLY/0!", "SEND_ONLY/1!")
		// The resent pair arrives in one read: one ACK for PSN 1.
		tt.CheckSeq(t, "responses", rec.Match(from(b)), "ACKNOWLEDGE/0 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/1")
	})
}

// A WRITE WITH IMMEDIATE needs its receive WQE only at its last packet
// (rxe RXE_RWR_MASK on WRITE_LAST_WITH_IMMEDIATE): the RNR NAK carries
// that packet's PSN, the payload before it is already placed, and the
// retry resends the last packet alone.
func TestRCRNRWriteWithImmLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()

		const size = 2*1024 + 77
		fill(a.buf[:size], 71)
		w := rdmaWR(a, b, 1, ibv.WRRDMAWriteWithImm, 0, 9000, size)
		w.Imm = 0xabcd
		a.post(w)
		n.RunUntil("an RNR NAK", time.Second, func() bool { return rec.Count(rnrNAK(b)) >= 2 })
		b.postRecv(recvWR(b, 5, 0, 0))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRDMAWrite)
		wc := b.waitWC(1)[0]
		wantWC(t, wc, 5, ibv.WCSuccess, ibv.WCRecvRDMAWithImm)
		if wc.Imm != 0xabcd || wc.ByteLen != size {
			t.Errorf("completion %+v, want imm 0xabcd, byte_len %d", wc, size)
		}
		checkBytes(t, "written", b.buf[9000:9000+size], a.buf[:size])
		reqs := tt.Descs(rec.Match(from(a)))
		if len(reqs) < 5 || !slices.Equal(reqs[:3], []string{"RDMA_WRITE_FIRST/0", "RDMA_WRITE_MIDDLE/1", "RDMA_WRITE_LAST_WITH_IMMEDIATE/2!"}) {
			t.Fatalf("requests %q", reqs)
		}
		for _, r := range reqs[3:] {
			if r != "RDMA_WRITE_LAST_WITH_IMMEDIATE/2!" {
				t.Errorf("retry sent %s, want only the last packet again", r)
			}
		}
		tt.CheckEach(t, rec.Match(rnrNAK(b)), tt.PSN(2))
	})
}

// A lost atomic ACK: the requester times out and sends the atomic
// again; the responder answers the duplicate from its resource with the
// original value, so the add happens once (C9-112; rxe duplicate_request).
func TestRCLostAtomicAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(1, ops(b, wire.RCAtomicAck)))
		n.Fabric().AddFilter(fabric.DropNth(2, ops(b, wire.RCAtomicAck)))

		binaryPut(b.buf[64:], 40)
		fa := rdmaWR(a, b, 1, ibv.WRAtomicFetchAndAdd, 0, 64, 8)
		fa.CompareAdd = 2
		cs := rdmaWR(a, b, 2, ibv.WRAtomicCmpAndSwp, 8, 64, 8)
		cs.CompareAdd, cs.Swap = 42, 1000
		a.post(fa, cs)
		wcs := a.waitWC(2)
		wantWC(t, wcs[0], 1, ibv.WCSuccess, ibv.WCFetchAdd)
		wantWC(t, wcs[1], 2, ibv.WCSuccess, ibv.WCCompSwap)
		if fa, cs, final := u64(a.buf[0:]), u64(a.buf[8:]), u64(b.buf[64:]); fa != 40 || cs != 42 || final != 1000 {
			t.Errorf("fetch-add returned %d, cmp-swap %d, final %d; want 40, 42, 1000", fa, cs, final)
		}
		acks := rec.Match(ops(b, wire.RCAtomicAck))
		tt.CheckSeq(t, "atomic ACKs", acks,
			"ATOMIC_ACKNOWLEDGE/0", "ATOMIC_ACKNOWLEDGE/1", "ATOMIC_ACKNOWLEDGE/0", "ATOMIC_ACKNOWLEDGE/1")
		if len(acks) == 4 {
			// The replays carry the values the one execution found.
			tt.Check(t, &acks[2], tt.AtomicOrig(40))
			tt.Check(t, &acks[3], tt.AtomicOrig(42))
		}
		if got := b.ctr().DuplicateRequest.Load(); got != 2 {
			t.Errorf("duplicate_request %d, want 2", got)
		}
	})
}

// A duplicated RNR NAK is one RNR NAK: the requester sends nothing while
// it waits for the RNR timer, so any RNR NAK arriving during the wait
// answers a transmission already counted, and must neither spend another
// RNR retry nor restart the wait.
func TestRCRNRNakDuplicated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		o := rcOpts
		o.rnr = 1
		a, b := newPair(t, n, o)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.OnMatch(rnrNAK(b), fabric.Duplicate))

		start := n.Now()
		a.post(sendWR(a, 1, ibv.WRSend, 0, 64))
		n.Run(100 * time.Microsecond)
		b.postRecv(recvWR(b, 1, 0, 64))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, b.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
		sends := rec.Match(ops(a, wire.RCSendOnly))
		if len(sends) != 2 {
			t.Fatalf("SEND sent %d times, want 2", len(sends))
		}
		tt.Check(t, &sends[1], tt.At(start.Add(rnrDelay(12))))
		if got := a.ctr().RcvdRNRErr.Load(); got != 1 {
			t.Errorf("rcvd_rnr_err %d, want 1 (the copy is dropped)", got)
		}
		if got := a.ctr().DropResponse.Load(); got != 1 {
			t.Errorf("dropped responses %d, want 1 (the copy)", got)
		}
	})
}

// Destroying a QP with a request in flight stops its retransmit timer:
// the network checks, once every QP is closed, that no timer is left on
// its clock (a timer of a destroyed QP would fire into freed state).
func TestRCCloseStopsTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		n.Fabric().AddFilter(fabric.DropIf(from(b)))
		b.postRecv(recvWR(b, 1, 0, 64))
		a.post(sendWR(a, 1, ibv.WRSend, 0, 64))
		n.Run(timeout14 / 2)
		if got := n.Clock().Pending(); got != 1 {
			t.Fatalf("%d timers armed with a SEND unacknowledged, want the retransmit timer", got)
		}
	})
}
