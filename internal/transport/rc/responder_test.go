package rc

// Unit tests that drive one QP's Process pass by hand, so that which
// packets one pass sees is exact rather than up to goroutine scheduling:
// ACK coalescing and the ordering of ACKs, NAKs and read responses.

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

var (
	localAddr = netip.MustParseAddr("10.0.0.2")
	peerAddr  = netip.MustParseAddr("10.0.0.1")
)

const peerQPN = 0x99

// sink is a transport.Output that keeps what the QP sends, parsed.
type sink struct {
	buf  [transport.MaxDatagram]byte
	sent []wire.Packet
	last []wire.Packet // what the last descs call described
}

func (s *sink) Buf() []byte { return s.buf[:] }

func (s *sink) Send(n int, _ *wire.Encap) {
	var p wire.Packet
	if err := wire.Parse(append([]byte(nil), s.buf[:n]...), &p); err != nil {
		panic(err)
	}
	s.sent = append(s.sent, p)
}

// descs describes the packets sent: opcode, PSN and non-ACK syndromes.
func (s *sink) descs() []string {
	s.last = s.sent
	var out []string
	for i := range s.sent {
		p := &s.sent[i]
		d := p.Opcode.String() + "/" + itoa(uint32(p.PSN()))
		if a := p.AETH(); a != nil && !a.Syndrome().IsACK() {
			d += " " + a.Syndrome().String()
		}
		out = append(out, d)
	}
	s.sent = nil
	return out
}

func itoa(v uint32) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}

// cqs is a transport.CQ keeping completions.
type cqs struct{ wcs []ibv.WorkCompletion }

func (c *cqs) Push(wc *ibv.WorkCompletion, _ bool) bool {
	c.wcs = append(c.wcs, *wc)
	return true
}

// harness is one RC QP in RTS with a 64 KiB MR, fed packets by hand.
type harness struct {
	t    *testing.T
	qp   *QP
	mr   *mem.MR
	buf  []byte
	cq   cqs
	rq   *transport.RecvQueue
	ctr  transport.Counters
	clk  *clock.Manual
	out  sink
	peer wire.Encap
}

func newHarness(t *testing.T) *harness { return newHarnessOf(t, ibv.QPTypeRC) }

// newHarnessOf is newHarness with a QP of type typ (RC or UC).
func newHarnessOf(t *testing.T, typ ibv.QPType) *harness {
	h := &harness{t: t, clk: clock.NewManual(time.Unix(0, 0)), buf: make([]byte, 1<<16)}
	tbl := mem.NewTable(mem.Limits{})
	pd, err := tbl.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	all := ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	if h.mr, err = tbl.RegMR(pd, h.buf, 0x10000, true, all); err != nil {
		t.Fatal(err)
	}
	h.rq = transport.NewRecvQueue(64, 4)
	h.qp, err = New(Config{QPN: 0x11, Type: typ, PD: pd, Mem: tbl, SendCQ: &h.cq, RecvCQ: &h.cq,
		RQ: h.rq, Cap: ibv.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4},
		LocalAddr: localAddr, Clock: h.clk, Counters: &h.ctr})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		a    ibv.QPAttr
		mask ibv.AttrMask
	}{
		{ibv.QPAttr{State: ibv.QPStateInit, AccessFlags: all}, ibv.QPAttrState | ibv.QPAttrAccessFlags},
		{ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: peerQPN, MaxDestRdAtomic: 4,
			AHAttr: ibv.AHAttr{GRH: ibv.GlobalRoute{DGID: peerAddr}}},
			ibv.QPAttrState | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrMaxDestRdAtomic |
				ibv.QPAttrAV | ibv.QPAttrRQPSN},
		{ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			ibv.QPAttrState | ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry |
				ibv.QPAttrMaxQPRdAtomic | ibv.QPAttrSQPSN},
	} {
		if typ == ibv.QPTypeUC { // no RC-only attributes
			step.mask &^= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic
		}
		if _, err := h.qp.Modify(&step.a, step.mask); err != nil {
			t.Fatal(err)
		}
	}
	h.peer = wire.Encap{Src: peerAddr, Dst: localAddr, SrcPort: 0xC000, DstPort: wire.UDPPort, HopLimit: 64}
	return h
}

// deliver queues a request from the peer without processing it.
func (h *harness) deliver(hd wire.Headers, payload []byte) {
	h.t.Helper()
	hd.BTH.DestQP, hd.BTH.PKey = h.qp.QPN(), wire.DefaultPKey
	p := new(transport.RxPacket)
	n, err := wire.Build(p.Buffer(), &h.peer, &hd, payload)
	if err != nil {
		h.t.Fatal(err)
	}
	p.Encap, p.Data = h.peer, p.Buffer()[:n]
	if err := wire.Parse(p.Data, &p.Pkt); err != nil {
		h.t.Fatal(err)
	}
	if !h.qp.Deliver(p) {
		h.t.Fatal("inbox full")
	}
}

// process runs Process until it reports no more work and returns what
// the QP sent.
func (h *harness) process() []string {
	for h.qp.Process(&h.out) {
	}
	return h.out.descs()
}

func sendOnly(psn wire.PSN, ackReq bool) wire.Headers {
	return wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PSN: psn, AckReq: ackReq}}
}

func (h *harness) postRecvs(n int) {
	for i := range n {
		if _, err := h.rq.Post([]ibv.RecvWR{{WRID: uint64(i),
			SGList: []ibv.SGE{{Addr: 0x10000 + uint64(i)*256, Length: 256, LKey: h.mr.LKey()}}}}); err != nil {
			h.t.Fatal(err)
		}
	}
}

func check(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// Several AckReq packets processed in one pass are acknowledged by one
// ACK of the highest PSN (IBTA 9.7.5.1.3 coalesced ACKs; rxe counts the
// ones it holds back as ack_deferred).
func TestAckCoalescing(t *testing.T) {
	h := newHarness(t)
	h.postRecvs(8)
	for psn := range wire.PSN(5) {
		h.deliver(sendOnly(psn, true), []byte("x"))
	}
	check(t, "one pass of five AckReq SENDs", h.process(), "RC_ACKNOWLEDGE/4")
	if got := h.ctr.AckDeferred.Load(); got != 4 {
		t.Errorf("ack_deferred %d, want 4", got)
	}
	if len(h.cq.wcs) != 5 {
		t.Errorf("%d receive completions, want 5", len(h.cq.wcs))
	}

	// Packets without AckReq are not acknowledged on their own.
	h.deliver(sendOnly(5, false), nil)
	h.deliver(sendOnly(6, false), nil)
	check(t, "SENDs without AckReq", h.process())
	h.deliver(sendOnly(7, true), nil)
	check(t, "then one with AckReq", h.process(), "RC_ACKNOWLEDGE/7")
	if got := h.ctr.AckDeferred.Load(); got != 4 {
		t.Errorf("ack_deferred %d, want still 4", got)
	}
}

// A pending coalesced ACK goes out before anything else the responder
// sends in the pass: a NAK, a duplicate's re-ACK, a READ's responses and
// an atomic ACK, so responses leave in PSN order.
func TestAckBeforeOtherResponses(t *testing.T) {
	h := newHarness(t)
	h.postRecvs(8)

	h.deliver(sendOnly(0, true), nil)
	h.deliver(sendOnly(1, true), nil)
	h.deliver(sendOnly(3+maxHeldRequests, true), nil) // a gap beyond the reorder window's reach
	check(t, "ACK then sequence NAK", h.process(), "RC_ACKNOWLEDGE/1", "RC_ACKNOWLEDGE/2 NAK_PSN_SEQ_ERR")

	h.deliver(sendOnly(2, true), nil)
	h.deliver(sendOnly(0, true), nil) // duplicate
	check(t, "one ACK for a packet and a duplicate after it", h.process(), "RC_ACKNOWLEDGE/2")
	h.deliver(sendOnly(1, false), nil) // duplicate, no AckReq
	check(t, "re-ACK of a duplicate alone", h.process(), "RC_ACKNOWLEDGE/2")

	h.deliver(sendOnly(3, true), nil)
	h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCReadRequest, PSN: 4},
		RETH: wire.RETHFields{VA: 0x10000, RKey: h.mr.RKey(), DMALen: 1500}}, nil)
	h.deliver(sendOnly(6, true), nil)
	check(t, "ACK, READ responses, then the SEND after the READ", h.process(),
		"RC_ACKNOWLEDGE/3", "RC_RDMA_READ_RESPONSE_FIRST/4", "RC_RDMA_READ_RESPONSE_LAST/5", "RC_ACKNOWLEDGE/6")

	h.deliver(sendOnly(7, true), nil)
	h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCFetchAdd, PSN: 8},
		AtomicETH: wire.AtomicETHFields{VA: 0x10000 + 4096, RKey: h.mr.RKey(), SwapAdd: 3}}, nil)
	check(t, "ACK then atomic ACK", h.process(), "RC_ACKNOWLEDGE/7", "RC_ATOMIC_ACKNOWLEDGE/8")

	h.deliver(sendOnly(9, true), nil)
	h.deliver(sendOnly(10, true), nil) // takes the last receive WQE
	h.deliver(sendOnly(11, true), nil) // finds none
	check(t, "ACK then RNR NAK", h.process(), "RC_ACKNOWLEDGE/10", "RC_ACKNOWLEDGE/11 RNR_NAK(timer=0)")
	if s := h.qp.State(); s != ibv.QPStateRTS {
		t.Errorf("state %v, want RTS", s)
	}
}

// A window sent again after a timeout is a run of duplicates: none is
// executed again (C9-105), and a pass of them, with the new packets
// after them, is acknowledged once, by the coalesced ACK of the last
// PSN accepted, where rxe sends one identical ACK per duplicate.
func TestDuplicateWindowOneAck(t *testing.T) {
	h := newHarness(t)
	h.postRecvs(4)
	window := func() {
		rkey := h.mr.RKey()
		h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteFirst, PSN: 0},
			RETH: wire.RETHFields{VA: 0x10000 + 0x8000, RKey: rkey, DMALen: 2500}}, bytes.Repeat([]byte{1}, 1024))
		h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteMiddle, PSN: 1}}, bytes.Repeat([]byte{2}, 1024))
		h.deliver(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteLast, PSN: 2, AckReq: true}}, bytes.Repeat([]byte{3}, 452))
		h.deliver(sendOnly(3, true), []byte("x"))
	}
	window()
	check(t, "the window", h.process(), "RC_ACKNOWLEDGE/3")
	w := h.buf[0x8000:]
	if w[0] != 1 || w[1024] != 2 || w[2499] != 3 {
		t.Fatalf("WRITE not placed: %d %d %d", w[0], w[1024], w[2499])
	}
	w[0], w[2499] = 0xee, 0xee // a re-execution would overwrite these

	window()                          // all duplicates
	h.deliver(sendOnly(4, true), nil) // and a new SEND in the same pass
	check(t, "the window again and a new SEND", h.process(), "RC_ACKNOWLEDGE/4")
	if msn := h.out.last[0].AETH().MSN(); msn != 3 {
		t.Errorf("ACK's MSN %d, want 3 (the WRITE and two SENDs)", msn)
	}
	window() // duplicates alone
	check(t, "the window a third time", h.process(), "RC_ACKNOWLEDGE/4")
	if got := h.ctr.DuplicateRequest.Load(); got != 8 {
		t.Errorf("duplicate_request %d, want 8", got)
	}
	if w[0] != 0xee || w[2499] != 0xee {
		t.Errorf("a duplicate WRITE was executed again")
	}
	if len(h.cq.wcs) != 2 {
		t.Errorf("%d receive completions, want 2 (a duplicate SEND completes nothing)", len(h.cq.wcs))
	}
}

func readReq(psn wire.PSN, va uint64, rkey, n uint32) wire.Headers {
	return wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCReadRequest, PSN: psn},
		RETH: wire.RETHFields{VA: va, RKey: rkey, DMALen: n}}
}

// Duplicate READs are served from the responder-resource ring, which
// holds the last max_dest_rd_atomic READs and atomics (recycled FIFO); a
// duplicate whose resource is gone, or that asks for more than the
// original or with another rkey, is silently dropped (class D; rxe
// duplicate_request, find_resource). A duplicate atomic gets its first
// result again without a second execution.
func TestDuplicateReadResources(t *testing.T) {
	h := newHarness(t) // max_dest_rd_atomic 4
	rkey := h.mr.RKey()
	for i := range wire.PSN(5) {
		h.deliver(readReq(2*i, 0x10000+uint64(i)*4096, rkey, 2048), nil) // two PSNs each
	}
	if got := len(h.process()); got != 10 {
		t.Fatalf("%d read responses, want 10", got)
	}
	h.deliver(readReq(0, 0x10000, rkey, 2048), nil) // its resource was recycled
	check(t, "duplicate of the evicted READ", h.process())
	h.deliver(readReq(2, 0x10000+4096, rkey, 2048), nil)
	check(t, "duplicate of a kept READ", h.process(), "RC_RDMA_READ_RESPONSE_FIRST/2", "RC_RDMA_READ_RESPONSE_LAST/3")
	h.deliver(readReq(5, 0x10000+2*4096+1024, rkey, 1024), nil)
	check(t, "its second half", h.process(), "RC_RDMA_READ_RESPONSE_LAST/5")
	h.deliver(readReq(6, 0x10000+3*4096, rkey^1, 2048), nil)
	check(t, "another rkey", h.process())
	h.deliver(readReq(6, 0x10000+3*4096, rkey, 4096), nil)
	check(t, "more than the original", h.process())
	h.deliver(readReq(7, 0x10000+3*4096+1024, rkey, 2048), nil)
	check(t, "past the original's end", h.process())
	if got := h.ctr.DuplicateRequest.Load(); got != 6 {
		t.Errorf("duplicate_request %d, want 6", got)
	}

	fa := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCFetchAdd, PSN: 10},
		AtomicETH: wire.AtomicETHFields{VA: 0x10000 + 8192, RKey: rkey, SwapAdd: 5}}
	binary.NativeEndian.PutUint64(h.buf[8192:], 7)
	h.deliver(fa, nil)
	h.deliver(fa, nil)
	check(t, "atomic and its duplicate", h.process(), "RC_ATOMIC_ACKNOWLEDGE/10", "RC_ATOMIC_ACKNOWLEDGE/10")
	for i := range h.out.last {
		if got := h.out.last[i].AtomicAckETH().Orig(); got != 7 {
			t.Errorf("atomic ACK %d returns %d, want the original 7", i, got)
		}
	}
	if got := binary.NativeEndian.Uint64(h.buf[8192:]); got != 12 {
		t.Errorf("value %d after one fetch-add of 5 to 7 and its duplicate, want 12", got)
	}
	if s := h.qp.State(); s != ibv.QPStateRTS {
		t.Errorf("state %v, want RTS", s)
	}
}

func atomicWrite(psn wire.PSN, va uint64, rkey uint32) wire.Headers {
	return wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCAtomicWrite, PSN: psn, AckReq: true},
		RETH: wire.RETHFields{VA: va, RKey: rkey, DMALen: 8}}
}

// ATOMIC WRITE and FLUSH take responder resources like READ and atomics
// (rxe_prepare_res): a duplicate is answered with an empty READ
// RESPONSE ONLY and not executed again; once the ring recycled its entry,
// or when it names another address or rkey, it is dropped (class D).
func TestDuplicateAtomicWriteFlushResources(t *testing.T) {
	h := newHarness(t) // max_dest_rd_atomic 4
	rkey := h.mr.RKey()
	all := ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	if _, err := h.qp.Modify(&ibv.QPAttr{AccessFlags: all | ibv.AccessFlushGlobal}, ibv.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	fmr, err := h.qp.cfg.Mem.RegMR(h.qp.cfg.PD, make([]byte, 64), 0x90000, true, ibv.AccessFlushGlobal)
	if err != nil {
		t.Fatal(err)
	}
	h.deliver(atomicWrite(0, 0x10000, rkey), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	flush := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCFlush, PSN: 1, AckReq: true},
		FETH: wire.FETHFields{PlacementType: wire.FlushGlobal, Selectivity: wire.FlushMR}, RETH: wire.RETHFields{RKey: fmr.RKey()}}
	h.deliver(flush, nil)
	check(t, "ATOMIC_WRITE then FLUSH", h.process(), "RC_RDMA_READ_RESPONSE_ONLY/0", "RC_RDMA_READ_RESPONSE_ONLY/1")
	for i, want := range []uint32{1, 2} {
		if got := h.out.last[i].AETH().MSN(); got != want {
			t.Errorf("answer %d MSN %d, want %d", i, got, want)
		}
	}
	copy(h.buf, []byte{2, 2, 2, 2, 2, 2, 2, 2})
	h.deliver(atomicWrite(0, 0x10000, rkey), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	h.deliver(flush, nil)
	check(t, "their duplicates", h.process(), "RC_RDMA_READ_RESPONSE_ONLY/0", "RC_RDMA_READ_RESPONSE_ONLY/1")
	if h.buf[0] != 2 {
		t.Errorf("a duplicate ATOMIC_WRITE wrote %d over the later 2", h.buf[0])
	}
	h.deliver(atomicWrite(0, 0x10008, rkey), []byte{3, 3, 3, 3, 3, 3, 3, 3})
	h.deliver(atomicWrite(0, 0x10000, rkey^1), []byte{3, 3, 3, 3, 3, 3, 3, 3})
	check(t, "duplicates naming another address or rkey", h.process())
	for i := range wire.PSN(4) {
		h.deliver(readReq(2+i, 0x10000, rkey, 8), nil)
	}
	if got := len(h.process()); got != 4 {
		t.Fatalf("%d read responses, want 4", got)
	}
	h.deliver(atomicWrite(0, 0x10000, rkey), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	h.deliver(flush, nil)
	check(t, "duplicates after the ring recycled their resources", h.process())
	if h.buf[0] != 2 {
		t.Errorf("an evicted duplicate ATOMIC_WRITE wrote")
	}
	if s := h.qp.State(); s != ibv.QPStateRTS {
		t.Errorf("state %v, want RTS", s)
	}
}

// TestRespRulesComplete checks the responder's error table: every error
// has a rule, a NAK-sending rule names a NAK or RNR NAK syndrome, and a
// rule that moves the QP to ERR never leaves it with a NAK of class B.
func TestRespRulesComplete(t *testing.T) {
	if got, want := len(respRules), int(errXRCSRQ)+1; got != want {
		t.Fatalf("respRules has %d rows, want %d", got, want)
	}
	for e := errPSNOutOfSeq; e <= errXRCSRQ; e++ {
		rule := respRules[e]
		switch rule.class {
		case classB, classC:
			if typ := rule.syn.Type(); typ != wire.SyndromeNAK && typ != wire.SyndromeRNRNAK {
				t.Errorf("error %d: syndrome %#x is not a NAK", e, rule.syn)
			}
			if rule.count == nil {
				t.Errorf("error %d: a NAK that counts nothing", e)
			}
		case classJ, classG:
			if rule.syn != 0 {
				t.Errorf("error %d: class %d sends no NAK, but has syndrome %#x", e, rule.class, rule.syn)
			}
		default:
			t.Errorf("error %d: no rule", e)
		}
		if rule.class == classB && (rule.status != ibv.WCSuccess || rule.event != 0) {
			t.Errorf("error %d: class B completes nothing and reports no event", e)
		}
		// The receive WQE completes with the status the requester gets
		// for the same NAK (transport.NAKStatus), but where softnic says
		// what the receive side saw: a SEND longer than the WQE, an SGE
		// the MR table refused.
		if rule.class == classC {
			want := transport.NAKStatus(rule.syn)
			switch e {
			case errRecvLength:
				want = ibv.WCLocLenErr
			case errMalformedWQE:
				want = ibv.WCLocProtErr
			}
			if got := rule.recvStatus(); got != want {
				t.Errorf("error %d: NAK %v completes the receive WQE with %v, want %v", e, rule.syn, got, want)
			}
		}
	}
	// The errors the UC responder meets (ucCheckLocked and the placement
	// it shares with RC) each count their drop.
	for _, e := range []respErr{errPSNOutOfSeq, errMissingOpcode, errUnsupportedOpcode, errRNR,
		errLength, errRecvLength, errRKeyViolation, errMalformedWQE} {
		if respRules[e].uc == nil {
			t.Errorf("error %d: no UC drop counter", e)
		}
	}
}
