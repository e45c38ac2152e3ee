package verbs

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
)

// Unsupported lists the libibverbs calls softnic deliberately does not
// offer, each with why: their Go counterparts exist and return an error
// wrapping EOPNOTSUPP, as libibverbs answers for a provider without the
// operation (verbs.c: "if (!ops->...) return EOPNOTSUPP"), and
// `softnic info -v` prints the list. Most are calls rxe lacks too.
var Unsupported = []struct {
	Call   string // the libibverbs call
	Go     string // its Go counterpart
	Reason string
}{
	{"ibv_create_rwq_ind_table", "Device.CreateRWQIndTable", "no receive side scaling: a softnic QP takes one WQ (QPInitAttr.WQ), not an RSS indirection table"},
	{"ibv_alloc_mr(IB_MR_TYPE_INTEGRITY)", "PD.AllocMR(MRTypeIntegrity)", "no signature (T10-DIF) MRs, nor SG_GAPS ones; rxe has neither"},
	{"ibv_alloc_null_mr", "PD.AllocNullMR", "no null MR: rxe has none"},
	{"ibv_alloc_dm", "Device.AllocDM", "no device memory: a software NIC's memory is the host's (max_dm_size 0)"},
	{"ibv_create_flow", "QP.CreateFlow", "no flow steering: there are no RAW_PACKET QPs"},
	{"ibv_create_counters", "Device.CreateCounters", "no counter objects: Device.Counters reads the device's hw_counters"},
	{"ibv_set_ece", "QP.SetECE, QP.QueryECE", "no enhanced connection establishment: rxe has none"},
	{"ibv_modify_qp_rate_limit", "QP.ModifyRateLimit", "no packet pacing (packet_pacing_caps 0)"},
	{"ibv_reg_dmabuf_mr", "PD.RegDmabufMR", "no dma-buf: a Go program registers memory it holds"},
	{"ibv_import_device", "ImportDevice", "no shared device contexts: a Device lives in one process"},
}

// errUnsupported is the error of an Unsupported call.
func errUnsupported(call string) error {
	for _, u := range Unsupported {
		if u.Call == call {
			return fmt.Errorf("%w: %s: %s", EOPNOTSUPP, call, u.Reason)
		}
	}
	return fmt.Errorf("%w: %s", EOPNOTSUPP, call)
}

// RWQIndTable would be a receive work queue indirection table
// (ibv_rwq_ind_table); softnic makes none.
type RWQIndTable struct{}

// CreateRWQIndTable would create an RSS indirection table over wqs
// (ibv_create_rwq_ind_table): softnic has no receive side scaling
// (rss_caps zero), so it returns EOPNOTSUPP. A QP takes one WQ instead
// (QPInitAttr.WQ).
func (d *Device) CreateRWQIndTable(logTableSize uint32, wqs []*WQ) (*RWQIndTable, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return nil, errUnsupported("ibv_create_rwq_ind_table")
}

// DM would be device memory (ibv_dm); softnic has none.
type DM struct{}

// AllocDM would allocate length bytes of device memory (ibv_alloc_dm):
// softnic's memory is the host's (max_dm_size 0), so it returns
// EOPNOTSUPP; ibv_memcpy_to_dm, ibv_memcpy_from_dm, ibv_reg_dm_mr and
// ibv_free_dm have nothing to act on.
func (d *Device) AllocDM(length uint64) (*DM, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return nil, errUnsupported("ibv_alloc_dm")
}

// Flow would be a flow steering rule (ibv_flow); softnic makes none.
type Flow struct{}

// CreateFlow would steer packets to the QP by a rule (ibv_create_flow):
// flow steering belongs to RAW_PACKET and UD QPs of Ethernet NICs, and
// softnic has neither RAW_PACKET QPs nor steering, so it returns
// EOPNOTSUPP (ibv_create_flow_action_esp likewise has no counterpart).
func (qp *QP) CreateFlow() (*Flow, error) {
	if err := qp.live(); err != nil {
		return nil, err
	}
	return nil, errUnsupported("ibv_create_flow")
}

// CountersObj would be a counters object (ibv_counters); softnic makes
// none.
type CountersObj struct{}

// CreateCounters would create a counters object to attach to flows or QPs
// (ibv_create_counters): softnic has no such objects (Device.Counters
// reads the device's counters), so it returns EOPNOTSUPP.
func (d *Device) CreateCounters() (*CountersObj, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return nil, errUnsupported("ibv_create_counters")
}

// SetECE would set the QP's enhanced connection establishment options
// (ibv_set_ece): softnic, like rxe, has none, so it returns EOPNOTSUPP;
// ibv_query_ece likewise.
func (qp *QP) SetECE(vendorID, options, compMask uint32) error {
	if err := qp.live(); err != nil {
		return err
	}
	return errUnsupported("ibv_set_ece")
}

// QueryECE would return the QP's enhanced connection establishment
// options (ibv_query_ece): softnic, like rxe, has none, so it returns
// EOPNOTSUPP.
func (qp *QP) QueryECE() (vendorID, options, compMask uint32, err error) {
	if err := qp.live(); err != nil {
		return 0, 0, 0, err
	}
	return 0, 0, 0, errUnsupported("ibv_set_ece")
}

// QueryDataInOrder reports whether the data of one WR of opcode op
// reaches memory in order, so that a reader may poll the data rather
// than the CQ (ibv_query_qp_data_in_order): 0, no guarantee, for every
// opcode and flags, as rxe answers (it has no query_qp_data_in_order).
// softnic places a message's packets in PSN order, but copies each
// packet's payload with Go's copy, whose byte order within the copy is
// not promised, not even by 128-byte blocks
// (IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES). Polling the last byte of
// a WRITE then tells that the packet holding it arrived, not that the
// bytes before it did.
func (qp *QP) QueryDataInOrder(op ibv.WROpcode, flags uint32) int { return 0 }

// ModifyRateLimit would set the QP's packet pacing
// (ibv_modify_qp_rate_limit): softnic has no packet pacing
// (packet_pacing_caps zero), so it returns EOPNOTSUPP.
func (qp *QP) ModifyRateLimit(rateLimitKbps uint32, maxBurstSz, typicalPktSz uint16) error {
	if err := qp.live(); err != nil {
		return err
	}
	return errUnsupported("ibv_modify_qp_rate_limit")
}

// RegDmabufMR would register a dma-buf (ibv_reg_dmabuf_mr): a Go
// program registers memory it holds (RegMR), so it returns EOPNOTSUPP.
func (pd *PD) RegDmabufMR(offset, length, iova uint64, fd int, access uint32) (*MR, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	release()
	return nil, errUnsupported("ibv_reg_dmabuf_mr")
}

// ImportDevice would open a device context another process shares by its
// command file descriptor (ibv_import_device, with ibv_import_pd and
// ibv_import_mr): a softnic Device lives in one process, so it returns
// EOPNOTSUPP.
func ImportDevice(cmdFD int) (*Device, error) {
	return nil, errUnsupported("ibv_import_device")
}
