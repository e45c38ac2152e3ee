package verbs

// XRC, eXtended Reliable Connection (rdma-core ibv_open_xrcd(3),
// ibv_create_srq_ex(3), ibv_open_qp(3), ibv_create_qp_ex(3)).

import (
	"fmt"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// XRCD is an XRC domain as one device holds it (ibv_xrcd). A domain
// groups XRC SRQs (CreateSRQEx with ibv.SRQTypeXRC) and XRC_RECV QPs
// (XRCD.CreateQP): an XRC_SEND QP's WR names a target SRQ by number
// (SendWR.RemoteSRQN, QPEx.WrSetXRCSRQN), and the XRC_RECV QP its packets
// reach takes the SEND's receive from that SRQ, checks rkeys in the SRQ's
// PD and completes on the SRQ's CQ, provided the SRQ is of its own
// domain; one connection thus serves every SRQ of the domain.
//
// ibv_open_xrcd shares a domain between processes through a file (fd and
// O_CREAT: the domain is the file's inode). OpenXRCD shares it between
// the devices of one Go process through a key: every OpenXRCD of the same
// non-empty key, on any device, opens the same domain. Nothing is shared
// across processes, since each process has its own NICs and their SRQ
// tables; peers in other processes reach a domain's SRQs only through
// their numbers on the wire. The empty key opens a domain of its own (fd
// -1).
type XRCD struct {
	d      *Device
	x      *nic.XRCD
	closed atomic.Bool
}

// OpenXRCD opens the XRC domain of key on the device, creating it if no
// open one has that key (ibv_open_xrcd with O_CREAT).
func (d *Device) OpenXRCD(key string) (*XRCD, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return &XRCD{d: d, x: nic.OpenXRCD(key)}, nil
}

func (x *XRCD) ok() bool { return x != nil && x.x != nil && !x.closed.Load() }

// Close closes this handle of the domain (ibv_close_xrcd). Closing the
// domain's last handle while XRC SRQs or XRC_RECV QPs remain in it is
// EBUSY; closing a handle twice is EINVAL.
func (x *XRCD) Close() error {
	if !x.ok() {
		return errNil("XRCD")
	}
	if err := x.x.Close(); err != nil {
		return err
	}
	x.closed.Store(true)
	return nil
}

// CreateQP creates an XRC_RECV QP in the domain (ibv_create_qp_ex with
// IBV_QPT_XRC_RECV and IBV_QP_INIT_ATTR_XRCD): the target half of XRC,
// with no PD, CQs, SRQ or receive queue of its own (those QPInitAttr
// fields must be unset, Type must be ibv.QPTypeXRCRecv) and no send
// queue: PostSend and PostRecv are EINVAL. Each request it takes names
// the XRC SRQ it uses in its XRCETH; a number that is no XRC SRQ of this
// domain on this device is NAKed as an invalid request and moves the QP
// to ERR (IBTA 9.3.7). It follows the kernel's XRC_TGT column of the QP
// state table (ib_modify_qp_is_ok): an RC responder's attributes.
func (x *XRCD) CreateQP(attr QPInitAttr) (*QP, error) {
	if !x.ok() {
		return nil, errNil("XRCD")
	}
	if err := x.d.check(); err != nil {
		return nil, err
	}
	switch {
	case attr.Type != ibv.QPTypeXRCRecv:
		return nil, fmt.Errorf("%w: XRCD.CreateQP makes XRC_RECV QPs, not %v (PD.CreateQP)", EINVAL, attr.Type)
	case attr.SendCQ != nil || attr.RecvCQ != nil || attr.SRQ != nil || attr.WQ != nil:
		return nil, fmt.Errorf("%w: an XRC_RECV QP has no CQ, SRQ or WQ of its own", EINVAL)
	case attr.SendOpsFlags != 0:
		return nil, fmt.Errorf("%w: an XRC_RECV QP sends nothing (send_ops_flags %#x)", EOPNOTSUPP, uint64(attr.SendOpsFlags))
	}
	qp := &QP{pd: &PD{d: x.d}}
	q, err := x.d.n.CreateQP(&nic.QPInitAttr{Type: attr.Type, XRCD: x.x, Context: qp, MaxTSOHeader: attr.MaxTSOHeader})
	if err != nil {
		return nil, err
	}
	attr.Cap = q.Query().Cap
	qp.qp, qp.init = q, attr
	x.d.objs.add(qp)
	return qp, nil
}

// OpenQP opens the XRC_RECV QP qpn of the device, created in this domain
// by another handle (ibv_open_qp): the same QP, which Modify and Query
// reach through either handle and which lives until every handle is
// destroyed. A QPN that is no XRC_RECV QP of the device, or one of
// another domain, is EINVAL.
func (x *XRCD) OpenQP(qpn uint32) (*QP, error) {
	if !x.ok() {
		return nil, errNil("XRCD")
	}
	if err := x.d.check(); err != nil {
		return nil, err
	}
	qp := &QP{pd: &PD{d: x.d}, init: QPInitAttr{Type: ibv.QPTypeXRCRecv}}
	q, err := x.d.n.OpenQP(x.x, qpn)
	if err != nil {
		return nil, err
	}
	qp.qp = q
	x.d.objs.add(qp)
	return qp, nil
}

// Num returns the number of an XRC SRQ (ibv_get_srq_num), what the WRs of
// an XRC_SEND QP put in RemoteSRQN to reach it; numbers are 24 bits and
// unique on their device. Other SRQs have none: EINVAL.
func (s *SRQ) Num() (uint32, error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	n, err := s.s.Num()
	return n, err
}

// WrSetXRCSRQN sets the last WR's remote SRQ number (ibv_wr_set_xrc_srqn;
// SendWR.RemoteSRQN), which an XRC_SEND QP's WRs must name. On other QP
// types it is EINVAL at WrComplete.
func (x *QPEx) WrSetXRCSRQN(num uint32) {
	w, _ := x.cur()
	if w == nil {
		return
	}
	if x.qp.init.Type != ibv.QPTypeXRCSend {
		x.fail(fmt.Errorf("%w: ibv_wr_set_xrc_srqn on a %v QP", EINVAL, x.qp.init.Type))
		return
	}
	if num > 1<<24-1 {
		x.fail(fmt.Errorf("%w: XRC SRQ number %#x exceeds 24 bits", EINVAL, num))
		return
	}
	w.RemoteSRQN = num
}
