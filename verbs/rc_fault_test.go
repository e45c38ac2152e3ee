package verbs_test

// RC transport fault tests on the deterministic fabric: lost, duplicated
// and refused packets, and what the requester, responder and completer
// make of them (IBTA 9.7; rxe_req.c, rxe_resp.c, rxe_comp.c;
// rxe-interop-facts.md §2.6-2.9). Each test runs in a synctest bubble:
// retransmit and RNR timers run on fake time.

import (
	"encoding/binary"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// rcOpts is the ibv_rc_pingpong configuration: timeout 14 (67 ms),
// retry_cnt 7, rnr_retry 7, min_rnr_timer 12, MTU 1024.
var rcOpts = pairOpts{timeout: 14, retry: 7, rnr: 7}

// timeout14 is the local ACK timeout of timeout 14: 4.096 µs × 2^14.
const timeout14 = 4096 << 14 * time.Nanosecond

// A lost SEND MIDDLE: the responder NAKs the next packet with a PSN
// sequence error carrying the PSN it expects (C9-109; rxe check_psn) and
// stays silent on the packets after it (sent_psn_nak), the requester
// resends from exactly that PSN (go-back-N, rxe req_retry), and the
// message arrives intact.
func TestRCLostSendMiddle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)
		f.AddFilter(fabric.DropNth(2, ops(a, wire.RCSendMiddle)))

		const n = 4*1024 + 300 // FIRST, MIDDLE×3, LAST
		fill(a.buf[:n], 1)
		postRecv(t, b, recvWR(b, 100, 0, 8192))
		post(t, a, sendWR(a, 1, ibv.WRSend, 0, n))
		wantWC(t, waitWC(t, a.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wc := waitWC(t, b.cq, 1)[0]
		wantWC(t, wc, 100, ibv.WCSuccess, ibv.WCRecv)
		if wc.ByteLen != n {
			t.Errorf("byte_len %d, want %d", wc.ByteLen, n)
		}
		checkBytes(t, "received message", b.buf[:n], a.buf[:n])
		checkBytes(t, "bytes after the message", b.buf[n:8192], make([]byte, 8192-n))

		checkSeq(t, "requests", rec.match(from(a)),
			"SEND_FIRST/0", "SEND_MIDDLE/1", "SEND_MIDDLE/2", "SEND_MIDDLE/3", "SEND_LAST/4!",
			"SEND_MIDDLE/2", "SEND_MIDDLE/3", "SEND_LAST/4!")
		checkSeq(t, "responses", rec.match(from(b)), "ACKNOWLEDGE/2 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/4")
		ca, cb := a.dev.Counters(), b.dev.Counters()
		if got := cb.OutOfSequence; got != 2 {
			t.Errorf("responder out_of_sequence %d, want 2", got)
		}
		if got := ca.RcvdSeqErr; got != 1 {
			t.Errorf("requester rcvd_seq_err %d, want 1", got)
		}
		if got := ca.Timeouts; got != 0 {
			t.Errorf("requester timeouts %d, want 0", got)
		}
	})
}

// "Lose the third RDMA WRITE MIDDLE, expect a sequence NAK and a
// go-back-N resend from its PSN" (STYLE.md 16): the resent packets are
// MIDDLEs without a RETH and land where the lost one should have.
func TestRCLostWriteMiddle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)
		f.AddFilter(fabric.DropNth(3, ops(a, wire.RCWriteMiddle)))

		const n, roff = 6*1024 + 100, 5000 // FIRST, MIDDLE×5, LAST
		fill(a.buf[:n], 2)
		before := append([]byte(nil), b.buf...)
		post(t, a, rdmaWR(a, b, 7, ibv.WRRDMAWrite, 0, roff, n))
		wantWC(t, waitWC(t, a.cq, 1)[0], 7, ibv.WCSuccess, ibv.WCRDMAWrite)

		want := append([]byte(nil), before...)
		copy(want[roff:], a.buf[:n])
		checkBytes(t, "responder memory", b.buf, want)
		checkSeq(t, "requests", rec.match(from(a)),
			"RDMA_WRITE_FIRST/0", "RDMA_WRITE_MIDDLE/1", "RDMA_WRITE_MIDDLE/2", "RDMA_WRITE_MIDDLE/3",
			"RDMA_WRITE_MIDDLE/4", "RDMA_WRITE_MIDDLE/5", "RDMA_WRITE_LAST/6!",
			"RDMA_WRITE_MIDDLE/3", "RDMA_WRITE_MIDDLE/4", "RDMA_WRITE_MIDDLE/5", "RDMA_WRITE_LAST/6!")
		checkSeq(t, "responses", rec.match(from(b)), "ACKNOWLEDGE/3 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/6")
		if got := pollAll(b.cq); len(got) != 0 {
			t.Errorf("a plain WRITE completed at the responder: %+v", got)
		}
	})
}

// readSetup writes n bytes of pattern at roff in b's memory and posts a
// READ of them into a at off.
func readSetup(t *testing.T, a, b *end, wrid uint64, off, roff, n int) {
	t.Helper()
	fill(b.buf[roff:roff+n], int(wrid))
	post(t, a, rdmaWR(a, b, wrid, ibv.WRRDMARead, off, roff, n))
}

// checkRead checks that a READ of n bytes from roff in b landed at off in
// a and nothing around it changed.
func checkRead(t *testing.T, a, b *end, off, roff, n int) {
	t.Helper()
	checkBytes(t, "read data", a.buf[off:off+n], b.buf[roff:roff+n])
	checkBytes(t, "bytes before the read buffer", a.buf[:off], make([]byte, off))
	checkBytes(t, "bytes after the read buffer", a.buf[off+n:], make([]byte, len(a.buf)-off-n))
}

// A lost READ RESPONSE MIDDLE: the requester sees the next response's PSN
// beyond the one it expects and re-issues a READ for the remaining bytes
// at the first missing PSN, VA and length advanced past what arrived
// (rxe req_retry: iova += npsn*mtu). The responder finds the original
// READ among its resources and replays the tail as a continuation,
// MIDDLE..LAST from that PSN (rxe duplicate_request, read_reply in
// rdatm_res_state_replay), which is also what an rxe requester accepts
// (rxe check_ack takes a FIRST only at the WQE's first PSN).
func TestRCLostReadResponseMiddle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)
		f.AddFilter(fabric.DropNth(2, ops(b, wire.RCReadResponseMiddle)))

		const n, off, roff = 5000, 1000, 20000 // responses FIRST, MIDDLE×3, LAST
		readSetup(t, a, b, 3, off, roff, n)
		wc := waitWC(t, a.cq, 1)[0]
		wantWC(t, wc, 3, ibv.WCSuccess, ibv.WCRDMARead)
		if wc.ByteLen != n {
			t.Errorf("byte_len %d, want %d", wc.ByteLen, n)
		}
		checkRead(t, a, b, off, roff, n)

		reqs := rec.match(from(a))
		checkSeq(t, "requests", reqs, "RDMA_READ_REQUEST/0!", "RDMA_READ_REQUEST/2!")
		if len(reqs) == 2 {
			for i, want := range []wire.RETHFields{
				{VA: b.mr.Addr() + roff, RKey: b.mr.RKey(), DMALen: n},
				{VA: b.mr.Addr() + roff + 2048, RKey: b.mr.RKey(), DMALen: n - 2048},
			} {
				if got := reqs[i].Wire.RETH().Fields(); got != want {
					t.Errorf("READ request %d: RETH %+v, want %+v", i, got, want)
				}
			}
		}
		checkSeq(t, "responses", rec.match(from(b)),
			"RDMA_READ_RESPONSE_FIRST/0", "RDMA_READ_RESPONSE_MIDDLE/1", "RDMA_READ_RESPONSE_MIDDLE/2",
			"RDMA_READ_RESPONSE_MIDDLE/3", "RDMA_READ_RESPONSE_LAST/4",
			"RDMA_READ_RESPONSE_MIDDLE/2", "RDMA_READ_RESPONSE_MIDDLE/3", "RDMA_READ_RESPONSE_LAST/4")
		if got := b.dev.Counters().DuplicateRequest; got != 1 {
			t.Errorf("responder duplicate_request %d, want 1", got)
		}
		if got := a.dev.Counters().Timeouts; got != 0 {
			t.Errorf("requester timeouts %d, want 0 (the gap alone triggers the retry)", got)
		}
	})
}

// A lost READ request: nothing comes back, the retransmit timer fires
// after the local ACK timeout and the request goes out again, whole.
func TestRCLostReadRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)
		f.AddFilter(fabric.DropNth(1, ops(a, wire.RCReadRequest)))

		const n, off, roff = 3000, 0, 100
		start := time.Now()
		readSetup(t, a, b, 4, off, roff, n)
		wantWC(t, waitWC(t, a.cq, 1)[0], 4, ibv.WCSuccess, ibv.WCRDMARead)
		checkRead(t, a, b, off, roff, n)

		reqs := rec.match(from(a))
		checkSeq(t, "requests", reqs, "RDMA_READ_REQUEST/0!", "RDMA_READ_REQUEST/0!")
		if len(reqs) == 2 {
			if d := reqs[1].at.Sub(start); d < timeout14 {
				t.Errorf("retransmitted after %v, before the %v timeout", d, timeout14)
			}
			if reqs[1].Wire.RETH().Fields() != reqs[0].Wire.RETH().Fields() {
				t.Errorf("retransmitted RETH %+v, want %+v", reqs[1].Wire.RETH().Fields(), reqs[0].Wire.RETH().Fields())
			}
		}
		checkSeq(t, "responses", rec.match(from(b)),
			"RDMA_READ_RESPONSE_FIRST/0", "RDMA_READ_RESPONSE_MIDDLE/1", "RDMA_READ_RESPONSE_LAST/2")
		if got := a.dev.Counters().Timeouts; got != 1 {
			t.Errorf("requester timeouts %d, want 1", got)
		}
		if got := b.dev.Counters().DuplicateRequest; got != 0 {
			t.Errorf("responder duplicate_request %d, want 0: the first request never arrived", got)
		}
	})
}

// A lost last READ response: no later response reveals the gap, so only
// the timer recovers it; the re-issued READ asks for the last packet's
// bytes alone and the replay is that one LAST.
func TestRCLostReadResponseLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)
		f.AddFilter(fabric.DropNth(1, ops(b, wire.RCReadResponseLast)))

		const n, off, roff = 5000, 64, 10000
		start := time.Now()
		readSetup(t, a, b, 5, off, roff, n)
		wantWC(t, waitWC(t, a.cq, 1)[0], 5, ibv.WCSuccess, ibv.WCRDMARead)
		checkRead(t, a, b, off, roff, n)

		reqs := rec.match(from(a))
		checkSeq(t, "requests", reqs, "RDMA_READ_REQUEST/0!", "RDMA_READ_REQUEST/4!")
		if len(reqs) == 2 {
			want := wire.RETHFields{VA: b.mr.Addr() + roff + 4096, RKey: b.mr.RKey(), DMALen: n - 4096}
			if got := reqs[1].Wire.RETH().Fields(); got != want {
				t.Errorf("re-issued READ RETH %+v, want %+v", got, want)
			}
			if d := reqs[1].at.Sub(start); d < timeout14 {
				t.Errorf("re-issued after %v, before the %v timeout", d, timeout14)
			}
		}
		checkSeq(t, "responses", rec.match(from(b)),
			"RDMA_READ_RESPONSE_FIRST/0", "RDMA_READ_RESPONSE_MIDDLE/1", "RDMA_READ_RESPONSE_MIDDLE/2",
			"RDMA_READ_RESPONSE_MIDDLE/3", "RDMA_READ_RESPONSE_LAST/4", "RDMA_READ_RESPONSE_LAST/4")
		if got := a.dev.Counters().Timeouts; got != 1 {
			t.Errorf("requester timeouts %d, want 1", got)
		}
	})
}

// Lost ACKs: the requester times out and resends; the responder sees
// duplicates, acknowledges them again without executing them a second
// time (C9-105; rxe duplicate_request): a SEND consumes one receive WQE, a
// WRITE WITH IMMEDIATE completes once.
func TestRCLostAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)
		f.AddFilter(fabric.DropNth(1, ops(b, wire.RCAck)))
		f.AddFilter(fabric.DropNth(1, fabric.And(ops(b, wire.RCAck), fabric.PSNIs(2))))

		// A two-packet SEND whose ACK is lost.
		fill(a.buf[:1500], 3)
		postRecv(t, b, recvWR(b, 200, 0, 2048), recvWR(b, 201, 4096, 2048))
		post(t, a, sendWR(a, 1, ibv.WRSend, 0, 1500))
		wantWC(t, waitWC(t, a.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		got := waitWC(t, b.cq, 1)
		noWC(t, b.cq, 2*timeout14)
		if len(got) != 1 {
			t.Fatalf("responder completions %+v, want one", got)
		}
		wantWC(t, got[0], 200, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "received", b.buf[:1500], a.buf[:1500])
		checkSeq(t, "SEND requests", rec.match(from(a)),
			"SEND_FIRST/0", "SEND_LAST/1!", "SEND_FIRST/0", "SEND_LAST/1!")
		// The duplicates are acknowledged again with the last PSN received:
		// one ACK for each pass that read them (the responder coalesces
		// them, TestDuplicateWindowOneAck; rxe sends one per duplicate).
		// Whether the two arrive in one read depends on scheduling.
		resp := descs(rec.match(from(b)))
		if len(resp) < 2 || len(resp) > 3 || slices.ContainsFunc(resp, func(d string) bool { return d != "ACKNOWLEDGE/1" }) {
			t.Errorf("SEND responses %q, want ACKNOWLEDGE/1 and one or two re-ACKs of PSN 1", resp)
		}
		if got := b.dev.Counters().DuplicateRequest; got != 2 {
			t.Errorf("responder duplicate_request %d, want 2", got)
		}

		// A WRITE WITH IMMEDIATE whose ACK is lost.
		rec.reset()
		fill(a.buf[8192:8192+700], 4)
		w := rdmaWR(a, b, 2, ibv.WRRDMAWriteWithImm, 8192, 30000, 700)
		w.Imm = 0xfeedf00d
		post(t, a, w)
		wantWC(t, waitWC(t, a.cq, 1)[0], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		got = waitWC(t, b.cq, 1)
		noWC(t, b.cq, 2*timeout14)
		wantWC(t, got[0], 201, ibv.WCSuccess, ibv.WCRecvRDMAWithImm)
		if got[0].Imm != 0xfeedf00d || got[0].ByteLen != 700 || got[0].Flags&ibv.WCWithImm == 0 {
			t.Errorf("WRITE WITH IMM completion %+v", got[0])
		}
		checkBytes(t, "written", b.buf[30000:30700], a.buf[8192:8892])
		checkSeq(t, "WRITE requests", rec.match(from(a)), "RDMA_WRITE_ONLY_WITH_IMMEDIATE/2!", "RDMA_WRITE_ONLY_WITH_IMMEDIATE/2!")
		checkSeq(t, "WRITE responses", rec.match(from(b)), "ACKNOWLEDGE/2", "ACKNOWLEDGE/2")
		if got := a.dev.Counters().Timeouts; got != 2 {
			t.Errorf("requester timeouts %d, want 2", got)
		}
	})
}

// Every request duplicated on the wire (a fabric Duplicate action): the
// responder executes each exactly once and answers the copy as a
// duplicate: SEND and WRITE are re-ACKed, READ is replayed from its
// responder resource, an atomic's first result is sent again without a
// second execution (IBTA 9.7.5.1.5; rxe duplicate_request).
func TestRCDuplicatedRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, rcOpts)
		rec := record(t, f)
		f.AddFilter(fabric.OnMatch(fabric.And(from(a), fabric.MaskIs(wire.MaskRequest)), fabric.Duplicate))

		// SEND: one receive WQE consumed of two.
		fill(a.buf[:3000], 5)
		postRecv(t, b, recvWR(b, 300, 0, 4096), recvWR(b, 301, 4096, 4096))
		post(t, a, sendWR(a, 1, ibv.WRSend, 0, 3000))
		wantWC(t, waitWC(t, a.cq, 1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		got := waitWC(t, b.cq, 1)
		noWC(t, b.cq, time.Millisecond)
		wantWC(t, got[0], 300, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "SEND data", b.buf[:3000], a.buf[:3000])

		// WRITE WITH IMMEDIATE: completes once, consuming WQE 301.
		fill(a.buf[8192:8192+2500], 6)
		w := rdmaWR(a, b, 2, ibv.WRRDMAWriteWithImm, 8192, 16384, 2500)
		w.Imm = 7
		post(t, a, w)
		wantWC(t, waitWC(t, a.cq, 1)[0], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		got = waitWC(t, b.cq, 1)
		noWC(t, b.cq, time.Millisecond)
		wantWC(t, got[0], 301, ibv.WCSuccess, ibv.WCRecvRDMAWithImm)
		checkBytes(t, "WRITE data", b.buf[16384:16384+2500], a.buf[8192:8192+2500])

		// READ: the copy is answered again, the requester drops the stale
		// second reply.
		readSetup(t, a, b, 3, 20000, 24000, 2100)
		wantWC(t, waitWC(t, a.cq, 1)[0], 3, ibv.WCSuccess, ibv.WCRDMARead)
		checkBytes(t, "READ data", a.buf[20000:22100], b.buf[24000:26100])
		// The READ completes with the first reply; the responder may
		// still be answering the copy.
		settle(0)
		if got := rec.count(ops(b, wire.RCReadResponseLast)); got != 2 {
			t.Errorf("%d READ_RESPONSE_LASTs, want 2 (original and replay)", got)
		}

		// 100 FETCH_ADDs of 1: exactly +100, every original distinct.
		const nfa, cnt, res = 100, 40000, 48000 // counter in b; results in a
		b.buf[cnt] = 0
		var wrs []ibv.SendWR
		for i := range nfa {
			w := rdmaWR(a, b, uint64(1000+i), ibv.WRAtomicFetchAndAdd, res+8*i, cnt, 8)
			w.CompareAdd = 1
			wrs = append(wrs, w)
		}
		post(t, a, wrs...)
		wcs := waitWC(t, a.cq, nfa)
		seenOrig := make(map[uint64]bool)
		for i, wc := range wcs {
			wantWC(t, wc, uint64(1000+i), ibv.WCSuccess, ibv.WCFetchAdd)
			orig := u64(a.buf[res+8*i:])
			if orig != uint64(i) || seenOrig[orig] {
				t.Errorf("fetch-add %d returned %d, want %d", i, orig, i)
			}
			seenOrig[orig] = true
		}
		if got := u64(b.buf[cnt:]); got != nfa {
			t.Errorf("counter %d after %d fetch-adds of 1", got, nfa)
		}

		// CMP_SWAP chain: each swaps i for i+1 and must see i.
		const ncas = 30
		wrs = wrs[:0]
		for i := range ncas {
			w := rdmaWR(a, b, uint64(2000+i), ibv.WRAtomicCmpAndSwp, res+8*i, cnt, 8)
			w.CompareAdd, w.Swap = uint64(nfa+i), uint64(nfa+i+1)
			wrs = append(wrs, w)
		}
		post(t, a, wrs...)
		for i, wc := range waitWC(t, a.cq, ncas) {
			wantWC(t, wc, uint64(2000+i), ibv.WCSuccess, ibv.WCCompSwap)
			if orig := u64(a.buf[res+8*i:]); orig != uint64(nfa+i) {
				t.Errorf("cmp-swap %d returned %d, want %d", i, orig, nfa+i)
			}
		}
		if got := u64(b.buf[cnt:]); got != nfa+ncas {
			t.Errorf("value %d after the cmp-swap chain, want %d", got, nfa+ncas)
		}

		settle(0) // the last request's copy may still be on its way
		reqs := rec.count(fabric.And(from(a), fabric.MaskIs(wire.MaskRequest)))
		dup := b.dev.Counters().DuplicateRequest
		// The tap sees each request once, before the fabric copies it.
		if uint64(reqs) != dup {
			t.Errorf("%d requests sent, each delivered twice, but the responder saw %d duplicates", reqs, dup)
		}
		wantState(t, "requester", a, ibv.QPStateRTS)
		wantState(t, "responder", b, ibv.QPStateRTS)
	})
}

// le64 reads the native-endian u64 at b (atomics use CPU byte order).
func u64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }
