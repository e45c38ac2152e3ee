package ibv

// SRQAttr holds a shared receive queue's attributes (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR    uint32 // max_wr: capacity in receive WRs
	MaxSGE   uint32 // max_sge: SGEs per WR
	SRQLimit uint32 // srq_limit: the armed limit; 0 when disarmed
}

// SRQAttrMask selects the SRQAttr fields a modify changes (enum
// ibv_srq_attr_mask).
type SRQAttrMask uint32

const (
	// SRQAttrMaxWR resizes the SRQ to SRQAttr.MaxWR (IBV_SRQ_MAX_WR; rxe
	// advertises IBV_DEVICE_SRQ_RESIZE).
	SRQAttrMaxWR SRQAttrMask = 1 << 0
	// SRQAttrLimit arms the limit event at SRQAttr.SRQLimit, or disarms
	// it with 0 (IBV_SRQ_LIMIT).
	SRQAttrLimit SRQAttrMask = 1 << 1
)

// WQState is a work queue's state (enum ibv_wq_state).
type WQState uint8

const (
	WQStateReset   WQState = 0 // IBV_WQS_RESET
	WQStateRdy     WQState = 1 // IBV_WQS_RDY
	WQStateErr     WQState = 2 // IBV_WQS_ERR
	WQStateUnknown WQState = 3 // IBV_WQS_UNKNOWN
)

// WQType is a work queue's type (enum ibv_wq_type); softnic has receive
// queues only.
type WQType uint8

// WQTypeRQ is IBV_WQT_RQ, a receive work queue.
const WQTypeRQ WQType = 0

// WQAttrMask selects what a WQ modify changes (enum ibv_wq_attr_mask).
type WQAttrMask uint32

const (
	WQAttrState     WQAttrMask = 1 << 0 // IBV_WQ_ATTR_STATE
	WQAttrCurrState WQAttrMask = 1 << 1 // IBV_WQ_ATTR_CURR_STATE
	WQAttrFlags     WQAttrMask = 1 << 2 // IBV_WQ_ATTR_FLAGS
)

// WQAttr are the attributes of ibv_modify_wq (struct ibv_wq_attr; its
// attr_mask is the modify's separate argument).
type WQAttr struct {
	State     WQState // wq_state: the state to move to
	CurrState WQState // curr_wq_state: with WQAttrCurrState, what the caller believes the state is
	Flags     uint32  // flags: enum ibv_wq_flags, none supported
	FlagsMask uint32  // flags_mask
}
