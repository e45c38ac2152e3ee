package ibv

// QPType is a queue pair's transport service (enum ibv_qp_type).
type QPType uint8

const (
	QPTypeRC        QPType = 2  // IBV_QPT_RC: reliable connection
	QPTypeUC        QPType = 3  // IBV_QPT_UC: unreliable connection
	QPTypeUD        QPType = 4  // IBV_QPT_UD: unreliable datagram
	QPTypeRawPacket QPType = 8  // IBV_QPT_RAW_PACKET (not supported)
	QPTypeXRCSend   QPType = 9  // IBV_QPT_XRC_SEND: the XRC initiator (send queue only)
	QPTypeXRCRecv   QPType = 10 // IBV_QPT_XRC_RECV: the XRC target (receive side only, in an XRC domain)
)

// QPState is a queue pair state (enum ibv_qp_state; IBTA 10.3.1).
type QPState uint8

const (
	QPStateReset QPState = iota // IBV_QPS_RESET
	QPStateInit                 // IBV_QPS_INIT
	QPStateRTR                  // IBV_QPS_RTR: ready to receive
	QPStateRTS                  // IBV_QPS_RTS: ready to send
	QPStateSQD                  // IBV_QPS_SQD: send queue drain
	QPStateSQE                  // IBV_QPS_SQE: send queue error
	QPStateErr                  // IBV_QPS_ERR
	// QPStateUnknown (IBV_QPS_UNKNOWN) is what a query reports for a QP
	// that is not a live QP of the device.
	QPStateUnknown
)

// AttrMask selects the QPAttr fields a modify or query uses (enum
// ibv_qp_attr_mask).
type AttrMask uint32

const (
	QPAttrState            AttrMask = 1 << 0  // IBV_QP_STATE: QPAttr.State
	QPAttrCurState         AttrMask = 1 << 1  // IBV_QP_CUR_STATE: QPAttr.CurState
	QPAttrEnSQDAsyncNotify AttrMask = 1 << 2  // IBV_QP_EN_SQD_ASYNC_NOTIFY
	QPAttrAccessFlags      AttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS: QPAttr.AccessFlags
	QPAttrPKeyIndex        AttrMask = 1 << 4  // IBV_QP_PKEY_INDEX
	QPAttrPort             AttrMask = 1 << 5  // IBV_QP_PORT: QPAttr.PortNum
	QPAttrQKey             AttrMask = 1 << 6  // IBV_QP_QKEY
	QPAttrAV               AttrMask = 1 << 7  // IBV_QP_AV: QPAttr.AHAttr
	QPAttrPathMTU          AttrMask = 1 << 8  // IBV_QP_PATH_MTU
	QPAttrTimeout          AttrMask = 1 << 9  // IBV_QP_TIMEOUT
	QPAttrRetryCnt         AttrMask = 1 << 10 // IBV_QP_RETRY_CNT
	QPAttrRNRRetry         AttrMask = 1 << 11 // IBV_QP_RNR_RETRY
	QPAttrRQPSN            AttrMask = 1 << 12 // IBV_QP_RQ_PSN
	QPAttrMaxQPRdAtomic    AttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC: QPAttr.MaxRdAtomic
	QPAttrAltPath          AttrMask = 1 << 14 // IBV_QP_ALT_PATH (not supported)
	QPAttrMinRNRTimer      AttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER
	QPAttrSQPSN            AttrMask = 1 << 16 // IBV_QP_SQ_PSN
	QPAttrMaxDestRdAtomic  AttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC
	QPAttrPathMigState     AttrMask = 1 << 18 // IBV_QP_PATH_MIG_STATE
	QPAttrCap              AttrMask = 1 << 19 // IBV_QP_CAP
	QPAttrDestQPN          AttrMask = 1 << 20 // IBV_QP_DEST_QPN
	QPAttrRateLimit        AttrMask = 1 << 25 // IBV_QP_RATE_LIMIT
)

// MTU is an IB path MTU enum (enum ibv_mtu): 1=256 .. 5=4096.
type MTU uint8

const (
	MTU256  MTU = 1 // IBV_MTU_256
	MTU512  MTU = 2 // IBV_MTU_512
	MTU1024 MTU = 3 // IBV_MTU_1024
	MTU2048 MTU = 4 // IBV_MTU_2048
	MTU4096 MTU = 5 // IBV_MTU_4096
)

// Bytes returns the MTU in bytes, or 0 for an invalid enum.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the largest MTU enum not above n bytes (0 if n < 256).
func MTUFromBytes(n int) MTU {
	for m := MTU4096; m >= MTU256; m-- {
		if m.Bytes() <= n {
			return m
		}
	}
	return 0
}

// Access is a set of memory and QP access rights (enum ibv_access_flags).
type Access uint32

const (
	AccessLocalWrite      Access = 1 << 0  // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite     Access = 1 << 1  // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead      Access = 1 << 2  // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic    Access = 1 << 3  // IBV_ACCESS_REMOTE_ATOMIC
	AccessMWBind          Access = 1 << 4  // IBV_ACCESS_MW_BIND
	AccessZeroBased       Access = 1 << 5  // IBV_ACCESS_ZERO_BASED
	AccessOnDemand        Access = 1 << 6  // IBV_ACCESS_ON_DEMAND
	AccessHugeTLB         Access = 1 << 7  // IBV_ACCESS_HUGETLB
	AccessFlushGlobal     Access = 1 << 8  // IBV_ACCESS_FLUSH_GLOBAL
	AccessFlushPersistent Access = 1 << 9  // IBV_ACCESS_FLUSH_PERSISTENT
	AccessRelaxedOrdering Access = 1 << 20 // IBV_ACCESS_RELAXED_ORDERING
)

// QPCap holds a QP's queue sizes (struct ibv_qp_cap). At creation they are
// what the caller asks for; the QP reports what it got, which may be more.
type QPCap struct {
	MaxSendWR     uint32 // max_send_wr: send queue depth
	MaxRecvWR     uint32 // max_recv_wr: receive queue depth (0 with an SRQ or WQ)
	MaxSendSGE    uint32 // max_send_sge: SGEs per send WR
	MaxRecvSGE    uint32 // max_recv_sge: SGEs per receive WR
	MaxInlineData uint32 // max_inline_data: bytes a SendInline WR may carry
}

// QPAttr holds the attributes of ibv_modify_qp and ibv_query_qp (struct
// ibv_qp_attr). A modify reads only the fields its AttrMask selects.
type QPAttr struct {
	State        QPState // qp_state: the state to move to (QPAttrState)
	CurState     QPState // cur_qp_state: the state the caller believes the QP is in (QPAttrCurState)
	PathMTU      MTU     // path_mtu (RC, UC; QPAttrPathMTU)
	PathMigState uint8   // path_mig_state: only IBV_MIG_MIGRATED (0) is accepted
	QKey         uint32  // qkey (UD; QPAttrQKey)
	RQPSN        uint32  // rq_psn: the first PSN the responder expects (QPAttrRQPSN)
	SQPSN        uint32  // sq_psn: the first PSN the requester sends (QPAttrSQPSN)
	DestQPN      uint32  // dest_qp_num: the peer QP (RC, UC; QPAttrDestQPN)
	AccessFlags  Access  // qp_access_flags: the remote operations the peer may do (QPAttrAccessFlags)
	Cap          QPCap   // cap: the queue sizes (query only)
	AHAttr       AHAttr  // ah_attr: the path to the peer (RC, UC; QPAttrAV)
	AltAHAttr    AHAttr  // alt_ah_attr: the alternate path (not supported)
	PKeyIndex    uint16  // pkey_index (QPAttrPKeyIndex); softnic's table has the default P_Key only
	AltPKeyIndex uint16  // alt_pkey_index (not supported)
	// EnSQDAsyncNotify is en_sqd_async_notify: with a move to SQD, raise
	// IBV_EVENT_SQ_DRAINED once the send queue is drained.
	EnSQDAsyncNotify bool
	SQDraining       bool  // sq_draining: query only, true while SQD is draining
	MaxRdAtomic      uint8 // max_rd_atomic: READs and atomics this QP has outstanding (QPAttrMaxQPRdAtomic)
	MaxDestRdAtomic  uint8 // max_dest_rd_atomic: the peer's READs and atomics it accepts at once
	MinRNRTimer      uint8 // min_rnr_timer: the RNR NAK timer code the responder sends (IBTA table 45)
	PortNum          uint8 // port_num (QPAttrPort): 1, softnic's only port
	// Timeout is timeout, the local ACK timeout exponent: an RC requester
	// waits 4.096 µs × 2^Timeout for an acknowledgement before it
	// retransmits (IBTA 9.7.6.1.3); 0 means no retransmit timer at all
	// (as rxe).
	Timeout uint8
	// RetryCnt is retry_cnt, the transport retry counter (0..7): the
	// number of times an RC requester retransmits after a local ACK
	// timeout or a PSN sequence error NAK before it completes the WR
	// with WCRetryExcErr and moves the QP to ERR (IBTA 9.7.6.1.3). 7
	// means seven retries, not infinite: a dead peer is detected
	// (RetryCnt+1) × the local ACK timeout after the first transmission.
	// softnic differs here from Linux rxe, which retries for ever at 7
	// (rxe_comp.c COMPST_ERROR_RETRY), and behaves as hardware NICs do.
	// Progress (an acknowledgement that moves forward) restores it.
	RetryCnt uint8
	// RNRRetry is rnr_retry, the RNR retry counter (0..7): how many RNR
	// NAKs a requester retries after; 7 means retry for ever (IBTA
	// 9.7.5.2.8).
	RNRRetry   uint8
	AltPortNum uint8  // alt_port_num (not supported)
	AltTimeout uint8  // alt_timeout (not supported)
	RateLimit  uint32 // rate_limit in kbps (QPAttrRateLimit; accepted, not enforced)
}
