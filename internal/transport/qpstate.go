package transport

import (
	"fmt"
	"math/bits"
	"strings"
	"syscall"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// The QP state machine of ibv_modify_qp(3) (IBTA 10.3.1, Table 99
// "QP State Transition Properties"), transcribed from the Linux kernel's
// qp_state_table and ib_modify_qp_is_ok (drivers/infiniband/core/verbs.c,
// torvalds/linux @f4d8f354), which rxe calls from rxe_qp_chk_attr.

// ErrInvalidModify is the sentinel every ibv_modify_qp refusal wraps; it is
// what the kernel reports as EINVAL (or EPERM for a controlled Q_Key).
var ErrInvalidModify = errno.New("invalid QP modify", syscall.EINVAL)

// The kinds of modify refusal; each wraps ErrInvalidModify, and a
// *ModifyError unwraps to one of them.
var (
	// ErrInvalidTransition: the (current, next) state pair is not in the
	// state table, or a state or QP type is out of range.
	ErrInvalidTransition = fmt.Errorf("%w: invalid state transition", ErrInvalidModify)
	// ErrMissingAttr: a required attribute of the transition is not in the mask.
	ErrMissingAttr = fmt.Errorf("%w: missing required attribute", ErrInvalidModify)
	// ErrExtraAttr: the mask holds an attribute the transition does not allow.
	ErrExtraAttr = fmt.Errorf("%w: attribute not allowed", ErrInvalidModify)
	// ErrAttrValue: an attribute selected by the mask has a value out of range.
	ErrAttrValue = fmt.Errorf("%w: attribute value out of range", ErrInvalidModify)
)

// ModifyError describes a refused ibv_modify_qp. Use errors.Is with
// ErrInvalidModify or one of the kinds, errors.As to read the fields.
type ModifyError struct {
	Kind     error // ErrInvalidTransition, ErrMissingAttr, ErrExtraAttr or ErrAttrValue
	Type     ibv.QPType
	Cur      ibv.QPState
	Next     ibv.QPState  // not set for ErrAttrValue
	Attr     ibv.AttrMask // the missing, extra or out-of-range attributes
	Required ibv.AttrMask // the transition's required attributes (besides IBV_QP_STATE)
	Optional ibv.AttrMask // the transition's optional attributes
	Detail   string       // what is wrong with a value, or why a transition is refused
}

func (e *ModifyError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalidModify.Error())
	b.WriteString(": ")
	switch e.Kind {
	case ErrMissingAttr:
		fmt.Fprintf(&b, "%v->%v for %v requires %v, missing %v", e.Cur, e.Next, e.Type, e.Required, e.Attr)
	case ErrExtraAttr:
		fmt.Fprintf(&b, "%v->%v for %v ", e.Cur, e.Next, e.Type)
		if allowed := e.Required | e.Optional; allowed != 0 {
			fmt.Fprintf(&b, "allows only IBV_QP_STATE|%v", allowed)
		} else {
			b.WriteString("allows only IBV_QP_STATE")
		}
		fmt.Fprintf(&b, ", %v not allowed", e.Attr)
		if e.Detail != "" {
			fmt.Fprintf(&b, " (%s)", e.Detail)
		}
	case ErrInvalidTransition:
		fmt.Fprintf(&b, "%v->%v for %v is not a legal transition", e.Cur, e.Next, e.Type)
		if e.Detail != "" {
			fmt.Fprintf(&b, " (%s)", e.Detail)
		}
	default:
		fmt.Fprintf(&b, "%v: %s", e.Attr, e.Detail)
	}
	return b.String()
}

func (e *ModifyError) Unwrap() error { return e.Kind }

// modifyRule is one cell of the state table: whether cur->next is legal,
// and per QP type (indexed by its verbs value) the required and optional
// attributes besides IBV_QP_STATE.
type modifyRule struct {
	valid    bool
	req, opt typeMasks
}

// typeMasks holds one mask per QP type, indexed by the type's value (the
// kernel's req_param[IB_QPT_MAX] / opt_param[IB_QPT_MAX]).
type typeMasks [ibv.QPTypeXRCRecv + 1]ibv.AttrMask

// Short names for the table only.
const (
	qmPKey    = ibv.QPAttrPKeyIndex
	qmPort    = ibv.QPAttrPort
	qmQKey    = ibv.QPAttrQKey
	qmAccess  = ibv.QPAttrAccessFlags
	qmAV      = ibv.QPAttrAV
	qmMTU     = ibv.QPAttrPathMTU
	qmDestQPN = ibv.QPAttrDestQPN
	qmRQPSN   = ibv.QPAttrRQPSN
	qmSQPSN   = ibv.QPAttrSQPSN
	qmDestRd  = ibv.QPAttrMaxDestRdAtomic
	qmRd      = ibv.QPAttrMaxQPRdAtomic
	qmRNRTmr  = ibv.QPAttrMinRNRTimer
	qmTimeout = ibv.QPAttrTimeout
	qmRetry   = ibv.QPAttrRetryCnt
	qmRNRRtr  = ibv.QPAttrRNRRetry
	qmAlt     = ibv.QPAttrAltPath
	qmMig     = ibv.QPAttrPathMigState
	qmCur     = ibv.QPAttrCurState
	qmSQDNtfy = ibv.QPAttrEnSQDAsyncNotify
	qmRate    = ibv.QPAttrRateLimit
)

const (
	colRC  = ibv.QPTypeRC
	colUC  = ibv.QPTypeUC
	colUD  = ibv.QPTypeUD
	colRaw = ibv.QPTypeRawPacket
	colXI  = ibv.QPTypeXRCSend // the kernel's IB_QPT_XRC_INI
	colXT  = ibv.QPTypeXRCRecv // the kernel's IB_QPT_XRC_TGT
)

// qpStateTable is the kernel's qp_state_table, cell for cell (SMI and GSI
// columns left out: verbs has no such QP types). A cell that is valid
// holds for every QP type, with the masks of its column; a type without a
// column entry takes IBV_QP_STATE only. RESET->ERR is not in the table:
// older kernels (v4.x) had the cell, the current one refuses it, and so
// does softnic.
var qpStateTable = [ibv.QPStateErr + 1][ibv.QPStateErr + 1]modifyRule{
	ibv.QPStateReset: {
		ibv.QPStateReset: {valid: true},
		ibv.QPStateInit: {
			valid: true,
			req: typeMasks{
				colUD:  qmPKey | qmPort | qmQKey,
				colRaw: qmPort,
				colUC:  qmPKey | qmPort | qmAccess,
				colRC:  qmPKey | qmPort | qmAccess,
				colXI:  qmPKey | qmPort | qmAccess,
				colXT:  qmPKey | qmPort | qmAccess,
			},
		},
	},
	ibv.QPStateInit: {
		ibv.QPStateReset: {valid: true},
		ibv.QPStateErr:   {valid: true},
		ibv.QPStateInit: {
			valid: true,
			opt: typeMasks{
				colUD: qmPKey | qmPort | qmQKey,
				colUC: qmPKey | qmPort | qmAccess,
				colRC: qmPKey | qmPort | qmAccess,
				colXI: qmPKey | qmPort | qmAccess,
				colXT: qmPKey | qmPort | qmAccess,
			},
		},
		ibv.QPStateRTR: {
			valid: true,
			req: typeMasks{
				colUC: qmAV | qmMTU | qmDestQPN | qmRQPSN,
				colRC: qmAV | qmMTU | qmDestQPN | qmRQPSN | qmDestRd | qmRNRTmr,
				colXI: qmAV | qmMTU | qmDestQPN | qmRQPSN,
				colXT: qmAV | qmMTU | qmDestQPN | qmRQPSN | qmDestRd | qmRNRTmr,
			},
			opt: typeMasks{
				colUD: qmPKey | qmQKey,
				colUC: qmAlt | qmAccess | qmPKey,
				colRC: qmAlt | qmAccess | qmPKey,
				colXI: qmAlt | qmAccess | qmPKey,
				colXT: qmAlt | qmAccess | qmPKey,
			},
		},
	},
	ibv.QPStateRTR: {
		ibv.QPStateReset: {valid: true},
		ibv.QPStateErr:   {valid: true},
		ibv.QPStateRTS: {
			valid: true,
			req: typeMasks{
				colUD: qmSQPSN,
				colUC: qmSQPSN,
				colRC: qmTimeout | qmRetry | qmRNRRtr | qmSQPSN | qmRd,
				colXI: qmTimeout | qmRetry | qmRNRRtr | qmSQPSN | qmRd,
				colXT: qmTimeout | qmSQPSN,
			},
			opt: typeMasks{
				colUD:  qmCur | qmQKey,
				colUC:  qmCur | qmAlt | qmAccess | qmMig,
				colRC:  qmCur | qmAlt | qmAccess | qmRNRTmr | qmMig,
				colXI:  qmCur | qmAlt | qmAccess | qmMig,
				colXT:  qmCur | qmAlt | qmAccess | qmRNRTmr | qmMig,
				colRaw: qmRate,
			},
		},
	},
	ibv.QPStateRTS: {
		ibv.QPStateReset: {valid: true},
		ibv.QPStateErr:   {valid: true},
		ibv.QPStateRTS: {
			valid: true,
			opt: typeMasks{
				colUD:  qmCur | qmQKey,
				colUC:  qmCur | qmAccess | qmAlt | qmMig,
				colRC:  qmCur | qmAccess | qmAlt | qmMig | qmRNRTmr,
				colXI:  qmCur | qmAccess | qmAlt | qmMig,
				colXT:  qmCur | qmAccess | qmAlt | qmMig | qmRNRTmr,
				colRaw: qmRate,
			},
		},
		ibv.QPStateSQD: {
			valid: true,
			opt: typeMasks{
				colUD: qmSQDNtfy,
				colUC: qmSQDNtfy,
				colRC: qmSQDNtfy,
				colXI: qmSQDNtfy,
				colXT: qmSQDNtfy,
			},
		},
	},
	ibv.QPStateSQD: {
		ibv.QPStateReset: {valid: true},
		ibv.QPStateErr:   {valid: true},
		ibv.QPStateRTS: {
			valid: true,
			opt: typeMasks{
				colUD: qmCur | qmQKey,
				colUC: qmCur | qmAlt | qmAccess | qmMig,
				colRC: qmCur | qmAlt | qmAccess | qmRNRTmr | qmMig,
				colXI: qmCur | qmAlt | qmAccess | qmMig,
				colXT: qmCur | qmAlt | qmAccess | qmRNRTmr | qmMig,
			},
		},
		ibv.QPStateSQD: {
			valid: true,
			opt: typeMasks{
				colUD: qmPKey | qmQKey,
				colUC: qmAV | qmAlt | qmAccess | qmPKey | qmMig,
				colRC: qmPort | qmAV | qmTimeout | qmRetry | qmRNRRtr | qmRd | qmDestRd | qmAlt | qmAccess | qmPKey | qmRNRTmr | qmMig,
				colXI: qmPort | qmAV | qmTimeout | qmRetry | qmRNRRtr | qmRd | qmAlt | qmAccess | qmPKey | qmMig,
				colXT: qmPort | qmAV | qmTimeout | qmDestRd | qmAlt | qmAccess | qmPKey | qmRNRTmr | qmMig,
			},
		},
	},
	ibv.QPStateSQE: {
		ibv.QPStateReset: {valid: true},
		ibv.QPStateErr:   {valid: true},
		ibv.QPStateRTS: {
			valid: true,
			opt: typeMasks{
				colUD: qmCur | qmQKey,
				colUC: qmCur | qmAccess,
			},
		},
	},
	ibv.QPStateErr: {
		ibv.QPStateReset: {valid: true},
		ibv.QPStateErr:   {valid: true},
	},
}

func knownQPType(t ibv.QPType) bool {
	switch t {
	case ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD, ibv.QPTypeRawPacket, ibv.QPTypeXRCSend, ibv.QPTypeXRCRecv:
		return true
	}
	return false
}

// ModifyAttrs returns the attributes a cur->next modify of a QP of type t
// requires and allows besides IBV_QP_STATE, and whether the transition is
// legal at all (the kernel's qp_state_table).
func ModifyAttrs(t ibv.QPType, cur, next ibv.QPState) (req, opt ibv.AttrMask, ok bool) {
	if !knownQPType(t) || cur > ibv.QPStateErr || next > ibv.QPStateErr {
		return 0, 0, false
	}
	r := &qpStateTable[cur][next]
	if !r.valid {
		return 0, 0, false
	}
	return r.req[t], r.opt[t], true
}

// CheckModify reports whether an ibv_modify_qp with attribute mask mask
// may move a QP of type t from cur to next, as the kernel's
// ib_modify_qp_is_ok decides: the pair must be in the state table, mask
// must hold every required attribute and nothing besides the required,
// the optional and IBV_QP_STATE; IBV_QP_CUR_STATE is only accepted from
// RTR, RTS, SQD and SQE. A modify without IBV_QP_STATE keeps the state:
// the caller passes next == cur and the cur->cur cell applies (so RTS->RTS
// takes its optional attributes, while RTR->RTR and SQE->SQE are refused).
//
// RAW_PACKET follows the kernel's column (RESET->INIT requires
// IBV_QP_PORT, RTR->RTS and RTS->RTS allow IBV_QP_RATE_LIMIT); whether
// such QPs can be created at all is up to the device. XRC_SEND and
// XRC_RECV are the kernel's XRC_INI and XRC_TGT columns.
//
// The error is a *ModifyError that names the attributes in question and
// unwraps to ErrInvalidTransition, ErrMissingAttr or ErrExtraAttr.
func CheckModify(t ibv.QPType, cur, next ibv.QPState, mask ibv.AttrMask) error {
	e := &ModifyError{Kind: ErrInvalidTransition, Type: t, Cur: cur, Next: next}
	switch {
	case !knownQPType(t):
		e.Detail = "unknown QP type"
		return e
	case cur > ibv.QPStateErr || next > ibv.QPStateErr:
		e.Detail = "state out of range"
		return e
	case mask&ibv.QPAttrState == 0 && next != cur:
		e.Detail = "a state change needs IBV_QP_STATE"
		return e
	}
	r := &qpStateTable[cur][next]
	if !r.valid {
		return e
	}
	req, opt := r.req[t], r.opt[t]
	e.Required, e.Optional = req, opt
	if mask&ibv.QPAttrCurState != 0 && cur != ibv.QPStateRTR && cur != ibv.QPStateRTS &&
		cur != ibv.QPStateSQD && cur != ibv.QPStateSQE {
		e.Kind, e.Attr = ErrExtraAttr, ibv.QPAttrCurState
		e.Detail = "IBV_QP_CUR_STATE is only accepted from RTR, RTS, SQD and SQE"
		return e
	}
	if missing := req &^ mask; missing != 0 {
		e.Kind, e.Attr = ErrMissingAttr, missing
		return e
	}
	if extra := mask &^ (req | opt | ibv.QPAttrState); extra != 0 {
		e.Kind, e.Attr = ErrExtraAttr, extra
		return e
	}
	return nil
}

// Limits are the device and port limits CheckAttrValues checks against
// (struct ibv_device_attr, struct ibv_port_attr).
type Limits struct {
	MaxQPRdAtom     uint8   // max_qp_rd_atom: bound of max_dest_rd_atomic (responder)
	MaxQPInitRdAtom uint8   // max_qp_init_rd_atom: bound of max_rd_atomic (initiator)
	MaxMTU          ibv.MTU // the port's max_mtu
	PortCount       uint8   // phys_port_cnt
	PKeyTableLen    uint16  // pkey_tbl_len
	MaxSendWR       uint32  // max_qp_wr
	MaxRecvWR       uint32  // max_qp_wr
	MaxSGE          uint32  // max_sge
	MaxInline       uint32  // max inline data
	// GIDTableLen is gid_tbl_len; 0 leaves the AV's sgid_index unchecked.
	GIDTableLen uint16
	// PrivilegedQKey lets the consumer set a controlled Q_Key (bit 31
	// set; IBTA 3.5.3 / 10.2.4), as the kernel allows a CAP_NET_RAW user.
	PrivilegedQKey bool
}

// Maximum values of the modify attributes (IBTA 9.7.6.1.3, 12.7.34, 9.7.5.2.8).
const (
	maxTimeout     = 31 // local ACK timeout exponent, 5 bits
	maxRetryCnt    = 7  // 3 bits
	maxRNRRetry    = 7  // 3 bits; 7 means infinite (retry_cnt 7 is seven)
	maxMinRNRTimer = 31 // 5-bit AETH timer code
	max24          = 1<<24 - 1
	controlledQKey = 1 << 31 // the kernel's IB_QP_SET_QKEY
	maxPathMig     = 2       // IBV_MIG_ARMED
)

// CheckAttrValues checks the values of the attributes mask selects for a
// QP of type t currently in state cur, as ib_uverbs modify_qp,
// _ib_modify_qp and rxe_qp_chk_attr do, against the limits lim:
//
//   - IBV_QP_STATE, IBV_QP_CUR_STATE: a state up to ERR; the current
//     state given must be the QP's (stricter than rxe, which trusts it);
//   - IBV_QP_PATH_MTU in 1..MaxMTU; IBV_QP_TIMEOUT ≤ 31; IBV_QP_RETRY_CNT
//     ≤ 7; IBV_QP_RNR_RETRY ≤ 7; IBV_QP_MIN_RNR_TIMER ≤ 31;
//   - IBV_QP_MAX_QP_RD_ATOMIC ≤ MaxQPInitRdAtom, IBV_QP_MAX_DEST_RD_ATOMIC
//     ≤ MaxQPRdAtom (the requested value, before RoundUpPow2);
//   - IBV_QP_DEST_QPN, IBV_QP_RQ_PSN, IBV_QP_SQ_PSN fit 24 bits (the
//     kernel masks PSNs with a warning; softnic refuses);
//   - IBV_QP_PORT in 1..PortCount; IBV_QP_PKEY_INDEX < PKeyTableLen;
//   - IBV_QP_QKEY: no controlled Q_Key unless PrivilegedQKey (EPERM in the kernel);
//   - IBV_QP_AV: a RoCE address vector: is_global set, a DGID that is a
//     valid address, not unspecified and, for connected QPs, not
//     multicast; sgid_index < GIDTableLen; port_num in 1..PortCount and
//     equal to port_num when IBV_QP_PORT comes with it (uverbs modify_qp);
//   - IBV_QP_ALT_PATH: refused, as _ib_modify_qp refuses alternate paths
//     on RoCE; IBV_QP_PATH_MIG_STATE ≤ IBV_MIG_ARMED;
//   - IBV_QP_CAP within MaxSendWR, MaxRecvWR, MaxSGE, MaxInline.
//
// The error is a *ModifyError unwrapping to ErrAttrValue, naming the attribute.
func CheckAttrValues(t ibv.QPType, cur ibv.QPState, attr *ibv.QPAttr, mask ibv.AttrMask, lim Limits) error {
	bad := func(m ibv.AttrMask, format string, args ...any) error {
		return &ModifyError{Kind: ErrAttrValue, Type: t, Cur: cur, Attr: m, Detail: fmt.Sprintf(format, args...)}
	}
	if mask == 0 {
		return nil
	}
	if attr == nil {
		return bad(mask, "no attributes given")
	}
	a := attr
	if mask&ibv.QPAttrState != 0 && a.State > ibv.QPStateErr {
		return bad(ibv.QPAttrState, "qp_state %d out of range", a.State)
	}
	if mask&ibv.QPAttrCurState != 0 {
		if a.CurState > ibv.QPStateErr {
			return bad(ibv.QPAttrCurState, "cur_qp_state %d out of range", a.CurState)
		}
		if a.CurState != cur {
			return bad(ibv.QPAttrCurState, "cur_qp_state %v is not the QP's state %v", a.CurState, cur)
		}
	}
	if mask&ibv.QPAttrPathMTU != 0 && (a.PathMTU < ibv.MTU256 || a.PathMTU > ibv.MTU4096 || a.PathMTU > lim.MaxMTU) {
		return bad(ibv.QPAttrPathMTU, "path_mtu %d not in 1..%d", a.PathMTU, lim.MaxMTU)
	}
	if mask&ibv.QPAttrTimeout != 0 && a.Timeout > maxTimeout {
		return bad(ibv.QPAttrTimeout, "timeout %d > %d", a.Timeout, maxTimeout)
	}
	if mask&ibv.QPAttrRetryCnt != 0 && a.RetryCnt > maxRetryCnt {
		return bad(ibv.QPAttrRetryCnt, "retry_cnt %d > %d", a.RetryCnt, maxRetryCnt)
	}
	if mask&ibv.QPAttrRNRRetry != 0 && a.RNRRetry > maxRNRRetry {
		return bad(ibv.QPAttrRNRRetry, "rnr_retry %d > %d", a.RNRRetry, maxRNRRetry)
	}
	if mask&ibv.QPAttrMinRNRTimer != 0 && a.MinRNRTimer > maxMinRNRTimer {
		return bad(ibv.QPAttrMinRNRTimer, "min_rnr_timer %d > %d", a.MinRNRTimer, maxMinRNRTimer)
	}
	if mask&ibv.QPAttrMaxQPRdAtomic != 0 && a.MaxRdAtomic > lim.MaxQPInitRdAtom {
		return bad(ibv.QPAttrMaxQPRdAtomic, "max_rd_atomic %d > max_qp_init_rd_atom %d", a.MaxRdAtomic, lim.MaxQPInitRdAtom)
	}
	if mask&ibv.QPAttrMaxDestRdAtomic != 0 && a.MaxDestRdAtomic > lim.MaxQPRdAtom {
		return bad(ibv.QPAttrMaxDestRdAtomic, "max_dest_rd_atomic %d > max_qp_rd_atom %d", a.MaxDestRdAtomic, lim.MaxQPRdAtom)
	}
	if mask&ibv.QPAttrDestQPN != 0 && a.DestQPN > max24 {
		return bad(ibv.QPAttrDestQPN, "dest_qp_num %#x does not fit 24 bits", a.DestQPN)
	}
	if mask&ibv.QPAttrRQPSN != 0 && a.RQPSN > max24 {
		return bad(ibv.QPAttrRQPSN, "rq_psn %#x does not fit 24 bits", a.RQPSN)
	}
	if mask&ibv.QPAttrSQPSN != 0 && a.SQPSN > max24 {
		return bad(ibv.QPAttrSQPSN, "sq_psn %#x does not fit 24 bits", a.SQPSN)
	}
	if mask&ibv.QPAttrPort != 0 && (a.PortNum < 1 || a.PortNum > lim.PortCount) {
		return bad(ibv.QPAttrPort, "port_num %d not in 1..%d", a.PortNum, lim.PortCount)
	}
	if mask&ibv.QPAttrPKeyIndex != 0 && a.PKeyIndex >= lim.PKeyTableLen {
		return bad(ibv.QPAttrPKeyIndex, "pkey_index %d >= pkey_tbl_len %d", a.PKeyIndex, lim.PKeyTableLen)
	}
	if mask&ibv.QPAttrQKey != 0 && a.QKey&controlledQKey != 0 && !lim.PrivilegedQKey {
		return bad(ibv.QPAttrQKey, "qkey %#x is a controlled Q_Key (bit 31 set) and needs privilege", a.QKey)
	}
	if mask&ibv.QPAttrAV != 0 {
		if err := checkAV(t, &a.AHAttr, lim); err != "" {
			return bad(ibv.QPAttrAV, "%s", err)
		}
		if mask&ibv.QPAttrPort != 0 && a.AHAttr.PortNum != a.PortNum {
			return bad(ibv.QPAttrAV, "ah_attr.port_num %d differs from port_num %d", a.AHAttr.PortNum, a.PortNum)
		}
	}
	if mask&ibv.QPAttrAltPath != 0 {
		return bad(ibv.QPAttrAltPath, "alternate paths are not supported on RoCE")
	}
	if mask&ibv.QPAttrPathMigState != 0 && a.PathMigState > maxPathMig {
		return bad(ibv.QPAttrPathMigState, "path_mig_state %d > %d", a.PathMigState, maxPathMig)
	}
	if mask&ibv.QPAttrCap != 0 {
		c := &a.Cap
		switch {
		case c.MaxSendWR > lim.MaxSendWR:
			return bad(ibv.QPAttrCap, "max_send_wr %d > %d", c.MaxSendWR, lim.MaxSendWR)
		case c.MaxRecvWR > lim.MaxRecvWR:
			return bad(ibv.QPAttrCap, "max_recv_wr %d > %d", c.MaxRecvWR, lim.MaxRecvWR)
		case c.MaxSendSGE > lim.MaxSGE:
			return bad(ibv.QPAttrCap, "max_send_sge %d > %d", c.MaxSendSGE, lim.MaxSGE)
		case c.MaxRecvSGE > lim.MaxSGE:
			return bad(ibv.QPAttrCap, "max_recv_sge %d > %d", c.MaxRecvSGE, lim.MaxSGE)
		case c.MaxInlineData > lim.MaxInline:
			return bad(ibv.QPAttrCap, "max_inline_data %d > %d", c.MaxInlineData, lim.MaxInline)
		}
	}
	return nil
}

// checkAV checks a RoCE address vector (rdma_check_ah_attr: RoCE needs a
// GRH; rxe_av_chk_attr: sgid_index within the GID table; uverbs
// modify_qp: a valid port). It returns what is wrong, or "".
func checkAV(t ibv.QPType, av *ibv.AHAttr, lim Limits) string {
	g := &av.GRH
	switch {
	case !av.IsGlobal:
		return "RoCE needs a global route (is_global = 0)"
	case !g.DGID.IsValid():
		return "dgid is not set"
	case g.DGID.IsUnspecified():
		return fmt.Sprintf("dgid %v is unspecified", g.DGID)
	case g.DGID.IsMulticast() && t != ibv.QPTypeUD && t != ibv.QPTypeRawPacket:
		return fmt.Sprintf("dgid %v is multicast on a connected QP", g.DGID)
	case lim.GIDTableLen != 0 && uint16(g.SGIDIndex) >= lim.GIDTableLen:
		return fmt.Sprintf("sgid_index %d >= gid_tbl_len %d", g.SGIDIndex, lim.GIDTableLen)
	case av.PortNum < 1 || av.PortNum > lim.PortCount:
		return fmt.Sprintf("ah_attr.port_num %d not in 1..%d", av.PortNum, lim.PortCount)
	}
	return ""
}

// RoundUpPow2 rounds a max_rd_atomic or max_dest_rd_atomic value up to a
// power of two, as rxe_qp_from_attr does (roundup_pow_of_two); 0 stays 0.
func RoundUpPow2(n uint32) uint32 {
	if n <= 1 {
		return n
	}
	return 1 << bits.Len32(n-1)
}
