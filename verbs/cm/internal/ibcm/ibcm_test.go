package ibcm

import (
	"bytes"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/wire"
)

func TestConvertAndAckTimeout(t *testing.T) {
	for _, c := range []struct {
		in   uint8
		want time.Duration
	}{{0, time.Millisecond}, {8, time.Millisecond}, {9, 2 * time.Millisecond}, {18, 1024 * time.Millisecond},
		{20, 4096 * time.Millisecond}, {24, 65536 * time.Millisecond}} {
		if got := ConvertToDuration(c.in); got != c.want {
			t.Errorf("ConvertToDuration(%d) = %v, want %v", c.in, got, c.want)
		}
	}
	// rxe's ACK delay 15 and cma.c's RoCE packet life time 18 give the
	// rping capture's local ACK timeout 19.
	if got := AckTimeout(15, 18); got != 19 {
		t.Errorf("AckTimeout(15, 18) = %d, want 19", got)
	}
	if got := AckTimeout(15, 0); got != 15 {
		t.Errorf("AckTimeout(15, 0) = %d, want 15", got)
	}
	if got := AckTimeout(15, 14); got != 16 {
		t.Errorf("AckTimeout(15, 14) = %d, want 16", got)
	}
	if got := AckTimeout(0, 31); got != 31 {
		t.Errorf("AckTimeout(0, 31) = %d", got)
	}
}

// TestConnectDisconnect runs the whole life of a connection: REQ, REP,
// RTU, DREQ, DREP, both timewaits; every state, event and TID checked.
func TestConnectDisconnect(t *testing.T) {
	bd := newBed(t)
	l := bd.listen()
	act := bd.connect(0x1c)
	if act.State() != StateReqSent {
		t.Fatalf("active state %v", act.State())
	}
	bd.p.pump()
	bd.wantLog("A>B REQ")
	ev := bd.rb.last(t)
	if ev.Type != EventReqReceived || ev.Req.Listen != l || ev.ID.Context != "listener" {
		t.Fatalf("passive event %+v", ev)
	}
	pas := ev.ID
	if pas.State() != StateReqRcvd || pas.RemoteID() != act.LocalID() {
		t.Fatalf("passive %v remote %#x", pas.State(), pas.RemoteID())
	}
	r := ev.Req
	if r.RemoteQPN != 0x1c || r.StartingPSN != 0x61ebe5 || r.Path.SGID != addrB || r.Path.DGID != addrA ||
		r.Path.PacketLifeTime != 18 || r.Path.FlowLabel != 0x68f03 || r.Path.HopLimit != 64 || r.Path.MTU != 3 ||
		r.RetryCount != 7 || r.RNRRetryCount != 7 || r.ServiceID != service || r.RemoteCAGUID != 0xa {
		t.Errorf("REQ event %+v", r)
	}
	if !bytes.HasPrefix(ev.PrivateData, []byte("hello")) || len(ev.PrivateData) != wire.CMReqPrivateDataLen {
		t.Errorf("REQ private data % x", ev.PrivateData)
	}
	if err := pas.SendREP(&RepParam{QPNum: 0x2d, StartingPSN: 0x6a0f89, ResponderResources: 1, InitiatorDepth: 1,
		RNRRetryCount: 7, PrivateData: []byte("rep")}); err != nil {
		t.Fatal(err)
	}
	if pas.State() != StateRepSent {
		t.Fatalf("passive %v", pas.State())
	}
	bd.p.pump()
	bd.wantLog("B>A REP")
	ev = bd.ra.last(t)
	if ev.Type != EventRepReceived || ev.ID != act || ev.Rep.RemoteQPN != 0x2d || ev.Rep.StartingPSN != 0x6a0f89 ||
		ev.Rep.TargetACKDelay != 15 || !bytes.HasPrefix(ev.PrivateData, []byte("rep")) {
		t.Fatalf("active event %+v %+v", ev, ev.Rep)
	}
	if err := act.SendRTU(nil); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	bd.wantLog("A>B RTU")
	if act.State() != StateEstablished || pas.State() != StateEstablished {
		t.Fatalf("states %v %v", act.State(), pas.State())
	}
	// Connection values as rdma_init_qp_attr reads them: the active sends
	// from the REP's PSN and receives from the REQ's, the passive the reverse.
	ca, cp := act.Conn(), pas.Conn()
	if ca.SQPSN != 0x6a0f89 || ca.RQPSN != 0x61ebe5 || cp.SQPSN != 0x61ebe5 || cp.RQPSN != 0x6a0f89 ||
		ca.RemoteQPN != 0x2d || cp.RemoteQPN != 0x1c || ca.Timeout != 19 || cp.Timeout != 19 || cp.PathMTU != 3 {
		t.Errorf("conn values active %+v passive %+v", ca, cp)
	}
	// Disconnect from the passive side: its own TID.
	if err := pas.SendDREQ(nil); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	bd.wantLog("B>A DREQ")
	if act.State() != StateDreqRcvd {
		t.Fatalf("active %v", act.State())
	}
	if err := act.SendDREP(nil); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	bd.wantLog("A>B DREP")
	if act.State() != StateTimewait || pas.State() != StateTimewait {
		t.Fatalf("states %v %v", act.State(), pas.State())
	}
	wantEvents(t, bd.ra, "IB_CM_REP_RECEIVED IB_CM_DREQ_RECEIVED")
	wantEvents(t, bd.rb, "IB_CM_REQ_RECEIVED IB_CM_RTU_RECEIVED IB_CM_DREP_RECEIVED")
	// Timewait lasts cm_convert_to_ms(av.timeout 19) = 2048 ms.
	bd.clk.Advance(2047 * time.Millisecond)
	if act.State() != StateTimewait {
		t.Fatal("timewait ended early")
	}
	bd.clk.Advance(time.Millisecond)
	if act.State() != StateIdle || pas.State() != StateIdle {
		t.Fatalf("after timewait %v %v", act.State(), pas.State())
	}
	wantEvents(t, bd.ra, "IB_CM_REP_RECEIVED IB_CM_DREQ_RECEIVED IB_CM_TIMEWAIT_EXIT")
	wantEvents(t, bd.rb, "IB_CM_REQ_RECEIVED IB_CM_RTU_RECEIVED IB_CM_DREP_RECEIVED IB_CM_TIMEWAIT_EXIT")
	if c := bd.a.Counters(); c.Retries != 0 || c.Unmatched != 0 || c.Malformed != 0 {
		t.Errorf("counters %+v", c)
	}
	act.Destroy()
	pas.Destroy()
	l.Destroy()
	if bd.a.IDs() != 0 || bd.b.IDs() != 0 || bd.clk.Pending() != 0 {
		t.Errorf("leak: %d %d IDs, %d timers", bd.a.IDs(), bd.b.IDs(), bd.clk.Pending())
	}
	bd.p.pump()
	bd.wantLog()
}

// TestTIDs: the REQ's TID is the agent's hi_tid over the byte-swapped local
// comm ID (cm_form_tid), and every reply reuses it; a DREQ forms its
// sender's own.
func TestTIDs(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	var tids []uint64
	var attrs []uint16
	bd.p.drop = func(p pkt) bool {
		tids = append(tids, wire.MAD(p.mad).TID())
		attrs = append(attrs, p.attr())
		return false
	}
	bd.rb.onEvent = func(ev *Event) {
		if ev.Type == EventReqReceived {
			ev.ID.SendREP(&RepParam{QPNum: 5})
		}
	}
	bd.ra.onEvent = func(ev *Event) {
		if ev.Type == EventRepReceived {
			ev.ID.SendRTU(nil)
		}
	}
	act := bd.connect(4)
	bd.p.pump()
	act.SendDREQ(nil)
	bd.p.pump()
	pas := bd.rb.evs[0].ID
	pas.SendDREP(nil)
	bd.p.pump()
	lid := act.LocalID()
	want := uint64(2)<<32 | uint64(lid>>24|lid>>8&0xff00|lid<<8&0xff0000|lid<<24)
	if len(tids) != 5 {
		t.Fatalf("%d MADs: %v", len(tids), attrs)
	}
	for i, tid := range tids {
		if tid != want {
			t.Errorf("MAD %d (attr %#x) TID %#x, want %#x", i, attrs[i], tid, want)
		}
	}
	// A DREQ from the passive side carries the passive's own TID.
	bd2 := newBed(t)
	bd2.listen()
	bd2.rb.onEvent = bd.rb.onEvent
	bd2.ra.onEvent = bd.ra.onEvent
	bd2.connect(4)
	bd2.p.pump()
	p2 := bd2.rb.evs[0].ID
	var dreqTID uint64
	bd2.p.drop = func(p pkt) bool {
		if p.attr() == wire.CMAttrDREQ {
			dreqTID = wire.MAD(p.mad).TID()
		}
		return false
	}
	p2.SendDREQ(nil)
	bd2.p.pump()
	if dreqTID != p2.formTID() || dreqTID == want {
		t.Errorf("passive DREQ TID %#x, want %#x", dreqTID, p2.formTID())
	}
}

// TestREQFormat checks the REQ's fields as cm_format_req sets them for
// RoCE, against the rping capture's values.
func TestREQFormat(t *testing.T) {
	bd := newBed(t)
	var req wire.CMReq
	bd.p.drop = func(p pkt) bool { req = wire.CMReq(p.mad); return true }
	bd.connect(0x1c)
	bd.p.pump()
	if req == nil {
		t.Fatal("no REQ")
	}
	if req.PrimaryLocalPortLID() != 0xffff || req.PrimaryRemotePortLID() != 0xffff || req.PrimarySubnetLocal() ||
		req.PrimaryLocalACKTimeout() != 19 || req.PrimaryHopLimit() != 64 || req.PrimaryFlowLabel() != 0x68f03 ||
		req.LocalCMResponseTimeout() != 20 || req.RemoteCMResponseTimeout() != 20 || req.MaxCMRetries() != 15 ||
		req.PathMTU() != 3 || req.PartitionKey() != 0xffff || req.LocalQPN() != 0x1c || req.StartingPSN() != 0x61ebe5 ||
		req.ResponderResources() != 1 || req.InitiatorDepth() != 1 || req.RetryCount() != 7 || req.RNRRetryCount() != 7 ||
		req.TransportServiceType() != wire.CMTransportRC || req.SRQ() || req.LocalCAGUID() != 0xa ||
		req.ServiceID() != service {
		t.Errorf("REQ fields wrong")
	}
	if addrFromGID(req.PrimaryLocalPortGID()) != addrA || addrFromGID(req.PrimaryRemotePortGID()) != addrB {
		t.Errorf("REQ GIDs % x % x", req.PrimaryLocalPortGID(), req.PrimaryRemotePortGID())
	}
}

func TestNoListener(t *testing.T) {
	bd := newBed(t)
	act := bd.connect(7)
	bd.p.pump()
	bd.wantLog("A>B REQ", "B>A REJ")
	ev := bd.ra.last(t)
	if ev.Type != EventRejReceived || ev.RejReason != wire.CMRejInvalidServiceID || act.State() != StateIdle {
		t.Fatalf("event %v reason %d state %v", ev.Type, ev.RejReason, act.State())
	}
	if bd.b.IDs() != 0 || bd.clk.Pending() != 0 {
		t.Errorf("leak: %d IDs, %d timers", bd.b.IDs(), bd.clk.Pending())
	}
}

func TestConsumerReject(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	act := bd.connect(7)
	bd.p.pump()
	pas := bd.rb.last(t).ID
	if err := pas.SendREJ(wire.CMRejConsumerDefined, nil, []byte("go away")); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	bd.wantLog("A>B REQ", "B>A REJ")
	ev := bd.ra.last(t)
	if ev.Type != EventRejReceived || ev.RejReason != wire.CMRejConsumerDefined || !bytes.HasPrefix(ev.PrivateData, []byte("go away")) ||
		len(ev.PrivateData) != wire.CMRejPrivateDataLen {
		t.Fatalf("event %+v", ev)
	}
	if act.State() != StateIdle || pas.State() != StateIdle || bd.clk.Pending() != 0 {
		t.Errorf("states %v %v, %d timers", act.State(), pas.State(), bd.clk.Pending())
	}
	// Rejecting again is misuse.
	if err := pas.SendREJ(wire.CMRejConsumerDefined, nil, nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("second REJ: %v", err)
	}
}

// TestREQRetriesThenError: a REQ nobody answers is resent every
// 2×1024 + 4096 ms, 15 times, then REQ_ERROR.
func TestREQRetriesThenError(t *testing.T) {
	bd := newBed(t)
	bd.p.drop = func(pkt) bool { return true }
	act := bd.connect(7)
	bd.p.pump()
	for i := 0; i < 15; i++ {
		bd.clk.Advance(6143 * time.Millisecond)
		if n := bd.p.pump(); n != 0 {
			t.Fatalf("retry %d early", i)
		}
		bd.clk.Advance(time.Millisecond)
		if n := bd.p.pump(); n != 1 {
			t.Fatalf("retry %d: %d MADs", i, n)
		}
	}
	if act.State() != StateReqSent {
		t.Fatalf("state %v", act.State())
	}
	bd.clk.Advance(6144 * time.Millisecond)
	wantEvents(t, bd.ra, "IB_CM_REQ_ERROR")
	if act.State() != StateIdle || bd.clk.Pending() != 0 || bd.a.Counters().Retries != 15 {
		t.Errorf("state %v, %d timers, %d retries", act.State(), bd.clk.Pending(), bd.a.Counters().Retries)
	}
}

// TestREPRetriesThenError: the REP is resent every 4096 ms (the REQ's
// local CM response timeout), 15 times, then REP_ERROR.
func TestREPRetriesThenError(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	bd.connect(7)
	bd.p.pump()
	pas := bd.rb.last(t).ID
	bd.p.drop = func(p pkt) bool { return p.attr() == wire.CMAttrREP }
	pas.SendREP(&RepParam{QPNum: 9})
	bd.p.pump()
	bd.p.takeLog()
	for i := 0; i < 15; i++ {
		bd.clk.Advance(4096 * time.Millisecond)
		bd.p.pump()
	}
	reps := 0
	for _, l := range bd.p.takeLog() {
		if l == "10.0.0.2>10.0.0.1 REP (dropped)" {
			reps++
		}
	}
	if reps != 15 {
		t.Errorf("%d REP retries", reps)
	}
	for bd.clk.AdvanceToNext() {
		bd.p.pump()
		if pas.State() == StateIdle {
			break
		}
	}
	if pas.State() != StateIdle {
		t.Fatalf("passive %v", pas.State())
	}
	if !bytes.Contains([]byte(bd.rb.types()), []byte("IB_CM_REP_ERROR")) {
		t.Errorf("events %s", bd.rb.types())
	}
}

// TestDREQRetriesThenError: a DREQ never answered ends in DREQ_ERROR and
// timewait.
func TestDREQRetriesThenError(t *testing.T) {
	bd := newBed(t)
	act, pas := bd.established()
	bd.p.drop = func(p pkt) bool { return p.attr() == wire.CMAttrDREQ }
	act.SendDREQ(nil)
	for i := 0; i <= 15; i++ {
		bd.p.pump()
		bd.clk.Advance(6144 * time.Millisecond)
	}
	if act.State() != StateTimewait || bd.ra.last(t).Type != EventDreqError {
		t.Fatalf("state %v event %v", act.State(), bd.ra.last(t).Type)
	}
	if pas.State() != StateEstablished {
		t.Errorf("passive %v", pas.State())
	}
}

// established connects a to b and returns both IDs.
func (bd *bed) established() (act, pas *ID) {
	bd.t.Helper()
	bd.listen()
	act = bd.connect(0x11)
	bd.p.pump()
	pas = bd.rb.last(bd.t).ID
	if err := pas.SendREP(&RepParam{QPNum: 0x22, StartingPSN: 5}); err != nil {
		bd.t.Fatal(err)
	}
	bd.p.pump()
	if err := act.SendRTU(nil); err != nil {
		bd.t.Fatal(err)
	}
	bd.p.pump()
	if act.State() != StateEstablished || pas.State() != StateEstablished {
		bd.t.Fatalf("not established: %v %v", act.State(), pas.State())
	}
	bd.p.takeLog()
	return act, pas
}

// TestLostREQRecovers: the first REQ is lost; the retry connects.
func TestLostREQRecovers(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	n := 0
	bd.p.drop = func(p pkt) bool { n++; return n == 1 }
	act := bd.connect(7)
	bd.p.pump()
	bd.clk.Advance(6144 * time.Millisecond)
	bd.p.pump()
	bd.wantLog("A>B REQ (dropped)", "A>B REQ")
	if bd.rb.last(t).Type != EventReqReceived || act.State() != StateReqSent {
		t.Fatal("retry not received")
	}
}

// TestDuplicateREQMRA: a duplicate REQ while the consumer has not
// answered: dropped in REQ_RCVD; after the consumer's delayed MRA (what
// cma.c does for every request) the duplicate is answered with an MRA,
// and the active side then waits the MRA's service timeout.
func TestDuplicateREQMRA(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	act := bd.connect(7)
	bd.p.pump()
	pas := bd.rb.last(t).ID
	bd.clk.Advance(6144 * time.Millisecond) // the REQ's retry
	bd.p.pump()
	bd.wantLog("A>B REQ", "A>B REQ")
	if c := bd.b.Counters(); c.Duplicates != 1 || bd.b.IDs() != 2 {
		t.Fatalf("duplicates %d, IDs %d", c.Duplicates, bd.b.IDs())
	}
	if err := pas.SendMRA(24|MRAFlagDelay, nil); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	bd.wantLog()
	if pas.State() != StateMRAReqSent {
		t.Fatalf("passive %v", pas.State())
	}
	bd.clk.Advance(6144 * time.Millisecond)
	bd.p.pump()
	bd.wantLog("A>B REQ", "B>A MRA")
	if act.State() != StateMRAReqRcvd || bd.ra.last(t).Type != EventMRAReceived || bd.ra.last(t).MRATimeout != 24 {
		t.Fatalf("active %v event %v", act.State(), bd.ra.last(t).Type)
	}
	// Now the REQ waits 65536 + 2048 ms (service timeout + path).
	bd.clk.Advance(67583 * time.Millisecond)
	if bd.p.pump() != 0 {
		t.Fatal("REQ resent before the MRA's timeout")
	}
	bd.clk.Advance(time.Millisecond)
	bd.p.pump()
	bd.wantLog("A>B REQ", "B>A MRA")
	// The consumer answers at last: REP from MRA_REQ_SENT.
	if err := pas.SendREP(&RepParam{QPNum: 8}); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	if act.State() != StateRepRcvd {
		t.Fatalf("active %v", act.State())
	}
}

// TestDuplicateREPAnswered: a duplicate REP (the RTU lost) is answered with
// the RTU again once established, with an MRA while the active consumer
// is slow.
func TestDuplicateREPAnswered(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	act := bd.connect(7)
	bd.p.pump()
	pas := bd.rb.last(t).ID
	pas.SendREP(&RepParam{QPNum: 8})
	bd.p.pump()
	act.SendMRA(24|MRAFlagDelay, nil)
	bd.p.takeLog()
	bd.clk.Advance(4096 * time.Millisecond) // REP retry
	bd.p.pump()
	bd.wantLog("B>A REP", "A>B MRA")
	if pas.State() != StateMRARepRcvd {
		t.Fatalf("passive %v", pas.State())
	}
	bd.p.drop = func(p pkt) bool { return p.attr() == wire.CMAttrRTU }
	act.SendRTU([]byte("rtu"))
	bd.p.pump()
	bd.p.drop = nil
	// The REP's next retry, after the MRA's 65536 + 2048 ms: answered with RTU.
	bd.clk.Advance(67584 * time.Millisecond)
	bd.p.pump()
	bd.wantLog("A>B RTU (dropped)", "B>A REP", "A>B RTU")
	if pas.State() != StateEstablished || !bytes.HasPrefix(bd.rb.last(t).PrivateData, []byte("rtu")) {
		t.Fatalf("passive %v", pas.State())
	}
}

// TestStaleConnection: a new REQ from a QP still connected to us is
// rejected with reason 10 and the old connection is disconnected.
func TestStaleConnection(t *testing.T) {
	bd := newBed(t)
	_, pas := bd.established()
	// The same remote QPN (0x11) from a new comm ID.
	act2 := bd.connect(0x11)
	bd.p.pump()
	bd.wantLog("A>B REQ", "B>A REJ", "B>A DREQ")
	if ev := bd.ra.evs[len(bd.ra.evs)-2]; ev.ID != act2 || ev.Type != EventRejReceived || ev.RejReason != wire.CMRejStaleConn {
		t.Errorf("event %v reason %d", ev.Type, ev.RejReason)
	}
	if act2.State() != StateTimewait || pas.State() != StateDreqSent {
		t.Errorf("states %v %v", act2.State(), pas.State())
	}
}

// TestDuplicateDREQ: a DREQ repeated after the DREP is answered from
// timewait; a DREQ for a gone ID gets a DREP too (cm_issue_drep).
func TestDuplicateDREQ(t *testing.T) {
	bd := newBed(t)
	act, pas := bd.established()
	var dreq []byte
	bd.p.drop = func(p pkt) bool {
		if p.attr() == wire.CMAttrDREQ {
			dreq = p.mad
		}
		return p.attr() == wire.CMAttrDREP
	}
	act.SendDREQ(nil)
	bd.p.pump()
	pas.SendDREP([]byte("bye"))
	bd.p.pump()
	bd.p.drop = nil
	// The DREQ again while the passive side is in timewait: DREP again.
	bd.b.Receive(dreq, addrA)
	bd.p.pump()
	bd.wantLog("A>B DREQ", "B>A DREP (dropped)", "B>A DREP")
	if act.State() != StateTimewait || !bytes.HasPrefix(bd.ra.last(t).PrivateData, []byte("bye")) {
		t.Fatalf("active %v", act.State())
	}
	if bd.b.Counters().Duplicates != 1 {
		t.Errorf("duplicates %d", bd.b.Counters().Duplicates)
	}
	// After the passive ID is gone, a DREQ still gets a DREP (cm_issue_drep).
	pas.Destroy()
	bd.b.Receive(dreq, addrA)
	bd.p.pump()
	bd.wantLog("B>A DREP")
}

// TestSimultaneousConnects: both sides listen and connect to each other at
// once: two independent connections.
func TestSimultaneousConnects(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	la, _ := bd.a.CreateID(bd.ra.handle, "listener-a")
	if err := la.Listen(service, 0); err != nil {
		t.Fatal(err)
	}
	bd.ra.onEvent = func(ev *Event) {
		switch ev.Type {
		case EventReqReceived:
			ev.ID.SendREP(&RepParam{QPNum: 0x99})
		case EventRepReceived:
			ev.ID.SendRTU(nil)
		}
	}
	bd.rb.onEvent = bd.ra.onEvent
	a1 := bd.connect(0x11)
	b1, _ := bd.b.CreateID(bd.rb.handle, "active-b")
	p := reqParam(service, 0x12, nil)
	p.Path.SGID, p.Path.DGID = addrB, addrA
	if err := b1.SendREQ(p); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	if a1.State() != StateEstablished || b1.State() != StateEstablished {
		t.Fatalf("states %v %v", a1.State(), b1.State())
	}
	if bd.a.IDs() != 3 || bd.b.IDs() != 3 {
		t.Errorf("IDs %d %d", bd.a.IDs(), bd.b.IDs())
	}
}

func TestSIDR(t *testing.T) {
	bd := newBed(t)
	l := bd.listen()
	_ = l
	bd.rb.onEvent = func(ev *Event) {
		if ev.Type == EventSIDRReqReceived {
			ev.ID.SendSIDRRep(&SIDRRepParam{QPNum: 0x33, QKey: 0x01234567, PrivateData: []byte("ud")})
		}
	}
	id, _ := bd.a.CreateID(bd.ra.handle, nil)
	if err := id.SendSIDRReq(&SIDRReqParam{DGID: addrB, ServiceID: service, PKey: 0xffff, Timeout: 4096 * time.Millisecond,
		MaxCMRetries: 15, PrivateData: []byte("q")}); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	bd.wantLog("A>B SIDR_REQ", "B>A SIDR_REP")
	ev := bd.ra.last(t)
	if ev.Type != EventSIDRRepReceived || ev.SIDR.Status != SIDRSuccess || ev.SIDR.QPN != 0x33 || ev.SIDR.QKey != 0x01234567 ||
		!bytes.HasPrefix(ev.PrivateData, []byte("ud")) || id.State() != StateIdle {
		t.Fatalf("event %+v %+v", ev, ev.SIDR)
	}
	if ev := bd.rb.last(t); ev.SIDR.SrcGID != addrA || !bytes.HasPrefix(ev.PrivateData, []byte("q")) || ev.ID.State() != StateIdle {
		t.Errorf("passive %+v", ev.SIDR)
	}
	// No listener: status unsupported.
	id2, _ := bd.a.CreateID(bd.ra.handle, nil)
	id2.SendSIDRReq(&SIDRReqParam{DGID: addrB, ServiceID: service + 1, Timeout: time.Second})
	bd.p.pump()
	if ev := bd.ra.last(t); ev.SIDR.Status != SIDRUnsupported {
		t.Errorf("status %d", ev.SIDR.Status)
	}
	// Unanswered: SIDR_REQ_ERROR after the retries.
	bd.p.drop = func(pkt) bool { return true }
	id3, _ := bd.a.CreateID(bd.ra.handle, nil)
	id3.SendSIDRReq(&SIDRReqParam{DGID: addrB, ServiceID: service, Timeout: time.Second, MaxCMRetries: 2})
	bd.clk.Advance(3 * time.Second)
	if ev := bd.ra.last(t); ev.Type != EventSIDRReqError || ev.ID != id3 {
		t.Errorf("event %v", ev.Type)
	}
	if bd.a.Counters().Retries != 2 {
		t.Errorf("retries %d", bd.a.Counters().Retries)
	}
}

func TestMisuse(t *testing.T) {
	bd := newBed(t)
	id, _ := bd.a.CreateID(nil, nil)
	for name, err := range map[string]error{
		"REP":  id.SendREP(&RepParam{}),
		"RTU":  id.SendRTU(nil),
		"DREQ": id.SendDREQ(nil),
		"DREP": id.SendDREP(nil),
		"MRA":  id.SendMRA(1, nil),
		"REJ":  id.SendREJ(28, nil, nil),
		"SIDR": id.SendSIDRRep(&SIDRRepParam{}),
		"est":  id.Establish(),
		"nil":  id.SendREQ(nil),
		"RD":   id.SendREQ(&ReqParam{QPType: wire.CMTransportRD, Path: Path{DGID: addrB}}),
		"pd":   id.SendREQ(&ReqParam{Path: Path{DGID: addrB}, PrivateData: make([]byte, 93)}),
	} {
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bd.listen()
	l2, _ := bd.b.CreateID(nil, nil)
	if err := l2.Listen(service, 0); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("second listen: %v", err)
	}
	if err := l2.Listen(service&^0xffff, 0xffffffffffff0000); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("overlapping mask listen: %v", err)
	}
	id.Destroy()
	if err := id.SendREQ(reqParam(service, 1, nil)); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("after destroy: %v", err)
	}
	id.Destroy() // twice is harmless
}

// TestListenMask: a masked listener takes every service ID under it.
func TestListenMask(t *testing.T) {
	bd := newBed(t)
	l, _ := bd.b.CreateID(bd.rb.handle, nil)
	if err := l.Listen(0x01060000, 0xffffffffffff0000); err != nil {
		t.Fatal(err)
	}
	bd.connect(1)
	bd.p.pump()
	if ev := bd.rb.last(t); ev.Type != EventReqReceived || ev.Req.Listen != l {
		t.Fatalf("event %v", ev.Type)
	}
}

// TestDestroyPerState: destroying an ID sends what cm_destroy_id sends in
// its state.
func TestDestroyPerState(t *testing.T) {
	// REQ_SENT: REJ timeout with the CA GUID as ARI.
	bd := newBed(t)
	bd.listen()
	act := bd.connect(1)
	bd.p.pump()
	pas := bd.rb.last(t).ID
	act.Destroy()
	bd.p.pump()
	bd.wantLog("A>B REQ", "A>B REJ")
	if ev := bd.rb.last(t); ev.Type != EventRejReceived || ev.RejReason != wire.CMRejTimeout || pas.State() != StateIdle {
		t.Errorf("passive event %v reason %d state %v", ev.Type, ev.RejReason, pas.State())
	}
	// ESTABLISHED: DREQ, answered by a DREP the destroyed ID never sees.
	bd = newBed(t)
	act, pas = bd.established()
	act.Destroy()
	bd.p.pump()
	bd.wantLog("A>B DREQ")
	if pas.State() != StateDreqRcvd {
		t.Errorf("passive %v", pas.State())
	}
	pas.SendDREP(nil)
	bd.p.pump()
	bd.wantLog("B>A DREP")
	if bd.a.Counters().Unmatched != 1 || bd.a.IDs() != 0 || len(bd.ra.evs) != 1 {
		t.Errorf("unmatched %d IDs %d events %s", bd.a.Counters().Unmatched, bd.a.IDs(), bd.ra.types())
	}
	// REQ_RCVD silently (backlog full): nothing sent.
	bd = newBed(t)
	bd.listen()
	bd.connect(1)
	bd.p.pump()
	bd.p.takeLog()
	bd.rb.last(t).ID.DestroySilently()
	bd.p.pump()
	bd.wantLog()
}

// TestREQFloodReclaimed: many REQs, answered by REPs nobody acknowledges:
// every half-open ID ends in REP_ERROR and the consumer's destroy leaves
// nothing behind.
func TestREQFloodReclaimed(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	bd.rb.onEvent = func(ev *Event) {
		switch ev.Type {
		case EventReqReceived:
			ev.ID.SendREP(&RepParam{QPNum: 1})
		case EventRepError:
			ev.ID.Destroy()
		}
	}
	bd.p.drop = func(p pkt) bool { return p.attr() == wire.CMAttrREP }
	for i := 0; i < 200; i++ {
		m := wire.CMReq(wire.PutCM(make([]byte, wire.MADLen), wire.CMAttrREQ, uint64(i)))
		m.SetLocalCommID(uint32(1000 + i))
		m.SetLocalQPN(uint32(i + 1))
		m.SetServiceID(service)
		m.SetLocalCMResponseTimeout(20)
		m.SetMaxCMRetries(3)
		g := addrB.As16()
		m.SetPrimaryRemotePortGID(g[:])
		bd.b.Receive(m.MAD(), addrA)
	}
	bd.p.pump()
	if bd.b.IDs() != 201 {
		t.Fatalf("%d IDs", bd.b.IDs())
	}
	for bd.clk.AdvanceToNext() {
		bd.p.pump()
	}
	if bd.b.IDs() != 1 || bd.clk.Pending() != 0 {
		t.Errorf("%d IDs, %d timers left", bd.b.IDs(), bd.clk.Pending())
	}
}

// TestMalformedDropped: short, wrong class, version or method, unknown
// attribute: all counted, none answered.
func TestMalformedDropped(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	good := wire.PutCM(make([]byte, wire.MADLen), wire.CMAttrREQ, 1)
	for _, mut := range []func(b []byte) []byte{
		func(b []byte) []byte { return b[:100] },
		func(b []byte) []byte { b[1] = 0x04; return b },
		func(b []byte) []byte { b[2] = 1; return b },
		func(b []byte) []byte { b[3] = 0x01; return b },
		func(b []byte) []byte { b[0] = 0x80; return b },
		func(b []byte) []byte { b[17] = 0x33; return b },
	} {
		bd.b.Receive(mut(append([]byte(nil), good...)), addrA)
	}
	if c := bd.b.Counters(); c.Malformed != 6 {
		t.Errorf("malformed %d", c.Malformed)
	}
	if bd.p.pump() != 0 {
		t.Error("a malformed MAD was answered")
	}
	// Unknown comm IDs: counted as unmatched (a DREQ still gets its DREP).
	for _, attr := range []uint16{wire.CMAttrREP, wire.CMAttrRTU, wire.CMAttrDREP, wire.CMAttrMRA, wire.CMAttrREJ, wire.CMAttrSIDRREP, wire.CMAttrLAP} {
		bd.b.Receive(wire.PutCM(make([]byte, wire.MADLen), attr, 9), addrA)
	}
	if c := bd.b.Counters(); c.Unmatched != 7 {
		t.Errorf("unmatched %d", c.Unmatched)
	}
}

func TestInvalidGIDRejected(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	// A REQ for GID A delivered to B.
	m := wire.CMReq(wire.PutCM(make([]byte, wire.MADLen), wire.CMAttrREQ, 5))
	m.SetLocalCommID(77)
	m.SetServiceID(service)
	m.SetPrimaryRemotePortGID(gidBytes(addrA))
	bd.b.Receive(m.MAD(), addrA)
	var rej wire.CMRej
	bd.p.drop = func(p pkt) bool { rej = wire.CMRej(p.mad); return true }
	bd.p.pump()
	if rej == nil || rej.Reason() != wire.CMRejInvalidGID || !bytes.Equal(rej.ARI()[:16], gidBytes(addrB)) ||
		rej.RemoteCommID() != 77 || rej.MAD().TID() != 5 {
		t.Errorf("REJ %v", rej)
	}
	if bd.b.IDs() != 1 {
		t.Errorf("%d IDs", bd.b.IDs())
	}
}

func gidBytes(a interface{ As16() [16]byte }) []byte { g := a.As16(); return g[:] }

// TestInvalidTransport: a REQ for an RD or XRC transport is rejected with
// reason 9.
func TestInvalidTransport(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	m := wire.CMReq(wire.PutCM(make([]byte, wire.MADLen), wire.CMAttrREQ, 5))
	m.SetLocalCommID(77)
	m.SetServiceID(service)
	m.SetTransportServiceType(wire.CMTransportRD)
	m.SetPrimaryRemotePortGID(gidBytes(addrB))
	bd.b.Receive(m.MAD(), addrA)
	var rej wire.CMRej
	bd.p.drop = func(p pkt) bool { rej = wire.CMRej(p.mad); return true }
	bd.p.pump()
	if rej == nil || rej.Reason() != wire.CMRejInvalidTransport || rej.MessageRejected() != wire.CMMsgResponseREQ {
		t.Fatalf("REJ %v", rej)
	}
}

// TestActiveRejectsREP: the active consumer refuses the REP: REJ with
// message rejected REP; the passive side, in REP_SENT, stops resending and
// reports it.
func TestActiveRejectsREP(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	act := bd.connect(7)
	bd.p.pump()
	pas := bd.rb.last(t).ID
	pas.SendREP(&RepParam{QPNum: 8})
	bd.p.pump()
	var rej wire.CMRej
	bd.p.drop = func(p pkt) bool { rej = wire.CMRej(p.mad); return false }
	if err := act.SendREJ(wire.CMRejConsumerDefined, nil, []byte("no thanks")); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	if rej.MessageRejected() != wire.CMMsgResponseREP || rej.LocalCommID() != act.LocalID() || rej.RemoteCommID() != pas.LocalID() {
		t.Errorf("REJ message %d comm IDs %#x %#x", rej.MessageRejected(), rej.LocalCommID(), rej.RemoteCommID())
	}
	if act.State() != StateIdle || pas.State() != StateIdle || bd.rb.last(t).Type != EventRejReceived {
		t.Errorf("states %v %v event %v", act.State(), pas.State(), bd.rb.last(t).Type)
	}
	if bd.clk.Pending() != 0 {
		t.Errorf("%d timers left (the REP's retry)", bd.clk.Pending())
	}
}

// TestSimultaneousDisconnect: both sides send a DREQ at once; each answers
// the other's with a DREP and both go through timewait once.
func TestSimultaneousDisconnect(t *testing.T) {
	bd := newBed(t)
	act, pas := bd.established()
	bd.ra.evs, bd.rb.evs = nil, nil
	act.SendDREQ(nil)
	pas.SendDREQ(nil)
	bd.p.pump()
	if act.State() != StateDreqRcvd || pas.State() != StateDreqRcvd {
		t.Fatalf("states %v %v", act.State(), pas.State())
	}
	act.SendDREP(nil)
	pas.SendDREP(nil)
	bd.p.pump()
	bd.wantLog("A>B DREQ", "B>A DREQ", "A>B DREP", "B>A DREP")
	if act.State() != StateTimewait || pas.State() != StateTimewait {
		t.Fatalf("states %v %v", act.State(), pas.State())
	}
	bd.clk.Advance(2048 * time.Millisecond)
	wantEvents(t, bd.ra, "IB_CM_DREQ_RECEIVED IB_CM_TIMEWAIT_EXIT")
	wantEvents(t, bd.rb, "IB_CM_DREQ_RECEIVED IB_CM_TIMEWAIT_EXIT")
	if bd.clk.Pending() != 0 {
		t.Errorf("%d timers left", bd.clk.Pending())
	}
}

// TestStaleREP: a REP from a QP still connected to one of ours is
// rejected as stale and the old connection is disconnected; the new
// REQ's ID stays in REQ_SENT (cm.c cm_rep_handler), while the passive
// side, rejected with reason 10, goes to timewait.
func TestStaleREP(t *testing.T) {
	bd := newBed(t)
	act, _ := bd.established() // B's QP 0x22 is connected to A's act
	id2, _ := bd.a.CreateID(bd.ra.handle, nil)
	id2.SendREQ(reqParam(service, 0x55, nil))
	bd.p.pump()
	pas2 := bd.rb.last(t).ID
	pas2.SendREP(&RepParam{QPNum: 0x22}) // the same remote QPN again
	bd.p.pump()
	bd.wantLog("A>B REQ", "B>A REP", "A>B REJ", "A>B DREQ")
	if id2.State() != StateReqSent || act.State() != StateDreqSent || pas2.State() != StateTimewait {
		t.Errorf("states %v %v %v", id2.State(), act.State(), pas2.State())
	}
}

// TestMRAForREP: an MRA of the REP stretches the REP's retry to the
// service timeout plus the path's.
func TestMRAForREP(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	act := bd.connect(7)
	bd.p.pump()
	pas := bd.rb.last(t).ID
	pas.SendREP(&RepParam{QPNum: 8})
	bd.p.pump()
	if err := act.SendMRA(10, nil); err != nil { // sent at once: no delay flag
		t.Fatal(err)
	}
	bd.p.pump()
	bd.wantLog("A>B REQ", "B>A REP", "A>B MRA")
	if pas.State() != StateMRARepRcvd || act.State() != StateMRARepSent {
		t.Fatalf("states %v %v", pas.State(), act.State())
	}
	// 4 ms (service timeout 10) + 2048 ms (path): the REP comes again.
	bd.clk.Advance(2051 * time.Millisecond)
	if bd.p.pump() != 0 {
		t.Fatal("REP resent before the MRA's time")
	}
	bd.clk.Advance(time.Millisecond)
	bd.p.pump()
	bd.wantLog("B>A REP", "A>B MRA")
}

// TestXRC: an XRC connection (cm.c cm_req_set_qp_type, cm_format_req,
// cm_format_rep, cm_rep_get_qpn): the REQ's transport service type 3
// with extended transport type 1 and, an XRC initiator having no
// responder, no responder resources, retry counts or SRQ; the passive
// side sees an XRC REQ; its REP carries the XRC target's QP number in the
// EECN field (local QPN 0) with SRQ set, and the active side's remote QPN
// is that number.
func TestXRC(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	var req wire.CMReq
	var rep wire.CMRep
	bd.p.drop = func(p pkt) bool {
		switch wire.MAD(p.mad).AttrID() {
		case wire.CMAttrREQ:
			req = append(wire.CMReq(nil), p.mad...)
		case wire.CMAttrREP:
			rep = append(wire.CMRep(nil), p.mad...)
		}
		return false
	}
	act, err := bd.a.CreateID(bd.ra.handle, "active")
	if err != nil {
		t.Fatal(err)
	}
	p := reqParam(service, 0x1c, []byte("hello"))
	p.QPType = QPTypeXRC
	if err := act.SendREQ(p); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	if req == nil {
		t.Fatal("no REQ")
	}
	if req.TransportServiceType() != wire.CMTransportXRC || req.ExtendedTransportType() != 1 || req.LocalQPN() != 0x1c ||
		req.ResponderResources() != 0 || req.RetryCount() != 0 || req.RNRRetryCount() != 0 || req.SRQ() ||
		req.InitiatorDepth() != p.InitiatorDepth {
		t.Errorf("XRC REQ: transport %d/%d qpn %#x rr %d retry %d rnr %d srq %v id %d", req.TransportServiceType(),
			req.ExtendedTransportType(), req.LocalQPN(), req.ResponderResources(), req.RetryCount(), req.RNRRetryCount(),
			req.SRQ(), req.InitiatorDepth())
	}
	ev := bd.rb.last(t)
	if ev.Type != EventReqReceived || ev.Req.QPType != QPTypeXRC {
		t.Fatalf("passive event %+v", ev)
	}
	pas := ev.ID
	if err := pas.SendREP(&RepParam{QPNum: 0x2d, StartingPSN: 0x6a0f89, ResponderResources: 1, InitiatorDepth: 1,
		RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	if rep == nil {
		t.Fatal("no REP")
	}
	if rep.LocalQPN() != 0 || rep.LocalEECN() != 0x2d || !rep.SRQ() || rep.InitiatorDepth() != 0 {
		t.Errorf("XRC REP: qpn %#x eecn %#x srq %v initiator depth %d", rep.LocalQPN(), rep.LocalEECN(), rep.SRQ(), rep.InitiatorDepth())
	}
	ev = bd.ra.last(t)
	if ev.Type != EventRepReceived || ev.Rep.RemoteQPN != 0x2d {
		t.Fatalf("active event %+v %+v", ev, ev.Rep)
	}
	if err := act.SendRTU(nil); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	if act.State() != StateEstablished || pas.State() != StateEstablished || act.Conn().RemoteQPN != 0x2d || pas.Conn().RemoteQPN != 0x1c {
		t.Errorf("states %v %v, remote QPNs %#x %#x", act.State(), pas.State(), act.Conn().RemoteQPN, pas.Conn().RemoteQPN)
	}
}

// TestXRCExtendedTransport: transport service type 3 with any extended
// transport type but 1 is no transport the CM knows (cm_req_get_qp_type
// returns 0): REJ invalid transport type.
func TestXRCExtendedTransport(t *testing.T) {
	bd := newBed(t)
	bd.listen()
	m := wire.CMReq(wire.PutCM(make([]byte, wire.MADLen), wire.CMAttrREQ, 5))
	m.SetLocalCommID(77)
	m.SetServiceID(service)
	m.SetTransportServiceType(wire.CMTransportXRC)
	m.SetExtendedTransportType(2)
	m.SetPrimaryRemotePortGID(gidBytes(addrB))
	bd.b.Receive(m.MAD(), addrA)
	var rej wire.CMRej
	bd.p.drop = func(p pkt) bool { rej = wire.CMRej(p.mad); return true }
	bd.p.pump()
	if rej == nil || rej.Reason() != wire.CMRejInvalidTransport {
		t.Fatalf("REJ %v", rej)
	}
}

// TestPortUnreachable: told that no CM listens at B (a MAD to it drew an
// ICMP port unreachable), the agent fails at once, with ECONNREFUSED,
// every message to B still waiting for a first answer, REQ and SIDR_REQ
// alike, in the order the IDs were made, and stops their timers; a REQ
// to another address, and one B answered with an MRA (B is there), go
// on; the timeout still reports ETIMEDOUT.
func TestPortUnreachable(t *testing.T) {
	bd := newBed(t)
	addrC := netip.MustParseAddr("10.0.0.3")
	bd.p.drop = func(pkt) bool { return true }
	req := bd.connect(7)
	sidr, _ := bd.a.CreateID(bd.ra.handle, "sidr")
	if err := sidr.SendSIDRReq(&SIDRReqParam{DGID: addrB, ServiceID: service, Timeout: time.Second, MaxCMRetries: 15}); err != nil {
		t.Fatal(err)
	}
	other, _ := bd.a.CreateID(bd.ra.handle, "other")
	p := reqParam(service, 9, nil)
	p.Path.DGID = addrC
	if err := other.SendREQ(p); err != nil {
		t.Fatal(err)
	}
	bd.p.pump()
	bd.a.PortUnreachable(addrB)
	wantEvents(t, bd.ra, "IB_CM_REQ_ERROR IB_CM_SIDR_REQ_ERROR")
	for i, ev := range bd.ra.evs {
		if ev.Err != syscall.ECONNREFUSED || ev.ID != []*ID{req, sidr}[i] {
			t.Errorf("event %d: %v for %v, Err %v; want ECONNREFUSED", i, ev.Type, ev.ID.Context, ev.Err)
		}
	}
	if req.State() != StateIdle || sidr.State() != StateIdle || other.State() != StateReqSent {
		t.Errorf("states %v %v %v, want idle, idle, REQ_SENT", req.State(), sidr.State(), other.State())
	}
	if n := bd.clk.Pending(); n != 1 {
		t.Errorf("%d timers, want the other REQ's alone", n)
	}
	// A REQ that B answered with an MRA is not failed.
	bd.p.drop = nil
	bd.ra.evs = nil
	bd.listen()
	bd.rb.onEvent = func(ev *Event) {
		if ev.Type == EventReqReceived {
			ev.ID.SendMRA(24, nil)
		}
	}
	mra := bd.connect(11)
	bd.p.pump()
	if mra.State() != StateMRAReqRcvd {
		t.Fatalf("state %v after the MRA", mra.State())
	}
	bd.a.PortUnreachable(addrB)
	if mra.State() != StateMRAReqRcvd || len(bd.ra.evs) != 1 || bd.ra.evs[0].Type != EventMRAReceived {
		t.Errorf("after an MRA: state %v, events %s; want unchanged", mra.State(), bd.ra.types())
	}
	bd.p.drop = func(pkt) bool { return true }
	bd.clk.Advance(100 * time.Second)
	if ev := bd.ra.last(t); ev.ID != other || ev.Type != EventReqError || ev.Err != syscall.ETIMEDOUT {
		t.Errorf("the other REQ's end: %v for %v, Err %v; want REQ_ERROR, ETIMEDOUT", ev.Type, ev.ID.Context, ev.Err)
	}
}
