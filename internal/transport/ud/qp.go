// Package ud implements softnic's Unreliable Datagram transport (IBTA
// chapters 9 and 10 for UD QPs): SEND and SEND_WITH_IMM of at most one port
// MTU per message, addressed per work request by an address handle, a
// destination QP number and a Q_Key carried in the DETH; no
// acknowledgements and no PSN checks, as in rxe (rxe_req.c, rxe_resp.c
// for IB_QPT_UD). Beyond rxe, TSO work requests (tso.go): one WR sent as
// several SEND_ONLY datagrams of a header and a piece each.
//
// A QP is driven the way package rc drives RC and UC QPs: the engine's
// processor calls Process, which drains the datagrams Deliver queued and
// then sends what the send queue holds, each within a budget (STYLE.md
// 8). Application calls (PostSend, Modify, Query) take the QP lock
// briefly; receives are posted straight into the RecvQueue the engine
// gave the QP (its own or a shared one).
package ud

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/cc"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

const (
	// budget bounds the datagrams one Process pass receives or sends, so
	// one busy QP cannot starve the others on its processor.
	budget = 64
	// GRHLen is the size of the area at the front of every UD receive
	// buffer that holds the packet's global route header: for RoCEv2 its
	// IP header, as rxe copies a union rdma_network_hdr there
	// (ibv_post_recv(3) NOTES; rxe_resp.c send_data_in callers).
	GRHLen = 40
	// qkeyUseQP is the Q_Key bit that, set in a send WR's Q_Key, stands
	// for the QP's own Q_Key (IBTA 10.2.5).
	qkeyUseQP = 1 << 31
)

// Config is what the engine gives a UD QP at creation.
type Config struct {
	QPN    uint32
	PD     *mem.PD
	Mem    *mem.Table
	SendCQ transport.CQ
	RecvCQ transport.CQ
	// RQ is the QP's own receive queue or its SRQ's.
	RQ *transport.RecvQueue
	// SRQ says RQ is shared: it is neither flushed nor reset with the QP.
	SRQ bool
	Cap ibv.QPCap
	// SigAll makes every send WR signaled (sq_sig_all).
	SigAll bool
	// LocalAddr is the NIC's address, the source of every datagram.
	LocalAddr netip.Addr
	// DstPort is the UDP destination port of peers (wire.UDPPort).
	DstPort uint16
	// SrcPort, when not 0, is the UDP source port of every datagram: the
	// link's (link.Link SrcPort: a UDP socket sends from the port it is
	// bound to), so that the ICRC is computed over the port on the wire.
	// 0 gives rxe's per-QP port.
	SrcPort uint16
	// MTU returns the port MTU in bytes, the largest UD message (rxe_req.c
	// get_mtu: port.mtu_cap for UD, not a path MTU). It is called for each
	// message as it is sent, so a port MTU that follows the interface's
	// (rxe_net.c NETDEV_CHANGEMTU) applies to WQEs not yet sent. nil
	// means 4096.
	MTU func() int
	// MaxTSOHeader is the QP's max_tso_header (ibv_create_qp_ex(3)): the
	// largest header a TSO WR may carry, at most MaxTSOHeader; 0 means
	// the QP takes no TSO WRs.
	MaxTSOHeader int
	// GSI makes the QP the General Services QP (QP1): its Q_Key is
	// wire.GSIQKey from creation, every datagram it sends carries that
	// Q_Key whatever the WR says (rxe_req.c init_req_packet: qp_num 1
	// sends GSI_QKEY), and receives are checked against it as against any
	// UD QP's Q_Key (rxe_recv.c check_keys). The engine refuses a modify
	// to another Q_Key.
	GSI      bool
	Counters *transport.Counters
	// OnAsync reports affiliated asynchronous events; it runs without the
	// QP lock held.
	OnAsync func(ev ibv.AsyncEventType)
	// CC, when set, is the NIC's congestion control (DCQCN): the QP has
	// a reaction point (cc.RP) that the CNPs addressed to it cut the rate
	// of (NoteCNP), and it sends its datagrams at that rate, whatever
	// their destinations (mlx5's rate limiter is the QP's too). Clock
	// times the pacer and Waker wakes the QP when it may send again.
	// nil: no congestion control, and nothing on the send path asks.
	CC    *ibv.CCParams
	Clock clock.Clock
	Waker transport.Waker
}

// QP is a UD queue pair's transport state.
type QP struct {
	cfg     Config
	srcPort uint16 // UDP source port of everything the QP sends

	inbox transport.Inbox
	batch []*transport.RxPacket // owned by Process
	lens  []int                 // guarded by mu: the lengths of the datagrams sendLocked queued

	mu      sync.Mutex
	state   ibv.QPState          // guarded by mu
	attr    ibv.QPAttr           // guarded by mu
	psn     wire.PSN             // guarded by mu: next send PSN
	sq      sendQueue            // guarded by mu
	haveWQE bool                 // guarded by mu: wqe holds the RQ's head
	wqe     transport.RecvWQE    // guarded by mu
	events  transport.EventQueue // guarded by mu; delivered after unlock
	// sqdPending is set from a modify to SQD until the drain is
	// reported (sqDrainedLocked). Guarded by mu.
	sqdPending bool
	encap      wire.Encap // guarded by mu: the datagram sendPacketLocked builds
	// rp is the reaction point of congestion control (Config.CC), nil
	// without; guarded by mu but for rp.Note. pace wakes the QP when
	// its pacer lets it send again.
	rp   *cc.RP
	pace transport.PaceTimer // guarded by mu
	wc   ibv.WorkCompletion  // guarded by mu: the completion completeSendLocked builds
}

// New makes a UD QP in the RESET state.
func New(cfg Config) (*QP, error) {
	if cfg.RQ == nil || cfg.SendCQ == nil || cfg.RecvCQ == nil || cfg.PD == nil || cfg.Mem == nil {
		return nil, fmt.Errorf("%w: UD QP needs a PD, both CQs and a receive queue", errno.Invalid)
	}
	if cfg.DstPort == 0 {
		cfg.DstPort = wire.UDPPort
	}
	if cfg.MTU == nil {
		cfg.MTU = func() int { return ibv.MTU4096.Bytes() }
	}
	if cfg.Counters == nil {
		cfg.Counters = new(transport.Counters)
	}
	qp := &QP{cfg: cfg, srcPort: wire.RxeSrcPort(cfg.QPN)}
	if cfg.CC != nil {
		if cfg.Clock == nil || cfg.Waker == nil {
			return nil, fmt.Errorf("%w: congestion control needs a clock and a waker", errno.Invalid)
		}
		qp.rp = cc.NewRP(cfg.CC)
	}
	if cfg.SrcPort != 0 {
		qp.srcPort = cfg.SrcPort
	}
	if cfg.MaxTSOHeader < 0 || cfg.MaxTSOHeader > MaxTSOHeader {
		return nil, fmt.Errorf("%w: max_tso_header %d, device limit %d", errno.Invalid, cfg.MaxTSOHeader, MaxTSOHeader)
	}
	qp.sq.init(int(cfg.Cap.MaxSendWR), int(cfg.Cap.MaxSendSGE), int(cfg.Cap.MaxInlineData), cfg.MaxTSOHeader)
	qp.lens = make([]int, 0, budget)
	qp.attr.Cap = cfg.Cap
	if cfg.GSI {
		qp.attr.QKey = wire.GSIQKey
	}
	return qp, nil
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.cfg.QPN }

// SrcPort returns the UDP source port of the QP's datagrams: Config's
// SrcPort, else 0xC000 + hash_32(QPN, 14), as rxe gives UD QPs (rxe_qp.c
// rxe_qp_init_req).
func (qp *QP) SrcPort() uint16 { return qp.srcPort }

// State returns the current state.
func (qp *QP) State() ibv.QPState {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.state
}

// Query returns the QP's attributes (ibv_query_qp).
func (qp *QP) Query() ibv.QPAttr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	a := qp.attr
	a.State, a.CurState = qp.state, qp.state
	a.SQPSN = uint32(qp.psn)
	a.PathMTU = ibv.MTUFromBytes(qp.cfg.MTU()) // the port MTU as it is now
	return a
}

// Modify applies attr under mask. The engine has already checked the
// transition and the values (transport.CheckModify, CheckAttrValues). It
// asks for a pass on the processor: the new state may let the QP send.
func (qp *QP) Modify(attr *ibv.QPAttr, mask ibv.AttrMask) (transport.Run, error) {
	qp.mu.Lock()
	qp.modifyLocked(attr, mask)
	qp.mu.Unlock()
	qp.flushEvents()
	return transport.RunLater, nil
}

func (qp *QP) modifyLocked(attr *ibv.QPAttr, mask ibv.AttrMask) {
	a := &qp.attr
	transport.StoreAttrs(a, attr, mask)
	if mask&ibv.QPAttrSQPSN != 0 {
		qp.psn = wire.PSN(attr.SQPSN & wire.PSNMask)
	}
	if mask&ibv.QPAttrState == 0 {
		return
	}
	prev := qp.state
	qp.sqdPending = false
	switch attr.State {
	case ibv.QPStateReset:
		qp.state = attr.State
		qp.resetLocked()
	case ibv.QPStateErr:
		if prev != ibv.QPStateErr {
			qp.toErrorLocked(false)
		}
	case ibv.QPStateSQD:
		qp.state = attr.State
		// A UD WQE leaves in one datagram and completes as it leaves, so
		// the send queue has nothing in flight once the processor stops
		// starting new WQEs: it is drained at once (IBTA 10.3.1, SQD).
		// A TSO WQE sends its pieces over several passes when it has
		// more than a pass's budget: one caught midway is finished
		// first (sendLocked), and the drain reported then.
		qp.sqdPending = true
		if !qp.midWQELocked() {
			qp.sqDrainedLocked()
		}
	default:
		qp.state = attr.State
	}
}

// sqDrainedLocked reports the send queue drained after a modify to SQD,
// once: IBV_EVENT_SQ_DRAINED when the modify asked for it
// (en_sqd_async_notify).
func (qp *QP) sqDrainedLocked() {
	if qp.sqdPending && qp.attr.EnSQDAsyncNotify {
		qp.events.Add(ibv.EventSQDrained)
	}
	qp.sqdPending = false
}

// resetLocked returns the QP to its state after creation: every WR is
// discarded without a completion (IBTA 10.3.1, RESET).
func (qp *QP) resetLocked() {
	qp.sq.reset()
	qp.haveWQE = false
	transport.DiscardRecvs(qp.cfg.RQ, qp.cfg.SRQ)
	qp.psn = 0
	qp.inbox.Release()
}

// toErrorLocked moves the QP to ERR and completes every outstanding WR
// with WR_FLUSH_ERR (IBTA 10.3.1, ERR). fatal reports
// IBV_EVENT_QP_FATAL (the QP went there on its own, not by a modify).
func (qp *QP) toErrorLocked(fatal bool) {
	qp.state = ibv.QPStateErr
	qp.flushSendLocked()
	qp.flushRecvLocked()
	if fatal {
		qp.events.Add(ibv.EventQPFatal)
	}
}

// toSQELocked moves the QP to the Send Queue Error state after a send WR
// completed in error: the remaining send WRs are flushed, receives go on,
// and a modify to RTS resumes sending (IBTA 10.3.1: SQE is the send
// queue error state of the unreliable services; ibv_modify_qp(3)
// IBV_QPS_SQE). rxe has no SQE and moves the QP to ERR instead.
func (qp *QP) toSQELocked() {
	qp.state = ibv.QPStateSQE
	qp.flushSendLocked()
}

// flushSendLocked completes every queued send WR with WR_FLUSH_ERR.
func (qp *QP) flushSendLocked() {
	for !qp.sq.empty() {
		w := qp.sq.pop()
		w.status = ibv.WCWRFlushErr
		qp.completeSendLocked(w)
	}
}

// flushRecvLocked completes the QP's receive WRs with WR_FLUSH_ERR: the
// one it holds and, without an SRQ, every one still posted.
func (qp *QP) flushRecvLocked() {
	transport.FlushRecvs(qp.cfg.RecvCQ, qp.cfg.QPN, &qp.wqe, &qp.haveWQE, qp.cfg.RQ, qp.cfg.SRQ)
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

// Deliver queues a received datagram for the QP, which releases it. It
// returns false (the caller keeps the packet) when the inbox is full.
func (qp *QP) Deliver(p *transport.RxPacket) bool { return qp.inbox.Add(p) }

// Process receives the queued datagrams and sends from the send queue,
// each within a budget. It reports whether work remains.
func (qp *QP) Process(out transport.Output) (more bool) {
	qp.batch = qp.inbox.Take(qp.batch[:0], budget)

	qp.mu.Lock()
	for _, p := range qp.batch {
		qp.receiveLocked(p)
		p.Release()
	}
	clear(qp.batch)
	more = qp.sendLocked(out)
	qp.mu.Unlock()
	qp.flushEvents()

	return more || !qp.inbox.Empty()
}

// Close releases queued datagrams and stops the pacer's timer (destroy).
func (qp *QP) Close() {
	qp.mu.Lock()
	qp.pace.Stop()
	qp.mu.Unlock()
	qp.inbox.Release()
}

// NoteCNP notes a CNP addressed to the QP, which its next pass acts on
// (cc.RP.Note); it reports false, the CNP ignored, when the QP has no
// congestion control (Config.CC). A UD QP sends to any address, so the
// CNP's source src is not checked (a connected QP's is: rc.QP.NoteCNP).
// Safe from any goroutine.
func (qp *QP) NoteCNP(src netip.Addr) bool {
	if qp.rp == nil {
		return false
	}
	qp.rp.Note()
	return true
}
