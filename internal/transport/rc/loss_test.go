package rc_test

// Lost, duplicated and refused packets between two RC QPs on the fabric,
// and what the requester, responder and completer make of them (IBTA 9.7;
// rxe_req.c, rxe_resp.c, rxe_comp.c; rxe-interop-facts.md §2.6-2.9). The
// retransmit and RNR timers run on the network's manual clock.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport/rc"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

// A lost SEND MIDDLE: the responder NAKs the next packet with a PSN
// sequence error carrying the PSN it expects (C9-109; rxe check_psn) and
// stays silent on the packets after it (sent_psn_nak), the requester
// resends from exactly that PSN (go-back-N, rxe req_retry), and the
// message arrives intact.
func TestRCLostSendMiddle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(2, ops(a, wire.RCSendMiddle)))

		const size = 4*1024 + 300 // FIRST, MIDDLE×3, LAST
		fill(a.buf[:size], 1)
		b.postRecv(recvWR(b, 100, 0, 8192))
		a.post(sendWR(a, 1, ibv.WRSend, 0, size))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wc := b.waitWC(1)[0]
		wantWC(t, wc, 100, ibv.WCSuccess, ibv.WCRecv)
		if wc.ByteLen != size {
			t.Errorf("byte_len %d, want %d", wc.ByteLen, size)
		}
		checkBytes(t, "received message", b.buf[:size], a.buf[:size])
		checkBytes(t, "bytes after the message", b.buf[size:8192], make([]byte, 8192-size))

		tt.CheckSeq(t, "requests", rec.Match(from(a)),
			"SEND_FIRST/0", "SEND_MIDDLE/1", "SEND_MIDDLE/2", "SEND_MIDDLE/3", "SEND_LAST/4!",
			"SEND_MIDDLE/2", "SEND_MIDDLE/3", "SEND_LAST/4!")
		resps := rec.Match(from(b))
		tt.CheckSeq(t, "responses", resps, "ACKNOWLEDGE/2 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/4")
		if len(resps) == 2 {
			// The NAK acknowledges the two packets before the gap (MSN 0:
			// no message complete yet) and names the expected PSN.
			tt.Check(t, &resps[0], tt.Opcode(wire.RCAck), tt.PSN(2), tt.Syndrome(wire.NakPSNSequence), tt.MSN(0))
			tt.Check(t, &resps[1], tt.Opcode(wire.RCAck), tt.PSN(4), tt.Syndrome(wire.AckUnlimited), tt.MSN(1))
		}
		if got := b.ctr().OutOfSequence.Load(); got != 2 {
			t.Errorf("responder out_of_sequence %d, want 2", got)
		}
		if got := a.ctr().RcvdSeqErr.Load(); got != 1 {
			t.Errorf("requester rcvd_seq_err %d, want 1", got)
		}
		if got := a.ctr().Timeouts.Load(); got != 0 {
			t.Errorf("requester timeouts %d, want 0", got)
		}
	})
}

// "Lose the third RDMA WRITE MIDDLE, expect a sequence NAK and a
// go-back-N resend from its PSN" (STYLE.md 16): the resent packets are
// MIDDLEs without a RETH and land where the lost one should have.
func TestRCLostWriteMiddle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(3, ops(a, wire.RCWriteMiddle)))

		const size, roff = writeSize, writeOff
		writeChecked(t, a, b, 2)
		reqs := rec.Match(from(a))
		tt.CheckSeq(t, "requests", reqs,
			"RDMA_WRITE_FIRST/0", "RDMA_WRITE_MIDDLE/1", "RDMA_WRITE_MIDDLE/2", "RDMA_WRITE_MIDDLE/3",
			"RDMA_WRITE_MIDDLE/4", "RDMA_WRITE_MIDDLE/5", "RDMA_WRITE_LAST/6!",
			"RDMA_WRITE_MIDDLE/3", "RDMA_WRITE_MIDDLE/4", "RDMA_WRITE_MIDDLE/5", "RDMA_WRITE_LAST/6!")
		if len(reqs) == 11 {
			tt.Check(t, &reqs[0], tt.RETH(wire.RETHFields{VA: b.mr.Addr() + roff, RKey: b.mr.RKey(), DMALen: size}))
			tt.CheckEach(t, reqs[1:], tt.HasRETH(false), tt.Pad())
			// The resend leaves when the NAK arrives, at once; the
			// responder sent it once its reorder window passed.
			tt.Check(t, &reqs[7], tt.At(reqs[0].At.Add(rc.ReorderWindow)))
		}
		tt.CheckSeq(t, "responses", rec.Match(from(b)), "ACKNOWLEDGE/3 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/6")
		if got := b.pollAll(); len(got) != 0 {
			t.Errorf("a plain WRITE completed at the responder: %+v", got)
		}
	})
}

// readSetup writes n bytes of pattern at roff in b's memory and posts a
// READ of them into a at off.
func readSetup(a, b *end, wrid uint64, off, roff, n int) {
	a.t.Helper()
	fill(b.buf[roff:roff+n], int(wrid))
	a.post(rdmaWR(a, b, wrid, ibv.WRRDMARead, off, roff, n))
}

// checkRead checks that a READ of n bytes from roff in b landed at off in
// a and nothing around it changed.
func checkRead(t *testing.T, a, b *end, off, roff, n int) {
	t.Helper()
	checkBytes(t, "read data", a.buf[off:off+n], b.buf[roff:roff+n])
	checkBytes(t, "bytes before the read buffer", a.buf[:off], make([]byte, off))
	checkBytes(t, "bytes after the read buffer", a.buf[off+n:], make([]byte, len(a.buf)-off-n))
}

// A lost READ RESPONSE MIDDLE: the requester keeps the responses after
// it (placed at their offsets) and, once the READ's last response came
// with one still missing, asks again for that one alone: a READ request
// at its PSN, VA advanced to it and one PMTU long (IBTA 9.7.5.1.5). The
// responder finds the original READ among its resources and replays the
// part asked for, here as LAST (rxe duplicate_request accepts "the same
// as the previous one or a subset of it"; read_reply's replay state).
func TestRCLostReadResponseMiddle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(2, ops(b, wire.RCReadResponseMiddle)))

		const size, off, roff = 5000, 1000, 20000 // responses FIRST, MIDDLE×3, LAST
		readSetup(a, b, 3, off, roff, size)
		wc := a.waitWC(1)[0]
		wantWC(t, wc, 3, ibv.WCSuccess, ibv.WCRDMARead)
		if wc.ByteLen != size {
			t.Errorf("byte_len %d, want %d", wc.ByteLen, size)
		}
		checkRead(t, a, b, off, roff, size)

		reqs := rec.Match(from(a))
		tt.CheckSeq(t, "requests", reqs, "RDMA_READ_REQUEST/0!", "RDMA_READ_REQUEST/2!")
		if len(reqs) == 2 {
			tt.Check(t, &reqs[0], tt.RETH(wire.RETHFields{VA: b.mr.Addr() + roff, RKey: b.mr.RKey(), DMALen: size}))
			tt.Check(t, &reqs[1], tt.RETH(wire.RETHFields{VA: b.mr.Addr() + roff + 2048, RKey: b.mr.RKey(), DMALen: 1024}))
		}
		tt.CheckSeq(t, "responses", rec.Match(from(b)),
			"RDMA_READ_RESPONSE_FIRST/0", "RDMA_READ_RESPONSE_MIDDLE/1", "RDMA_READ_RESPONSE_MIDDLE/2",
			"RDMA_READ_RESPONSE_MIDDLE/3", "RDMA_READ_RESPONSE_LAST/4", "RDMA_READ_RESPONSE_LAST/2")
		if got := b.ctr().DuplicateRequest.Load(); got != 1 {
			t.Errorf("responder duplicate_request %d, want 1", got)
		}
		if got := a.ctr().Timeouts.Load(); got != 0 {
			t.Errorf("requester timeouts %d, want 0 (the gap alone triggers the retry)", got)
		}
	})
}

// A lost READ request: nothing comes back, the retransmit timer fires
// after the local ACK timeout and the request goes out again, whole.
func TestRCLostReadRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(1, ops(a, wire.RCReadRequest)))

		const size, off, roff = 3000, 0, 100
		start := n.Now()
		readSetup(a, b, 4, off, roff, size)
		wantWC(t, a.waitWC(1)[0], 4, ibv.WCSuccess, ibv.WCRDMARead)
		checkRead(t, a, b, off, roff, size)

		reqs := rec.Match(from(a))
		tt.CheckSeq(t, "requests", reqs, "RDMA_READ_REQUEST/0!", "RDMA_READ_REQUEST/0!")
		if len(reqs) == 2 {
			// Exactly one local ACK timeout after the first.
			tt.Check(t, &reqs[1], tt.At(start.Add(timeout14)),
				tt.RETH(wire.RETHFields{VA: b.mr.Addr() + roff, RKey: b.mr.RKey(), DMALen: size}))
		}
		tt.CheckSeq(t, "responses", rec.Match(from(b)),
			"RDMA_READ_RESPONSE_FIRST/0", "RDMA_READ_RESPONSE_MIDDLE/1", "RDMA_READ_RESPONSE_LAST/2")
		if got := a.ctr().Timeouts.Load(); got != 1 {
			t.Errorf("requester timeouts %d, want 1", got)
		}
		if got := b.ctr().DuplicateRequest.Load(); got != 0 {
			t.Errorf("responder duplicate_request %d, want 0: the first request never arrived", got)
		}
	})
}

// A lost last READ response: no later response reveals the gap, so only
// the timer recovers it; the re-issued READ asks for the last packet's
// bytes alone and the replay is that one LAST.
func TestRCLostReadResponseLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(1, ops(b, wire.RCReadResponseLast)))

		const size, off, roff = 5000, 64, 10000
		start := n.Now()
		readSetup(a, b, 5, off, roff, size)
		wantWC(t, a.waitWC(1)[0], 5, ibv.WCSuccess, ibv.WCRDMARead)
		checkRead(t, a, b, off, roff, size)

		reqs := rec.Match(from(a))
		tt.CheckSeq(t, "requests", reqs, "RDMA_READ_REQUEST/0!", "RDMA_READ_REQUEST/4!")
		if len(reqs) == 2 {
			// The responses of PSN 0-3 pushed the deadline out, but they
			// left at once: the timer fires one timeout after the request.
			tt.Check(t, &reqs[1], tt.At(start.Add(timeout14)),
				tt.RETH(wire.RETHFields{VA: b.mr.Addr() + roff + 4096, RKey: b.mr.RKey(), DMALen: size - 4096}))
		}
		tt.CheckSeq(t, "responses", rec.Match(from(b)),
			"RDMA_READ_RESPONSE_FIRST/0", "RDMA_READ_RESPONSE_MIDDLE/1", "RDMA_READ_RESPONSE_MIDDLE/2",
			"RDMA_READ_RESPONSE_MIDDLE/3", "RDMA_READ_RESPONSE_LAST/4", "RDMA_READ_RESPONSE_LAST/4")
		if got := a.ctr().Timeouts.Load(); got != 1 {
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
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(1, ops(b, wire.RCAck)))
		n.Fabric().AddFilter(fabric.DropNth(1, fabric.And(ops(b, wire.RCAck), fabric.PSNIs(2))))

		// A two-packet SEND whose ACK is lost.
		fill(a.buf[:1500], 3)
		b.postRecv(recvWR(b, 200, 0, 2048), recvWR(b, 201, 4096, 2048))
		a.post(sendWR(a, 1, ibv.WRSend, 0, 1500))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		got := b.waitWC(1)
		b.noWC(2 * timeout14)
		wantWC(t, got[0], 200, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "received", b.buf[:1500], a.buf[:1500])
		tt.CheckSeq(t, "SEND requests", rec.Match(from(a)),
			"SEND_FIRST/0", "SEND_LAST/1!", "SEND_FIRST/0", "SEND_LAST/1!")
		// The resent pair arrives in one read and is acknowledged by one
		// ACK with the last PSN received (the responder coalesces the
		// duplicates' ACKs; rxe sends one per duplicate).
		resps := rec.Match(from(b))
		tt.CheckSeq(t, "SEND responses", resps, "ACKNOWLEDGE/1", "ACKNOWLEDGE/1")
		tt.CheckEach(t, resps, tt.MSN(1))
		if got := b.ctr().DuplicateRequest.Load(); got != 2 {
			t.Errorf("responder duplicate_request %d, want 2", got)
		}

		// A WRITE WITH IMMEDIATE whose ACK is lost.
		rec.Reset()
		fill(a.buf[8192:8192+700], 4)
		w := rdmaWR(a, b, 2, ibv.WRRDMAWriteWithImm, 8192, 30000, 700)
		w.Imm = 0xfeedf00d
		a.post(w)
		wantWC(t, a.waitWC(1)[0], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		got = b.waitWC(1)
		b.noWC(2 * timeout14)
		wantWC(t, got[0], 201, ibv.WCSuccess, ibv.WCRecvRDMAWithImm)
		if got[0].Imm != 0xfeedf00d || got[0].ByteLen != 700 || got[0].Flags&ibv.WCWithImm == 0 {
			t.Errorf("WRITE WITH IMM completion %+v", got[0])
		}
		checkBytes(t, "written", b.buf[30000:30700], a.buf[8192:8892])
		reqs := rec.Match(from(a))
		tt.CheckSeq(t, "WRITE requests", reqs, "RDMA_WRITE_ONLY_WITH_IMMEDIATE/2!", "RDMA_WRITE_ONLY_WITH_IMMEDIATE/2!")
		tt.CheckEach(t, reqs, tt.Imm(0xfeedf00d), tt.PayloadLen(700))
		tt.CheckSeq(t, "WRITE responses", rec.Match(from(b)), "ACKNOWLEDGE/2", "ACKNOWLEDGE/2")
		if got := a.ctr().Timeouts.Load(); got != 2 {
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
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.OnMatch(fabric.And(from(a), fabric.MaskIs(wire.MaskRequest)), fabric.Duplicate))

		// SEND: one receive WQE consumed of two.
		fill(a.buf[:3000], 5)
		b.postRecv(recvWR(b, 300, 0, 4096), recvWR(b, 301, 4096, 4096))
		a.post(sendWR(a, 1, ibv.WRSend, 0, 3000))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		got := b.waitWC(1)
		b.noWC(time.Millisecond)
		wantWC(t, got[0], 300, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "SEND data", b.buf[:3000], a.buf[:3000])

		// WRITE WITH IMMEDIATE: completes once, consuming WQE 301.
		fill(a.buf[8192:8192+2500], 6)
		w := rdmaWR(a, b, 2, ibv.WRRDMAWriteWithImm, 8192, 16384, 2500)
		w.Imm = 7
		a.post(w)
		wantWC(t, a.waitWC(1)[0], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		got = b.waitWC(1)
		b.noWC(time.Millisecond)
		wantWC(t, got[0], 301, ibv.WCSuccess, ibv.WCRecvRDMAWithImm)
		checkBytes(t, "WRITE data", b.buf[16384:16384+2500], a.buf[8192:8192+2500])

		// READ: the copy is answered again, the requester drops the stale
		// second reply.
		readSetup(a, b, 3, 20000, 24000, 2100)
		wantWC(t, a.waitWC(1)[0], 3, ibv.WCSuccess, ibv.WCRDMARead)
		checkBytes(t, "READ data", a.buf[20000:22100], b.buf[24000:26100])
		n.Settle()
		if got := rec.Count(ops(b, wire.RCReadResponseLast)); got != 2 {
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
		a.post(wrs...)
		wcs := a.waitWC(nfa)
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
		// Every atomic ACK, original or replayed, returns the value the
		// one execution found.
		first := rec.Match(ops(a, wire.RCFetchAdd))[0].Wire.PSN()
		acks := rec.Match(ops(b, wire.RCAtomicAck))
		if len(acks) != 2*nfa {
			t.Errorf("%d atomic ACKs for %d duplicated fetch-adds", len(acks), nfa)
		}
		for i := range acks {
			tt.Check(t, &acks[i], tt.AtomicOrig(uint64(acks[i].Wire.PSN().Diff(first))))
		}

		// CMP_SWAP chain: each swaps i for i+1 and must see i.
		const ncas = 30
		wrs = wrs[:0]
		for i := range ncas {
			w := rdmaWR(a, b, uint64(2000+i), ibv.WRAtomicCmpAndSwp, res+8*i, cnt, 8)
			w.CompareAdd, w.Swap = uint64(nfa+i), uint64(nfa+i+1)
			wrs = append(wrs, w)
		}
		a.post(wrs...)
		for i, wc := range a.waitWC(ncas) {
			wantWC(t, wc, uint64(2000+i), ibv.WCSuccess, ibv.WCCompSwap)
			if orig := u64(a.buf[res+8*i:]); orig != uint64(nfa+i) {
				t.Errorf("cmp-swap %d returned %d, want %d", i, orig, nfa+i)
			}
		}
		if got := u64(b.buf[cnt:]); got != nfa+ncas {
			t.Errorf("value %d after the cmp-swap chain, want %d", got, nfa+ncas)
		}

		n.Settle()
		reqs := rec.Count(fabric.And(from(a), fabric.MaskIs(wire.MaskRequest)))
		dup := b.ctr().DuplicateRequest.Load()
		// The recorder sees each request once, before the fabric copies it.
		if uint64(reqs) != dup {
			t.Errorf("%d requests sent, each delivered twice, but the responder saw %d duplicates", reqs, dup)
		}
		wantState(t, "requester", a, ibv.QPStateRTS)
		wantState(t, "responder", b, ibv.QPStateRTS)
	})
}
