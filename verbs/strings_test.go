package verbs_test

import (
	"fmt"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestVerbsEnumStrings: the enums defined in package verbs and package
// nic print their names, flag sets as A|B, unknown values numerically.
func TestVerbsEnumStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{verbs.PortNop.String(), "NOP"},
		{verbs.PortDown.String(), "DOWN"},
		{verbs.PortInit.String(), "INIT"},
		{verbs.PortArmed.String(), "ARMED"},
		{verbs.PortActive.String(), "ACTIVE"},
		{verbs.PortActiveDefer.String(), "ACTIVE_DEFER"},
		{verbs.PortState(6).String(), "PortState(6)"},
		{verbs.MRTypeMemReg.String(), "MEM_REG"},
		{verbs.MRType(3).String(), "MRType(3)"},
		{verbs.MWType1.String(), "TYPE_1"},
		{verbs.MWType2.String(), "TYPE_2"},
		{verbs.MWType(0).String(), "MWType(0)"},
		{verbs.SendOpsFlags(0).String(), "0"},
		{(verbs.SendOpsSend | verbs.SendOpsRDMAWrite).String(), "RDMA_WRITE|SEND"},
		{(verbs.SendOpsRDMAWriteWithImm | verbs.SendOpsSendWithImm | verbs.SendOpsRDMARead |
			verbs.SendOpsAtomicCmpAndSwp | verbs.SendOpsAtomicFetchAdd | verbs.SendOpsLocalInv).String(),
			"RDMA_WRITE_WITH_IMM|SEND_WITH_IMM|RDMA_READ|ATOMIC_CMP_AND_SWP|ATOMIC_FETCH_AND_ADD|LOCAL_INV"},
		{(verbs.SendOpsBindMW | verbs.SendOpsSendWithInv | verbs.SendOpsTSO | verbs.SendOpsFlush |
			verbs.SendOpsAtomicWrite | 1<<20).String(), "BIND_MW|SEND_WITH_INV|TSO|FLUSH|ATOMIC_WRITE|0x100000"},
		{ibv.WQTypeRQ.String(), "RQ"},
		{ibv.WQType(1).String(), "WQType(1)"},
		{ibv.WQStateRdy.String(), "RDY"},
		{(ibv.WQAttrState | ibv.WQAttrCurrState | ibv.WQAttrFlags).String(), "STATE|CURR_STATE|FLAGS"},
		{ibv.WQAttrMask(1 << 4).String(), "0x10"},
		{(ibv.SRQAttrMaxWR | ibv.SRQAttrLimit).String(), "MAX_WR|LIMIT"},
		{ibv.SRQAttrMask(0).String(), "0"},
		{ibv.EventQPFatal.Description(), "local work queue catastrophic error"},
		{ibv.EventSRQLimitReached.Description(), "SRQ limit reached"},
		{ibv.AsyncEventType(20).Description(), "AsyncEventType(20)"},
		// The re-exported transport enums, as a user meets them.
		{ibv.WCRemAccessErr.String(), "remote access error"},
		{fmt.Sprint(ibv.WCRecvRDMAWithImm), "RECV_RDMA_WITH_IMM"},
		{fmt.Sprint(ibv.QPStateRTS, " ", ibv.QPTypeUD, " ", ibv.MTU4096), "RTS UD 4096"},
		{fmt.Sprint(ibv.SendSignaled | ibv.SendInline), "SIGNALED|INLINE"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	// Every ibv_event_type has a description other than a number.
	for typ := ibv.EventCQErr; typ <= ibv.EventWQFatal; typ++ {
		if d := typ.Description(); d == "" || d == fmt.Sprintf("AsyncEventType(%d)", uint8(typ)) {
			t.Errorf("%v has no description: %q", typ, d)
		}
	}
}

// TestVerbsEnumFormat: the enums of package verbs print their names under
// %v and their numbers under %d and %x (ibv.FormatEnum).
func TestVerbsEnumFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		arg    any
		want   string
	}{
		{"%v", verbs.PortActive, "ACTIVE"},
		{"%x", verbs.PortActive, "4"},
		{"%d", verbs.MWType2, "2"},
		{"%x", verbs.MWType2, "2"},
		{"%x", verbs.MRTypeMemReg, "0"},
		{"%#x", verbs.SendOpsSend | verbs.SendOpsRDMAWrite, "0x5"},
		{"%v", verbs.SendOpsSend | verbs.SendOpsRDMAWrite, "RDMA_WRITE|SEND"},
	} {
		if got := fmt.Sprintf(tc.format, tc.arg); got != tc.want {
			t.Errorf("Sprintf(%q, %T) = %q, want %q", tc.format, tc.arg, got, tc.want)
		}
	}
}
