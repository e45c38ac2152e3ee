// Package transport holds the types shared by softnic's transports and its
// engine: work requests, completions, QP types, states and attributes,
// access flags and address vectors. Their names and numeric values are
// libibverbs' (verbs.h), so ibv_post_send(3), ibv_poll_cq(3) and
// ibv_modify_qp(3) describe them; package verbs re-exports them.
package transport

import (
	"fmt"
	"net/netip"
)

// QPType is a queue pair's transport service (enum ibv_qp_type).
type QPType uint8

const (
	QPTypeRC        QPType = 2
	QPTypeUC        QPType = 3
	QPTypeUD        QPType = 4
	QPTypeRawPacket QPType = 8
	QPTypeXRCSend   QPType = 9
	QPTypeXRCRecv   QPType = 10
)

// QPState is a queue pair state (enum ibv_qp_state; IBTA 10.3.1).
type QPState uint8

const (
	QPStateReset QPState = iota
	QPStateInit
	QPStateRTR
	QPStateRTS
	QPStateSQD
	QPStateSQE
	QPStateErr
	QPStateUnknown
)

// AttrMask selects the QPAttr fields a modify or query uses (enum ibv_qp_attr_mask).
type AttrMask uint32

const (
	AttrState            AttrMask = 1 << 0
	AttrCurState         AttrMask = 1 << 1
	AttrEnSQDAsyncNotify AttrMask = 1 << 2
	AttrAccessFlags      AttrMask = 1 << 3
	AttrPKeyIndex        AttrMask = 1 << 4
	AttrPort             AttrMask = 1 << 5
	AttrQKey             AttrMask = 1 << 6
	AttrAV               AttrMask = 1 << 7
	AttrPathMTU          AttrMask = 1 << 8
	AttrTimeout          AttrMask = 1 << 9
	AttrRetryCnt         AttrMask = 1 << 10
	AttrRNRRetry         AttrMask = 1 << 11
	AttrRQPSN            AttrMask = 1 << 12
	AttrMaxQPRdAtomic    AttrMask = 1 << 13
	AttrAltPath          AttrMask = 1 << 14
	AttrMinRNRTimer      AttrMask = 1 << 15
	AttrSQPSN            AttrMask = 1 << 16
	AttrMaxDestRdAtomic  AttrMask = 1 << 17
	AttrPathMigState     AttrMask = 1 << 18
	AttrCap              AttrMask = 1 << 19
	AttrDestQPN          AttrMask = 1 << 20
	AttrRateLimit        AttrMask = 1 << 25
)

// MTU is an IB path MTU enum (enum ibv_mtu): 1=256 .. 5=4096.
type MTU uint8

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
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
	AccessLocalWrite      Access = 1 << 0
	AccessRemoteWrite     Access = 1 << 1
	AccessRemoteRead      Access = 1 << 2
	AccessRemoteAtomic    Access = 1 << 3
	AccessMWBind          Access = 1 << 4
	AccessZeroBased       Access = 1 << 5
	AccessOnDemand        Access = 1 << 6
	AccessHugeTLB         Access = 1 << 7
	AccessFlushGlobal     Access = 1 << 8
	AccessFlushPersistent Access = 1 << 9
	AccessRelaxedOrdering Access = 1 << 20
)

// GRH is the global route of an address vector (struct ibv_global_route).
// In RoCEv2 it becomes the IP header: DGID is the destination address
// (IPv4-mapped for IPv4) and TrafficClass the TOS. HopLimit is not sent:
// packets carry RouteHopLimit, the route's, as Linux's do.
type GRH struct {
	DGID         netip.Addr
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (struct ibv_ah_attr).
type AHAttr struct {
	GRH         GRH
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	PortNum     uint8
}

// AddressHandle is the destination of a UD send (the ibv_ah of
// wr.ud.ah): an address handle made by verbs PD.CreateAH, or a bare
// *AHAttr for a one-off destination.
type AddressHandle interface {
	// AddressVector returns the handle's address vector and the handle of
	// the protection domain it belongs to (0 for a bare *AHAttr, which a
	// QP of any PD may use); ok is false once the handle is destroyed.
	AddressVector() (av *AHAttr, pd uint32, ok bool)
}

// AddressVector makes a bare address vector a UD destination.
func (a *AHAttr) AddressVector() (*AHAttr, uint32, bool) { return a, 0, a != nil }

// QPCap holds a QP's queue sizes (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPAttr holds the attributes of ibv_modify_qp / ibv_query_qp (struct ibv_qp_attr).
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          MTU
	PathMigState     uint8
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPN          uint32
	AccessFlags      Access
	Cap              QPCap
	AHAttr           AHAttr
	AltAHAttr        AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	// Timeout is the local ACK timeout exponent: an RC requester waits
	// 4.096 µs × 2^Timeout for an acknowledgement before it retransmits
	// (IBTA 9.7.6.1.3); 0 means no retransmit timer at all (as rxe).
	Timeout uint8
	// RetryCnt is the transport retry counter (0..7): the number of
	// times an RC requester retransmits after a local ACK timeout or a
	// PSN sequence error NAK before it completes the WR with
	// WCRetryExcErr and moves the QP to ERR (IBTA 9.7.6.1.3). 7 means
	// seven retries, not infinite: a dead peer is detected (RetryCnt+1)
	// × the local ACK timeout after the first transmission. softnic
	// differs here from Linux rxe, which retries for ever at 7
	// (rxe_comp.c COMPST_ERROR_RETRY), and behaves as hardware NICs do.
	// Progress (an acknowledgement that moves forward) restores it.
	RetryCnt uint8
	// RNRRetry is the RNR retry counter (0..7): how many RNR NAKs a
	// requester retries after; 7 means retry for ever (IBTA 9.7.5.2.8).
	RNRRetry   uint8
	AltPortNum uint8
	AltTimeout uint8
	RateLimit  uint32
}

// WROpcode is a send work request's operation (enum ibv_wr_opcode).
type WROpcode uint8

const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
	WRTSO               WROpcode = 10
	WRDriver1           WROpcode = 11
	WRFlush             WROpcode = 14
	WRAtomicWrite       WROpcode = 15
	// WRRegMR is the kernel's IB_WR_REG_MR (fast registration), which
	// libibverbs has no value for; softnic gives it one past the range.
	WRRegMR WROpcode = 32
)

// SendFlags are a send work request's flags (enum ibv_send_flags).
type SendFlags uint32

const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
	SendIPCsum    SendFlags = 1 << 4
)

// SGE is a scatter/gather element (struct ibv_sge): Length bytes at Addr in
// the memory region whose lkey is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (struct ibv_send_wr without the chain
// pointer: PostSend takes a slice).
type SendWR struct {
	WRID    uint64
	Opcode  WROpcode
	Flags   SendFlags
	SGList  []SGE
	Imm     uint32 // immediate data (network order value, as imm_data)
	InvRKey uint32 // SEND_WITH_INV / LOCAL_INV: the rkey to invalidate

	// RDMA (READ, WRITE, FLUSH, ATOMIC_WRITE).
	RemoteAddr uint64
	RKey       uint32

	// Atomics: CompareAdd is the compare value of CMP_AND_SWP or the add
	// value of FETCH_AND_ADD; Swap the swap value. ATOMIC_WRITE takes its
	// 8 bytes from SGList or InlineData.
	CompareAdd uint64
	Swap       uint64

	// UD (wr.ud): the destination's address handle, QP number and Q_Key.
	// A RemoteQKey with the high-order bit set stands for the sending QP's
	// own Q_Key (IBTA 10.2.5; rxe sends it verbatim instead).
	AH         AddressHandle
	RemoteQPN  uint32
	RemoteQKey uint32

	// FLUSH (ibv_wr_flush): placement type, selectivity level and the
	// length of the range (a FLUSH carries no local data).
	FlushType  uint8
	FlushLevel uint8
	FlushLen   uint32

	// InlineData, when non-nil with SendInline, is the payload (copied at post).
	InlineData []byte

	// Memory windows and fast registration (BIND_MW, REG_MR).
	Bind *MWBind
	Reg  *RegMR
}

// MWBind describes a memory-window bind (struct ibv_mw_bind / ibv_bind_mw_wr).
type MWBind struct {
	MWHandle uint32 // the window's rkey at the time of the bind
	NewRKey  uint32 // rkey after the bind (type 2: key byte chosen by the caller)
	MRLKey   uint32 // the MR the window is bound to
	Addr     uint64
	Length   uint64
	Access   Access
}

// RegMR describes a fast-registration work request (the kernel's ib_reg_wr).
type RegMR struct {
	// MR is the engine's fast-registration MR (the *mem.MR behind a verbs
	// MR), named directly as ib_reg_wr.mr names it, so a REG_MR posted
	// after an earlier one changed the key still finds it. When nil, MRLKey
	// names it by its current key.
	MR     any
	MRLKey uint32
	Key    uint32 // the key after registration (only the low 8 bits may differ)
	Access Access
	// IOVA and Length are the address of the region's first byte and its
	// length (ib_mr.iova and .length, set by ib_map_mr_sg); Length must not
	// exceed what the MR has mapped.
	IOVA   uint64
	Length uint64
}

// RecvWR is a receive work request (struct ibv_recv_wr without the chain).
type RecvWR struct {
	WRID   uint64
	SGList []SGE
}

// WCStatus is a work completion status (enum ibv_wc_status).
type WCStatus uint8

const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
	WCLocRDDViolErr
	WCRemInvRDReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
	WCTMErr
	WCTMRndvIncomplete
)

// WCOpcode is a completion's operation (enum ibv_wc_opcode).
type WCOpcode uint8

const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCTSO             WCOpcode = 7
	WCFlush           WCOpcode = 8
	WCAtomicWrite     WCOpcode = 9
	WCRegMR           WCOpcode = 10 // kernel IB_WC_REG_MR
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

// WCFlags are a completion's flags (enum ibv_wc_flags).
type WCFlags uint32

const (
	WCGRH         WCFlags = 1 << 0
	WCWithImm     WCFlags = 1 << 1
	WCIPCsumOK    WCFlags = 1 << 2
	WCWithInv     WCFlags = 1 << 3
	WCTMSyncReq   WCFlags = 1 << 4
	WCTMMatch     WCFlags = 1 << 5
	WCTMDataValid WCFlags = 1 << 6
)

// WorkCompletion is one completion (struct ibv_wc).
type WorkCompletion struct {
	WRID         uint64
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32
	Imm          uint32 // immediate data, or the invalidated rkey with WCWithInv
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}

// InlineError is the error of a send posted with SendInline whose data is
// given by SGEs that cannot be read: an lkey naming no MR of the QP's PD,
// or a range outside its MR. Both transports copy such data when the WR
// is posted, so they refuse the WR there, with ErrInvalid (ibv_post_send
// EINVAL and bad_wr), rather than send zeros. The rxe provider copies
// inline data from the SGE addresses without looking at the lkey; in a
// Go program an address means something only through its MR, so softnic
// checks what rxe does not.
func InlineError(err error) error {
	return fmt.Errorf("%w: inline data: %w", ErrInvalid, err)
}
