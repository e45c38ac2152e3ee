package verbs

import (
	"sync"

	"github.com/softnic/softnic/nic"
)

// QPInitAttr describes a QP to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	Cap    QPCap
	// SigAll makes every send WR signaled (sq_sig_all).
	SigAll bool
	// SendOpsFlags enables the extended send interface (QP.Ex) for these
	// operations (ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS).
	SendOpsFlags SendOpsFlags
}

// QP is a queue pair (ibv_qp).
type QP struct {
	pd     *PD
	qp     *nic.QP
	init   QPInitAttr
	ex     *QPEx
	postMu sync.Mutex // serialises PostSend with WrStart..WrComplete
}

// CreateQP creates a QP in the RESET state (ibv_create_qp).
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, errno(nic.ErrInvalid)
	}
	q, err := pd.d.n.CreateQP(&nic.QPInitAttr{
		Type: attr.Type, PD: pd.pd, SendCQ: attr.SendCQ.q, RecvCQ: attr.RecvCQ.q,
		Cap: attr.Cap, SigAll: attr.SigAll,
	})
	if err != nil {
		return nil, errno(err)
	}
	attr.Cap = q.Query().Cap
	qp := &QP{pd: pd, qp: q, init: attr}
	if attr.SendOpsFlags != 0 {
		qp.ex = &QPEx{qp: qp, ops: attr.SendOpsFlags}
	}
	return qp, nil
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 { return qp.qp.QPN() }

// Modify changes attributes and state (ibv_modify_qp). The transition and
// mask are checked against the IBTA QP state table as the kernel's
// ib_modify_qp_is_ok does.
func (qp *QP) Modify(attr *QPAttr, mask AttrMask) error { return errno(qp.qp.Modify(attr, mask)) }

// Query returns the QP's attributes and creation attributes (ibv_query_qp).
func (qp *QP) Query() (QPAttr, QPInitAttr) { return qp.qp.Query(), qp.init }

// State returns the QP's current state.
func (qp *QP) State() QPState { return qp.qp.State() }

// PostSend posts wrs in order (ibv_post_send). It stops at the first WR it
// refuses: the returned count is the number posted, which is also the
// index of the bad WR (bad_wr), and err says why.
func (qp *QP) PostSend(wrs ...SendWR) (int, error) {
	qp.postMu.Lock()
	n, err := qp.qp.PostSend(wrs)
	qp.postMu.Unlock()
	return n, errno(err)
}

// PostRecv posts receive WRs (ibv_post_recv), with bad-WR reporting as
// PostSend.
func (qp *QP) PostRecv(wrs ...RecvWR) (int, error) {
	n, err := qp.qp.PostRecv(wrs)
	return n, errno(err)
}

// Destroy destroys the QP (ibv_destroy_qp).
func (qp *QP) Destroy() error { return errno(qp.qp.Destroy()) }
