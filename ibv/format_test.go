package ibv

import (
	"fmt"
	"testing"
)

// TestEnumFormat: every enum and flag type prints its name under %v and
// %s and its number under the integer verbs, as the C code ported to Go
// (printf("%x", wc.opcode)) expects.
func TestEnumFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		arg    any
		want   string
	}{
		{"%v", WCWithImm, "WITH_IMM"},
		{"%s", WCWithImm, "WITH_IMM"},
		{"%x", WCWithImm, "2"},
		{"%#x", WCWithImm | WCGRH, "0x3"},
		{"%08b", WCWithImm, "00000010"},
		{"%d", WCRecvRDMAWithImm, "129"},
		{"%x", WCRecvRDMAWithImm, "81"},
		{"%X", WCRecvRDMAWithImm, "81"},
		{"%v", WCRecvRDMAWithImm, "RECV_RDMA_WITH_IMM"},
		{"%q", WCSend, `"SEND"`},
		{"%-6v|", QPTypeUD, "UD    |"},
		{"%6v|", QPTypeUD, "    UD|"},
		{"%d", QPTypeUD, "4"},
		{"%#v", QPTypeUD, "0x4"},
		{"%d", QPStateRTS, "3"},
		{"%v", QPStateRTS, "RTS"},
		{"%d", MTU1024, "3"},
		{"%v", MTU1024, "1024"},
		{"%x", AccessLocalWrite | AccessRemoteRead, "5"},
		{"%v", AccessLocalWrite | AccessRemoteRead, "LOCAL_WRITE|REMOTE_READ"},
		{"%x", WRRDMAWriteWithImm, "1"},
		{"%d", WRRegMR, "32"},
		{"%x", SendSignaled | SendInline, "a"},
		{"%d", WCLocProtErr, "4"},
		{"%v", WCLocProtErr, "local protection error"},
		{"%x", QPAttrState | QPAttrPort, "21"},
		{"%d", WQStateRdy, "1"},
		{"%d", WQTypeRQ, "0"},
		{"%x", WQAttrMask(3), "3"},
		{"%x", SRQAttrMask(2), "2"},
		{"%d", SRQTypeTM, "2"},
		{"%d", WRTagSync, "2"},
		{"%x", OpsSignaled | OpsTMSync, "3"},
		{"%d", EventPortActive, "9"},
		{"%v", EventPortActive, "PORT_ACTIVE"},
		{"%x", QPType(200), "c8"},
		{"%v", QPType(200), "QPType(200)"},
	} {
		if got := fmt.Sprintf(tc.format, tc.arg); got != tc.want {
			t.Errorf("Sprintf(%q, %T %d) = %q, want %q", tc.format, tc.arg, tc.arg, got, tc.want)
		}
	}
}
