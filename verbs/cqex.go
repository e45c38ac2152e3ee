package verbs

import (
	"fmt"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// Modify changes the CQ's attributes (ibv_modify_cq). With
// ibv.CQAttrModerate it sets the CQ's event moderation, as mlx5 does
// (rxe has no ibv_modify_cq): once armed by ReqNotify, the CQ generates
// its completion event when Moderate.CQCount completions that satisfy the
// arm have arrived, or Moderate.CQPeriod microseconds after the first of
// them, whichever comes first; a count of 0 bounds by time only, and both
// 0 (a new CQ's setting) generate the event at the first completion, as
// without moderation. Polling is not moderated: completions are in the CQ
// at once. A count without a period holds the event until the count-th
// completion however long that takes (and CQ.Wait, which blocks on the
// event, with it): give a period to bound the wait. Values above
// QueryDeviceEx's CQModCaps, unknown AttrMask bits or a nil attr are
// EINVAL.
func (c *CQ) Modify(attr *ibv.ModifyCQAttr) error {
	if err := c.live(); err != nil {
		return err
	}
	if attr == nil {
		return fmt.Errorf("%w: nil ibv_modify_cq_attr", EINVAL)
	}
	if extra := attr.AttrMask &^ ibv.CQAttrModerate; extra != 0 {
		return fmt.Errorf("%w: ibv_modify_cq attr_mask %#x: only IBV_CQ_ATTR_MODERATE is known", EINVAL, uint32(extra))
	}
	if attr.AttrMask&ibv.CQAttrModerate == 0 {
		return nil
	}
	m := attr.Moderate
	return c.q.Moderate(int(m.CQCount), time.Duration(m.CQPeriod)*time.Microsecond, c.d.n.Clock())
}

// CQInitAttrEx describes an extended CQ to create (struct
// ibv_cq_init_attr_ex).
type CQInitAttrEx struct {
	// CQE is the least number of entries (cqe), rounded up as for CreateCQ.
	CQE int
	// Channel, when set, receives the CQ's completion events (channel).
	Channel *CompChannel
	// CompVector is comp_vector: softnic has one completion vector
	// (num_comp_vectors 1), so it must be 0.
	CompVector uint32
	// WCFlags are the fields its completions carry (wc_flags): any of
	// ibv.WCStandardFlags, ibv.WCExWithCompletionTimestamp(Wallclock) and
	// ibv.WCExWithTMInfo. CVLAN and FLOW_TAG, which belong to raw
	// Ethernet QPs softnic does not have, are EOPNOTSUPP.
	WCFlags ibv.CreateCQWCFlags
	// Flags are ibv_create_cq_attr_flags (with IBV_CQ_INIT_ATTR_MASK_FLAGS):
	// CreateCQAttrSingleThreaded is taken (softnic's CQ locks anyway);
	// CreateCQAttrIgnoreOverrun is EOPNOTSUPP (an overrun CQ is in error,
	// IBTA 11.4.2.1).
	Flags uint32
	// ParentDomain is parent_domain (IBV_CQ_INIT_ATTR_MASK_PD): a parent
	// domain of this device, or nil. softnic's CQs need none of its
	// allocators; the CQ holds it until Destroy, as mlx5's does (its
	// Dealloc is EBUSY meanwhile).
	ParentDomain *PD
}

// The create flags of CQInitAttrEx.Flags (enum ibv_create_cq_attr_flags).
const (
	CreateCQAttrSingleThreaded = 1 << 0 // IBV_CREATE_CQ_ATTR_SINGLE_THREADED
	CreateCQAttrIgnoreOverrun  = 1 << 1 // IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN
)

// cqExWCFlags are the wc_flags CreateCQEx takes.
const cqExWCFlags = ibv.WCStandardFlags | ibv.WCExWithCompletionTimestamp |
	ibv.WCExWithCompletionTimestampWallclock | ibv.WCExWithTMInfo

// CQEx is an extended CQ (struct ibv_cq_ex): completions are read one at
// a time between StartPoll and EndPoll (ibv_start_poll, ibv_next_poll,
// ibv_end_poll), the current one's WRID and Status in fields as in C, the
// rest with the Read accessors (ibv_wc_read_*), which are defined for the
// fields CreateCQEx's WCFlags asked for and return zero for the others.
// The embedded CQ is ibv_cq_ex_to_cq: Poll, ReqNotify, Modify, Destroy
// and the rest work on it as on any CQ. Like ibv_cq_ex, a CQEx's poll
// belongs to one goroutine at a time.
type CQEx struct {
	*CQ
	// WRID and Status are the current completion's wr_id and status
	// (ibv_cq_ex.wr_id, status), set by StartPoll and NextPoll.
	WRID   uint64
	Status ibv.WCStatus

	flags   ibv.CreateCQWCFlags
	polling bool
	cur     [1]ibv.WorkCompletion
	stamp   [1]int64 // cur's time, Unix nanoseconds of the device's clock
}

// CreateCQEx creates an extended CQ (ibv_create_cq_ex). The refusals are
// CreateCQ's, and EOPNOTSUPP for wc_flags or flags softnic does not have
// (see CQInitAttrEx), EINVAL for a comp_vector other than 0 or a parent
// domain of another device or that is a plain PD.
func (d *Device) CreateCQEx(attr CQInitAttrEx) (*CQEx, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	switch {
	case attr.WCFlags&^cqExWCFlags != 0:
		return nil, fmt.Errorf("%w: wc_flags %v not supported", EOPNOTSUPP, attr.WCFlags&^cqExWCFlags)
	case attr.Flags&^CreateCQAttrSingleThreaded != 0:
		return nil, fmt.Errorf("%w: create flags %#x not supported (IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: an overrun CQ is in error)", EOPNOTSUPP, attr.Flags&^CreateCQAttrSingleThreaded)
	case attr.CompVector != 0:
		return nil, fmt.Errorf("%w: comp_vector %d (the device has 1 completion vector)", EINVAL, attr.CompVector)
	}
	par := attr.ParentDomain
	if par != nil {
		if err := par.checkParent(d); err != nil {
			return nil, err
		}
		par.mu.Lock()
		defer par.mu.Unlock()
		if par.dead {
			return nil, fmt.Errorf("%w: the parent domain was deallocated", EINVAL)
		}
	}
	c, err := d.CreateCQ(attr.CQE, attr.Channel)
	if err != nil {
		return nil, err
	}
	if par != nil {
		c.parent = par
		par.cqs++
	}
	if attr.WCFlags&(ibv.WCExWithCompletionTimestamp|ibv.WCExWithCompletionTimestampWallclock) != 0 {
		c.q.Stamp(d.n.Clock())
	}
	return &CQEx{CQ: c, flags: attr.WCFlags}, nil
}

// StartPoll starts reading the CQ and takes its oldest completion as the
// current one (ibv_start_poll): nil, or ENOENT when the CQ is empty, in
// which case EndPoll must not be called. An empty CQ first reads the
// device's link, as Poll does. A StartPoll while a poll is open is
// EINVAL.
func (x *CQEx) StartPoll() error {
	if x == nil {
		return errNil("CQEx")
	}
	if err := x.CQ.live(); err != nil {
		return err
	}
	if x.polling {
		return fmt.Errorf("%w: ibv_start_poll before ibv_end_poll", EINVAL)
	}
	if !x.next() {
		return fmt.Errorf("%w: the CQ is empty", ENOENT)
	}
	x.polling = true
	return nil
}

// NextPoll takes the next completion as the current one (ibv_next_poll):
// ENOENT when there is none. Outside StartPoll..EndPoll it is EINVAL.
func (x *CQEx) NextPoll() error {
	if x == nil {
		return errNil("CQEx")
	}
	if err := x.CQ.live(); err != nil {
		return err
	}
	if !x.polling {
		return fmt.Errorf("%w: ibv_next_poll without ibv_start_poll", EINVAL)
	}
	if !x.next() {
		return fmt.Errorf("%w: no more completions", ENOENT)
	}
	return nil
}

// EndPoll ends the poll StartPoll opened (ibv_end_poll); without one it
// does nothing.
func (x *CQEx) EndPoll() {
	if x != nil {
		x.polling = false
	}
}

// next takes the oldest completion, reading the link first if the CQ is
// empty, and reports whether there was one.
func (x *CQEx) next() bool {
	q := x.CQ.q
	n := q.PollStamped(x.cur[:], x.stamp[:])
	if n == 0 && x.d.n.Progress() > 0 {
		n = q.PollStamped(x.cur[:], x.stamp[:])
	}
	if n == 0 {
		return false
	}
	x.WRID, x.Status = x.cur[0].WRID, x.cur[0].Status
	return true
}

// has reports whether the CQ's wc_flags asked for f (false for a nil
// CQEx, whose accessors return zero).
func (x *CQEx) has(f ibv.CreateCQWCFlags) bool { return x != nil && x.flags&f != 0 }

// ReadOpcode returns the current completion's opcode (ibv_wc_read_opcode).
func (x *CQEx) ReadOpcode() ibv.WCOpcode {
	if x == nil {
		return 0
	}
	return x.cur[0].Opcode
}

// ReadVendorErr returns its vendor error, 0 (ibv_wc_read_vendor_err).
func (x *CQEx) ReadVendorErr() uint32 {
	if x == nil {
		return 0
	}
	return x.cur[0].VendorErr
}

// ReadWCFlags returns its wc_flags (ibv_wc_read_wc_flags).
func (x *CQEx) ReadWCFlags() ibv.WCFlags {
	if x == nil {
		return 0
	}
	return x.cur[0].Flags
}

// ReadByteLen returns its byte_len (ibv_wc_read_byte_len; WCExWithByteLen).
func (x *CQEx) ReadByteLen() uint32 {
	if !x.has(ibv.WCExWithByteLen) {
		return 0
	}
	return x.cur[0].ByteLen
}

// ReadImmData returns its immediate data, as WorkCompletion.Imm holds it
// (ibv_wc_read_imm_data; WCExWithImm).
func (x *CQEx) ReadImmData() uint32 {
	if !x.has(ibv.WCExWithImm) {
		return 0
	}
	return x.cur[0].Imm
}

// ReadInvalidatedRKey returns the rkey a SEND_WITH_INV invalidated
// (ibv_wc_read_invalidated_rkey; WCExWithImm, which carries both, as
// imm_data and invalidated_rkey share a union).
func (x *CQEx) ReadInvalidatedRKey() uint32 { return x.ReadImmData() }

// ReadQPNum returns its local QP number (ibv_wc_read_qp_num; WCExWithQPNum).
func (x *CQEx) ReadQPNum() uint32 {
	if !x.has(ibv.WCExWithQPNum) {
		return 0
	}
	return x.cur[0].QPNum
}

// ReadSrcQP returns a UD receive's source QP (ibv_wc_read_src_qp;
// WCExWithSrcQP).
func (x *CQEx) ReadSrcQP() uint32 {
	if !x.has(ibv.WCExWithSrcQP) {
		return 0
	}
	return x.cur[0].SrcQP
}

// ReadSLID returns its source LID, 0 on RoCE (ibv_wc_read_slid; WCExWithSLID).
func (x *CQEx) ReadSLID() uint32 {
	if !x.has(ibv.WCExWithSLID) {
		return 0
	}
	return uint32(x.cur[0].SLID)
}

// ReadSL returns its service level (ibv_wc_read_sl; WCExWithSL).
func (x *CQEx) ReadSL() uint8 {
	if !x.has(ibv.WCExWithSL) {
		return 0
	}
	return x.cur[0].SL
}

// ReadDLIDPathBits returns its DLID path bits, 0 on RoCE
// (ibv_wc_read_dlid_path_bits; WCExWithDLIDPathBits).
func (x *CQEx) ReadDLIDPathBits() uint8 {
	if !x.has(ibv.WCExWithDLIDPathBits) {
		return 0
	}
	return x.cur[0].DLIDPathBits
}

// ReadCompletionTS returns when the completion was made, in cycles of the
// HCA core clock (ibv_wc_read_completion_ts;
// WCExWithCompletionTimestamp): softnic's clock counts nanoseconds of the
// device's clock (Config.Clock), so QueryDeviceEx reports HCACoreClock
// 1 GHz and QueryRTValuesEx reads the same clock now.
func (x *CQEx) ReadCompletionTS() uint64 {
	if !x.has(ibv.WCExWithCompletionTimestamp) {
		return 0
	}
	return uint64(x.stamp[0])
}

// ReadCompletionWallclockNS returns when the completion was made, in
// nanoseconds since the Unix epoch of the device's clock
// (ibv_wc_read_completion_wallclock_ns;
// WCExWithCompletionTimestampWallclock).
func (x *CQEx) ReadCompletionWallclockNS() uint64 {
	if !x.has(ibv.WCExWithCompletionTimestampWallclock) {
		return 0
	}
	return uint64(x.stamp[0])
}

// ReadTMInfo returns a tag-matching completion's tag and priv
// (ibv_wc_read_tm_info; WCExWithTMInfo).
func (x *CQEx) ReadTMInfo() (tag uint64, priv uint32) {
	if !x.has(ibv.WCExWithTMInfo) {
		return 0, 0
	}
	return x.cur[0].TMTag, x.cur[0].TMPriv
}

// QueryRTValuesEx reads the device's real-time values
// (ibv_query_rt_values_ex): with ibv.ValuesMaskRawClock in v.CompMask, the
// device's clock now in the unit of ReadCompletionTS, in RawClock.Nsec
// (Sec 0), as mlx5 reports its cycle counter. v.CompMask comes back as
// the values filled; unknown bits are EINVAL.
func (d *Device) QueryRTValuesEx(v *ibv.ValuesEx) error {
	if err := d.check(); err != nil {
		return err
	}
	if v == nil {
		return fmt.Errorf("%w: nil ibv_values_ex", EINVAL)
	}
	if v.CompMask&^ibv.ValuesMaskRawClock != 0 {
		return fmt.Errorf("%w: ibv_values_ex comp_mask %#x", EINVAL, uint32(v.CompMask))
	}
	want := v.CompMask
	*v = ibv.ValuesEx{}
	if want&ibv.ValuesMaskRawClock != 0 {
		v.RawClock = ibv.Timespec{Nsec: d.n.Clock().Now().UnixNano()}
		v.CompMask = ibv.ValuesMaskRawClock
	}
	return nil
}

// cqModCaps is what QueryDeviceEx reports as cq_mod_caps.
var cqModCaps = ibv.CQModerationCaps{MaxCQCount: nic.MaxCQModCount, MaxCQPeriod: uint16(nic.MaxCQModPeriod / time.Microsecond)}
