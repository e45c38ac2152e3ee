// Package rc implements softnic's connected transports, RC, UC and XRC: the
// requester (requester.go), the responder (responder.go) and the completer
// (completer.go) of IBTA chapter 9, structured as rxe's rxe_req.c,
// rxe_resp.c and rxe_comp.c. Beside them: the send ring (sendqueue.go),
// request packet building (reqpacket.go), send completions
// (sendcomplete.go) and the responder's error table (resperr.go).
//
// A QP is driven by one goroutine at a time: the engine's processor calls
// Process, which drains the packets Deliver queued, runs the completer and
// the responder on them, then runs the requester, each within a budget.
// Timers only set a flag and wake the QP (STYLE.md 9). Application calls
// (PostSend, PostRecv, Modify, Query) take the QP lock briefly.
//
// XRC (IBTA 9.3.7 and the XRC annex; rdma-core ibv_create_qp_ex(3)) is RC
// with two QP types sharing the work: an XRC_SEND QP is an RC requester
// and completer whose request packets use the XRC opcodes and carry the
// XRCETH (the WR's RemoteSRQN); an XRC_RECV QP is an RC responder that
// takes each request's receive WQE, PD and CQ from the XRC SRQ its
// XRCETH names (Config.XRCSRQ), and answers with the XRC opcodes of the
// RC responses (no XRCETH). Everything else, PSNs, ACKs, NAKs,
// duplicates, retries and RNR, is RC's own code.
package rc

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/cc"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/tm"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// Flow-control constants (rxe_param.h).
const (
	// MaxUnackedPSNs bounds the requester's window: the packets it may
	// have sent and not yet seen acknowledged. softnic deliberately keeps
	// 512 where rxe keeps 128 (RXE_MAX_UNACKED_PSNS); the IBTA bounds it
	// only by half the 24-bit PSN space. At 128 a bandwidth test between
	// slow hosts idles waiting for ACKs (docs/performance.md,
	// "rc.MaxUnackedPSNs: why 512"). A softnic peer's socket buffer holds
	// the window even at path MTU 4096 when it may set its 8 MiB
	// (UDPConfig.SocketBuffer; root or rmem_max); what many QPs toward one
	// peer have in flight together is bounded by the NIC's budget toward
	// it (PeerBudget).
	MaxUnackedPSNs = 512
	// RetryUnackedPSNs is the most the window can be after a timeout
	// (completer.lossLocked): the go-back-N sends at most rxe's whole
	// window (RXE_MAX_UNACKED_PSNS) again, and acknowledgements grow it
	// back. A timer acted on late (a vCPU off its host CPU) would
	// otherwise queue a whole window in front of the ACKs it waits for
	// and time out again (docs/performance.md, "rc.RetryUnackedPSNs:
	// why 128 after a timeout"). The IBTA sets what is resent (9.7.6.1.3:
	// from the oldest unacknowledged PSN) but not how much at once; a
	// smaller burst after a timeout is what TCP does too (RFC 5681 3.1:
	// the window after a retransmit timeout is one segment).
	RetryUnackedPSNs = 128
	// minUnackedPSNs is the smallest window losses shrink it to
	// (completer.lossLocked). A window of w costs about w packets a loss
	// (go-back-N, IBTA 9.7.5.1.2), and a path losing one packet in p
	// sustains about 1.2/sqrt(p) (completer.growLocked), 7 at 3%: the
	// floor sets the cost of every loss once losses are that frequent.
	// TCP's is two segments (RFC 5681 3.1); at 8 the requester asks for
	// an ACK every fourth packet (AckReq at half the window,
	// sendPacketLocked; docs/performance.md, "rc.minUnackedPSNs: why 8").
	minUnackedPSNs = 8
	// maxPktPerAck forces AckReq on one in this many middle packets
	// (RXE_MAX_PKT_PER_ACK).
	maxPktPerAck = 64
	// budget bounds the packets one Process pass handles or sends, so one
	// busy QP cannot starve the others on its processor.
	budget = 64
)

// Config is what the engine gives a QP at creation.
type Config struct {
	QPN    uint32
	Type   ibv.QPType // QPTypeRC, QPTypeUC, QPTypeXRCSend or QPTypeXRCRecv
	PD     *mem.PD
	Mem    *mem.Table
	SendCQ transport.CQ
	RecvCQ transport.CQ
	RQ     *transport.RecvQueue // the QP's own RQ or its SRQ
	SRQ    bool                 // RQ is shared: not flushed or reset with the QP
	// TM, when set, is the tag list of the tag-matching SRQ that RQ
	// belongs to (RC only): SENDs are matched against it (startTMLocked),
	// and RecvCQ is the SRQ's CQ.
	TM *tm.List
	// XRCSRQ, on an XRC_RECV QP, resolves the XRC SRQ number of a
	// request's XRCETH to the SRQ's receive queue, PD and CQ; it reports
	// false for a number that names no XRC SRQ of the QP's XRC domain.
	// PD, RQ and RecvCQ are then unused until a request names an SRQ.
	XRCSRQ    func(num uint32) (XRCTarget, bool)
	Cap       ibv.QPCap
	SigAll    bool
	LocalAddr netip.Addr
	DstPort   uint16 // UDP destination port of peers (wire.UDPPort)
	SrcPort   uint16 // UDP source port when not 0: the link's (link.Link SrcPort)
	Clock     clock.Clock
	Counters  *transport.Counters
	// Waker schedules a pass of the QP on its processor when a timer
	// fires (timers.go). nil: nothing wakes the QP (a test that drives
	// Process itself).
	Waker transport.Waker
	// OnAsync reports asynchronous events (QP fatal, SQ drained, last WQE
	// reached); it runs without the QP lock held.
	OnAsync func(ev ibv.AsyncEventType)
	// CC, when set, is the NIC's congestion control (DCQCN): the QP has
	// a reaction point (cc.RP) that CNPs addressed to it cut the rate
	// of (NoteCNP), and its requester sends at that rate. nil: no
	// congestion control, and nothing on the send path asks for it.
	CC *ibv.CCParams
}

// XRCTarget is what an XRC_RECV QP uses of an XRC SRQ: its receive
// queue, the PD its receives and the rkeys of requests naming it are
// checked in, and the CQ its receives complete on.
type XRCTarget struct {
	RQ *transport.RecvQueue
	PD *mem.PD
	CQ transport.CQ
}

// QP is an RC, UC or XRC queue pair's transport state.
type QP struct {
	cfg Config
	// class is the transport class of the opcodes the QP sends (IBTA
	// 9.2: ClassRC, ClassUC or ClassXRC); startPacket ORs it into the
	// RC opcodes the requester and responder build.
	class wire.Opcode
	xrc   bool // an XRC_SEND or XRC_RECV QP

	inbox transport.Inbox

	mu    sync.Mutex
	state ibv.QPState // guarded by mu
	attr  ibv.QPAttr  // guarded by mu
	pmtu  int         // guarded by mu
	encap wire.Encap  // guarded by mu: headers of everything this QP sends

	sq   sendQueue // guarded by mu
	req  requester // guarded by mu
	comp completer // guarded by mu
	resp responder // guarded by mu
	// flight is the QP's share of the budget toward its peer
	// (PeerBudget); guarded by mu, some of it by the budget's.
	flight flight

	timeout       time.Duration // guarded by mu; 0 = no retransmit timer
	retryTimer    clock.Timer   // guarded by mu
	retryArmed    bool          // guarded by mu
	retryDeadline time.Time     // guarded by mu
	// timerAt is when the retransmit timer fires next; probeAt, when
	// probeArmed, when the early retry goes back (armProbeLocked).
	timerAt    time.Time   // guarded by mu
	probeAt    time.Time   // guarded by mu
	probeArmed bool        // guarded by mu
	rnrTimer   clock.Timer // guarded by mu
	timerFired atomic.Bool // set by the retransmit timer
	// rp is the reaction point of congestion control (Config.CC), nil
	// without; guarded by mu but for rp.Note. pace wakes the QP when
	// its pacer lets it send again.
	rp   *cc.RP
	pace transport.PaceTimer // guarded by mu
	// peerQPN is attr.DestQPN, for the notification point, which
	// reads it without the lock (PeerQPN); peerAddr the peer's address
	// (the path's destination), for the reaction point's check of a
	// CNP's source (NoteCNP).
	peerQPN  atomic.Uint32
	peerAddr atomic.Pointer[netip.Addr]
	rnrFired atomic.Bool // set by the RNR timer
	// reorderTimer ends the responder's reorder window at reorderAt
	// (reorder.go); guarded by mu.
	reorderTimer clock.Timer
	reorderAt    time.Time
	reorderFired atomic.Bool // set by the reorder timer
	sqDrained    bool        // guarded by mu: SQ-drained event sent for this SQD

	events transport.EventQueue // guarded by mu; delivered after unlock
	wc     ibv.WorkCompletion   // guarded by mu; the completion being pushed
	batch  []*transport.RxPacket
	// ucSent holds, for a UC QP, the send queue index of the WQE of each
	// packet the current pass queued (ucFlushLocked); guarded by mu.
	ucSent []uint64
}

// New makes a QP in the RESET state.
func New(cfg Config) (*QP, error) {
	class := wire.ClassRC
	switch cfg.Type {
	case ibv.QPTypeRC:
	case ibv.QPTypeUC:
		class = wire.ClassUC
	case ibv.QPTypeXRCSend:
		class = wire.ClassXRC
	case ibv.QPTypeXRCRecv:
		class = wire.ClassXRC
		if cfg.XRCSRQ == nil {
			return nil, fmt.Errorf("%w: an XRC_RECV QP needs Config.XRCSRQ", errno.Invalid)
		}
	default:
		return nil, fmt.Errorf("%w: rc.New for a %v QP", errno.Invalid, cfg.Type)
	}
	if cfg.DstPort == 0 {
		cfg.DstPort = wire.UDPPort
	}
	if cfg.Waker == nil {
		cfg.Waker = noWaker{}
	}
	qp := &QP{cfg: cfg, class: class, xrc: class == wire.ClassXRC}
	if cfg.CC != nil {
		qp.rp = cc.NewRP(cfg.CC)
	}
	qp.sq.init(int(cfg.Cap.MaxSendWR), int(cfg.Cap.MaxSendSGE), int(cfg.Cap.MaxInlineData))
	qp.attr.Cap = cfg.Cap
	qp.attr.PathMTU = ibv.MTU256 // rxe: path_mtu defaults to 256 until modified
	qp.comp.startAt(0)
	qp.pmtu = 256
	return qp, nil
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.cfg.QPN }

// Type returns RC, UC, XRC_SEND or XRC_RECV.
func (qp *QP) Type() ibv.QPType { return qp.cfg.Type }

// State returns the current state.
func (qp *QP) State() ibv.QPState {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.state
}

// isRC reports whether the QP is reliable (acknowledged): RC and both
// XRC types.
func (qp *QP) isRC() bool { return qp.cfg.Type != ibv.QPTypeUC }

// Query returns the QP's attributes (ibv_query_qp).
func (qp *QP) Query() ibv.QPAttr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	a := qp.attr
	a.State = qp.state
	a.CurState = qp.state
	a.SQDraining = qp.state == ibv.QPStateSQD && !qp.sqDrained
	a.SQPSN = uint32(qp.req.psn)
	a.RQPSN = uint32(qp.resp.psn)
	return a
}

// Modify applies attr under mask. The engine has already validated the
// transition and the values (transport.CheckModify, CheckAttrValues). It
// asks for a pass on the processor: the new state may let the QP send,
// resend or flush.
func (qp *QP) Modify(attr *ibv.QPAttr, mask ibv.AttrMask) (transport.Run, error) {
	qp.mu.Lock()
	qp.modifyLocked(attr, mask)
	qp.mu.Unlock()
	qp.flushEvents()
	return transport.RunLater, nil
}

func (qp *QP) modifyLocked(attr *ibv.QPAttr, mask ibv.AttrMask) {
	transport.StoreAttrs(&qp.attr, attr, mask)
	if mask&ibv.QPAttrPathMTU != 0 {
		qp.pmtu = attr.PathMTU.Bytes()
	}
	if mask&ibv.QPAttrTimeout != 0 {
		qp.timeout = 0
		if attr.Timeout != 0 {
			// 4.096 µs × 2^timeout (IBTA 9.7.6.1.3; rxe_qp.c IB_QP_TIMEOUT).
			qp.timeout = time.Duration(4096<<attr.Timeout) * time.Nanosecond
		}
	}
	if mask&ibv.QPAttrRetryCnt != 0 {
		qp.comp.retryCnt = attr.RetryCnt
	}
	if mask&ibv.QPAttrRNRRetry != 0 {
		qp.comp.rnrRetry = attr.RNRRetry
	}
	if mask&ibv.QPAttrRQPSN != 0 {
		qp.resp.psn = wire.PSN(attr.RQPSN & wire.PSNMask)
	}
	if mask&ibv.QPAttrSQPSN != 0 {
		psn := wire.PSN(attr.SQPSN & wire.PSNMask)
		qp.req.psn, qp.req.highPSN = psn, psn
		qp.comp.startAt(psn)
	}
	if mask&ibv.QPAttrMaxDestRdAtomic != 0 {
		qp.resp.resources = make([]resource, qp.attr.MaxDestRdAtomic)
		qp.resp.nextRes = 0
	}
	if mask&(ibv.QPAttrAV|ibv.QPAttrDestQPN) != 0 {
		qp.setPathLocked()
		qp.peerQPN.Store(qp.attr.DestQPN)
		peer := qp.encap.Dst.Unmap()
		qp.peerAddr.Store(&peer)
	}
	if mask&ibv.QPAttrState == 0 {
		return
	}
	prev := qp.state
	qp.state = attr.State
	switch attr.State {
	case ibv.QPStateReset:
		qp.resetLocked()
	case ibv.QPStateSQD:
		qp.sqDrained = false
	case ibv.QPStateErr:
		if prev != ibv.QPStateErr {
			qp.state = prev
			qp.toErrorLocked()
		}
	}
}

// setPathLocked computes the IP/UDP header of everything the QP sends
// (rxe_net.c prepare4/prepare6; rxe-interop-facts.md §2.1, §3).
func (qp *QP) setPathLocked() {
	g := &qp.attr.AHAttr.GRH
	e := transport.RouteEncap(qp.cfg.LocalAddr, g, qp.cfg.DstPort)
	// A flow label gives the source port (rdma_flow_label_to_udp_sport);
	// without one rxe derives it from both QPNs, symmetric, so both ends
	// of a connection use the same port (captures/FACTS.md).
	// A link that sends from one port (a UDP socket bound to 4791) gives
	// it, so that the ICRC is computed over the port on the wire.
	if qp.cfg.SrcPort != 0 {
		e.SrcPort = qp.cfg.SrcPort
	} else if g.FlowLabel != 0 {
		e.SrcPort = wire.FlowLabelSrcPort(g.FlowLabel)
	} else {
		e.SrcPort = wire.ConnectedSrcPort(qp.cfg.QPN, qp.attr.DestQPN)
	}
	qp.encap = e
}

// resetLocked returns the QP to its state after creation (IBTA 10.3.1:
// RESET discards every WR without completions).
func (qp *QP) resetLocked() {
	qp.stopTimersLocked()
	qp.dropRndvLocked()
	qp.sq.reset()
	transport.DiscardRecvs(qp.cfg.RQ, qp.cfg.SRQ)
	qp.resp.dropTMLocked(qp)
	qp.req = requester{}
	qp.comp = completer{retryCnt: qp.attr.RetryCnt, rnrRetry: qp.attr.RNRRetry}
	qp.comp.startAt(0)
	qp.resp.dropHeldLocked(qp)
	res := qp.resp.resources
	clear(res)
	qp.resp = responder{resources: res}
	qp.timerFired.Store(false)
	qp.rnrFired.Store(false)
	qp.reorderFired.Store(false)
	qp.inbox.Release()
}

// NoteCNP notes a CNP from src addressed to the QP, which the next
// pass's requester acts on (cc.RP.Note); it reports false, the CNP
// ignored, when the QP has no congestion control (Config.CC) or src is
// not its peer's address: only the notification point at the far end of
// the QP's path may slow it down, as only its peer's packets reach it
// (rxe_recv.c check_addr), and a CNP from anywhere else — a stale path,
// a forged one — would cut the rate of a QP it says nothing about.
// Safe from any goroutine.
func (qp *QP) NoteCNP(src netip.Addr) bool {
	if qp.rp == nil {
		return false
	}
	if peer := qp.peerAddr.Load(); peer == nil || *peer != src.Unmap() {
		return false
	}
	qp.rp.Note()
	return true
}

// PeerQPN returns the QP number of the QP's peer (its DestQPN): where
// the notification point sends its CNPs. Safe from any goroutine.
func (qp *QP) PeerQPN() uint32 { return qp.peerQPN.Load() }

// Deliver queues a received packet for the QP; the QP releases it. It
// returns false (and the caller keeps the packet) when the inbox is full.
func (qp *QP) Deliver(p *transport.RxPacket) bool { return qp.inbox.Add(p) }

// RequestsInFlight returns how many of the QP's send WQEs have been sent
// (wholly or in part, or rewound by a retry) and await the peer's
// acknowledgement or response (startedLocked):
// what a requester's application may be waiting for. The engine asks it
// when an application did not answer a message at once (its hold for
// the answer, nic's reader.holdForAnswer).
func (qp *QP) RequestsInFlight() int {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.startedLocked()
}

// Process runs the QP's protocol work: received packets, timers, and the
// requester, each within a budget. It reports whether work remains (the
// engine then runs it again).
func (qp *QP) Process(out transport.Output) (more bool) {
	qp.batch = qp.inbox.Take(qp.batch[:0], budget)

	qp.mu.Lock()
	// One reading of the clock for the whole pass: the handlers below take
	// it as a parameter (STYLE.md 10).
	now := qp.cfg.Clock.Now()
	// A read reply in progress goes first: later requests wait behind it
	// so responses leave in PSN order (rxe_resp.c read_reply).
	more = qp.resp.readReplyLocked(qp, out, now)
	qp.resp.replayLocked(qp, out, now)
	for i, p := range qp.batch {
		if qp.resp.reading() {
			// Put the rest back at the front of the inbox: the reply's
			// pacer's timer wakes the QP when it stopped for its rate,
			// else the next pass goes on at once.
			qp.inbox.PutBack(qp.batch[i:])
			more = more || !qp.resp.reply.paced
			break
		}
		qp.receiveLocked(p, out, now)
		p.Release()
		qp.resp.replayLocked(qp, out, now)
	}
	clear(qp.batch)
	qp.resp.reorderTimerLocked(qp, out, now)
	qp.resp.flushAckLocked(qp, out)
	if qp.resp.reading() && !qp.resp.reply.paced {
		more = qp.resp.readReplyLocked(qp, out, now) || more
	}
	qp.timersLocked(now)
	left := qp.requesterLocked(out, now)
	qp.endFlightLocked(left)
	if left {
		more = true
	}
	if !qp.isRC() {
		qp.ucFlushLocked(out)
	}
	qp.mu.Unlock()
	qp.flushEvents()

	// What waits in the inbox behind a reply held by its pacer waits for
	// the pacer's timer too (a pass now would only put it back).
	return more || (!qp.inbox.Empty() && !qp.resp.reply.paced)
}

// receiveLocked routes one packet to the responder or the completer
// (rxe_recv.c rxe_rcv_pkt: requests to the responder, responses to the
// completer), after the per-QP state checks of hdr_check.
func (qp *QP) receiveLocked(p *transport.RxPacket, out transport.Output, now time.Time) {
	c := qp.cfg.Counters
	pkt := &p.Pkt
	// rxe_recv.c check_addr: a connected QP takes packets only from its
	// peer's address.
	if p.Encap.Src.Unmap() != qp.encap.Dst.Unmap() {
		c.DropAddr.Add(1)
		return
	}
	switch {
	case pkt.Is(wire.MaskRequest):
		// Requests need RTR or later (rxe_recv.c check_type_state).
		if qp.state < ibv.QPStateRTR || qp.state == ibv.QPStateErr {
			c.DropState.Add(1)
			return
		}
		qp.resp.requestLocked(qp, pkt, out, now)
	case pkt.Is(wire.MaskResponse):
		if !qp.isRC() || qp.state < ibv.QPStateRTS || qp.state == ibv.QPStateErr {
			c.DropState.Add(1)
			return
		}
		if qp.xrc {
			// An XRC response is the RC one with the XRC class (IBTA
			// 9.3.7: no XRCETH in responses, so the same layout): the
			// completer sees it as RC.
			pkt.Opcode = pkt.Opcode.Op()
			pkt.Info = pkt.Opcode.Info()
		}
		qp.comp.responseLocked(qp, pkt, now)
	default:
		c.DropNoQP.Add(1)
	}
}

// toErrorLocked moves the QP to ERR and flushes every outstanding WR with
// WR_FLUSH_ERR (IBTA 10.3.1, 11.4.2.1; rxe_comp.c flush_send_queue).
func (qp *QP) toErrorLocked() {
	if qp.state == ibv.QPStateErr {
		return
	}
	qp.state = ibv.QPStateErr
	qp.stopTimersLocked()
	qp.resp.dropHeldLocked(qp)
	qp.flushLocked()
	qp.events.Add(ibv.EventQPFatal)
}

// flushLocked completes every WQE still queued with WR_FLUSH_ERR.
func (qp *QP) flushLocked() {
	for !qp.sq.empty() {
		w := qp.sq.head()
		if w.state != wqeDone {
			w.status = ibv.WCWRFlushErr
			qp.completeSendLocked(w, true)
		}
		qp.sq.pop()
	}
	qp.req.idx = qp.sq.headIdx
	// The receive in progress was posted first: it is flushed before the
	// ones still queued behind it, so completions keep posting order.
	qp.flushRecvLocked()
}

// flushRecvLocked completes the QP's receives with WR_FLUSH_ERR.
func (qp *QP) flushRecvLocked() {
	qp.resp.dropTMLocked(qp)
	transport.FlushRecvs(qp.cfg.RecvCQ, qp.cfg.QPN, &qp.resp.wqe, &qp.resp.haveWQE, qp.cfg.RQ, qp.cfg.SRQ)
}

// FlushRecv completes every posted receive with WR_FLUSH_ERR if the QP is
// in ERR (receives posted in ERR are flushed, IBTA 10.8.3.3).
func (qp *QP) FlushRecv() {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state == ibv.QPStateErr {
		qp.flushRecvLocked()
	}
}

func (qp *QP) flushEvents() { qp.events.Deliver(&qp.mu, qp.cfg.OnAsync) }

// Close stops the QP's timers and releases queued packets (destroy).
func (qp *QP) Close() {
	qp.mu.Lock()
	qp.stopTimersLocked()
	qp.resp.dropHeldLocked(qp)
	qp.leaveBudgetLocked()
	qp.mu.Unlock()
	qp.inbox.Release()
}

// sendHeaders starts a packet in out's buffer: the BTH for opcode op with
// the QP's destination and P_Key.
func (qp *QP) startPacket(out transport.Output, h *wire.Headers) ([]byte, int) {
	b := out.Buf()
	// RC opcodes in the QP's class: a no-op on RC and on UC (whose
	// requests come in UC opcodes), the XRC opcodes on XRC (IBTA 9.2).
	h.BTH.Opcode |= qp.class
	h.BTH.PKey = wire.DefaultPKey
	h.BTH.DestQP = qp.attr.DestQPN
	n, err := wire.PutHeaders(b, h)
	if err != nil {
		panic(err) // opcodes come from the table: unreachable
	}
	return b, n
}

// finishSplitPacket pads, checksums and queues a packet whose headers
// are at b[:hdr] and whose payload the link sends from where it lies
// (wire.FinishSplit).
func (qp *QP) finishSplitPacket(out transport.SplitOutput, b []byte, hdr int, payload []byte) {
	n, err := wire.FinishSplit(b, &qp.encap, hdr, payload)
	if err != nil {
		panic(err) // sizes are bounded by the PMTU: unreachable
	}
	out.SendSplit(n, hdr, payload, &qp.encap)
}

// finishPacket pads, checksums and queues a packet whose headers are at
// b[:hdr] and whose payload of n bytes follows them.
func (qp *QP) finishPacket(out transport.Output, b []byte, hdr, n int) {
	total, err := wire.Finish(b, &qp.encap, hdr, n)
	if err != nil {
		panic(err) // sizes are bounded by the PMTU: unreachable
	}
	out.Send(total, &qp.encap)
}
