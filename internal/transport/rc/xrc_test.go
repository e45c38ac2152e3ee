package rc

import (
	"bytes"
	"testing"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// xrcHarness is an XRC_RECV QP in RTS with two XRC SRQs of its domain
// (numbers 1 and 2), each with its own PD, MR and CQ, fed by hand.
type xrcHarness struct {
	harness
	srqs map[uint32]*xrcSRQ
}

type xrcSRQ struct {
	pd  *mem.PD
	mr  *mem.MR
	buf []byte
	rq  *transport.RecvQueue
	cq  cqs
}

func newXRCHarness(t *testing.T) *xrcHarness {
	h := &xrcHarness{harness: harness{t: t, clk: clock.NewManual(time.Unix(0, 0))}, srqs: map[uint32]*xrcSRQ{}}
	tbl := mem.NewTable(mem.Limits{})
	all := ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	for _, num := range []uint32{1, 2} {
		s := &xrcSRQ{buf: make([]byte, 1<<16), rq: transport.NewRecvQueue(16, 1)}
		var err error
		if s.pd, err = tbl.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if s.mr, err = tbl.RegMR(s.pd, s.buf, uint64(num)<<20, true, all); err != nil {
			t.Fatal(err)
		}
		h.srqs[num] = s
	}
	var err error
	h.qp, err = New(Config{QPN: 0x11, Type: ibv.QPTypeXRCRecv, Mem: tbl, RQ: transport.NewRecvQueue(1, 1), SRQ: true,
		XRCSRQ: func(num uint32) (XRCTarget, bool) {
			s := h.srqs[num]
			if s == nil {
				return XRCTarget{}, false
			}
			return XRCTarget{RQ: s.rq, PD: s.pd, CQ: &s.cq}, true
		},
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
			ibv.QPAttrState | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrAV | ibv.QPAttrRQPSN},
		{ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 14}, ibv.QPAttrState | ibv.QPAttrTimeout | ibv.QPAttrSQPSN},
	} {
		if _, err := h.qp.Modify(&step.a, step.mask); err != nil {
			t.Fatal(err)
		}
	}
	h.peer = wire.Encap{Src: peerAddr, Dst: localAddr, SrcPort: 0xC000, DstPort: wire.UDPPort, HopLimit: 64}
	return h
}

func (h *xrcHarness) post(num uint32, wrid uint64) {
	s := h.srqs[num]
	if _, err := s.rq.Post([]ibv.RecvWR{{WRID: wrid, SGList: []ibv.SGE{{Addr: uint64(num) << 20, Length: 4096, LKey: s.mr.LKey()}}}}); err != nil {
		h.t.Fatal(err)
	}
}

func xrcSend(op wire.Opcode, psn wire.PSN, srqn uint32, ackReq bool) wire.Headers {
	return wire.Headers{BTH: wire.BTHFields{Opcode: op, PSN: psn, AckReq: ackReq}, XRCETH: wire.XRCETHFields{XRCSRQ: srqn}}
}

// An XRC SEND lands in the SRQ its XRCETH names and completes on that
// SRQ's CQ; the ACKs are XRC ACKs; a duplicate is ACKed again and not
// placed twice; a WRITE's rkey is checked in the named SRQ's PD.
func TestXRCTarget(t *testing.T) {
	h := newXRCHarness(t)
	h.post(1, 10)
	h.post(2, 20)
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendOnly.Op(), 0, 2, true), []byte("to two"))
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendOnly.Op(), 1, 1, true), []byte("to one"))
	check(t, "two SENDs", h.process(), "XRC_ACKNOWLEDGE/1")
	s1, s2 := h.srqs[1], h.srqs[2]
	if len(s2.cq.wcs) != 1 || s2.cq.wcs[0].WRID != 20 || s2.cq.wcs[0].QPNum != 0x11 || !bytes.Equal(s2.buf[:6], []byte("to two")) {
		t.Errorf("SRQ 2: %+v %q", s2.cq.wcs, s2.buf[:6])
	}
	if len(s1.cq.wcs) != 1 || s1.cq.wcs[0].WRID != 10 || !bytes.Equal(s1.buf[:6], []byte("to one")) {
		t.Errorf("SRQ 1: %+v %q", s1.cq.wcs, s1.buf[:6])
	}
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendOnly.Op(), 1, 1, true), []byte("again!"))
	check(t, "a duplicate", h.process(), "XRC_ACKNOWLEDGE/1")
	if len(s1.cq.wcs) != 1 {
		t.Errorf("a duplicate completed: %+v", s1.cq.wcs)
	}

	// WRITE to SRQ 2's MR through SRQ 1's number: another PD.
	w := xrcSend(wire.ClassXRC|wire.RCWriteOnly.Op(), 2, 1, true)
	w.RETH = wire.RETHFields{VA: 2 << 20, RKey: s2.mr.RKey(), DMALen: 4}
	h.deliver(w, []byte("nope"))
	check(t, "a WRITE with another PD's rkey", h.process(), "XRC_ACKNOWLEDGE/2 NAK_REM_ACCESS_ERR")
	if h.qp.State() != ibv.QPStateErr {
		t.Errorf("state %v, want ERR", h.qp.State())
	}
}

// A message that continues under another SRQ number than it started
// with is an invalid request; so is a number of no SRQ of the domain.
func TestXRCTargetRefusals(t *testing.T) {
	h := newXRCHarness(t)
	h.post(1, 10)
	h.post(2, 20)
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendFirst.Op(), 0, 1, false), make([]byte, 1024))
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendLast.Op(), 1, 2, true), []byte("x"))
	check(t, "a LAST naming another SRQ", h.process(), "XRC_ACKNOWLEDGE/1 NAK_INVALID_REQ")
	if s1 := h.srqs[1]; len(s1.cq.wcs) != 1 || s1.cq.wcs[0].Status == ibv.WCSuccess {
		t.Errorf("SRQ 1's WQE in use: %+v, want one error completion", s1.cq.wcs)
	}
	if s2 := h.srqs[2]; len(s2.cq.wcs) != 0 || s2.rq.Len() != 1 {
		t.Errorf("SRQ 2 touched: %+v", s2.cq.wcs)
	}

	// A packet out of sequence naming SRQ 2 in between: the error still
	// completes SRQ 1's WQE on SRQ 1's CQ.
	h = newXRCHarness(t)
	h.post(1, 10)
	h.post(2, 20)
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendFirst.Op(), 0, 1, false), make([]byte, 1024))
	// Beyond the reorder window's reach: NAKed at once, not held.
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendLast.Op(), 1+maxHeldRequests+1, 2, true), []byte("x"))
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendLast.Op(), 1, 2, true), []byte("x"))
	check(t, "a gap, then a LAST naming another SRQ", h.process(), "XRC_ACKNOWLEDGE/1 NAK_PSN_SEQ_ERR", "XRC_ACKNOWLEDGE/1 NAK_INVALID_REQ")
	if s1, s2 := h.srqs[1], h.srqs[2]; len(s1.cq.wcs) != 1 || s1.cq.wcs[0].WRID != 10 || len(s2.cq.wcs) != 0 {
		t.Errorf("SRQ 1's CQ %+v, SRQ 2's %+v; want SRQ 1's WQE on SRQ 1's CQ", s1.cq.wcs, s2.cq.wcs)
	}

	h = newXRCHarness(t)
	h.deliver(xrcSend(wire.ClassXRC|wire.RCSendOnly.Op(), 0, 7, true), []byte("x"))
	check(t, "no such SRQ", h.process(), "XRC_ACKNOWLEDGE/0 NAK_INVALID_REQ")
	if got := h.ctr.InvalidRequestErr.Load(); got != 1 {
		t.Errorf("invalid requests counted %d, want 1", got)
	}
}
