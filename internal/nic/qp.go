package nic

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/nic/cq"
	"github.com/softnic/softnic/internal/tm"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/internal/transport/rc"
	"github.com/softnic/softnic/internal/transport/ud"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// Limits used for validation.
const (
	maxQPWR    = 1 << 14
	maxSGE     = 32
	maxInline  = 512
	maxRdAtom  = 128
	maxCQE     = 32767
	maxSRQWR   = 1 << 14
	maxSRQSGE  = 27
	maxPortMTU = ibv.MTU4096
	pkeyTblLen = 1
	atomicHCA  = 1 // IBV_ATOMIC_HCA
	// pathMigMigrated is IBV_MIG_MIGRATED, the only path_mig_state
	// accepted (see QP.Modify).
	pathMigMigrated = 0
)

const (
	// rxeCapFlags are the flags the newest rxe reports (rxe_param.h
	// RXE_DEVICE_CAP_FLAGS; rxe-interop-facts.md §1): memory windows of
	// types 1 and 2B, fast registration, FLUSH and ATOMIC WRITE among
	// them. FLUSH_PERSISTENT is left to QueryDevice: softnic grants it
	// only over persistent memory (mem.Limits.PersistentMemory).
	rxeCapFlags = ibv.CapBadPKeyCntr | ibv.CapBadQKeyCntr | ibv.CapAutoPathMig | ibv.CapChangePhyPort |
		ibv.CapUDAVPortEnforce | ibv.CapPortActiveEvent | ibv.CapSysImageGUID | ibv.CapRCRNRNakGen | ibv.CapSRQResize |
		ibv.CapMemWindow | ibv.CapMemMgtExtensions | ibv.CapMemWindowType2B | ibv.CapFlushGlobal | ibv.CapAtomicWrite
)

// QueryDevice returns the device attributes.
func (n *NIC) QueryDevice() ibv.DeviceAttr {
	guid := n.nodeGUID()
	// XRC is softnic's own: rxe has none (rxe_param.h).
	caps := uint64(rxeCapFlags | ibv.CapXRC)
	if n.mem.Limits().PersistentMemory {
		caps |= ibv.CapFlushPersistent
	}
	a := ibv.DeviceAttr{
		FWVer:             "softnic 0.1",
		NodeGUID:          guid,
		SysImageGUID:      guid,
		MaxMRSize:         ^uint64(0),
		PageSizeCap:       0xfffff000,
		VendorID:          0xFFFFFF, // IBTA v1.4 A3.3.1, as newer rxe
		DeviceCapFlags:    caps,
		MaxQP:             1 << 16,
		MaxQPWR:           maxQPWR,
		MaxSGE:            maxSGE,
		MaxSGERd:          maxSGE,
		MaxCQ:             1 << 14,
		MaxCQE:            maxCQE,
		MaxMR:             1<<19 - 1,
		MaxPD:             1 << 20,
		MaxQPRdAtom:       maxRdAtom,
		MaxResRdAtom:      0x3f000,
		MaxQPInitRdAtom:   maxRdAtom,
		AtomicCap:         atomicHCA,
		MaxMW:             1 << 19,
		MaxAH:             32767,
		MaxSRQ:            1 << 14,
		MaxSRQWR:          maxSRQWR,
		MaxSRQSGE:         maxSRQSGE,
		MaxPKeys:          64,
		LocalCAAckDelay:   15,
		PhysPortCnt:       1,
		MaxInlineData:     maxInline,
		MaxMsgSize:        rc.MaxMsgSize,
		MaxFastRegPageLen: 512,
	}
	if link.CanMulticast(n.cfg.Link) {
		a.MaxMcastGrp = MaxMcastGroups
		a.MaxMcastQPAttach = MaxMcastQPAttach
		a.MaxTotalMcastQPAttach = MaxTotalMcastQPAttach
	}
	return a
}

// nodeGUID is an EUI-64 made from the address, as rxe makes one from the
// MAC (stable per address).
func (n *NIC) nodeGUID() uint64 {
	b := n.addr.As16()
	g := uint64(0x02) << 56 // locally administered
	for i := 10; i < 16; i++ {
		g |= uint64(b[i]) << (8 * (15 - i))
	}
	return g
}

// QPInitAttr describes a QP to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   ibv.QPType
	PD     *mem.PD
	SendCQ *cq.CQ
	RecvCQ *cq.CQ
	Cap    ibv.QPCap
	SigAll bool
	// SRQ, when set, is the shared receive queue the QP takes its receive
	// WQEs from instead of an RQ of its own (ibv_qp_init_attr.srq); the
	// receive capacities of Cap are then ignored and reported as 0.
	SRQ *SRQ
	// WQ, when set, is the work queue the QP takes its receive WQEs from
	// and completes them on (RecvCQ must then be nil or the WQ's CQ);
	// Cap's receive capacities are ignored as with an SRQ.
	WQ *WQ
	// Context is what the QP's asynchronous events carry in
	// AsyncEvent.Other.
	Context any
	// MaxTSOHeader is max_tso_header: the largest header of the QP's TSO
	// WRs; only UD QPs take TSO (TSOCaps), up to ud.MaxTSOHeader bytes.
	MaxTSOHeader int
	// XRCD is the domain of an XRC_RECV QP, which has no PD, no CQs and
	// no receive queue: each request's XRCETH names the XRC SRQ of XRCD
	// whose queue, PD and CQ it uses (ibv_create_qp_ex(3)).
	XRCD *XRCD
	// GSI makes the QP the NIC's General Services QP: a UD QP numbered 1
	// (GSIQPN) whose Q_Key is wire.GSIQKey, sent in every datagram and
	// the only one accepted (rxe_req.c init_req_packet, rxe_recv.c
	// check_keys: for QP1, GSI_QKEY). A NIC has at most one (errno.Busy).
	GSI bool
}

// QP is a queue pair of the NIC.
type QP struct {
	n      *NIC
	qpn    uint32
	typ    ibv.QPType
	pd     *mem.PD
	sendCQ *cq.CQ
	recvCQ *cq.CQ
	rq     *transport.RecvQueue
	t      qpTransport
	e      *qpEntry // the QP in the NIC's table: what NIC.run runs
	srq    *SRQ
	wq     *WQ
	shared *sharedRQ // the SRQ's or the WQ's: what rq belongs to, if not the QP
	ctx    any
	dr     drainState
	// lastWQE is set once IBV_EVENT_QP_LAST_WQE_REACHED went out for the
	// current stay in ERR.
	lastWQE atomic.Bool
	// toErr is set while a Modify takes the QP to ERR: the transport's
	// IBV_EVENT_QP_FATAL is for QPs that go there on their own.
	toErr atomic.Bool
	// gsi marks QP1, the General Services QP (QPInitAttr.GSI).
	gsi bool
	// mcast are the multicast groups the QP is attached to; guarded by mu.
	mcast []netip.Addr

	// An XRC_RECV QP's domain, and how many handles (its creation and
	// each OpenQP) are not yet destroyed.
	xrcd    *XRCD
	handles int // guarded by mu

	// peer is the address the QP's path leads to, whose budget
	// (peerBudgets) it uses; the zero Addr while it uses none. Guarded
	// by mu.
	peer netip.Addr

	mu   sync.Mutex  // serialises Modify and Destroy
	dead atomic.Bool // destroyed; read without mu by the post paths
}

// CreateQP creates a QP in the RESET state (ibv_create_qp).
func (n *NIC) CreateQP(a *QPInitAttr) (*QP, error) {
	switch {
	case a.Type == ibv.QPTypeXRCRecv:
		return n.createXRCRecv(a)
	case a.XRCD != nil:
		return nil, fmt.Errorf("%w: an XRC domain for a %v QP (XRC_RECV only)", errno.Invalid, a.Type)
	case a.SRQ != nil && a.SRQ.xrcd != nil:
		return nil, fmt.Errorf("%w: a %v QP on an XRC SRQ (XRC SRQs serve XRC_RECV QPs, by number)", errno.Invalid, a.Type)
	case a.Type == ibv.QPTypeXRCSend:
		// The initiator has a send queue only (ibv_create_qp_ex(3)).
		if a.SRQ != nil || a.WQ != nil || a.RecvCQ != nil && a.RecvCQ != a.SendCQ {
			return nil, fmt.Errorf("%w: an XRC_SEND QP has no receive side (SRQ, WQ or RecvCQ)", errno.Invalid)
		}
		a.RecvCQ = a.SendCQ // held, never completed on
		a.Cap.MaxRecvWR, a.Cap.MaxRecvSGE = 0, 0
	}
	recvCQ := a.RecvCQ
	if a.WQ != nil {
		switch {
		case a.SRQ != nil:
			return nil, fmt.Errorf("%w: QP with both an SRQ and a WQ", errno.Invalid)
		case a.WQ.n != n:
			return nil, fmt.Errorf("%w: the WQ is another device's", errno.Invalid)
		case recvCQ != nil && recvCQ != a.WQ.cq:
			return nil, fmt.Errorf("%w: a QP on a WQ completes receives on the WQ's CQ", errno.Invalid)
		}
		recvCQ = a.WQ.cq
	}
	var tml *tm.List
	if a.SRQ != nil && a.SRQ.tm != nil {
		// A tag-matching SRQ takes RC QPs only (ibv_create_srq_ex(3),
		// IBV_TM_CAP_RC), and every receive of its QPs completes on its
		// CQ (tag_matching.md: the TM-SRQ "reports all tag matching
		// completions and events to a dedicated CQ"), whatever recv_cq.
		if a.Type != ibv.QPTypeRC {
			return nil, fmt.Errorf("%w: a %v QP on a tag-matching SRQ", errno.NotSupported, a.Type)
		}
		tml, recvCQ = a.SRQ.tm, a.SRQ.cq
	}
	if a.PD == nil || a.SendCQ == nil || recvCQ == nil {
		return nil, fmt.Errorf("%w: QP needs a PD and both CQs", errno.Invalid)
	}
	c := a.Cap
	switch {
	case c.MaxSendWR > maxQPWR || c.MaxRecvWR > maxQPWR:
		return nil, fmt.Errorf("%w: max WR %d/%d exceeds %d", errno.Invalid, c.MaxSendWR, c.MaxRecvWR, maxQPWR)
	case c.MaxSendSGE > maxSGE || c.MaxRecvSGE > maxSGE:
		return nil, fmt.Errorf("%w: max SGE %d/%d exceeds %d", errno.Invalid, c.MaxSendSGE, c.MaxRecvSGE, maxSGE)
	case c.MaxInlineData > maxInline:
		return nil, fmt.Errorf("%w: max inline %d exceeds %d", errno.Invalid, c.MaxInlineData, maxInline)
	case a.MaxTSOHeader != 0 && a.Type != ibv.QPTypeUD:
		return nil, fmt.Errorf("%w: max_tso_header on a %v QP (TSO is UD only)", errno.Invalid, a.Type)
	case a.MaxTSOHeader < 0 || a.MaxTSOHeader > ud.MaxTSOHeader:
		return nil, fmt.Errorf("%w: max_tso_header %d exceeds %d", errno.Invalid, a.MaxTSOHeader, ud.MaxTSOHeader)
	}
	// Report what the QP really got, as rxe does (at least one of each).
	c.MaxSendWR = max(c.MaxSendWR, 1)
	c.MaxRecvWR = max(c.MaxRecvWR, 1)
	c.MaxSendSGE = max(c.MaxSendSGE, 1)
	c.MaxRecvSGE = max(c.MaxRecvSGE, 1)
	switch a.Type {
	case ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD, ibv.QPTypeXRCSend:
	default:
		return nil, fmt.Errorf("%w: QP type %v not supported", errno.Invalid, a.Type)
	}
	if a.GSI {
		// QP1 is a UD QP with a receive queue of its own, as the kernel's
		// MAD layer creates it (ib_mad_port_open: IB_QPT_GSI, no SRQ).
		switch {
		case a.Type != ibv.QPTypeUD:
			return nil, fmt.Errorf("%w: the GSI QP is a UD QP, not %v", errno.Invalid, a.Type)
		case a.SRQ != nil || a.WQ != nil:
			return nil, fmt.Errorf("%w: the GSI QP takes no SRQ or WQ", errno.Invalid)
		case a.MaxTSOHeader != 0:
			return nil, fmt.Errorf("%w: the GSI QP takes no TSO", errno.Invalid)
		}
	}
	qp := &QP{n: n, typ: a.Type, pd: a.PD, sendCQ: a.SendCQ, recvCQ: recvCQ, srq: a.SRQ, wq: a.WQ, ctx: a.Context, gsi: a.GSI}
	qp.dr.init(a.SendCQ, recvCQ)
	switch {
	case a.SRQ != nil:
		qp.shared = &a.SRQ.sharedRQ
	case a.WQ != nil:
		qp.shared = &a.WQ.sharedRQ
	}
	if qp.shared != nil {
		if err := qp.shared.attach(); err != nil {
			return nil, err
		}
		qp.rq = qp.shared.rq
		c.MaxRecvWR, c.MaxRecvSGE = 0, 0
	} else {
		qp.rq = transport.NewRecvQueue(int(c.MaxRecvWR), int(c.MaxRecvSGE))
	}
	if a.Type == ibv.QPTypeXRCSend {
		c.MaxRecvWR, c.MaxRecvSGE = 0, 0
	}
	shared := qp.shared != nil
	var fixed uint32
	if a.GSI {
		fixed = GSIQPN
	}
	e, err := n.registerQP(a.Type, fixed, func(qpn uint32, w transport.Waker) (Transport, error) {
		qp.qpn = qpn
		if a.Type == ibv.QPTypeUD {
			t, err := n.newUD(qp, qpn, a, c, w)
			qp.t = t
			return t, err
		}
		t, err := rc.New(rc.Config{
			QPN: qpn, Type: a.Type, PD: a.PD, Mem: n.mem,
			SendCQ: qp.dr.send, RecvCQ: qp.dr.recv, RQ: qp.rq, SRQ: shared, TM: tml, Cap: c, SigAll: a.SigAll,
			LocalAddr: n.addr, DstPort: n.cfg.PeerPort, SrcPort: n.cfg.Link.SrcPort(),
			Clock: n.clock, Counters: &n.ctr, Waker: w,
			OnAsync: qp.transportEvent, CC: n.cfg.CC,
		})
		qp.t = t
		return t, err
	})
	if err != nil {
		if shared {
			qp.shared.detach()
		}
		return nil, err
	}
	qp.e = e
	a.PD.Ref()
	a.SendCQ.Ref()
	recvCQ.Ref()
	return qp, nil
}

// transportEvent reports an asynchronous event of the QP's transport (RC,
// UC or UD alike) as the public event it stands for.
func (qp *QP) transportEvent(ev ibv.AsyncEventType) {
	if ev == ibv.EventQPFatal {
		qp.fatal()
		return
	}
	qp.postEvent(ev)
}

// fatal reports a transport's move to ERR: IBV_EVENT_QP_FATAL when it
// went there on its own (not while a Modify takes it there: rc reports
// both), then LAST_WQE_REACHED for a QP on an SRQ.
func (qp *QP) fatal() {
	if !qp.toErr.Load() {
		qp.postEvent(ibv.EventQPFatal)
	}
	qp.lastWQEReached()
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// Type returns the QP's transport type.
func (qp *QP) Type() ibv.QPType { return qp.typ }

// Limits returns the limits modify checks values against.
func (n *NIC) qpLimits() transport.Limits {
	return transport.Limits{
		MaxQPRdAtom: maxRdAtom, MaxQPInitRdAtom: maxRdAtom, MaxMTU: maxPortMTU,
		PortCount: 1, PKeyTableLen: pkeyTblLen,
		MaxSendWR: maxQPWR, MaxRecvWR: maxQPWR, MaxSGE: maxSGE, MaxInline: maxInline,
	}
}

// Modify changes the QP's attributes and state (ibv_modify_qp), after
// checking the transition and the attribute mask against the IBTA state
// table and the values against the device limits.
func (qp *QP) Modify(attr *ibv.QPAttr, mask ibv.AttrMask) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if err := qp.usable(); err != nil {
		return err
	}
	if attr == nil && mask != 0 {
		return fmt.Errorf("%w: modify QP %#x with mask %v but no attributes", errno.Invalid, qp.qpn, mask)
	}
	cur := qp.t.State()
	next := cur
	if mask&ibv.QPAttrState != 0 {
		next = attr.State
	}
	if err := transport.CheckModify(qp.typ, cur, next, mask); err != nil {
		return err
	}
	lim := qp.n.qpLimits()
	if qp.gsi {
		if mask&ibv.QPAttrQKey != 0 && attr.QKey != wire.GSIQKey {
			// QP1's Q_Key is fixed (IBTA 13.4.2; the kernel's MAD layer
			// gives it IB_QP1_QKEY, ib_mad.c ib_mad_change_qp_state_to_rts).
			return fmt.Errorf("%w: %v: Q_Key %#x on the GSI QP (it is %#x)", errno.Invalid, ibv.QPAttrQKey, attr.QKey, uint32(wire.GSIQKey))
		}
		lim.PrivilegedQKey = true // GSIQKey is a controlled Q_Key: QP1's own
	}
	if err := transport.CheckAttrValues(qp.typ, cur, attr, mask, lim); err != nil {
		return err
	}
	if mask&ibv.QPAttrPathMigState != 0 && attr.PathMigState != pathMigMigrated {
		// Only IBV_MIG_MIGRATED, "no migration armed", is accepted: with
		// no alternate path (IBV_QP_ALT_PATH is refused) there is nothing
		// to migrate to, so path migration is never armed and
		// IBV_EVENT_PATH_MIG / PATH_MIG_ERR are never raised.
		return fmt.Errorf("%w: %v: path_mig_state %d: path migration is not supported (only IBV_MIG_MIGRATED)",
			errno.Invalid, ibv.QPAttrPathMigState, attr.PathMigState)
	}
	if mask&ibv.QPAttrAV != 0 {
		// The path's GID must be of the NIC's address family: RoCEv2 sends
		// IPv4 from an IPv4 GID and IPv6 from an IPv6 one.
		if d := attr.AHAttr.GRH.DGID; !d.IsValid() || d.Unmap().Is4() != qp.n.addr.Unmap().Is4() {
			return fmt.Errorf("%w: %v: destination GID %v is not of the family of the device address %v",
				errno.Invalid, ibv.QPAttrAV, d, qp.n.addr)
		}
	}
	if next == ibv.QPStateErr && cur != ibv.QPStateErr {
		qp.toErr.Store(true)
		defer qp.toErr.Store(false)
	}
	run, err := qp.t.Modify(attr, mask)
	if err != nil {
		return err
	}
	if mask&ibv.QPAttrAV != 0 {
		qp.setPeerBudgetLocked()
	}
	qp.n.run(qp.e, run)
	qp.afterModify()
	if qp.ownRQ() {
		// A stage closed by a flush or a reset takes receives again once
		// the QP does (transport.Stage): not in RESET, and not if the
		// QP went on to ERR meanwhile.
		qp.rq.ReopenStage(qp.takesRecvs)
	}
	return nil
}

// takesRecvs reports whether the QP's state takes receives into its queue
// as they are posted: not RESET, which refuses them, nor ERR, which
// flushes them (IBTA 10.8.3.3).
func (qp *QP) takesRecvs() bool {
	st := qp.t.State()
	return st != ibv.QPStateReset && st != ibv.QPStateErr
}

// ownRQ reports whether the QP has a receive queue of its own (not an
// SRQ's or a WQ's, and not XRC's).
func (qp *QP) ownRQ() bool {
	return qp.rq != nil && qp.shared == nil && qp.typ != ibv.QPTypeXRCSend && qp.typ != ibv.QPTypeXRCRecv
}

// StageRecvs attaches st to the QP's own receive queue, nil detaching it
// (transport.Stage). The stage starts closed, or open when the QP already
// takes receives.
func (qp *QP) StageRecvs(st transport.Stage) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if err := qp.usable(); err != nil {
		return err
	}
	if !qp.ownRQ() {
		return fmt.Errorf("%w: QP %#x has no receive queue of its own", errno.Invalid, qp.qpn)
	}
	qp.rq.SetStage(st)
	if st != nil {
		qp.rq.ReopenStage(qp.takesRecvs)
	}
	return nil
}

// Query returns the QP's attributes and its creation attributes.
func (qp *QP) Query() ibv.QPAttr { return qp.t.Query() }

// State returns the QP's current state.
func (qp *QP) State() ibv.QPState { return qp.t.State() }

// usable reports why the QP cannot be used: destroyed, or its NIC closed.
func (qp *QP) usable() error {
	switch {
	case qp.dead.Load():
		return fmt.Errorf("%w: QP %#x destroyed", errno.Invalid, qp.qpn)
	case qp.n.Closed():
		return fmt.Errorf("%w: QP %#x", ErrClosed, qp.qpn)
	}
	return nil
}

// PostSend posts send work requests (ibv_post_send); on error it returns
// the index of the first WR not posted. The WRs go down once: the
// transport queues them and says what to run (transport.Run), and the
// engine runs it, the QP's requester at once on this goroutine for a
// small request to an idle queue (run to completion, NIC.kick).
func (qp *QP) PostSend(wrs []ibv.SendWR) (int, error) {
	if err := qp.usable(); err != nil {
		return 0, err
	}
	if qp.xrcd != nil {
		return 0, errNoSendQueue
	}
	n, run, err := qp.postSend(wrs, false)
	qp.n.run(qp.e, run)
	return n, err
}

// PostSendAll posts every WR of wrs or, if any is refused or the queue
// cannot take them all, none (ibv_wr_complete).
func (qp *QP) PostSendAll(wrs []ibv.SendWR) error {
	if err := qp.usable(); err != nil {
		return err
	}
	if qp.xrcd != nil {
		return errNoSendQueue
	}
	_, run, err := qp.postSend(wrs, true)
	qp.n.run(qp.e, run)
	return err
}

// postSend posts wrs to the QP's transport, all or none when all is set.
// It is the one call the engine makes to a transport's concrete type
// rather than through qpTransport: passed through an interface, wrs
// would escape, and the slice every ibv_post_send builds (verbs.QP.
// PostSend's variadic WRs) would cost an allocation per post.
func (qp *QP) postSend(wrs []ibv.SendWR, all bool) (int, transport.Run, error) {
	switch t := qp.t.(type) {
	case *rc.QP:
		if all {
			run, err := t.PostSendAll(wrs)
			return 0, run, err
		}
		return t.PostSend(wrs)
	case *ud.QP:
		if all {
			run, err := t.PostSendAll(wrs)
			return 0, run, err
		}
		return t.PostSend(wrs)
	}
	return 0, transport.RunNone, errNoTransport
}

var (
	errNoTransport = fmt.Errorf("%w: QP has no transport", errno.Invalid)
	errNoSendQueue = fmt.Errorf("%w: an XRC_RECV QP has no send queue", errno.Invalid)
)

// PostRecv posts receive work requests (ibv_post_recv).
func (qp *QP) PostRecv(wrs []ibv.RecvWR) (int, error) {
	if err := qp.usable(); err != nil {
		return 0, err
	}
	if qp.typ == ibv.QPTypeXRCSend || qp.typ == ibv.QPTypeXRCRecv {
		// XRC_SEND has no receive side; XRC_RECV takes its receives from
		// the XRC SRQs its requests name (ibv_create_qp_ex(3)).
		return 0, fmt.Errorf("%w: a %v QP has no receive queue", errno.Invalid, qp.typ)
	}
	if qp.shared != nil {
		// A QP on an SRQ has no receive queue of its own (rxe post_recv:
		// EINVAL; ibv_post_recv(3): use ibv_post_srq_recv).
		return 0, fmt.Errorf("%w: QP %#x takes its receives from an SRQ or WQ", errno.Invalid, qp.qpn)
	}
	if s := qp.t.State(); s == ibv.QPStateReset {
		return 0, fmt.Errorf("%w: post receive in state %v", transport.ErrState, s)
	}
	i, err := qp.rq.Post(wrs)
	if qp.t.State() == ibv.QPStateErr {
		// Receives posted in ERR are flushed at once.
		qp.t.FlushRecv()
	}
	return i, err
}

// Destroy destroys the QP (ibv_destroy_qp): outstanding work is dropped
// without completions, but for the sends a UD or UC QP was posted, which
// go out first (NIC.drainSends).
func (qp *QP) Destroy() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead.Load() {
		return fmt.Errorf("%w: QP %#x already destroyed", errno.Invalid, qp.qpn)
	}
	if qp.xrcd != nil {
		// An XRC_RECV QP goes with its last handle (ibv_open_qp(3)).
		if qp.handles--; qp.handles > 0 {
			return nil
		}
		qp.n.xrc.mu.Lock()
		delete(qp.n.xrc.tgts, qp.qpn)
		qp.n.xrc.mu.Unlock()
		qp.xrcd.unuse()
	}
	qp.detachAllMcastLocked()
	qp.dead.Store(true)
	if qp.ownRQ() {
		qp.rq.SetStage(nil) // its memory may go once Destroy returns
	}
	qp.n.unregisterQP(qp.qpn, sendsAlone(qp.typ) && qp.t.State() == ibv.QPStateRTS)
	qp.dropPeerBudgetLocked()
	if qp.xrcd == nil {
		qp.pd.Unref()
		qp.sendCQ.Unref()
		qp.recvCQ.Unref()
	}
	if qp.shared != nil {
		qp.shared.detach()
	}
	// Events about the QP still queued go with it (its QPN may be reused).
	qp.n.dropAsync(func(e *ibv.AsyncEvent) bool { return e.Type.IsQPEvent() && e.QPN == qp.qpn })
	return nil
}

// createXRCRecv creates an XRC_RECV QP in domain a.XRCD: no PD, CQs or
// receive queue of its own (ibv_create_qp_ex(3): IBV_QPT_XRC_RECV with
// IBV_QP_INIT_ATTR_XRCD). Its requests take their receive queue, PD and
// CQ from the XRC SRQ each names (rc.Config.XRCSRQ).
func (n *NIC) createXRCRecv(a *QPInitAttr) (*QP, error) {
	switch {
	case a.XRCD == nil:
		return nil, fmt.Errorf("%w: an XRC_RECV QP needs an XRC domain", errno.Invalid)
	case a.PD != nil || a.SendCQ != nil || a.RecvCQ != nil || a.SRQ != nil || a.WQ != nil:
		return nil, fmt.Errorf("%w: an XRC_RECV QP has no PD, CQ, SRQ or WQ of its own", errno.Invalid)
	case a.MaxTSOHeader != 0:
		return nil, fmt.Errorf("%w: max_tso_header on an XRC_RECV QP (TSO is UD only)", errno.Invalid)
	}
	x := a.XRCD
	if err := x.use(); err != nil {
		return nil, err
	}
	qp := &QP{n: n, typ: a.Type, ctx: a.Context, xrcd: x, handles: 1}
	qp.dr.init(nil, nil) // never completed on: no send queue, receives go to the SRQs' CQs
	qp.rq = transport.NewRecvQueue(1, 1)
	e, err := n.registerQP(a.Type, 0, func(qpn uint32, w transport.Waker) (Transport, error) {
		qp.qpn = qpn
		t, err := rc.New(rc.Config{
			QPN: qpn, Type: a.Type, Mem: n.mem,
			SendCQ: qp.dr.send, RQ: qp.rq, SRQ: true,
			XRCSRQ:    func(num uint32) (rc.XRCTarget, bool) { return n.xrc.target(x, num) },
			LocalAddr: n.addr, DstPort: n.cfg.PeerPort, SrcPort: n.cfg.Link.SrcPort(),
			Clock: n.clock, Counters: &n.ctr, Waker: w,
			OnAsync: qp.transportEvent, CC: n.cfg.CC,
		})
		qp.t = t
		return t, err
	})
	if err != nil {
		x.unuse()
		return nil, err
	}
	qp.e = e
	n.xrc.mu.Lock()
	if n.xrc.tgts == nil {
		n.xrc.tgts = map[uint32]*QP{}
	}
	n.xrc.tgts[qp.qpn] = qp
	n.xrc.mu.Unlock()
	return qp, nil
}
