package nic

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/internal/transport/rc"
	"github.com/softnic/softnic/internal/transport/ud"
)

// qpTransport is the transport behind a QP as nic.QP drives it: an RC/UC
// QP of package rc or a UD QP of package ud. Posting sends is the one
// call nic.QP makes to the concrete type instead (QP.postSend).
type qpTransport interface {
	Transport
	State() ibv.QPState
	Query() ibv.QPAttr
	// Modify applies a checked modify and says what to run for it.
	Modify(attr *ibv.QPAttr, mask ibv.AttrMask) (transport.Run, error)
	FlushRecv()
}

var (
	_ qpTransport = (*rc.QP)(nil)
	_ qpTransport = (*ud.QP)(nil)
)

// DefaultPortMTU is the port MTU of a NIC whose link cannot tell its
// interface's MTU and whose Config leaves PortMTU unset: the largest IB
// MTU, which rxe reports as max_mtu and, on a netdev of 4176 bytes or
// more, as active_mtu (ActiveMTU; rxe-interop-facts.md §2.10).
const DefaultPortMTU = ibv.MTU4096

// PortMTU returns the port's active MTU (ibv_port_attr.active_mtu):
// Config.PortMTU when set, else ActiveMTU of the link's interface MTU as
// it is now (rxe.c rxe_set_mtu, re-run on NETDEV_CHANGEMTU), else
// DefaultPortMTU. It bounds UD messages: rxe sizes UD packets by the port
// MTU (rxe_req.c get_mtu: port.mtu_cap), not by a path MTU, and a UD
// message longer than it is completed without being sent (IBTA
// C10-93.1.1). RC and UC QPs use their own path MTU, which modify_qp
// checks against the port's max_mtu (4096), not this (rxe_qp.c
// rxe_qp_chk_attr).
func (n *NIC) PortMTU() ibv.MTU {
	if m := n.cfg.PortMTU; m != 0 {
		return m // checked by New
	}
	if mtu := n.cfg.Link.MTU(); mtu > 0 {
		return ActiveMTU(mtu)
	}
	return DefaultPortMTU
}

// MaxTSOHeader is the largest max_tso_header a UD QP may ask for.
const MaxTSOHeader = ud.MaxTSOHeader

// TSOCaps returns the device's segmentation-offload capabilities
// (ibv_query_device_ex tso_caps): UD TSO of up to ud.MaxTSO payload
// bytes. mlx5 reports TSO for RAW_PACKET QPs only (the kernel's
// mlx5_ib_query_device) and rxe none; softnic's is UD's.
func TSOCaps() ibv.TSOCaps {
	return ibv.TSOCaps{MaxTSO: ud.MaxTSO, SupportedQPTs: ud.TSOSupportedQPTs}
}

// newUD makes the UD transport of qp.
func (n *NIC) newUD(qp *QP, qpn uint32, a *QPInitAttr, c ibv.QPCap, w transport.Waker) (*ud.QP, error) {
	return ud.New(ud.Config{
		QPN: qpn, PD: a.PD, Mem: n.mem, SendCQ: qp.dr.send, RecvCQ: qp.dr.recv,
		RQ: qp.rq, SRQ: qp.shared != nil, Cap: c, SigAll: a.SigAll,
		LocalAddr: n.addr, DstPort: n.cfg.PeerPort, SrcPort: n.cfg.Link.SrcPort(),
		MTU:          func() int { return n.PortMTU().Bytes() },
		MaxTSOHeader: a.MaxTSOHeader,
		GSI:          a.GSI,
		Counters:     &n.ctr,
		OnAsync:      qp.transportEvent,
		CC:           n.cfg.CC,
		Clock:        n.clock,
		Waker:        w,
	})
}

// lastWQEReached posts IBV_EVENT_QP_LAST_WQE_REACHED for a QP attached to
// an SRQ that has entered ERR, once per entry: in ERR the QP takes no more
// WQEs from the SRQ, so the application may now reclaim the ones it still
// owns (IBTA 11.6.3.1, ibv_get_async_event(3)).
func (qp *QP) lastWQEReached() {
	if qp.srq != nil && qp.lastWQE.CompareAndSwap(false, true) {
		qp.dr.lastWQEFired()
		qp.postEvent(ibv.EventQPLastWQEReached)
	}
}

// afterModify runs the QP's bookkeeping after a successful modify: the
// last-WQE event on entering ERR, its re-arming on RESET.
func (qp *QP) afterModify() {
	switch qp.t.State() {
	case ibv.QPStateErr:
		qp.lastWQEReached()
	case ibv.QPStateReset:
		qp.lastWQE.Store(false)
		qp.dr.lastWQERearm()
		qp.cleanCQs()
	}
}

// cleanCQs removes the QP's completions from its CQs as it enters RESET,
// as libmlx5 does (mlx5_modify_qp: mlx5_cq_clean of the receive and the
// send CQ): a program that takes a failed QP through RESET back to RTS
// does not poll the old QP's flushed WRs among the new ones' (pyverbs'
// test_mr_rereg_addr). softnic departs from rxe here, whose provider and
// kernel driver leave them queued; the IBTA leaves what happens to the
// CQEs of a QP reset open. Receives from an SRQ or a WQ stay: libmlx5
// gives such a WQE back to its SRQ, softnic has no way to, and their
// completions are the only record of the data they took.
func (qp *QP) cleanCQs() {
	qpn, keepRecvs := qp.qpn, qp.shared != nil // an SRQ's or a WQ's receives
	drop := func(wc *ibv.WorkCompletion) bool {
		return wc.QPNum == qpn && !(keepRecvs && isRecvWC(wc))
	}
	if qp.sendCQ != nil {
		qp.sendCQ.Remove(drop)
	}
	if qp.recvCQ != nil && qp.recvCQ != qp.sendCQ {
		qp.recvCQ.Remove(drop)
	}
}

// isRecvWC reports whether wc is of the receive side (IBV_WC_RECV and
// the opcodes after it, all with bit 7 set in verbs.h).
func isRecvWC(wc *ibv.WorkCompletion) bool { return wc.Opcode&ibv.WCRecv != 0 }
