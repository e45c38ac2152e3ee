package verbs

import (
	"fmt"
	"sync"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// QPInitAttr describes a QP to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	// Type is the transport service: QPTypeRC, QPTypeUC, QPTypeUD or
	// QPTypeXRCSend (the XRC initiator: an RC send queue whose WRs name
	// the target's XRC SRQ in RemoteSRQN; it has no receive side, so
	// RecvCQ may be nil, SRQ and WQ must be, and PostRecv is EINVAL).
	// XRC_RECV QPs are made with XRCD.CreateQP.
	Type ibv.QPType
	// SendCQ and RecvCQ receive the QP's send and receive completions;
	// they may be the same CQ.
	SendCQ *CQ
	RecvCQ *CQ
	// Cap are the queue sizes asked for; CreateQP refuses sizes above the
	// device limits and QP.Query reports the sizes the QP got.
	Cap ibv.QPCap
	// SigAll makes every send WR signaled (sq_sig_all).
	SigAll bool
	// SendOpsFlags enables the extended send interface (QP.Ex) for these
	// operations (ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS).
	// Operations the QP type cannot carry are refused with EOPNOTSUPP, as
	// rxe refuses them.
	SendOpsFlags SendOpsFlags
	// SRQ, when set, is the shared receive queue the QP takes its receive
	// WQEs from (ibv_qp_init_attr.srq); Cap's receive sizes are then
	// ignored (reported as 0) and QP.PostRecv is EINVAL: post to the SRQ.
	SRQ *SRQ
	// WQ, when set, is the work queue the QP takes its receive WQEs from
	// (a softnic extension standing for an indirection table of one WQ,
	// ibv_qp_init_attr_ex.rwq_ind_tbl): receives complete on the WQ's CQ,
	// so RecvCQ must be nil or that CQ; Cap's receive sizes are ignored
	// and QP.PostRecv is EINVAL, as with an SRQ. See WQ.
	WQ *WQ
	// MaxTSOHeader is max_tso_header (ibv_create_qp_ex with
	// IBV_QP_INIT_ATTR_MAX_TSO_HEADER): the largest header the QP's TSO
	// WRs (ibv.WRTSO, QPEx.WrSendTSO) may carry. Only UD QPs take it, up
	// to MaxTSOHeader bytes; anything else is EINVAL. A UD QP created
	// without it refuses TSO WRs with EINVAL. mlx5 takes it on
	// RAW_PACKET QPs only, where the header is an Ethernet frame's; on
	// softnic's UD it is any bytes the application puts in front of
	// each piece (IPoIB's LSO does so with its IPoIB and IP headers).
	MaxTSOHeader int
}

// MaxTSOHeader is the largest QPInitAttr.MaxTSOHeader softnic takes
// (192 bytes); ibv.TSOCaps (Device.QueryDeviceEx) gives the largest TSO
// payload.
const MaxTSOHeader = nic.MaxTSOHeader

// QP is a queue pair (ibv_qp).
type QP struct {
	pd     *PD
	qp     *nic.QP
	init   QPInitAttr
	ex     *QPEx
	postMu sync.Mutex // serialises PostSend with WrStart..WrComplete
}

func (qp *QP) ok() bool { return qp != nil && qp.qp != nil }

// Send operations the extended interface accepts per QP type (rxe
// provider RXE_SUP_RC_QP_SEND_OPS_FLAGS, RXE_SUP_UC_QP_SEND_OPS_FLAGS).
const (
	rcSendOps = SendOpsRDMAWrite | SendOpsRDMAWriteWithImm | SendOpsSend | SendOpsSendWithImm |
		SendOpsRDMARead | SendOpsAtomicCmpAndSwp | SendOpsAtomicFetchAdd | SendOpsLocalInv |
		SendOpsBindMW | SendOpsSendWithInv | SendOpsFlush | SendOpsAtomicWrite
	// UC also takes LOCAL_INV, as the ibv_post_send(3) table and mlx5 do
	// (rxe's provider leaves it out), and not SEND_WITH_INV, which IBTA
	// has no UC opcode for (the ibv_post_send(3) table; mlx5's
	// MLX5_SUPPORTED_SEND_OPS_FLAGS_UC): rxe's provider takes it in
	// send_ops_flags and the kernel fails the WR later; softnic refuses it
	// at creation.
	ucSendOps = SendOpsRDMAWrite | SendOpsRDMAWriteWithImm | SendOpsSend | SendOpsSendWithImm |
		SendOpsLocalInv | SendOpsBindMW
	// UD also takes TSO, which rxe has not (RXE_SUP_UD_QP_SEND_OPS_FLAGS
	// is SEND and SEND_WITH_IMM).
	udSendOps = SendOpsSend | SendOpsSendWithImm | SendOpsTSO
)

// CreateQP creates a QP in the RESET state (ibv_create_qp). Both CQs must
// be live CQs of this package; capacities above the device limits are
// EINVAL, and so are CQs, an SRQ or a WQ of another device than the PD's.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	return pd.createQP(attr, false)
}

// createQP is CreateQP, and CreateGSIQP when gsi is set.
func (pd *PD) createQP(attr QPInitAttr, gsi bool) (*QP, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	defer release()
	for _, c := range []struct {
		name string
		cq   *CQ
	}{{"SendCQ", attr.SendCQ}, {"RecvCQ", attr.RecvCQ}} {
		switch {
		case c.cq == nil && c.name == "RecvCQ" && attr.WQ != nil:
			continue // the WQ's
		case c.cq == nil && c.name == "RecvCQ" && attr.Type == ibv.QPTypeXRCSend:
			continue // XRC_SEND has no receive side
		case c.cq == nil:
			return nil, fmt.Errorf("%w: QPInitAttr.%s is nil", EINVAL, c.name)
		case !c.cq.ok():
			return nil, errNil("QPInitAttr." + c.name)
		case c.cq.dead.Load():
			return nil, fmt.Errorf("%w: QPInitAttr.%s is destroyed", EINVAL, c.name)
		}
		if err := pd.d.sameDevice("QPInitAttr."+c.name, c.cq.d); err != nil {
			return nil, err
		}
	}
	if attr.SRQ.ok() {
		if err := pd.d.sameDevice("QPInitAttr.SRQ", attr.SRQ.pd.d); err != nil {
			return nil, err
		}
	}
	if attr.WQ.ok() {
		if err := pd.d.sameDevice("QPInitAttr.WQ", attr.WQ.pd.d); err != nil {
			return nil, err
		}
	}
	if attr.Type == ibv.QPTypeXRCRecv {
		return nil, fmt.Errorf("%w: an XRC_RECV QP is made in an XRC domain (XRCD.CreateQP)", EINVAL)
	}
	if attr.SendOpsFlags != 0 {
		allowed := rcSendOps
		switch attr.Type {
		case ibv.QPTypeUC:
			allowed = ucSendOps
		case ibv.QPTypeUD:
			allowed = udSendOps
		}
		if extra := attr.SendOpsFlags &^ allowed; extra != 0 {
			return nil, fmt.Errorf("%w: send_ops_flags %#x not supported on %v QPs", EOPNOTSUPP, uint64(extra), attr.Type)
		}
	}
	srq, err := attr.SRQ.engine()
	if err != nil {
		return nil, err
	}
	wq, err := attr.WQ.engine()
	if err != nil {
		return nil, err
	}
	var recvCQ *nic.CQ
	if attr.RecvCQ != nil {
		recvCQ = attr.RecvCQ.q
	}
	qp := &QP{pd: pd}
	q, err := pd.d.n.CreateQP(&nic.QPInitAttr{
		Type: attr.Type, PD: pd.pd, SendCQ: attr.SendCQ.q, RecvCQ: recvCQ,
		Cap: attr.Cap, SigAll: attr.SigAll, SRQ: srq, WQ: wq, Context: qp,
		MaxTSOHeader: attr.MaxTSOHeader, GSI: gsi,
	})
	if err != nil {
		return nil, err
	}
	attr.Cap = q.Query().Cap
	if attr.WQ != nil && attr.RecvCQ == nil {
		attr.RecvCQ = attr.WQ.cq
	}
	qp.qp, qp.init = q, attr
	if attr.SendOpsFlags != 0 {
		qp.ex = &QPEx{qp: qp, ops: attr.SendOpsFlags}
	}
	pd.d.objs.add(qp)
	return qp, nil
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 {
	if !qp.ok() {
		return 0
	}
	return qp.qp.QPN()
}

// Modify changes attributes and state (ibv_modify_qp). The transition and
// mask are checked against the IBTA QP state table as the kernel's
// ib_modify_qp_is_ok does, and the values against the device limits; a
// refusal wraps EINVAL, names the attribute in question and leaves the QP
// as it was. A QP entering RESET takes its completions out of its CQs, as
// libmlx5 does (rxe's provider leaves them); receives of an SRQ or a WQ
// stay queued.
func (qp *QP) Modify(attr *ibv.QPAttr, mask ibv.AttrMask) error {
	if err := qp.live(); err != nil {
		return err
	}
	return qp.qp.Modify(attr, mask)
}

// Query returns the QP's attributes and creation attributes (ibv_query_qp);
// after Device.Close, as for a QP not made by CreateQP, states
// QPStateUnknown and no creation attributes.
func (qp *QP) Query() (ibv.QPAttr, QPInitAttr) {
	if qp.live() != nil {
		return ibv.QPAttr{State: ibv.QPStateUnknown, CurState: ibv.QPStateUnknown}, QPInitAttr{}
	}
	return qp.qp.Query(), qp.init
}

// State returns the QP's current state (QPStateUnknown for a QP not made
// by CreateQP, and after Device.Close).
func (qp *QP) State() ibv.QPState {
	if qp.live() != nil {
		return ibv.QPStateUnknown
	}
	return qp.qp.State()
}

// PostSend posts wrs in order (ibv_post_send). It stops at the first WR it
// refuses: the returned count is the number posted, which is also the
// index of the bad WR (bad_wr), and err says why: EINVAL for a WR the QP
// cannot carry, an AH or fast-registration MR of another device, the
// IBV_SEND_IP_CSUM flag (softnic has no checksum offload: see
// errIPCsum), inline data
// (SendInline without InlineData) from SGEs at an address no MR of the
// QP's PD covers, or a QP in RESET, INIT or
// RTR; ENOMEM (also matching ENOSPC) for a full send queue. WRs posted in
// ERR complete with WCWRFlushErr.
//
// Inline data from SGEs is copied when the WR is posted, and, as
// ibv_post_send(3) says, "the L_Key will not be checked": a C provider
// reads the SGE's address whatever its lkey. A Go program's address
// means something only through registered memory, so softnic finds it
// among the PD's MRs: the SGE's own MR when its lkey names a valid MR of
// the PD that covers the range, else any MR of the PD registered at its
// buffer's own address (RegMR) that covers it, whatever the lkey and the
// MR's access rights. Only an address no MR of the PD covers is refused,
// there rather than sending zeros.
//
// PostSend and BindMW on one QP may be called from many goroutines at
// once; each post is atomic. While a WrStart batch of the QP's extended
// interface is open, a PostSend or BindMW from another goroutine waits
// until WrComplete or WrAbort ends it, as on mlx5, whose ibv_post_send
// and ibv_wr_start take the same send-queue lock; from the goroutine that
// holds the batch it would wait on itself forever, so it is refused at
// once with EBUSY, posting nothing (libibverbs leaves ibv_post_send
// inside one's own ibv_wr_start batch undefined).
func (qp *QP) PostSend(wrs ...ibv.SendWR) (int, error) {
	if err := qp.live(); err != nil {
		return 0, err
	}
	if err := qp.lockPost(); err != nil {
		return 0, err
	}
	defer qp.postMu.Unlock()
	return qp.postLocked(wrs)
}

// lockPost takes postMu for a PostSend or BindMW, waiting for a post or a
// WrStart batch of another goroutine to end, or refuses at once with
// EBUSY when the calling goroutine holds the QP's batch: it would wait on
// itself. The batch records its goroutine's token (goroutine) once it
// holds postMu, before that goroutine can call anything else, so the
// token read here is the caller's own exactly when the caller holds the
// batch.
func (qp *QP) lockPost() error {
	if qp.postMu.TryLock() {
		return nil
	}
	if x := qp.ex; x != nil && x.owner.Load() == goroutine() {
		return fmt.Errorf("%w: QP %#x has an open ibv_wr_start batch on this goroutine: complete it with WrComplete or drop it with WrAbort first", EBUSY, qp.QPN())
	}
	qp.postMu.Lock()
	return nil
}

// postLocked posts wrs with postMu held and notes the binds posted.
func (qp *QP) postLocked(wrs []ibv.SendWR) (int, error) {
	ok, foreign := qp.pd.d.checkWRs(wrs)
	n, err := qp.qp.PostSend(wrs[:ok])
	qp.noteBinds(wrs[:n])
	if err == nil && foreign != nil {
		return n, fmt.Errorf("WR %d: %w", n, foreign)
	}
	return n, err
}

// PostRecv posts receive WRs (ibv_post_recv), with bad-WR reporting as
// PostSend: EINVAL for too many SGEs or a QP in RESET, ENOMEM (and
// ENOSPC) for a full receive queue.
func (qp *QP) PostRecv(wrs ...ibv.RecvWR) (int, error) {
	if err := qp.live(); err != nil {
		return 0, err
	}
	n, err := qp.qp.PostRecv(wrs)
	return n, err
}

// RecvStage is where a program posts receives without calling the
// engine, for a binding whose every call into Go costs (softnic's C
// libibverbs, whose ibv_post_recv writes them into memory of its own).
// The QP's receive queue pulls the staged receives, oldest first and
// before anything posted after them through PostRecv, when it needs one
// and finds itself empty; a flush (ERR) or a reset also closes the stage,
// and the program then posts through PostRecv until a modify to INIT, RTR
// or RTS reopens it. Pull appends the staged WRs to buf and empties the
// stage (their SGLists valid until the next Pull), closing it with close;
// Reopen opens it. The stage keeps the count of what the queue holds,
// staged or not, so that the program refuses a post to a full queue with
// ENOMEM as PostRecv would: Reserve counts one WR PostRecv is about to
// queue, false when the queue is full, and Removed one WR leaving it
// (taken by a message, flushed, discarded). Every call comes with the
// queue's lock held: they are never concurrent for one QP.
type RecvStage interface {
	Pull(buf []ibv.RecvWR, close bool) []ibv.RecvWR
	Reopen()
	Reserve() bool
	Removed()
}

// StageRecvs attaches st to the QP's own receive queue (nil detaches it;
// Destroy does too). EINVAL for a QP on an SRQ or a WQ, and for XRC.
func (qp *QP) StageRecvs(st RecvStage) error {
	if err := qp.live(); err != nil {
		return err
	}
	return qp.qp.StageRecvs(st)
}

// Destroy destroys the QP (ibv_destroy_qp): its outstanding work is
// dropped without completions, and it no longer holds its PD and CQs.
// Destroying it again is EINVAL.
func (qp *QP) Destroy() error {
	if !qp.ok() {
		return errNil("QP")
	}
	if err := qp.pd.d.asyncBusy(qp); err != nil {
		return fmt.Errorf("destroy QP %#x: %w", qp.QPN(), err)
	}
	if err := qp.qp.Destroy(); err != nil {
		return err
	}
	qp.pd.d.objs.del(qp)
	return nil
}
