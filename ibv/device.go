package ibv

import "fmt"

// DeviceAttr is the device's capabilities (struct ibv_device_attr), with
// rxe's limits (rxe_param.h), so that a program sized for rxe fits.
type DeviceAttr struct {
	FWVer          string // fw_ver
	NodeGUID       uint64 // node_guid
	SysImageGUID   uint64 // sys_image_guid
	MaxMRSize      uint64 // max_mr_size
	PageSizeCap    uint64 // page_size_cap
	VendorID       uint32 // vendor_id
	VendorPartID   uint32 // vendor_part_id
	HWVer          uint32 // hw_ver
	MaxQP          int    // max_qp
	MaxQPWR        int    // max_qp_wr: WRs per send or receive queue
	DeviceCapFlags uint64 // device_cap_flags: the Cap* bits
	MaxSGE         int    // max_sge: SGEs per WR
	MaxSGERd       int    // max_sge_rd: SGEs per READ
	MaxCQ          int    // max_cq
	MaxCQE         int    // max_cqe: entries per CQ
	MaxMR          int    // max_mr
	MaxPD          int    // max_pd
	MaxQPRdAtom    int    // max_qp_rd_atom: READs and atomics a QP accepts at once
	MaxEERdAtom    int    // max_ee_rd_atom: 0, no RD
	MaxResRdAtom   int    // max_res_rd_atom
	// MaxQPInitRdAtom is max_qp_init_rd_atom: READs and atomics a QP
	// may have outstanding.
	MaxQPInitRdAtom int
	MaxEEInitRdAtom int // max_ee_init_rd_atom: 0, no RD
	AtomicCap       int // atomic_cap: IBV_ATOMIC_HCA (1)
	MaxMW           int // max_mw
	MaxAH           int // max_ah
	MaxFMR          int // max_fmr: 0
	MaxSRQ          int // max_srq
	MaxSRQWR        int // max_srq_wr
	MaxSRQSGE       int // max_srq_sge
	MaxPKeys        int // max_pkeys
	// MaxMcastGrp, MaxMcastQPAttach and MaxTotalMcastQPAttach are
	// max_mcast_grp, max_mcast_qp_attach and max_total_mcast_qp_attach:
	// the multicast groups, the QPs a group and the attachments in all a
	// device takes (ibv_attach_mcast); 0 when it cannot receive multicast.
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	LocalCAAckDelay       uint8 // local_ca_ack_delay
	PhysPortCnt           uint8 // phys_port_cnt: 1
	// MaxInlineData, MaxMsgSize and MaxFastRegPageLen are not in struct
	// ibv_device_attr: the largest inline payload a QP may ask for
	// (rxe's RXE_MAX_INLINE_DATA), the largest message (the port's
	// max_msg_sz) and the kernel's max_fast_reg_page_list_len.
	MaxInlineData     int
	MaxMsgSize        uint64
	MaxFastRegPageLen int
}

// Device capability flags (enum ib_uverbs_device_cap_flags), the bits of
// DeviceAttr.DeviceCapFlags.
const (
	CapBadPKeyCntr      = 1 << 1  // IB_UVERBS_DEVICE_BAD_PKEY_CNTR
	CapBadQKeyCntr      = 1 << 2  // IB_UVERBS_DEVICE_BAD_QKEY_CNTR
	CapAutoPathMig      = 1 << 4  // IB_UVERBS_DEVICE_AUTO_PATH_MIG
	CapChangePhyPort    = 1 << 5  // IB_UVERBS_DEVICE_CHANGE_PHY_PORT
	CapUDAVPortEnforce  = 1 << 6  // IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE
	CapPortActiveEvent  = 1 << 10 // IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT
	CapSysImageGUID     = 1 << 11 // IB_UVERBS_DEVICE_SYS_IMAGE_GUID
	CapRCRNRNakGen      = 1 << 12 // IB_UVERBS_DEVICE_RC_RNR_NAK_GEN
	CapSRQResize        = 1 << 13 // IB_UVERBS_DEVICE_SRQ_RESIZE
	CapMemWindow        = 1 << 17 // IB_UVERBS_DEVICE_MEM_WINDOW
	CapUDIPCsum         = 1 << 18 // IB_UVERBS_DEVICE_UD_IP_CSUM: not softnic's (IBV_SEND_IP_CSUM is EINVAL)
	CapXRC              = 1 << 20 // IB_UVERBS_DEVICE_XRC (IBV_DEVICE_XRC)
	CapMemMgtExtensions = 1 << 21 // IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS
	CapMemWindowType2B  = 1 << 24 // IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B
	CapRawIPCsum        = 1 << 26 // IB_UVERBS_DEVICE_RAW_IP_CSUM: not softnic's (no RAW_PACKET QPs)
	CapFlushGlobal      = 1 << 38 // IB_UVERBS_DEVICE_FLUSH_GLOBAL
	CapFlushPersistent  = 1 << 39 // IB_UVERBS_DEVICE_FLUSH_PERSISTENT
	CapAtomicWrite      = 1 << 40 // IB_UVERBS_DEVICE_ATOMIC_WRITE
)

// DeviceAttrEx is the extended device attributes (struct
// ibv_device_attr_ex): the classic ones and the capabilities that have no
// place there.
type DeviceAttrEx struct {
	DeviceAttr         // orig_attr
	TMCaps     TMCaps  // tm_caps: tag matching
	TSOCaps    TSOCaps // tso_caps: TCP segmentation offload (UD TSO)
	// ODPCaps is odp_caps: on-demand paging, which a software NIC that
	// pins nothing has for every MR and operation.
	ODPCaps ODPCaps
	// CompletionTimestampMask and HCACoreClock are
	// completion_timestamp_mask (the bits a completion timestamp has) and
	// hca_core_clock (its frequency in kHz): softnic stamps completions in
	// nanoseconds of the device's clock, a 1 GHz core clock of 64 bits.
	CompletionTimestampMask uint64
	HCACoreClock            uint64
	// CQModCaps is cq_mod_caps: the largest CQ moderation (ibv_modify_cq).
	CQModCaps CQModerationCaps
	// RSSCaps and MaxWQTypeRQ are rss_caps (zero: softnic has no receive
	// side scaling, no RSS indirection tables) and max_wq_type_rq.
	RSSCaps     RSSCaps
	MaxWQTypeRQ uint32
}

// RSSCaps is struct ibv_rss_caps: receive side scaling, which softnic
// does not do (all zero).
type RSSCaps struct {
	SupportedQPTs              uint32 // supported_qpts
	MaxRWQIndirectionTables    uint32 // max_rwq_indirection_tables
	MaxRWQIndirectionTableSize uint32 // max_rwq_indirection_table_size
	RxHashFieldsMask           uint64 // rx_hash_fields_mask
	RxHashFunction             uint8  // rx_hash_function
}

// TSOCaps are a device's segmentation-offload capabilities (struct
// ibv_tso_caps, ibv_query_device_ex(3)).
type TSOCaps struct {
	// MaxTSO is max_tso: the largest payload, header not counted, one
	// TSO work request may carry (0: no TSO).
	MaxTSO uint32
	// SupportedQPTs is supported_qpts: the QP types that take TSO work
	// requests, bit 1<<QPType for each (1<<IBV_QPT_UD, ...).
	SupportedQPTs uint32
}

// Supports reports whether QP type t takes TSO work requests
// (supported_qpts & 1 << t, as rdma-core's tests check it).
func (c TSOCaps) Supports(t QPType) bool { return c.MaxTSO > 0 && c.SupportedQPTs&(1<<t) != 0 }

// ReregMRFlags are ibv_rereg_mr's flags (enum ibv_rereg_mr_flags): what
// the re-registration changes.
type ReregMRFlags int

// The ibv_rereg_mr flags (IBV_REREG_MR_CHANGE_*).
const (
	ReregMRChangeTranslation ReregMRFlags = 1 << 0 // the memory: a new buffer
	ReregMRChangePD          ReregMRFlags = 1 << 1 // the protection domain
	ReregMRChangeAccess      ReregMRFlags = 1 << 2 // the access flags
)

// AdviseMRAdvice is ibv_advise_mr's advice (IBV_ADVISE_MR_ADVICE_*).
type AdviseMRAdvice uint32

// The ibv_advise_mr advice values.
const (
	AdviseMRAdvicePrefetch        AdviseMRAdvice = 0 // IBV_ADVISE_MR_ADVICE_PREFETCH
	AdviseMRAdvicePrefetchWrite   AdviseMRAdvice = 1 // IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE
	AdviseMRAdvicePrefetchNoFault AdviseMRAdvice = 2 // IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT
)

// AdviseMRFlagFlush is IBV_ADVISE_MR_FLAG_FLUSH: return once the advice
// is carried out.
const AdviseMRFlagFlush = 1 << 0

// GIDType is a GID's type (enum ibv_gid_type).
type GIDType uint32

// The GID types: an InfiniBand GID, a RoCE v1 GID (an Ethernet frame of
// ethertype 0x8915) or a RoCE v2 GID (a UDP datagram to port 4791), the
// only kind rxe, hence softnic, has (rxe_port_immutable:
// RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP).
const (
	GIDTypeIB     GIDType = 0 // IBV_GID_TYPE_IB
	GIDTypeRoCEv1 GIDType = 1 // IBV_GID_TYPE_ROCE_V1
	GIDTypeRoCEv2 GIDType = 2 // IBV_GID_TYPE_ROCE_V2
)

// String returns the type as the kernel's sysfs gid_attrs/types names it
// ("IB/RoCE v1", "RoCE v2"); IB and RoCE v1 share the name there.
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "IB/RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return unknown("GIDType", uint64(t))
}

// Format implements fmt.Formatter (FormatEnum).
func (t GIDType) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(t), t.String) }
