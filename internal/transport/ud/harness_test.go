package ud_test

// The harness of UD's rule tests: nodes on a transporttest.Net, each with
// its own memory table, PD, MR, CQ and a UD QP in RTS. Every call these
// tests make into the transport's API (ud.New, Modify, PostSend, the
// receive queue's Post and FlushRecv, Query, State) is in this file,
// behind the helpers below; the nodes deliver datagrams and run Process
// (transporttest net.go).

import (
	"fmt"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/internal/transport/ud"
)

// opts configures an end's QP.
type opts struct {
	qkey    uint32
	portMTU ibv.MTU // the port's active MTU, the largest UD message; 0 is 4096
	maxWR   uint32  // 0 is 512
	sigAll  bool
}

// end is one node with a UD QP in RTS: a memory table, a PD, an MR over
// buf (1 MiB), one CQ for sends and receives and the QP's receive queue.
type end struct {
	t    testing.TB
	net  *tt.Net
	node *tt.Node
	port *tt.Port
	qp   *ud.QP
	tbl  *mem.Table
	pd   *mem.PD
	mr   *mem.MR
	buf  []byte
	cq   *tt.CQ
	rq   *transport.RecvQueue
}

// mrIOVA is where each end registers its buffer: fixed, so runs repeat.
const mrIOVA = 0x1000_0000

// newEnd makes a node at addr with a UD QP moved to RTS with o.qkey the
// way ibv_ud_pingpong does.
func newEnd(t testing.TB, n *tt.Net, addr string, o opts) *end {
	t.Helper()
	e := newQP(t, n, addr, o)
	e.toRTS(o.qkey)
	return e
}

// newQP makes a node at addr with a UD QP in RESET.
func newQP(t testing.TB, n *tt.Net, addr string, o opts) *end {
	t.Helper()
	if o.maxWR == 0 {
		o.maxWR = 512
	}
	mtu := ibv.MTU4096
	if o.portMTU != 0 {
		mtu = o.portMTU
	}
	e := &end{t: t, net: n, node: n.Node(addr), buf: make([]byte, 1<<20), cq: new(tt.CQ)}
	e.tbl = mem.NewTable(mem.Limits{KeySeed: 1})
	var err error
	if e.pd, err = e.tbl.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.tbl.RegMR(e.pd, e.buf, mrIOVA, true, ibv.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	c := ibv.QPCap{MaxSendWR: o.maxWR, MaxRecvWR: o.maxWR, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}
	e.rq = transport.NewRecvQueue(int(c.MaxRecvWR), int(c.MaxRecvSGE))
	e.port = e.node.Port(ibv.QPTypeUD)
	e.qp, err = ud.New(ud.Config{
		QPN: e.port.QPN(), PD: e.pd, Mem: e.tbl, SendCQ: e.cq, RecvCQ: e.cq, RQ: e.rq,
		Cap: c, SigAll: o.sigAll, LocalAddr: e.node.Addr(),
		MTU:      mtu.Bytes,
		Counters: &e.node.Counters,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.port.Bind(e.qp)
	return e
}

// toRTS moves e's QP RESET→INIT→RTR→RTS with Q_Key qkey.
func (e *end) toRTS(qkey uint32) {
	e.t.Helper()
	e.modify(ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1, QKey: qkey},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrQKey)
	e.modify(ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState)
	e.modify(ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: 0}, ibv.QPAttrState|ibv.QPAttrSQPSN)
}

// limits are the device limits modify checks values against (nic's).
var limits = transport.Limits{MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, MaxMTU: ibv.MTU4096, PortCount: 1,
	PKeyTableLen: 1, MaxSendWR: 1 << 14, MaxRecvWR: 1 << 14, MaxSGE: 32, MaxInline: 512}

// modifyErr modifies e's QP after the checks the engine makes first
// (transport.CheckModify, CheckAttrValues) and returns their error.
func (e *end) modifyErr(attr ibv.QPAttr, mask ibv.AttrMask) error {
	cur, next := e.qp.State(), e.qp.State()
	if mask&ibv.QPAttrState != 0 {
		next = attr.State
	}
	if err := transport.CheckModify(ibv.QPTypeUD, cur, next, mask); err != nil {
		return err
	}
	if err := transport.CheckAttrValues(ibv.QPTypeUD, cur, &attr, mask, limits); err != nil {
		return err
	}
	run, err := e.qp.Modify(&attr, mask)
	e.run(run)
	return err
}

// modify is modifyErr failing the test on error.
func (e *end) modify(attr ibv.QPAttr, mask ibv.AttrMask) {
	e.t.Helper()
	if err := e.modifyErr(attr, mask); err != nil {
		e.t.Fatalf("modify QP: %v", err)
	}
}

// post posts send WRs on e's QP, failing the test on error.
func (e *end) post(wrs ...ibv.SendWR) {
	e.t.Helper()
	_, run, err := e.qp.PostSend(wrs)
	e.run(run)
	if err != nil {
		e.t.Fatalf("post send: %v", err)
	}
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

// sge is the SGE of n bytes at off in e's MR.
func (e *end) sge(off, n int) ibv.SGE {
	return ibv.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}
}

// postRecvs posts n receive WRs of size bytes each at consecutive offsets
// from off, WRIDs wrid0, wrid0+1, ...
func (e *end) postRecvs(n, off, size int, wrid0 uint64) {
	e.t.Helper()
	for i := range n {
		e.postRecv(ibv.RecvWR{WRID: wrid0 + uint64(i), SGList: []ibv.SGE{e.sge(off+i*size, size)}})
	}
}

// avTo is an address vector towards dst's node, with the traffic class,
// hop limit and flow label given.
func (e *end) avTo(dst *end, tc, hop uint8, flow uint32) *ibv.AHAttr {
	return &ibv.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: ibv.GlobalRoute{DGID: dst.node.Addr(), TrafficClass: tc, HopLimit: hop, FlowLabel: flow}}
}

// send posts a signaled UD SEND of e.buf[off:off+n] to QP qpn through av.
func (e *end) send(av ibv.AddressHandle, qpn, qkey uint32, wrid uint64, off, n int) {
	e.t.Helper()
	e.post(ibv.SendWR{WRID: wrid, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{e.sge(off, n)}, AH: av, RemoteQPN: qpn, RemoteQKey: qkey})
}

// waitWC runs the network until e's CQ holds n completions, within a
// minute of fake time, and takes them.
func (e *end) waitWC(n int) []ibv.WorkCompletion {
	e.t.Helper()
	e.net.RunUntil(fmt.Sprintf("%d completions at %v", n, e.node.Addr()), time.Minute, func() bool { return e.cq.Len() >= n })
	return e.cq.Take(n)
}

// noWC fails the test if e's CQ holds completions after d of fake time.
func (e *end) noWC(d time.Duration) {
	e.t.Helper()
	e.net.Run(d)
	if got := e.cq.Take(-1); len(got) > 0 {
		e.t.Fatalf("unexpected completions at %v: %+v", e.node.Addr(), got)
	}
}

// run acts on what the transport asked for after a call (transport.Run):
// the node makes a pass over every woken port, on the test's goroutine,
// whether the engine would run it at once or on a processor.
func (e *end) run(r transport.Run) {
	if r != transport.RunNone {
		e.port.Wake()
	}
}
