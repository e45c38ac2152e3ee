package ibv

import "fmt"

// CQAttrMask is ibv_modify_cq_attr.attr_mask (enum ibv_cq_attr_mask).
type CQAttrMask uint32

// CQAttrModerate (IBV_CQ_ATTR_MODERATE): ModifyCQAttr.Moderate is set.
const CQAttrModerate CQAttrMask = 1 << 0

// ModerateCQ is struct ibv_moderate_cq: an armed CQ generates its
// completion event after CQCount completions or CQPeriod microseconds
// after the first of them, whichever comes first.
type ModerateCQ struct {
	CQCount  uint16 // cq_count: 0 bounds by time only
	CQPeriod uint16 // cq_period, in microseconds: 0 bounds by count only
}

// ModifyCQAttr is struct ibv_modify_cq_attr (ibv_modify_cq).
type ModifyCQAttr struct {
	AttrMask CQAttrMask // attr_mask
	Moderate ModerateCQ // moderate
}

// CQModerationCaps is struct ibv_cq_moderation_caps: the largest
// moderation ibv_modify_cq takes.
type CQModerationCaps struct {
	MaxCQCount  uint16 // max_cq_count
	MaxCQPeriod uint16 // max_cq_period, in microseconds
}

// CreateCQWCFlags are ibv_cq_init_attr_ex.wc_flags (enum
// ibv_create_cq_wc_flags): the fields an extended CQ's completions carry,
// read with the CQEx accessors of the same names.
type CreateCQWCFlags uint64

// The wc_flags bits (IBV_WC_EX_WITH_*).
const (
	WCExWithByteLen                      CreateCQWCFlags = 1 << 0  // ibv_wc_read_byte_len
	WCExWithImm                          CreateCQWCFlags = 1 << 1  // ibv_wc_read_imm_data, ibv_wc_read_invalidated_rkey
	WCExWithQPNum                        CreateCQWCFlags = 1 << 2  // ibv_wc_read_qp_num
	WCExWithSrcQP                        CreateCQWCFlags = 1 << 3  // ibv_wc_read_src_qp
	WCExWithSLID                         CreateCQWCFlags = 1 << 4  // ibv_wc_read_slid
	WCExWithSL                           CreateCQWCFlags = 1 << 5  // ibv_wc_read_sl
	WCExWithDLIDPathBits                 CreateCQWCFlags = 1 << 6  // ibv_wc_read_dlid_path_bits
	WCExWithCompletionTimestamp          CreateCQWCFlags = 1 << 7  // ibv_wc_read_completion_ts
	WCExWithCVLAN                        CreateCQWCFlags = 1 << 8  // ibv_wc_read_cvlan: not softnic's
	WCExWithFlowTag                      CreateCQWCFlags = 1 << 9  // ibv_wc_read_flow_tag: not softnic's
	WCExWithTMInfo                       CreateCQWCFlags = 1 << 10 // ibv_wc_read_tm_info
	WCExWithCompletionTimestampWallclock CreateCQWCFlags = 1 << 11 // ibv_wc_read_completion_wallclock_ns

	// WCStandardFlags is IBV_WC_STANDARD_FLAGS: the fields of struct
	// ibv_wc.
	WCStandardFlags = WCExWithByteLen | WCExWithImm | WCExWithQPNum | WCExWithSrcQP |
		WCExWithSLID | WCExWithSL | WCExWithDLIDPathBits
)

var createCQWCFlagNames = []flag{
	{uint64(WCExWithByteLen), "BYTE_LEN"}, {uint64(WCExWithImm), "IMM"}, {uint64(WCExWithQPNum), "QP_NUM"},
	{uint64(WCExWithSrcQP), "SRC_QP"}, {uint64(WCExWithSLID), "SLID"}, {uint64(WCExWithSL), "SL"},
	{uint64(WCExWithDLIDPathBits), "DLID_PATH_BITS"}, {uint64(WCExWithCompletionTimestamp), "COMPLETION_TIMESTAMP"},
	{uint64(WCExWithCVLAN), "CVLAN"}, {uint64(WCExWithFlowTag), "FLOW_TAG"}, {uint64(WCExWithTMInfo), "TM_INFO"},
	{uint64(WCExWithCompletionTimestampWallclock), "COMPLETION_TIMESTAMP_WALLCLOCK"},
}

// String lists the flags by their IBV_WC_EX_WITH_* names without the
// prefix ("BYTE_LEN|IMM").
func (f CreateCQWCFlags) String() string { return flagString(uint64(f), createCQWCFlagNames) }

// Format implements fmt.Formatter (FormatEnum).
func (f CreateCQWCFlags) Format(s fmt.State, verb rune) { FormatEnum(s, verb, uint64(f), f.String) }

// ValuesMask is ibv_values_ex.comp_mask (enum ibv_values_mask).
type ValuesMask uint32

// ValuesMaskRawClock (IBV_VALUES_MASK_RAW_CLOCK): ValuesEx.RawClock is
// asked for, or was filled.
const ValuesMaskRawClock ValuesMask = 1 << 0

// ValuesEx is struct ibv_values_ex (ibv_query_rt_values_ex): RawClock is
// the device's clock now, in the unit of completion timestamps
// (nanoseconds at an HCA core clock of 1 GHz), as raw_clock's timespec
// (seconds and nanoseconds).
type ValuesEx struct {
	CompMask ValuesMask // comp_mask
	RawClock Timespec   // raw_clock
}

// Timespec is struct timespec.
type Timespec struct {
	Sec  int64 // tv_sec
	Nsec int64 // tv_nsec
}

// ODPCaps is struct ibv_odp_caps: on-demand paging (IBV_ACCESS_ON_DEMAND).
type ODPCaps struct {
	GeneralCaps uint64 // general_caps: ODPSupport, ODPSupportImplicit
	// RCODPCaps, UCODPCaps and UDODPCaps are per_transport_caps: the
	// operations (ODPSupportSend, ...) that may use ODP MRs.
	RCODPCaps, UCODPCaps, UDODPCaps uint32
}

// ODP capability bits (enum ibv_odp_general_caps, enum
// ibv_odp_transport_cap_bits).
const (
	ODPSupport         = 1 << 0 // IBV_ODP_SUPPORT
	ODPSupportImplicit = 1 << 1 // IBV_ODP_SUPPORT_IMPLICIT

	ODPSupportSend    = 1 << 0 // IBV_ODP_SUPPORT_SEND
	ODPSupportRecv    = 1 << 1 // IBV_ODP_SUPPORT_RECV
	ODPSupportWrite   = 1 << 2 // IBV_ODP_SUPPORT_WRITE
	ODPSupportRead    = 1 << 3 // IBV_ODP_SUPPORT_READ
	ODPSupportAtomic  = 1 << 4 // IBV_ODP_SUPPORT_ATOMIC
	ODPSupportSRQRecv = 1 << 5 // IBV_ODP_SUPPORT_SRQ_RECV
)
