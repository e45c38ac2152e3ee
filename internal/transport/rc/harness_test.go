package rc_test

// The two-QP harness of RC's and UC's protocol tests: two nodes on a
// transporttest.Net, each with its own memory table, PD, MR and CQ, and an
// rc.QP connected to the other's. Every call these tests make into the
// transport's API (rc.New, Modify, PostSend, the receive queue's Post and
// FlushRecv, Query, State) is in this file, behind the helpers below; the
// nodes deliver packets and run Process (transporttest net.go).

import (
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/internal/transport/rc"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

// opts configures a pair's QPs, the way ibv_rc_pingpong does by default
// (see defaults).
type opts struct {
	typ     ibv.QPType // RC or UC (newXRCPair makes the XRC types)
	mtu     ibv.MTU
	bufSize int
	access  ibv.Access // the MR's
	// qpAccess is the QPs' access flags; 0 means REMOTE_WRITE, READ and
	// ATOMIC (UC: REMOTE_WRITE).
	qpAccess ibv.Access
	timeout  uint8
	retry    uint8
	rnr      uint8
	sqPSN    uint32 // a's send PSN, b's receive PSN
	rqPSN    uint32 // a's receive PSN, b's send PSN
	maxWR    uint32
	// maxRdAtomic is the requesters' max_rd_atomic (initiator depth);
	// 0 means 16.
	maxRdAtomic uint8
	// sigAll creates the QPs with sq_sig_all.
	sigAll bool
}

// rcOpts is the ibv_rc_pingpong configuration: timeout 14 (67 ms),
// retry_cnt 7, rnr_retry 7, min_rnr_timer 12, MTU 1024.
var rcOpts = opts{timeout: 14, retry: 7, rnr: 7}

// timeout14 is the local ACK timeout of timeout 14: 4.096 µs × 2^14.
const timeout14 = 4096 << 14 * time.Nanosecond

func (o *opts) defaults() {
	if o.typ == 0 {
		o.typ = ibv.QPTypeRC
	}
	if o.mtu == 0 {
		o.mtu = ibv.MTU1024
	}
	if o.bufSize == 0 {
		o.bufSize = 1 << 16
	}
	if o.access == 0 {
		o.access = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	}
	if o.maxWR == 0 {
		o.maxWR = 256
	}
}

// end is one side of a pair: a node with a memory table, a PD, an MR over
// buf, one CQ for sends and receives, a receive queue and the QP.
type end struct {
	t    testing.TB
	net  *tt.Net
	node *tt.Node
	port *tt.Port
	qp   *rc.QP
	typ  ibv.QPType
	tbl  *mem.Table
	pd   *mem.PD
	mr   *mem.MR
	buf  []byte
	cq   *tt.CQ
	rq   *transport.RecvQueue
	// events are the affiliated asynchronous events the QP reported
	// (Config.OnAsync), oldest first; takeEvents empties it.
	events []ibv.AsyncEventType
}

// mrIOVA is where each end registers its buffer: fixed, so that the
// RETHs on the wire are the same on every run.
const mrIOVA = 0x1000_0000

// newPair makes two nodes on n at 10.0.0.1 and 10.0.0.2 with connected
// QPs in RTS.
func newPair(t testing.TB, n *tt.Net, o opts) (a, b *end) {
	t.Helper()
	o.defaults()
	a = newEnd(t, n, "10.0.0.1", o)
	b = newEnd(t, n, "10.0.0.2", o)
	connect(t, a, b.node.Addr(), b.qpn(), o, o.sqPSN, o.rqPSN)
	connect(t, b, a.node.Addr(), a.qpn(), o, o.rqPSN, o.sqPSN)
	return a, b
}

// newEnd makes a node at addr with a QP of type o.typ in RESET.
func newEnd(t testing.TB, n *tt.Net, addr string, o opts) *end {
	t.Helper()
	return newEndOn(t, n, n.Node(addr), o)
}

// newEndOn makes a QP of type o.typ in RESET on node, beside the QPs
// the node has.
func newEndOn(t testing.TB, n *tt.Net, node *tt.Node, o opts) *end {
	t.Helper()
	o.defaults()
	e := &end{t: t, net: n, node: node, typ: o.typ, buf: make([]byte, o.bufSize), cq: new(tt.CQ)}
	e.tbl = mem.NewTable(mem.Limits{KeySeed: 1})
	var err error
	if e.pd, err = e.tbl.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.tbl.RegMR(e.pd, e.buf, mrIOVA, true, o.access); err != nil {
		t.Fatal(err)
	}
	c := ibv.QPCap{MaxSendWR: o.maxWR, MaxRecvWR: o.maxWR, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}
	e.rq = transport.NewRecvQueue(int(c.MaxRecvWR), int(c.MaxRecvSGE))
	e.port = e.node.Port(o.typ)
	cfg := rc.Config{
		QPN: e.port.QPN(), Type: o.typ, PD: e.pd, Mem: e.tbl, SendCQ: e.cq, RecvCQ: e.cq, RQ: e.rq,
		Cap: c, SigAll: o.sigAll, LocalAddr: e.node.Addr(), Clock: n.Clock(), Counters: &e.node.Counters,
		Waker:   e.port,
		OnAsync: func(ev ibv.AsyncEventType) { e.events = append(e.events, ev) },
	}
	if o.typ == ibv.QPTypeXRCRecv {
		// An XRC target has no PD, receive queue or receive CQ of its
		// own: it takes them from the XRC SRQ a request names (nic
		// xrc.go). e's are XRC SRQ number xrcSRQN's.
		cfg.PD, cfg.RecvCQ, cfg.RQ, cfg.SRQ = nil, nil, transport.NewRecvQueue(1, 1), true
		cfg.XRCSRQ = func(num uint32) (rc.XRCTarget, bool) {
			if num != xrcSRQN {
				return rc.XRCTarget{}, false
			}
			return rc.XRCTarget{RQ: e.rq, PD: e.pd, CQ: e.cq}, true
		}
	}
	e.qp, err = rc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.port.Bind(e.qp)
	return e
}

// xrcSRQN is the number of the XRC SRQ an XRC target takes its receives
// from (newEnd), which an XRC initiator's WRs name (RemoteSRQN).
const xrcSRQN = 7

// newXRCPair makes an XRC initiator (XRC_SEND) at 10.0.0.1 connected to
// an XRC target (XRC_RECV) at 10.0.0.2, both in RTS.
func newXRCPair(t testing.TB, n *tt.Net, o opts) (a, b *end) {
	t.Helper()
	o.defaults()
	o.typ = ibv.QPTypeXRCSend
	a = newEnd(t, n, "10.0.0.1", o)
	o.typ = ibv.QPTypeXRCRecv
	b = newEnd(t, n, "10.0.0.2", o)
	connect(t, a, b.node.Addr(), b.qpn(), o, o.sqPSN, o.rqPSN)
	connect(t, b, a.node.Addr(), a.qpn(), o, o.rqPSN, o.sqPSN)
	return a, b
}

// connect moves e's QP to RTS towards the QP peerQPN at peer, the way
// ibv_rc_pingpong does, with the attributes e's QP type takes (the
// kernel's qp_state_table: a responder's max_dest_rd_atomic and
// min_rnr_timer, a requester's timeout, retry counts and max_rd_atomic).
func connect(t testing.TB, e *end, peer netip.Addr, peerQPN uint32, o opts, sqPSN, rqPSN uint32) {
	t.Helper()
	o.defaults()
	requester := e.typ == ibv.QPTypeRC || e.typ == ibv.QPTypeXRCSend
	responder := e.typ == ibv.QPTypeRC || e.typ == ibv.QPTypeXRCRecv
	access := ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	if e.typ == ibv.QPTypeUC {
		access = ibv.AccessRemoteWrite
	}
	if o.qpAccess != 0 {
		access = o.qpAccess
	}
	e.modify(ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1, AccessFlags: access},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags)
	rtr := ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: o.mtu, DestQPN: peerQPN, RQPSN: rqPSN,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: peer, HopLimit: 1}}}
	mask := ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN
	if responder {
		rtr.MaxDestRdAtomic, rtr.MinRNRTimer = 16, 12
		mask |= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
	}
	e.modify(rtr, mask)
	rts := ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: sqPSN}
	mask = ibv.QPAttrState | ibv.QPAttrSQPSN
	if requester {
		rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = o.timeout, o.retry, o.rnr, 16
		if o.maxRdAtomic != 0 {
			rts.MaxRdAtomic = o.maxRdAtomic
		}
		mask |= ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic
	} else if responder {
		rts.Timeout = o.timeout
		mask |= ibv.QPAttrTimeout
	}
	e.modify(rts, mask)
}

// limits are the device limits modify checks values against (nic's).
var limits = transport.Limits{MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, MaxMTU: ibv.MTU4096, PortCount: 1,
	PKeyTableLen: 1, MaxSendWR: 1 << 14, MaxRecvWR: 1 << 14, MaxSGE: 32, MaxInline: 512}

// modify modifies e's QP after the checks the engine makes first
// (transport.CheckModify, CheckAttrValues), failing the test on error.
func (e *end) modify(attr ibv.QPAttr, mask ibv.AttrMask) {
	e.t.Helper()
	cur, next := e.qp.State(), e.qp.State()
	if mask&ibv.QPAttrState != 0 {
		next = attr.State
	}
	if err := transport.CheckModify(e.typ, cur, next, mask); err != nil {
		e.t.Fatalf("modify QP: %v", err)
	}
	if err := transport.CheckAttrValues(e.typ, cur, &attr, mask, limits); err != nil {
		e.t.Fatalf("modify QP: %v", err)
	}
	run, err := e.qp.Modify(&attr, mask)
	e.run(run)
	if err != nil {
		e.t.Fatalf("modify QP: %v", err)
	}
}

// setBudget makes b the budget e's requests take from (nil: none), as
// the engine does for the QP's peer (nic's peer budgets).
func (e *end) setBudget(b *rc.PeerBudget) { e.qp.SetBudget(b) }

// post posts send WRs on e's QP, failing the test on error.
func (e *end) post(wrs ...ibv.SendWR) {
	e.t.Helper()
	_, run, err := e.qp.PostSend(wrs)
	e.run(run)
	if err != nil {
		e.t.Fatalf("post send: %v", err)
	}
}

// postRun posts one send WR on e's QP, failing the test on error, and
// returns what the transport asked the engine to run (transport.Run).
func (e *end) postRun(wr ibv.SendWR) transport.Run {
	e.t.Helper()
	_, run, err := e.qp.PostSend([]ibv.SendWR{wr})
	e.run(run)
	if err != nil {
		e.t.Fatalf("post send: %v", err)
	}
	return run
}

// postRecv posts receive WRs to e's receive queue, failing the test on
// error; in ERR they are flushed at once, as the engine does (nic qp.go
// PostRecv).
func (e *end) postRecv(wrs ...ibv.RecvWR) {
	e.t.Helper()
	if _, err := e.rq.Post(wrs); err != nil {
		e.t.Fatalf("post recv: %v", err)
	}
	if e.qp.State() == ibv.QPStateErr {
		e.qp.FlushRecv()
	}
}

// state returns e's QP state.
func (e *end) state() ibv.QPState { return e.qp.State() }

// query returns e's QP attributes.
func (e *end) query() ibv.QPAttr { return e.qp.Query() }

// qpn returns e's QP number.
func (e *end) qpn() uint32 { return e.qp.QPN() }

// ctr returns the counters of e's node.
func (e *end) ctr() *transport.Counters { return &e.node.Counters }

// newRawPeer makes a node at 10.0.0.2 whose RC QP in RTS is connected to
// a raw endpoint at 10.0.0.1 playing QP 0x99, both directions starting
// at PSN psn: tests build its requests byte by byte.
func newRawPeer(t testing.TB, n *tt.Net, o opts, psn uint32) (*end, *rawPeer) {
	t.Helper()
	o.defaults()
	b := newEnd(t, n, "10.0.0.2", o)
	raw := &rawPeer{qpn: 0x99, dst: b.qpn()}
	raw.Raw = n.Raw("10.0.0.1", b.node.Addr(), wire.ConnectedSrcPort(raw.qpn, raw.dst))
	b.modify(ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1,
		AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags)
	b.modify(ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: o.mtu, DestQPN: raw.qpn, RQPSN: psn,
		MaxDestRdAtomic: 16, MinRNRTimer: 12,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: raw.Addr(), HopLimit: 1}}},
		ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|
			ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer)
	b.modify(ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: psn, Timeout: o.timeout,
		RetryCnt: o.retry, RNRRetry: o.rnr, MaxRdAtomic: 16},
		ibv.QPAttrState|ibv.QPAttrSQPSN|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|
			ibv.QPAttrRNRRetry|ibv.QPAttrMaxQPRdAtomic)
	return b, raw
}

// rawPeer is a raw endpoint playing the requester of an RC connection.
type rawPeer struct {
	*tt.Raw
	qpn uint32 // the QPN the QP sends its responses to
	dst uint32 // the QP's QPN
}

// send sends a request with headers h, its BTH destination and P_Key
// filled in, and payload.
func (r *rawPeer) send(h wire.Headers, payload []byte) {
	h.BTH.DestQP, h.BTH.PKey = r.dst, wire.DefaultPKey
	r.Send(h, payload)
}

// sendOnly sends a SEND ONLY asking for an ACK, with PSN psn and
// payload.
func (r *rawPeer) sendOnly(psn wire.PSN, payload []byte) {
	r.send(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PSN: psn, AckReq: true}}, payload)
}

// run acts on what the transport asked for after a call (transport.Run):
// the node makes a pass over every woken port, on the test's goroutine,
// whether the engine would run it at once or on a processor.
func (e *end) run(r transport.Run) {
	if r != transport.RunNone {
		e.port.Wake()
	}
}
