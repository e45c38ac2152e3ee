package ibv

import (
	"fmt"
	"strconv"
	"strings"
)

// The names of the verbs enums, for logs and errors. Each enum prints its
// libibverbs name without the IBV_ prefix ("RDMA_WRITE", "RTS"), a flag
// set prints its flags joined by "|" ("LOCAL_WRITE|REMOTE_READ"), and a
// value with no name prints as the type and its number ("QPType(7)",
// unknown flag bits in hex), so a bad value is never mistaken for a
// good one. That is the %v and %s of fmt; its integer verbs (%d, %x)
// print the number (FormatEnum, format.go).

// unknown formats a value with no name: "Type(n)".
func unknown(typ string, v uint64) string {
	return typ + "(" + strconv.FormatUint(v, 10) + ")"
}

// flag names one bit of a flag set.
type flag struct {
	bit  uint64
	name string
}

// flagString joins the names of the bits of v that names has with "|",
// in the order of names, then the bits it has no name for in hex; an
// empty set is "0".
func flagString(v uint64, names []flag) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	for _, f := range names {
		if v&f.bit == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(f.name)
		v &^= f.bit
	}
	if v != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x")
		b.WriteString(strconv.FormatUint(v, 16))
	}
	return b.String()
}

// String returns the enum ibv_qp_type name ("RC", "UD").
func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	case QPTypeRawPacket:
		return "RAW_PACKET"
	case QPTypeXRCSend:
		return "XRC_SEND"
	case QPTypeXRCRecv:
		return "XRC_RECV"
	}
	return unknown("QPType", uint64(t))
}

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"}

// String returns the enum ibv_qp_state name ("RESET", "RTS").
func (s QPState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return unknown("QPState", uint64(s))
}

// String returns the MTU in bytes ("1024"), as ibv_devinfo prints it.
func (m MTU) String() string {
	if n := m.Bytes(); n != 0 {
		return strconv.Itoa(n)
	}
	return unknown("MTU", uint64(m))
}

var accessNames = []flag{
	{uint64(AccessLocalWrite), "LOCAL_WRITE"}, {uint64(AccessRemoteWrite), "REMOTE_WRITE"},
	{uint64(AccessRemoteRead), "REMOTE_READ"}, {uint64(AccessRemoteAtomic), "REMOTE_ATOMIC"},
	{uint64(AccessMWBind), "MW_BIND"}, {uint64(AccessZeroBased), "ZERO_BASED"},
	{uint64(AccessOnDemand), "ON_DEMAND"}, {uint64(AccessHugeTLB), "HUGETLB"},
	{uint64(AccessFlushGlobal), "FLUSH_GLOBAL"}, {uint64(AccessFlushPersistent), "FLUSH_PERSISTENT"},
	{uint64(AccessRelaxedOrdering), "RELAXED_ORDERING"},
}

// String lists the access flags by their enum ibv_access_flags names
// ("LOCAL_WRITE|REMOTE_READ").
func (a Access) String() string { return flagString(uint64(a), accessNames) }

var wrNames = map[WROpcode]string{
	WRRDMAWrite: "RDMA_WRITE", WRRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", WRSend: "SEND",
	WRSendWithImm: "SEND_WITH_IMM", WRRDMARead: "RDMA_READ", WRAtomicCmpAndSwp: "ATOMIC_CMP_AND_SWP",
	WRAtomicFetchAndAdd: "ATOMIC_FETCH_AND_ADD", WRLocalInv: "LOCAL_INV", WRBindMW: "BIND_MW",
	WRSendWithInv: "SEND_WITH_INV", WRTSO: "TSO", WRDriver1: "DRIVER1", WRFlush: "FLUSH",
	WRAtomicWrite: "ATOMIC_WRITE", WRRegMR: "REG_MR",
}

// String returns the enum ibv_wr_opcode name ("RDMA_WRITE"); WRRegMR is
// the kernel's "REG_MR".
func (o WROpcode) String() string {
	if n, ok := wrNames[o]; ok {
		return n
	}
	return unknown("WROpcode", uint64(o))
}

var sendFlagNames = []flag{
	{uint64(SendFence), "FENCE"}, {uint64(SendSignaled), "SIGNALED"},
	{uint64(SendSolicited), "SOLICITED"}, {uint64(SendInline), "INLINE"},
	{uint64(SendIPCsum), "IP_CSUM"},
}

// String lists the flags by their enum ibv_send_flags names
// ("SIGNALED|INLINE").
func (f SendFlags) String() string { return flagString(uint64(f), sendFlagNames) }

var wcStatusNames = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
	"TM error", "TM software rendezvous",
}

// String returns ibv_wc_status_str's text ("remote access error"). A
// status with no name prints as "WCStatus(n)" where ibv_wc_status_str
// says "unknown".
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return unknown("WCStatus", uint64(s))
}

var wcOpcodeNames = map[WCOpcode]string{
	WCSend: "SEND", WCRDMAWrite: "RDMA_WRITE", WCRDMARead: "RDMA_READ", WCCompSwap: "COMP_SWAP",
	WCFetchAdd: "FETCH_ADD", WCBindMW: "BIND_MW", WCLocalInv: "LOCAL_INV", WCTSO: "TSO",
	WCFlush: "FLUSH", WCAtomicWrite: "ATOMIC_WRITE", WCRegMR: "REG_MR", WCRecv: "RECV",
	WCRecvRDMAWithImm: "RECV_RDMA_WITH_IMM", WCTMAdd: "TM_ADD", WCTMDel: "TM_DEL", WCTMSync: "TM_SYNC",
	WCTMRecv: "TM_RECV", WCTMNoTag: "TM_NO_TAG",
}

// String returns the enum ibv_wc_opcode name ("RECV_RDMA_WITH_IMM");
// WCRegMR is the kernel's "REG_MR".
func (o WCOpcode) String() string {
	if n, ok := wcOpcodeNames[o]; ok {
		return n
	}
	return unknown("WCOpcode", uint64(o))
}

var wcFlagNames = []flag{
	{uint64(WCGRH), "GRH"}, {uint64(WCWithImm), "WITH_IMM"}, {uint64(WCIPCsumOK), "IP_CSUM_OK"},
	{uint64(WCWithInv), "WITH_INV"}, {uint64(WCTMSyncReq), "TM_SYNC_REQ"},
	{uint64(WCTMMatch), "TM_MATCH"}, {uint64(WCTMDataValid), "TM_DATA_VALID"},
}

// String lists the flags by their enum ibv_wc_flags names
// ("GRH|WITH_IMM").
func (f WCFlags) String() string { return flagString(uint64(f), wcFlagNames) }

var attrNames = [...]string{
	"IBV_QP_STATE", "IBV_QP_CUR_STATE", "IBV_QP_EN_SQD_ASYNC_NOTIFY", "IBV_QP_ACCESS_FLAGS",
	"IBV_QP_PKEY_INDEX", "IBV_QP_PORT", "IBV_QP_QKEY", "IBV_QP_AV", "IBV_QP_PATH_MTU",
	"IBV_QP_TIMEOUT", "IBV_QP_RETRY_CNT", "IBV_QP_RNR_RETRY", "IBV_QP_RQ_PSN",
	"IBV_QP_MAX_QP_RD_ATOMIC", "IBV_QP_ALT_PATH", "IBV_QP_MIN_RNR_TIMER", "IBV_QP_SQ_PSN",
	"IBV_QP_MAX_DEST_RD_ATOMIC", "IBV_QP_PATH_MIG_STATE", "IBV_QP_CAP", "IBV_QP_DEST_QPN",
	"IBV_QP_RESERVED1", "IBV_QP_RESERVED2", "IBV_QP_RESERVED3", "IBV_QP_RESERVED4",
	"IBV_QP_RATE_LIMIT",
}

// String lists the mask's bits by their enum ibv_qp_attr_mask names, joined
// with "|" in bit order; unknown bits are shown in hex, an empty mask as "0".
func (m AttrMask) String() string {
	if m == 0 {
		return "0"
	}
	var b strings.Builder
	for i := 0; i < len(attrNames); i++ {
		if m&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(attrNames[i])
	}
	if rest := m &^ (1<<len(attrNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "%#x", uint32(rest))
	}
	return b.String()
}

var wqStateNames = [...]string{"RESET", "RDY", "ERR", "UNKNOWN"}

// String returns the enum ibv_wq_state name without its IBV_WQS_ prefix
// ("RDY").
func (s WQState) String() string {
	if int(s) < len(wqStateNames) {
		return wqStateNames[s]
	}
	return fmt.Sprintf("WQState(%d)", uint8(s))
}

// String returns the enum ibv_wq_type name ("RQ").
func (t WQType) String() string {
	if t == WQTypeRQ {
		return "RQ"
	}
	return fmt.Sprintf("WQType(%d)", uint8(t))
}

// String lists the mask's bits by their enum ibv_wq_attr_mask names
// ("STATE|CURR_STATE"); unknown bits in hex, an empty mask "0".
func (m WQAttrMask) String() string {
	return maskString(uint64(m), "STATE", "CURR_STATE", "FLAGS")
}

// String lists the mask's bits by their enum ibv_srq_attr_mask names
// ("MAX_WR|LIMIT"); unknown bits in hex, an empty mask "0".
func (m SRQAttrMask) String() string { return maskString(uint64(m), "MAX_WR", "LIMIT") }

// maskString joins the names of v's bits, names[i] naming bit i, with
// "|", then the bits without a name in hex; 0 is "0".
func maskString(v uint64, names ...string) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	for i, n := range names {
		if v&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(n)
		v &^= 1 << i
	}
	if v != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "%#x", v)
	}
	return b.String()
}

// String returns the enum ibv_srq_type name ("TM").
func (t SRQType) String() string {
	switch t {
	case SRQTypeBasic:
		return "BASIC"
	case SRQTypeXRC:
		return "XRC"
	case SRQTypeTM:
		return "TM"
	}
	return unknown("SRQType", uint64(t))
}

// String returns the enum ibv_ops_wr_opcode name ("TAG_ADD").
func (o OpsOpcode) String() string {
	switch o {
	case WRTagAdd:
		return "TAG_ADD"
	case WRTagDel:
		return "TAG_DEL"
	case WRTagSync:
		return "TAG_SYNC"
	}
	return unknown("OpsOpcode", uint64(o))
}

var opsFlagNames = []flag{{uint64(OpsSignaled), "SIGNALED"}, {uint64(OpsTMSync), "TM_SYNC"}}

// String lists the flags by their enum ibv_ops_flags names ("SIGNALED|TM_SYNC").
func (f OpsFlags) String() string { return flagString(uint64(f), opsFlagNames) }
