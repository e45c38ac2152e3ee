package ibv

import (
	"fmt"
	"testing"
)

// enumCase is one enum type: every defined value with its name, and how
// any value prints.
type enumCase struct {
	typ     string
	named   map[uint64]string
	str     func(uint64) string
	maxVals uint64 // values 0..maxVals-1 are tried
}

// checkEnum: each defined value prints its name, and every other value
// in range prints as "Type(n)".
func checkEnum(t *testing.T, c enumCase) {
	t.Helper()
	for v := uint64(0); v < c.maxVals; v++ {
		want, ok := c.named[v]
		if !ok {
			want = fmt.Sprintf("%s(%d)", c.typ, v)
		}
		if got := c.str(v); got != want {
			t.Errorf("%s(%d).String() = %q, want %q", c.typ, v, got, want)
		}
	}
}

func TestEnumStrings(t *testing.T) {
	for _, c := range []enumCase{
		{"QPType", map[uint64]string{2: "RC", 3: "UC", 4: "UD", 8: "RAW_PACKET", 9: "XRC_SEND", 10: "XRC_RECV"},
			func(v uint64) string { return QPType(v).String() }, 256},
		{"QPState", map[uint64]string{0: "RESET", 1: "INIT", 2: "RTR", 3: "RTS", 4: "SQD", 5: "SQE", 6: "ERR", 7: "UNKNOWN"},
			func(v uint64) string { return QPState(v).String() }, 256},
		{"MTU", map[uint64]string{1: "256", 2: "512", 3: "1024", 4: "2048", 5: "4096"},
			func(v uint64) string { return MTU(v).String() }, 256},
		{"WROpcode", map[uint64]string{
			0: "RDMA_WRITE", 1: "RDMA_WRITE_WITH_IMM", 2: "SEND", 3: "SEND_WITH_IMM", 4: "RDMA_READ",
			5: "ATOMIC_CMP_AND_SWP", 6: "ATOMIC_FETCH_AND_ADD", 7: "LOCAL_INV", 8: "BIND_MW",
			9: "SEND_WITH_INV", 10: "TSO", 11: "DRIVER1", 14: "FLUSH", 15: "ATOMIC_WRITE", 32: "REG_MR"},
			func(v uint64) string { return WROpcode(v).String() }, 256},
		{"WCOpcode", map[uint64]string{
			0: "SEND", 1: "RDMA_WRITE", 2: "RDMA_READ", 3: "COMP_SWAP", 4: "FETCH_ADD", 5: "BIND_MW",
			6: "LOCAL_INV", 7: "TSO", 8: "FLUSH", 9: "ATOMIC_WRITE", 10: "REG_MR", 128: "RECV",
			129: "RECV_RDMA_WITH_IMM", 130: "TM_ADD", 131: "TM_DEL", 132: "TM_SYNC", 133: "TM_RECV",
			134: "TM_NO_TAG"},
			func(v uint64) string { return WCOpcode(v).String() }, 256},
		{"WCStatus", map[uint64]string{ // ibv_wc_status_str (libibverbs/enum_strs.c)
			0: "success", 1: "local length error", 2: "local QP operation error",
			3: "local EE context operation error", 4: "local protection error",
			5: "Work Request Flushed Error", 6: "memory management operation error",
			7: "bad response error", 8: "local access error", 9: "remote invalid request error",
			10: "remote access error", 11: "remote operation error", 12: "transport retry counter exceeded",
			13: "RNR retry counter exceeded", 14: "local RDD violation error",
			15: "remote invalid RD request", 16: "aborted error", 17: "invalid EE context number",
			18: "invalid EE context state", 19: "fatal error", 20: "response timeout error",
			21: "general error", 22: "TM error", 23: "TM software rendezvous"},
			func(v uint64) string { return WCStatus(v).String() }, 256},
		{"SRQType", map[uint64]string{0: "BASIC", 1: "XRC", 2: "TM"},
			func(v uint64) string { return SRQType(v).String() }, 256},
		{"OpsOpcode", map[uint64]string{0: "TAG_ADD", 1: "TAG_DEL", 2: "TAG_SYNC"},
			func(v uint64) string { return OpsOpcode(v).String() }, 256},
	} {
		t.Run(c.typ, func(t *testing.T) { checkEnum(t, c) })
	}
}

func TestFlagStrings(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Access(0).String(), "0"},
		{AccessLocalWrite.String(), "LOCAL_WRITE"},
		{(AccessLocalWrite | AccessRemoteRead | AccessRemoteAtomic).String(), "LOCAL_WRITE|REMOTE_READ|REMOTE_ATOMIC"},
		{(AccessMWBind | AccessZeroBased | AccessOnDemand | AccessHugeTLB).String(), "MW_BIND|ZERO_BASED|ON_DEMAND|HUGETLB"},
		{(AccessFlushGlobal | AccessFlushPersistent | AccessRelaxedOrdering).String(), "FLUSH_GLOBAL|FLUSH_PERSISTENT|RELAXED_ORDERING"},
		{(AccessRemoteWrite | 1<<30).String(), "REMOTE_WRITE|0x40000000"},
		{Access(1 << 12).String(), "0x1000"},
		{(SendFence | SendSignaled | SendSolicited | SendInline | SendIPCsum).String(), "FENCE|SIGNALED|SOLICITED|INLINE|IP_CSUM"},
		{SendFlags(1 << 5).String(), "0x20"},
		{SendFlags(0).String(), "0"},
		{(WCGRH | WCWithImm | WCIPCsumOK | WCWithInv).String(), "GRH|WITH_IMM|IP_CSUM_OK|WITH_INV"},
		{(WCTMSyncReq | WCTMMatch | WCTMDataValid | 1<<9).String(), "TM_SYNC_REQ|TM_MATCH|TM_DATA_VALID|0x200"},
		{(OpsSignaled | OpsTMSync).String(), "SIGNALED|TM_SYNC"},
		{(OpsTMSync | 1<<4).String(), "TM_SYNC|0x10"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
