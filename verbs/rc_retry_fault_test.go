package verbs_test

// RNR NAKs, retransmit timeouts and their retry counters (IBTA 9.7.5.2.8,
// 9.7.6.1.3; rxe_comp.c COMPST_RNR_RETRY, COMPST_ERROR_RETRY; rxe_qp.c
// IB_QP_TIMEOUT; rxe-interop-facts.md §2.7).

import (
	"encoding/binary"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// rnrTable is IBTA Table 45 (rxe rnrnak_usec, whose 61410 for entry 25
// is a typo for 61440).
var rnrTable = [32]time.Duration{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
}

func rnrDelay(i uint8) time.Duration { return rnrTable[i] * time.Microsecond }

// dropFirst returns a filter dropping the first n datagrams m matches.
func dropFirst(n int, m fabric.Matcher) fabric.Filter {
	var seen atomic.Int64
	return func(p *fabric.Packet) fabric.Action {
		if m(p) && seen.Add(1) <= int64(n) {
			return fabric.Drop
		}
		return fabric.Pass
	}
}

// rnrNAK matches RNR NAKs from e.
func rnrNAK(e *end) fabric.Matcher {
	return fabric.And(ops(e, wire.RCAck), func(p *fabric.Packet) bool {
		return p.Wire.AETH().Syndrome().Type() == wire.SyndromeRNRNAK
	})
}

// checkRNRWaits checks that every retransmission of the request at psn
// left at least the RNR delay after the RNR NAK before it (the
// requester waits rnrnak_usec[timer] before retrying, and nothing else -
// a PSN sequence NAK or the retransmit timer - shortens the wait).
func checkRNRWaits(t *testing.T, rec *recorder, a, b *end, psn wire.PSN, delay time.Duration) {
	t.Helper()
	reqs := rec.match(fabric.And(from(a), fabric.PSNIs(psn), fabric.MaskIs(wire.MaskStart)))
	naks := rec.match(rnrNAK(b))
	if len(naks) == 0 || len(reqs) < 2 {
		t.Fatalf("%d transmissions of PSN %d and %d RNR NAKs", len(reqs), psn, len(naks))
	}
	for i, r := range reqs[1:] {
		nak := naks[i]
		if nak.psn() != psn {
			t.Errorf("RNR NAK %d carries PSN %d, want the failed PSN %d", i, nak.psn(), psn)
		}
		if gap := r.at.Sub(nak.at); gap < delay {
			t.Errorf("retransmission %d left %v after RNR NAK %d, before the RNR timer of %v", i+1, gap, i, delay)
		}
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
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)

		const n = 2500
		fill(a.buf[:n], 9)
		post(t, a, sendWR(a, 1, ibv.WRSend, 0, n))
		waitUntil(t, time.Second, "three RNR NAKs", func() bool { return rec.count(rnrNAK(b)) >= 3 })
		postRecv(t, b, recvWR(b, 50, 100, 4096))
		wantWC(t, waitWC(t, a.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, waitWC(t, b.cq, 1)[0], 50, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "received", b.buf[100:100+n], a.buf[:n])

		for _, nak := range rec.match(rnrNAK(b)) {
			if s := nak.syn(); s != 0x20|12 {
				t.Errorf("RNR NAK syndrome %#x, want %#x (0x20 | min_rnr_timer 12)", uint8(s), 0x20|12)
			}
		}
		checkRNRWaits(t, rec, a, b, 0, rnrDelay(12))
		wantState(t, "requester", a, ibv.QPStateRTS)
		if got, naks := a.dev.Counters().RcvdRNRErr, uint64(rec.count(rnrNAK(b))); got != naks {
			t.Errorf("requester rcvd_rnr_err %d, want %d", got, naks)
		}
		if got, naks := b.dev.Counters().SendRNRErr, uint64(rec.count(rnrNAK(b))); got != naks {
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
		t.Run(string('0'+rnr), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				o := rcOpts
				o.rnr = rnr
				a, b := newPair(t, f, o)
				rec := record(t, f)

				unsig := sendWR(a, 3, ibv.WRSend, 0, 10)
				unsig.Flags = 0
				post(t, a, sendWR(a, 1, ibv.WRSend, 0, 10), sendWR(a, 2, ibv.WRRDMAWrite, 0, 10), unsig)
				a.qp.PostSend() // nothing
				wcs := waitWC(t, a.cq, 3)
				wantWC(t, wcs[0], 1, ibv.WCRNRRetryExcErr, ibv.WCSend)
				wantWC(t, wcs[1], 2, ibv.WCWRFlushErr, ibv.WCRDMAWrite)
				wantWC(t, wcs[2], 3, ibv.WCWRFlushErr, ibv.WCSend)
				noWC(t, a.cq, time.Second)
				wantState(t, "requester", a, ibv.QPStateErr)
				wantState(t, "responder", b, ibv.QPStateRTS)
				if got := rec.count(fabric.And(ops(a, wire.RCSendOnly), fabric.PSNIs(0))); got != int(rnr)+1 {
					t.Errorf("SEND sent %d times, want %d (rnr_retry %d)", got, rnr+1, rnr)
				}
				if got := rec.count(rnrNAK(b)); got != int(rnr)+1 {
					t.Errorf("%d RNR NAKs, want %d", got, rnr+1)
				}
				if got := a.dev.Counters().RetryRNRExceededErr; got != 1 {
					t.Errorf("retry_rnr_exceeded_err %d, want 1", got)
				}
				// Posting in ERR flushes at once.
				post(t, a, sendWR(a, 4, ibv.WRSend, 0, 10))
				wantWC(t, waitWC(t, a.cq, 1)[0], 4, ibv.WCWRFlushErr, ibv.WCSend)
			})
		})
	}
}

// rnr_retry 7 retries forever (IBTA 9.7.5.2.8): after many RNR rounds a
// posted receive still lets the SEND through.
func TestRCRNRRetryInfinite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		modify(t, b, ibv.QPAttr{MinRNRTimer: 1}, ibv.QPAttrMinRNRTimer) // 10 µs
		rec := record(t, f)

		post(t, a, sendWR(a, 1, ibv.WRSend, 0, 100))
		const rounds = 40
		waitUntil(t, time.Second, "RNR rounds", func() bool { return rec.count(rnrNAK(b)) >= rounds })
		if got := pollAll(a.cq); len(got) != 0 {
			t.Fatalf("completions during RNR retries: %+v", got)
		}
		postRecv(t, b, recvWR(b, 8, 0, 100))
		wantWC(t, waitWC(t, a.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, waitWC(t, b.cq, 1)[0], 8, ibv.WCSuccess, ibv.WCRecv)
		checkRNRWaits(t, rec, a, b, 0, rnrDelay(1))
		for _, nak := range rec.match(rnrNAK(b)) {
			if s := nak.syn(); s != 0x21 {
				t.Fatalf("RNR NAK syndrome %#x, want 0x21", uint8(s))
			}
		}
	})
}

// The RNR wait is the table entry of the NAK's timer field, for every
// field value the responder may send (rxe rnrnak_usec).
func TestRCRNRTimerTable(t *testing.T) {
	for _, timer := range []uint8{0, 1, 5, 12, 18, 25, 31} {
		t.Run(rnrDelay(timer).String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				a, b := newPair(t, f, rcOpts)
				modify(t, b, ibv.QPAttr{MinRNRTimer: timer}, ibv.QPAttrMinRNRTimer)
				rec := record(t, f)

				post(t, a, sendWR(a, 1, ibv.WRSend, 0, 64))
				sends := fabric.And(ops(a, wire.RCSendOnly), fabric.PSNIs(0))
				waitUntil(t, 2*time.Second, "a retransmission", func() bool { return rec.count(sends) >= 2 })
				naks := rec.match(rnrNAK(b))
				tx := rec.match(sends)
				if s := naks[0].syn(); s != wire.RNRNAK(timer) {
					t.Errorf("syndrome %#x, want %#x", uint8(s), uint8(wire.RNRNAK(timer)))
				}
				want := rnrDelay(timer)
				if gap := tx[1].at.Sub(naks[0].at); gap < want || gap > want+time.Millisecond {
					t.Errorf("retried %v after the RNR NAK, want %v", gap, want)
				}
				postRecv(t, b, recvWR(b, 1, 0, 64))
				wantWC(t, waitWCFor(t, a.cq, 1, 5*time.Second)[0], 1, ibv.WCSuccess, ibv.WCSend)
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
		t.Run(string('0'+retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				o := rcOpts
				o.retry = retry
				a, b := newPair(t, f, o)
				rec := record(t, f)
				f.AddFilter(fabric.DropIf(from(a)))

				start := time.Now()
				unsig := rdmaWR(a, b, 4, ibv.WRRDMARead, 4096, 0, 100)
				unsig.Flags = 0
				post(t, a, sendWR(a, 1, ibv.WRSend, 0, 3000), rdmaWR(a, b, 2, ibv.WRRDMAWrite, 0, 0, 100),
					rdmaWR(a, b, 3, ibv.WRRDMARead, 4096, 0, 100), unsig)
				wcs := waitWCFor(t, a.cq, 4, time.Duration(retry+2)*timeout14)
				elapsed := time.Since(start)
				wantWC(t, wcs[0], 1, ibv.WCRetryExcErr, ibv.WCSend)
				wantWC(t, wcs[1], 2, ibv.WCWRFlushErr, ibv.WCRDMAWrite)
				wantWC(t, wcs[2], 3, ibv.WCWRFlushErr, ibv.WCRDMARead)
				wantWC(t, wcs[3], 4, ibv.WCWRFlushErr, ibv.WCRDMARead)
				wantState(t, "requester", a, ibv.QPStateErr)
				wantState(t, "responder", b, ibv.QPStateRTS)
				if want := time.Duration(retry+1) * timeout14; elapsed < want || elapsed > want+time.Millisecond {
					t.Errorf("failed after %v, want %v (retry_cnt %d + 1 timeouts)", elapsed, want, retry)
				}
				if got := rec.count(fabric.And(ops(a, wire.RCSendFirst), fabric.PSNIs(0))); got != int(retry)+1 {
					t.Errorf("first packet sent %d times, want retry_cnt+1 = %d", got, retry+1)
				}
				if got := rec.count(fabric.And(ops(a, wire.RCReadRequest))); got != 2*(int(retry)+1) {
					t.Errorf("READ requests sent %d times, want %d", got, 2*(retry+1))
				}
				ca := a.dev.Counters()
				if got := ca.Timeouts; got != uint64(retry)+1 {
					t.Errorf("timeouts %d, want %d", got, retry+1)
				}
				if got := ca.RetryExceededErr; got != 1 {
					t.Errorf("retry_exceeded_err %d, want 1", got)
				}
				noWC(t, a.cq, 2*timeout14)
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
		t.Run(string('0'+retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				o := rcOpts
				o.retry = retry
				a, b := newPair(t, f, o)
				rec := record(t, f)
				f.AddFilter(fabric.DropIf(from(b)))

				postRecv(t, b, recvWR(b, 1, 0, 64))
				start := time.Now()
				post(t, a, sendWR(a, 1, ibv.WRSend, 0, 64))
				wcs := waitWCFor(t, a.cq, 1, time.Duration(retry+2)*timeout14)
				elapsed := time.Since(start)
				wantWC(t, wcs[0], 1, ibv.WCRetryExcErr, ibv.WCSend)
				wantState(t, "requester", a, ibv.QPStateErr)
				want := time.Duration(retry+1) * timeout14
				if elapsed < want || elapsed > want+time.Millisecond {
					t.Errorf("RETRY_EXC_ERR after %v, want %v = (%d+1) × %v", elapsed, want, retry, timeout14)
				}
				sends := rec.match(ops(a, wire.RCSendOnly))
				if len(sends) != int(retry)+1 {
					t.Fatalf("SEND transmitted %d times, want retry_cnt+1 = %d", len(sends), retry+1)
				}
				for i, s := range sends {
					at := s.at.Sub(start)
					if lo := time.Duration(i) * timeout14; at < lo || at > lo+time.Millisecond {
						t.Errorf("transmission %d at %v, want %v", i, at, lo)
					}
				}
				if got := a.dev.Counters().RetryExceededErr; got != 1 {
					t.Errorf("retry_exceeded_err %d, want 1", got)
				}
				// Nothing more leaves the requester once it gave up.
				settle(4 * timeout14)
				if got := rec.count(from(a)); got != int(retry)+1 {
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
		t.Run(string('0'+retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				o := rcOpts
				o.retry = retry
				a, b := newPair(t, f, o)
				rec := record(t, f)
				acks := ops(b, wire.RCAck)
				f.AddFilter(dropFirst(int(retry), acks))

				postRecv(t, b, recvWR(b, 1, 0, 64), recvWR(b, 2, 64, 64))
				start := time.Now()
				post(t, a, sendWR(a, 1, ibv.WRSend, 0, 64))
				wantWC(t, waitWCFor(t, a.cq, 1, time.Duration(retry+2)*timeout14)[0], 1, ibv.WCSuccess, ibv.WCSend)
				if got, want := time.Since(start), time.Duration(retry)*timeout14; got < want || got > want+time.Millisecond {
					t.Errorf("SEND completed after %v, want %v (at the last retry)", got, want)
				}
				wantWC(t, waitWC(t, b.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
				if got := rec.count(ops(a, wire.RCSendOnly)); got != int(retry)+1 {
					t.Errorf("SEND transmitted %d times, want %d", got, retry+1)
				}
				wantState(t, "requester", a, ibv.QPStateRTS)

				// The counter is whole again: the next SEND, all of whose
				// ACKs are lost, is transmitted retry_cnt+1 times.
				f.AddFilter(fabric.DropIf(acks))
				before := rec.count(ops(a, wire.RCSendOnly))
				start = time.Now()
				post(t, a, sendWR(a, 2, ibv.WRSend, 0, 64))
				wantWC(t, waitWCFor(t, a.cq, 1, time.Duration(retry+2)*timeout14)[0], 2, ibv.WCRetryExcErr, ibv.WCSend)
				if got, want := time.Since(start), time.Duration(retry+1)*timeout14; got < want || got > want+time.Millisecond {
					t.Errorf("second SEND failed after %v, want %v", got, want)
				}
				if got := rec.count(ops(a, wire.RCSendOnly)) - before; got != int(retry)+1 {
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
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		o := rcOpts
		o.timeout = 0
		a, b := newPair(t, f, o)
		rec := record(t, f)
		f.AddFilter(fabric.DropNth(1, ops(a, wire.RCSendOnly)))

		postRecv(t, b, recvWR(b, 1, 0, 64), recvWR(b, 2, 64, 64))
		post(t, a, sendWR(a, 1, ibv.WRSend, 0, 64))
		noWC(t, a.cq, time.Minute)
		if got := rec.count(from(a)); got != 1 {
			t.Errorf("%d packets sent in a minute, want 1: no retransmit timer", got)
		}
		if got := a.dev.Counters().Timeouts; got != 0 {
			t.Errorf("timeouts %d, want 0", got)
		}
		post(t, a, sendWR(a, 2, ibv.WRSend, 64, 64))
		wcs := waitWC(t, a.cq, 2)
		wantWC(t, wcs[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, wcs[1], 2, ibv.WCSuccess, ibv.WCSend)
		checkSeq(t, "requests", rec.match(from(a)), "SEND_ONLY/0!", "SEND_ONLY/1!", "SEND_ONLY/0!", "SEND_ONLY/1!")
		// The ACKs of the resent pair may be coalesced into one for PSN 1.
		resps := rec.match(from(b))
		checkSeq(t, "NAKs", rec.match(isNak), "ACKNOWLEDGE/0 NAK_PSN_SEQ_ERR")
		if last := resps[len(resps)-1]; last.desc() != "ACKNOWLEDGE/1" {
			t.Errorf("last response %s, want ACKNOWLEDGE/1", last.desc())
		}
	})
}

// A WRITE WITH IMMEDIATE needs its receive WQE only at its last packet
// (rxe RXE_RWR_MASK on WRITE_LAST_WITH_IMMEDIATE): the RNR NAK carries
// that packet's PSN, the payload before it is already placed, and the
// retry resends the last packet alone.
func TestRCRNRWriteWithImmLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)

		const n = 2*1024 + 77
		fill(a.buf[:n], 71)
		w := rdmaWR(a, b, 1, ibv.WRRDMAWriteWithImm, 0, 9000, n)
		w.Imm = 0xabcd
		post(t, a, w)
		waitUntil(t, time.Second, "an RNR NAK", func() bool { return rec.count(rnrNAK(b)) >= 2 })
		postRecv(t, b, recvWR(b, 5, 0, 0))
		wantWC(t, waitWC(t, a.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCRDMAWrite)
		wc := waitWC(t, b.cq, 1)[0]
		wantWC(t, wc, 5, ibv.WCSuccess, ibv.WCRecvRDMAWithImm)
		if wc.Imm != 0xabcd || wc.ByteLen != n {
			t.Errorf("completion %+v, want imm 0xabcd, byte_len %d", wc, n)
		}
		checkBytes(t, "written", b.buf[9000:9000+n], a.buf[:n])
		reqs := descs(rec.match(from(a)))
		if len(reqs) < 5 || !slices.Equal(reqs[:3], []string{"RDMA_WRITE_FIRST/0", "RDMA_WRITE_MIDDLE/1", "RDMA_WRITE_LAST_WITH_IMMEDIATE/2!"}) {
			t.Fatalf("requests %q", reqs)
		}
		for _, r := range reqs[3:] {
			if r != "RDMA_WRITE_LAST_WITH_IMMEDIATE/2!" {
				t.Errorf("retry sent %s, want only the last packet again", r)
			}
		}
		for _, nak := range rec.match(rnrNAK(b)) {
			if nak.psn() != 2 {
				t.Errorf("RNR NAK at PSN %d, want 2", nak.psn())
			}
		}
	})
}

// A lost atomic ACK: the requester times out and sends the atomic
// again; the responder answers the duplicate from its resource with the
// original value, so the add happens once (C9-112; rxe duplicate_request).
func TestRCLostAtomicAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)
		f.AddFilter(fabric.DropNth(1, ops(b, wire.RCAtomicAck)))
		f.AddFilter(fabric.DropNth(2, ops(b, wire.RCAtomicAck)))

		binaryPut(b.buf[64:], 40)
		fa := rdmaWR(a, b, 1, ibv.WRAtomicFetchAndAdd, 0, 64, 8)
		fa.CompareAdd = 2
		cs := rdmaWR(a, b, 2, ibv.WRAtomicCmpAndSwp, 8, 64, 8)
		cs.CompareAdd, cs.Swap = 42, 1000
		post(t, a, fa, cs)
		wcs := waitWC(t, a.cq, 2)
		wantWC(t, wcs[0], 1, ibv.WCSuccess, ibv.WCFetchAdd)
		wantWC(t, wcs[1], 2, ibv.WCSuccess, ibv.WCCompSwap)
		if got, got2, final := u64(a.buf[0:]), u64(a.buf[8:]), u64(b.buf[64:]); got != 40 || got2 != 42 || final != 1000 {
			t.Errorf("fetch-add returned %d, cmp-swap %d, final %d; want 40, 42, 1000", got, got2, final)
		}
		checkSeq(t, "atomic ACKs", rec.match(ops(b, wire.RCAtomicAck)),
			"ATOMIC_ACKNOWLEDGE/0", "ATOMIC_ACKNOWLEDGE/1", "ATOMIC_ACKNOWLEDGE/0", "ATOMIC_ACKNOWLEDGE/1")
		if got := b.dev.Counters().DuplicateRequest; got != 2 {
			t.Errorf("duplicate_request %d, want 2", got)
		}
	})
}

func binaryPut(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }

// A duplicated RNR NAK is one RNR NAK: the requester sends nothing while
// it waits for the RNR timer, so any RNR NAK arriving during the wait
// answers a transmission already counted, and must neither spend another
// RNR retry nor restart the wait.
func TestRCRNRNakDuplicated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		o := rcOpts
		o.rnr = 1
		a, b := newPair(t, f, o)
		rec := record(t, f)
		f.AddFilter(fabric.OnMatch(rnrNAK(b), fabric.Duplicate))

		start := time.Now()
		post(t, a, sendWR(a, 1, ibv.WRSend, 0, 64))
		time.Sleep(100 * time.Microsecond)
		postRecv(t, b, recvWR(b, 1, 0, 64))
		wantWC(t, waitWC(t, a.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, waitWC(t, b.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
		sends := rec.match(ops(a, wire.RCSendOnly))
		if len(sends) != 2 {
			t.Fatalf("SEND sent %d times, want 2", len(sends))
		}
		if d := sends[1].at.Sub(start); d != rnrDelay(12) {
			t.Errorf("retried after %v, want the RNR delay %v", d, rnrDelay(12))
		}
		if got := a.dev.Counters().RcvdRNRErr; got != 1 {
			t.Errorf("rcvd_rnr_err %d, want 1 (the copy is dropped)", got)
		}
	})
}
