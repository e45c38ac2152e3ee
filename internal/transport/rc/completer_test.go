package rc

// Completer unit tests: responses built by hand and fed to a requester QP
// one pass at a time (rxe_comp.c check_psn, check_ack).

import (
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// post posts WRs on the harness QP, each of n bytes at off in its MR.
func (h *harness) post(wrs ...ibv.SendWR) {
	h.t.Helper()
	if _, _, err := h.qp.PostSend(wrs); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) wr(id uint64, op ibv.WROpcode, off, n int) ibv.SendWR {
	return ibv.SendWR{WRID: id, Opcode: op, Flags: ibv.SendSignaled,
		SGList:     []ibv.SGE{{Addr: 0x10000 + uint64(off), Length: uint32(n), LKey: h.mr.LKey()}},
		RemoteAddr: 0x9000000, RKey: 0x1234}
}

// respond delivers a response from the peer.
func (h *harness) respond(op wire.Opcode, psn wire.PSN, syn wire.Syndrome, payload []byte) {
	h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: op, PSN: psn}, AETH: wire.AETHFields{Syndrome: syn}}, payload)
}

// completions returns and forgets the completions so far.
func (h *harness) completions() []ibv.WorkCompletion {
	wcs := h.cq.wcs
	h.cq.wcs = nil
	return wcs
}

func wantStatuses(t *testing.T, got []ibv.WorkCompletion, want ...ibv.WCStatus) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("completions %+v, want statuses %v", got, want)
	}
	for i := range want {
		if got[i].Status != want[i] || got[i].WRID != uint64(i+1) && want[i] == ibv.WCSuccess {
			t.Errorf("completion %d: %+v, want status %v", i, got[i], want[i])
		}
	}
}

// One ACK of the last PSN completes every SEND and WRITE up to it
// (coalesced ACKs, IBTA 9.7.5.1.3); responses for PSNs never sent and
// repeated ones are dropped (rxe check_psn).
func TestCompleterCoalescedAndStale(t *testing.T) {
	h := newHarness(t)
	h.post(h.wr(1, ibv.WRSend, 0, 100), h.wr(2, ibv.WRRDMAWrite, 0, 2000), h.wr(3, ibv.WRSend, 0, 10))
	check(t, "requests", h.process(),
		"RC_SEND_ONLY/0", "RC_RDMA_WRITE_FIRST/1", "RC_RDMA_WRITE_LAST/2", "RC_SEND_ONLY/3")

	h.respond(wire.RCAck, 7, wire.AckUnlimited, nil) // a PSN never sent
	h.process()
	if got := h.completions(); len(got) != 0 {
		t.Fatalf("a ghost ACK completed %+v", got)
	}
	h.respond(wire.RCAck, 2, wire.AckUnlimited, nil)
	h.process()
	wantStatuses(t, h.completions(), ibv.WCSuccess, ibv.WCSuccess)
	h.respond(wire.RCAck, 2, wire.AckUnlimited, nil) // again
	h.respond(wire.RCAck, 3, wire.AckUnlimited, nil)
	h.process()
	if got := h.completions(); len(got) != 1 || got[0].WRID != 3 {
		t.Fatalf("completions %+v, want WR 3 alone", got)
	}
	if got := h.ctr.DropResponse.Load(); got != 2 {
		t.Errorf("drop_response %d, want 2 (the ghost and the repeat)", got)
	}
}

// RequestsInFlight counts the WQEs sent and not yet acknowledged: none
// posted only, each once its packets left, those an RNR NAK rewound too,
// fewer as ACKs complete them.
func TestRequestsInFlight(t *testing.T) {
	h := newHarness(t)
	want := func(what string, k int) {
		t.Helper()
		if got := h.qp.RequestsInFlight(); got != k {
			t.Errorf("%s: RequestsInFlight %d, want %d", what, got, k)
		}
	}
	want("new", 0)
	h.post(h.wr(1, ibv.WRRDMAWrite, 0, 8), h.wr(2, ibv.WRSend, 0, 2000), h.wr(3, ibv.WRRDMARead, 0, 8))
	want("posted", 0)
	h.process()
	want("sent", 3)
	// An RNR NAK at PSN 1 acknowledges the WRITE and rewinds the
	// requester to the SEND, which waits for the RNR timer: rewound, the
	// SEND and the READ still count.
	h.respond(wire.RCAck, 1, wire.RNRNAK(1), nil)
	if got := h.process(); len(got) != 0 {
		t.Fatalf("sent %v before the RNR timer", got)
	}
	want("the WRITE acknowledged, the rest rewound", 2)
	h.respond(wire.RCAck, 2, wire.AckUnlimited, nil)
	h.process()
	want("the SEND acknowledged", 1) // the READ waits for its data
	h.respond(wire.RCReadResponseOnly, 3, wire.AckUnlimited, make([]byte, 8))
	h.process()
	want("the READ answered", 0)
	if got := h.completions(); len(got) != 3 {
		t.Errorf("completions %+v, want 3", got)
	}
}

// NAK codes: the three defined fatal ones map to their statuses, and the
// others (0x64 Invalid RD Request, reserved codes) to Remote Operational
// Error as rxe maps them (check_ack default); a reserved syndrome type is
// dropped.
func TestCompleterNakCodes(t *testing.T) {
	for _, c := range []struct {
		syn  wire.Syndrome
		want ibv.WCStatus
	}{
		{wire.NakInvalidRequest, ibv.WCRemInvReqErr},
		{wire.NakRemoteAccess, ibv.WCRemAccessErr},
		{wire.NakRemoteOp, ibv.WCRemOpErr},
		{wire.NakInvalidRDReq, ibv.WCRemOpErr},
		{0x6a, ibv.WCRemOpErr},
		{0x41, 0xff}, // reserved type: ignored
	} {
		t.Run(c.syn.String(), func(t *testing.T) {
			h := newHarness(t)
			h.post(h.wr(1, ibv.WRSend, 0, 10), h.wr(2, ibv.WRSend, 0, 10))
			h.process()
			h.respond(wire.RCAck, 1, c.syn, nil)
			h.process()
			got := h.completions()
			if c.want == 0xff {
				if len(got) != 0 || h.qp.State() != ibv.QPStateRTS {
					t.Fatalf("reserved syndrome: completions %+v, state %v", got, h.qp.State())
				}
				return
			}
			// The NAK acknowledges WR 1 and fails WR 2.
			if len(got) != 2 || got[0].Status != ibv.WCSuccess || got[1].WRID != 2 || got[1].Status != c.want {
				t.Fatalf("completions %+v, want WR 1 success and WR 2 %v", got, c.want)
			}
			if s := h.qp.State(); s != ibv.QPStateErr {
				t.Errorf("state %v, want ERR", s)
			}
		})
	}
}

// A READ response whose length or opcode disagrees with the READ fails it
// with BAD_RESP_ERR (rxe check_ack → COMPST_ERROR).
func TestCompleterBadResponse(t *testing.T) {
	for _, c := range []struct {
		name    string
		op      wire.Opcode
		payload int
	}{
		{"short ONLY", wire.RCReadResponseOnly, 99},
		{"long ONLY", wire.RCReadResponseOnly, 101},
		{"FIRST for a one-packet READ", wire.RCReadResponseFirst, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.post(h.wr(1, ibv.WRRDMARead, 0, 100))
			check(t, "request", h.process(), "RC_RDMA_READ_REQUEST/0")
			if c.op == wire.RCReadResponseFirst {
				h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: c.op}, AETH: wire.AETHFields{Syndrome: wire.AckUnlimited}},
					make([]byte, 1024))
			} else {
				h.respond(c.op, 0, wire.AckUnlimited, make([]byte, c.payload))
			}
			h.process()
			got := h.completions()
			if len(got) != 1 || got[0].Status != ibv.WCBadRespErr {
				t.Fatalf("completions %+v, want one BAD_RESP_ERR", got)
			}
		})
	}
}

// A READ answered in part and then retried asks for the rest only, and a
// replayed tail that starts with READ_RESPONSE_FIRST (as some HCAs send
// it) is accepted as well as rxe's MIDDLE/LAST.
func TestCompleterReadResumeFirstOrMiddle(t *testing.T) {
	for _, op := range []wire.Opcode{wire.RCReadResponseFirst, wire.RCReadResponseMiddle} {
		t.Run(op.String(), func(t *testing.T) {
			h := newHarness(t)
			for i := range h.buf[:8192] {
				h.buf[i] = 0
			}
			h.post(h.wr(1, ibv.WRRDMARead, 0, 3000))
			check(t, "request", h.process(), "RC_RDMA_READ_REQUEST/0")
			one := func(b byte, n int) []byte {
				p := make([]byte, n)
				for i := range p {
					p[i] = b
				}
				return p
			}
			h.respond(wire.RCReadResponseFirst, 0, wire.AckUnlimited, one(1, 1024))
			h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCReadResponseLast, PSN: 2},
				AETH: wire.AETHFields{Syndrome: wire.AckUnlimited}}, one(3, 952)) // PSN 1 missing
			reqs := h.process()
			check(t, "re-issued READ", reqs, "RC_RDMA_READ_REQUEST/1")
			// The replay of PSNs 1 and 2.
			if op == wire.RCReadResponseFirst {
				h.respond(op, 1, wire.AckUnlimited, one(2, 1024))
			} else {
				h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: op, PSN: 1}}, one(2, 1024))
			}
			h.respond(wire.RCReadResponseLast, 2, wire.AckUnlimited, one(3, 952))
			h.process()
			got := h.completions()
			if len(got) != 1 || got[0].Status != ibv.WCSuccess || got[0].ByteLen != 3000 {
				t.Fatalf("completions %+v", got)
			}
			for i, b := range h.buf[:3000] {
				if want := byte(1 + i/1024); b != want {
					t.Fatalf("byte %d is %d, want %d", i, b, want)
				}
			}
		})
	}
}

// The requester keeps at most MaxUnackedPSNs packets unacknowledged: it
// stops at the window's edge and sends as many more as an ACK frees.
func TestRequesterWindow(t *testing.T) {
	h := newHarness(t)
	const perWrite = 64 // 64 KiB at path MTU 1024
	n := MaxUnackedPSNs/perWrite + 2
	for i := range n {
		h.post(h.wr(uint64(i+1), ibv.WRRDMAWrite, 0, perWrite*1024))
	}
	sent := h.process()
	if len(sent) != MaxUnackedPSNs || sent[len(sent)-1] != "RC_RDMA_WRITE_LAST/"+itoa(MaxUnackedPSNs-1) {
		t.Fatalf("sent %d packets before any ACK, the last %q; want the window, %d", len(sent), sent[len(sent)-1], MaxUnackedPSNs)
	}
	h.respond(wire.RCAck, perWrite-1, wire.AckUnlimited, nil) // the first WRITE
	sent = h.process()
	if len(sent) != perWrite || sent[0] != "RC_RDMA_WRITE_FIRST/"+itoa(MaxUnackedPSNs) {
		t.Fatalf("an ACK of %d packets let %d more go (first %q)", perWrite, len(sent), sent[0])
	}
	if got := h.completions(); len(got) != 1 || got[0].WRID != 1 {
		t.Errorf("completions %+v, want WR 1", got)
	}
	if got := h.process(); len(got) != 0 {
		t.Errorf("sent %v with the window full", got)
	}
}

// After a timeout the go-back-N resends at most RetryUnackedPSNs packets;
// an acknowledgement then grows the window by half the PSNs it covers.
func TestRequesterRetryWindow(t *testing.T) {
	h := newHarness(t) // timeout 14
	timeout := time.Duration(4096<<14) * time.Nanosecond
	const perWrite = 64
	for i := range MaxUnackedPSNs/perWrite + 2 {
		h.post(h.wr(uint64(i+1), ibv.WRRDMAWrite, 0, perWrite*1024))
	}
	if sent := h.process(); len(sent) != MaxUnackedPSNs {
		t.Fatalf("sent %d packets before any ACK, want the window, %d", len(sent), MaxUnackedPSNs)
	}
	// ends is the first and last of what a pass sent ("" when nothing).
	ends := func(sent []string) (first, last string) {
		if len(sent) == 0 {
			return "", ""
		}
		return sent[0], sent[len(sent)-1]
	}
	h.clk.Advance(timeout)
	sent := h.process()
	if first, last := ends(sent); len(sent) != RetryUnackedPSNs || first != "RC_RDMA_WRITE_FIRST/0" ||
		last != "RC_RDMA_WRITE_LAST/"+itoa(RetryUnackedPSNs-1) {
		t.Fatalf("the timeout resent %d packets (%q .. %q), want %d from PSN 0", len(sent), first, last, RetryUnackedPSNs)
	}
	if got := h.ctr.Timeouts.Load(); got != 1 {
		t.Fatalf("timeouts %d, want 1", got)
	}
	// The same ACK that would have moved before: the original first
	// WRITE's, late. It completes WR 1 and grows the window by half its
	// 64 PSNs: the retry goes on from PSN 128 up to 64 + 128 + 32.
	h.respond(wire.RCAck, perWrite-1, wire.AckUnlimited, nil)
	sent = h.process()
	first, _ := ends(sent)
	if want := perWrite + perWrite/2; len(sent) != want || first != "RC_RDMA_WRITE_FIRST/"+itoa(RetryUnackedPSNs) {
		t.Fatalf("after the ACK: %d packets from %q, want %d from PSN %d", len(sent), first, want, RetryUnackedPSNs)
	}
	if got := h.completions(); len(got) != 1 || got[0].WRID != 1 || got[0].Status != ibv.WCSuccess {
		t.Errorf("completions %+v, want WR 1", got)
	}
}

// A re-ask leaves to a go-back-N under way the READs it has still to
// send again: after a timeout the window (RetryUnackedPSNs) lets the
// retry resend READs 0 and 1 only, and a late response of READ 3 that
// then shows every earlier response missing re-asks none of READs 2 and
// 3, which the retry sends when the window opens (asked for twice, each
// reply came twice; with a responder slower than the network, rxe in a
// guest, the replies piled up behind each other and a run received
// 6-9 packets for each one needed).
func TestReaskLeavesRewoundReadsToRetry(t *testing.T) {
	h := newHarness(t) // timeout 14, MaxRdAtomic 4, path MTU 1024
	timeout := time.Duration(4096<<14) * time.Nanosecond
	const size, per = 65536, 64 // 64 responses a READ
	for i := range 4 {
		h.post(h.wr(uint64(i+1), ibv.WRRDMARead, 0, size))
	}
	check(t, "the READs", h.process(), "RC_RDMA_READ_REQUEST/0", "RC_RDMA_READ_REQUEST/64",
		"RC_RDMA_READ_REQUEST/128", "RC_RDMA_READ_REQUEST/192")
	h.clk.Advance(timeout)
	check(t, "the timeout's go-back-N, in a window of 128", h.process(),
		"RC_RDMA_READ_REQUEST/0", "RC_RDMA_READ_REQUEST/64")
	h.respond(wire.RCReadResponseLast, 4*per-1, wire.AckUnlimited, make([]byte, 1024))
	for _, p := range h.process() {
		if p == "RC_RDMA_READ_REQUEST/128" || p == "RC_RDMA_READ_REQUEST/192" {
			t.Errorf("a late response re-asked %s, which the go-back-N has still to send", p)
		}
	}
}

// An RNR wait holds the early retry (QP.armProbeLocked): with the window
// shrunk by losses and a round trip measured, a READ response that comes
// during the wait moves the completer, and the early retry is not armed;
// when the timer fires, it is not set again for a time already past,
// which would fire it at once, for ever.
func TestEarlyRetryHeldByRNRWait(t *testing.T) {
	h := newHarness(t)
	h.post(h.wr(1, ibv.WRRDMARead, 0, 2048), h.wr(2, ibv.WRSend, 4096, 8))
	if sent := h.process(); len(sent) != 2 {
		t.Fatalf("sent %v, want the READ request and the SEND", sent)
	}
	h.qp.mu.Lock()
	h.qp.comp.srtt, h.qp.comp.win = 100*time.Microsecond, 64 // after losses
	h.qp.mu.Unlock()
	// The SEND's RNR NAK overtakes the READ's responses.
	h.respond(wire.RCAck, 2, wire.RNRNAK(14), nil)
	h.respond(wire.RCReadResponseFirst, 0, wire.AckUnlimited, make([]byte, 1024))
	h.process()
	waiting := func() bool {
		h.qp.mu.Lock()
		defer h.qp.mu.Unlock()
		return h.qp.req.rnrWait
	}
	if !waiting() {
		t.Fatal("no RNR wait")
	}
	for i := 0; waiting(); i++ {
		if i == 50 {
			t.Fatal("the RNR wait did not end")
		}
		next, ok := h.clk.NextDeadline()
		if !ok {
			break
		}
		if !next.After(h.clk.Now()) {
			t.Fatalf("a timer is due at %v, now %v: armed for a time already past", next, h.clk.Now())
		}
		h.clk.AdvanceToNext()
		h.process()
	}
	if got := h.ctr.EarlyRetries.Load(); got != 0 {
		t.Errorf("%d early retries during the RNR wait, want none", got)
	}
}

// The window's rules (completer.growLocked, lossLocked), PSN by PSN:
// untouched at MaxUnackedPSNs while nothing is lost; at a loss of a SEND
// or WRITE, half of it, and at most what was acknowledged since the last
// loss; back to ssthresh fast, and beyond it by one PSN a window's worth
// acknowledged (RFC 5681 3.1); a timeout is capped at RetryUnackedPSNs,
// not at what was acknowledged; never below minUnackedPSNs.
func TestWindowRules(t *testing.T) {
	h := newHarness(t)
	c := &h.qp.comp // an empty send queue: every loss is a SEND's or WRITE's
	ack := func(n int32) {
		before := c.psn
		c.psn = c.psn.Add(uint32(n))
		c.growLocked(before)
	}
	want := func(step string, win, ssthresh int32) {
		t.Helper()
		if c.win != win || c.ssthresh != ssthresh {
			t.Fatalf("%s: window %d, ssthresh %d; want %d, %d", step, c.win, c.ssthresh, win, ssthresh)
		}
	}
	want("new", MaxUnackedPSNs, MaxUnackedPSNs)
	ack(10 * MaxUnackedPSNs)
	want("lossless", MaxUnackedPSNs, MaxUnackedPSNs)

	c.lossLocked(h.qp, false)
	want("a loss after many PSNs", MaxUnackedPSNs/2, MaxUnackedPSNs/2)
	ack(MaxUnackedPSNs/2 - 1)
	want("a window's worth less one", MaxUnackedPSNs/2, MaxUnackedPSNs/2)
	ack(1)
	want("a window's worth", MaxUnackedPSNs/2+1, MaxUnackedPSNs/2)

	c.lossLocked(h.qp, false)
	want("a loss a window's worth after the last", MaxUnackedPSNs/4, MaxUnackedPSNs/4)
	ack(20)
	c.lossLocked(h.qp, false)
	want("a loss 20 PSNs after the last", 20, MaxUnackedPSNs/8)
	ack(20)
	want("slow start", 30, MaxUnackedPSNs/8)
	ack(1000)
	want("back to ssthresh", MaxUnackedPSNs/8, MaxUnackedPSNs/8)

	for range 10 {
		ack(3)
		c.lossLocked(h.qp, false)
	}
	want("losses every 3 PSNs", minUnackedPSNs, minUnackedPSNs)

	c.win, c.ssthresh = MaxUnackedPSNs, MaxUnackedPSNs
	c.lossLocked(h.qp, true)
	want("a timeout", RetryUnackedPSNs, MaxUnackedPSNs/2)
	ack(2 * RetryUnackedPSNs)
	want("after the timeout", MaxUnackedPSNs/2, MaxUnackedPSNs/2)
}
