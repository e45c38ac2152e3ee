package verbs

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// Connecting queue pairs
//
// A QP is connected by three ibv_modify_qp calls, RESET->INIT,
// INIT->RTR and RTR->RTS, each with the attribute mask the IBTA state
// table (the kernel's qp_state_table, nic.ModifyAttrs) requires for
// the QP's type. Connect makes the three calls from what the two sides
// exchanged out of band; ToInit, ToRTR and ToRTS make one each. With them
// ibv_rc_pingpong's connection is three lines:
//
//	me := qp.Endpoint(psn)                  // what this side tells its peer
//	peer := exchange(me)                    // out of band: TCP, a file, a channel
//	err := qp.Connect(me, peer, nil)        // INIT, RTR, RTS

// Endpoint is what one side of a connection tells the other before
// connecting (ibv_rc_pingpong's struct pingpong_dest without the LID,
// which RoCE does not use): its QP number, the first PSN it sends and
// its GID.
type Endpoint struct {
	QPN uint32
	PSN uint32
	GID GID
}

// Endpoint returns the QP's endpoint starting its send queue at psn (a
// 24-bit value; ToRTS refuses a larger one): its number and its device's
// GID (index 0 of port 1).
func (qp *QP) Endpoint(psn uint32) Endpoint {
	if !qp.ok() {
		return Endpoint{}
	}
	return Endpoint{QPN: qp.QPN(), PSN: psn, GID: GIDFromAddr(qp.pd.d.Addr())}
}

// ConnectAttr are the local choices of Connect, ToInit, ToRTR and ToRTS.
// Each field is used as given, zero included (a zero Timeout waits for an
// ACK forever, a zero RetryCnt never retransmits); fields the QP's type
// does not take are ignored. DefaultConnectAttr gives the usual values.
type ConnectAttr struct {
	// PathMTU is the path MTU of an RC or UC QP (IBV_QP_PATH_MTU).
	PathMTU ibv.MTU
	// Access is the remote access an RC or UC QP grants
	// (IBV_QP_ACCESS_FLAGS).
	Access ibv.Access
	// QKey is a UD QP's Q_Key (IBV_QP_QKEY).
	QKey uint32
	// MaxDestRdAtomic and MinRNRTimer are an RC QP's responder resources
	// and RNR NAK timer (IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER).
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	// MaxRdAtomic, Timeout, RetryCnt and RNRRetry are an RC QP's
	// requester settings (IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_TIMEOUT,
	// IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY).
	MaxRdAtomic uint8
	Timeout     uint8
	RetryCnt    uint8
	RNRRetry    uint8
	// TrafficClass and FlowLabel go into the address vector of an RC or
	// UC QP (ah_attr.grh).
	TrafficClass uint8
	FlowLabel    uint32
}

// DefaultQKey is the Q_Key of DefaultConnectAttr, ibv_ud_pingpong's.
const DefaultQKey = 0x11111111

// DefaultConnectAttr returns the values of rdma-core's ibv_rc_pingpong
// (pp_connect_ctx: path MTU 1024, max_dest_rd_atomic 1, min_rnr_timer 12,
// timeout 14, retry_cnt 7, rnr_retry 7, max_rd_atomic 1), the Q_Key of
// ibv_ud_pingpong (0x11111111), and remote access for what the type
// carries: REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC on RC and XRC_RECV
// (the XRC target), REMOTE_WRITE on UC. (ibv_rc_pingpong itself grants no
// remote access: it only SENDs.)
func DefaultConnectAttr(t ibv.QPType) ConnectAttr {
	a := ConnectAttr{
		PathMTU: ibv.MTU1024, QKey: DefaultQKey,
		MaxDestRdAtomic: 1, MinRNRTimer: 12, MaxRdAtomic: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
	}
	switch t {
	case ibv.QPTypeRC, ibv.QPTypeXRCRecv:
		a.Access = ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	case ibv.QPTypeUC:
		a.Access = ibv.AccessRemoteWrite
	}
	return a
}

// Connect takes the QP from RESET through INIT and RTR to RTS: ToInit,
// ToRTR(remote) and ToRTS(local.PSN), with attr or, when attr is nil,
// DefaultConnectAttr of the QP's type. local is the QP's own Endpoint
// (EINVAL when it names another QP or device), remote the peer's; a UD QP has no
// peer, so its remote must be the zero Endpoint (EINVAL otherwise:
// address each UD send with an AH instead).
//
// Connect stops at the first step refused and returns its error, which
// wraps EINVAL and names the transition and the attribute in question;
// the QP stays in the state it reached (reset it with Modify to try
// again).
func (qp *QP) Connect(local, remote Endpoint, attr *ConnectAttr) error {
	if err := qp.live(); err != nil {
		return err
	}
	if own := qp.Endpoint(local.PSN); local != own {
		return fmt.Errorf("%w: connect QP %#x at %v: the local endpoint is QP %#x's at %v", EINVAL,
			own.QPN, own.GID.Addr(), local.QPN, local.GID.Addr())
	}
	if qp.init.Type == ibv.QPTypeUD && remote != (Endpoint{}) {
		return errUDRemote(qp, remote)
	}
	if err := qp.ToInit(attr); err != nil {
		return err
	}
	if err := qp.ToRTR(remote, attr); err != nil {
		return err
	}
	return qp.ToRTS(local.PSN, attr)
}

// ToInit moves the QP from RESET to INIT (or INIT to INIT) with the
// attributes the state table requires for its type: P_Key index 0, port
// 1 and attr.Access on RC and UC; P_Key index 0, port 1 and attr.QKey on
// UD. A nil attr is DefaultConnectAttr of the QP's type.
func (qp *QP) ToInit(attr *ConnectAttr) error {
	return qp.connectStep(ibv.QPStateReset, ibv.QPStateInit, Endpoint{}, 0, attr)
}

// ToRTR moves the QP from INIT to RTR towards remote with the attributes
// the state table requires: on RC and UC the address vector of
// remote.GID (with attr's traffic class and flow label), attr.PathMTU,
// remote.QPN and remote.PSN as the receive PSN, and on RC
// attr.MaxDestRdAtomic and attr.MinRNRTimer; on UD nothing besides the
// state, and remote must be the zero Endpoint. A nil attr is
// DefaultConnectAttr of the QP's type.
func (qp *QP) ToRTR(remote Endpoint, attr *ConnectAttr) error {
	return qp.connectStep(ibv.QPStateInit, ibv.QPStateRTR, remote, 0, attr)
}

// ToRTS moves the QP from RTR to RTS sending from sqPSN, with, on RC,
// attr's Timeout, RetryCnt, RNRRetry and MaxRdAtomic. A nil attr is
// DefaultConnectAttr of the QP's type.
func (qp *QP) ToRTS(sqPSN uint32, attr *ConnectAttr) error {
	return qp.connectStep(ibv.QPStateRTR, ibv.QPStateRTS, Endpoint{}, sqPSN, attr)
}

// connectStep makes the from->to modify with the attributes the state
// table requires for the QP's type (nic.ModifyAttrs, the kernel's
// qp_state_table), filled in from attr, remote and sqPSN.
func (qp *QP) connectStep(from, to ibv.QPState, remote Endpoint, sqPSN uint32, attr *ConnectAttr) error {
	if err := qp.live(); err != nil {
		return err
	}
	t := qp.init.Type
	req, _, ok := nic.ModifyAttrs(t, from, to)
	if !ok {
		return fmt.Errorf("%w: connect QP %#x: %v QPs have no %v->%v step", EINVAL, qp.QPN(), t, from, to)
	}
	a := DefaultConnectAttr(t)
	if attr != nil {
		a = *attr
	}
	if t == ibv.QPTypeUD && remote != (Endpoint{}) {
		return errUDRemote(qp, remote)
	}
	qa := ibv.QPAttr{
		State: to, PKeyIndex: 0, PortNum: 1, AccessFlags: a.Access, QKey: a.QKey,
		PathMTU: a.PathMTU, DestQPN: remote.QPN, RQPSN: remote.PSN,
		MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{
			DGID: remote.GID.Addr(), TrafficClass: a.TrafficClass, FlowLabel: a.FlowLabel, HopLimit: nic.RouteHopLimit}},
		SQPSN: sqPSN, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, MaxRdAtomic: a.MaxRdAtomic,
	}
	if err := qp.Modify(&qa, ibv.QPAttrState|req); err != nil {
		return fmt.Errorf("connect QP %#x: %w", qp.QPN(), err)
	}
	return nil
}

func errUDRemote(qp *QP, remote Endpoint) error {
	return fmt.Errorf("%w: connect QP %#x: a UD QP has no remote endpoint (got QP %#x at %v): address each send with an AH",
		EINVAL, qp.QPN(), remote.QPN, remote.GID.Addr())
}
