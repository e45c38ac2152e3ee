package ibv

// Tag matching (ibv_post_srq_ops(3), rdma-core Documentation/tag_matching.md):
// a tag-matching SRQ (SRQTypeTM) matches the tag in the header of each
// incoming SEND against a list of tagged buffers the application posts
// with OpsWR, and places matched data straight into the tagged buffer.

// SRQType is a shared receive queue's type (enum ibv_srq_type).
type SRQType uint8

const (
	SRQTypeBasic SRQType = 0 // IBV_SRQT_BASIC: an ordinary SRQ
	SRQTypeXRC   SRQType = 1 // IBV_SRQT_XRC: an SRQ in an XRC domain, named by its number
	SRQTypeTM    SRQType = 2 // IBV_SRQT_TM: a tag-matching SRQ
)

// TMCap sizes a tag-matching SRQ at creation (struct ibv_tm_cap, the tm_cap
// of struct ibv_srq_init_attr_ex).
type TMCap struct {
	MaxNumTags uint32 // max_num_tags: tagged buffers the list holds at once
	MaxOps     uint32 // max_ops: list operations outstanding at once
}

// TMCaps are the device's tag-matching capabilities (struct ibv_tm_caps,
// the tm_caps of struct ibv_device_attr_ex).
type TMCaps struct {
	// MaxRndvHdrSize is max_rndv_hdr_size: the largest TMH + RVH + user
	// header of a rendezvous request.
	MaxRndvHdrSize uint32
	MaxNumTags     uint32 // max_num_tags: the largest tag list
	Flags          uint32 // flags: TMCapRC
	MaxOps         uint32 // max_ops: the most list operations outstanding
	MaxSGE         uint32 // max_sge: SGEs per tagged buffer
}

// TMCapRC is IBV_TM_CAP_RC: tag matching on RC QPs.
const TMCapRC = 1 << 0

// OpsOpcode is a tag list operation (enum ibv_ops_wr_opcode).
type OpsOpcode uint8

const (
	WRTagAdd  OpsOpcode = 0 // IBV_WR_TAG_ADD: add a tagged buffer
	WRTagDel  OpsOpcode = 1 // IBV_WR_TAG_DEL: remove one by its handle
	WRTagSync OpsOpcode = 2 // IBV_WR_TAG_SYNC: report the unexpected count only
)

// OpsFlags are a list operation's flags (enum ibv_ops_flags).
type OpsFlags uint32

const (
	// OpsSignaled (IBV_OPS_SIGNALED): the operation completes on the
	// SRQ's CQ with its WRID (WCTMAdd, WCTMDel, WCTMSync).
	OpsSignaled OpsFlags = 1 << 0
	// OpsTMSync (IBV_OPS_TM_SYNC): UnexpectedCnt carries the number of
	// unexpected messages software has processed.
	OpsTMSync OpsFlags = 1 << 1
)

// OpsWR is a tag list operation (struct ibv_ops_wr; a batch is a slice
// rather than a chain of next pointers, and the tm union's members are
// plain fields).
type OpsWR struct {
	WRID   uint64    // wr_id: returned in the operation's completion
	Opcode OpsOpcode // opcode
	Flags  OpsFlags  // flags
	// UnexpectedCnt is tm.unexpected_cnt: with OpsTMSync, the unexpected
	// messages software has processed.
	UnexpectedCnt uint32
	// Handle is tm.handle: the tagged buffer a WRTagDel removes, and what
	// a WRTagAdd returns (written back into the WR by the post).
	Handle uint32
	// RecvWRID, SGList, Tag and Mask are tm.add: the wr_id of the
	// buffer's WCTMRecv completion, the buffer, and the match rule — an
	// incoming message matches when its TMH tag & Mask == Tag.
	RecvWRID uint64
	SGList   []SGE
	Tag      uint64
	Mask     uint64
}

// Tag-matching completion opcodes (enum ibv_wc_opcode, after
// IBV_WC_RECV_RDMA_WITH_IMM).
const (
	WCTMAdd   WCOpcode = 130 // IBV_WC_TM_ADD: a signaled WRTagAdd
	WCTMDel   WCOpcode = 131 // IBV_WC_TM_DEL: a signaled WRTagDel
	WCTMSync  WCOpcode = 132 // IBV_WC_TM_SYNC: a signaled WRTagSync
	WCTMRecv  WCOpcode = 133 // IBV_WC_TM_RECV: a message matched a tagged buffer
	WCTMNoTag WCOpcode = 134 // IBV_WC_TM_NO_TAG: a NO_TAG message, an ordinary receive
)
