package verbs

import (
	"fmt"
	"strings"

	"github.com/softnic/softnic/ibv"
)

// The enums of package verbs print as the ones of package ibv do
// (see ibv.QPType, ibv.WROpcode, ibv.WCStatus, ...): the libibverbs name without its
// prefix, flag sets joined by "|", and "Type(n)" for a value with no
// name.

// PortState is a port's state (enum ibv_port_state), as PortAttr.State
// holds it: PortState(attr.State) prints it.
type PortState uint8

// The port states of enum ibv_port_state; softnic's port is always
// PortActive.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActiveDefer PortState = 5
)

var portStateNames = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// String returns the enum ibv_port_state name without IBV_PORT_
// ("ACTIVE"), as ibv_devinfo prints it after "PORT_".
func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return fmt.Sprintf("PortState(%d)", uint8(s))
}

// String returns the enum ib_mr_type name without IB_MR_TYPE_
// ("MEM_REG", "INTEGRITY").
func (t MRType) String() string {
	switch t {
	case MRTypeMemReg:
		return "MEM_REG"
	case MRTypeSGGaps:
		return "SG_GAPS"
	case MRTypeIntegrity:
		return "INTEGRITY"
	}
	return fmt.Sprintf("MRType(%d)", int(t))
}

// String returns the enum ibv_mw_type name ("TYPE_1", "TYPE_2").
func (t MWType) String() string {
	switch t {
	case MWType1:
		return "TYPE_1"
	case MWType2:
		return "TYPE_2"
	}
	return fmt.Sprintf("MWType(%d)", int(t))
}

var sendOpsNames = [...]string{
	"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ",
	"ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD", "LOCAL_INV", "BIND_MW", "SEND_WITH_INV",
	"TSO", "FLUSH", "ATOMIC_WRITE",
}

// String lists the flags by their IBV_QP_EX_WITH_* names without the
// prefix ("SEND|RDMA_WRITE"); unknown bits in hex, no flags "0".
func (f SendOpsFlags) String() string {
	if f == 0 {
		return "0"
	}
	var b strings.Builder
	for i, n := range sendOpsNames {
		if f&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(n)
		f &^= 1 << i
	}
	if f != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "%#x", uint64(f))
	}
	return b.String()
}

// Format implements fmt.Formatter (ibv.FormatEnum): the name under %v,
// the number under %d and %x.
func (s PortState) Format(f fmt.State, verb rune) { ibv.FormatEnum(f, verb, uint64(s), s.String) }

// Format implements fmt.Formatter (ibv.FormatEnum).
func (t MRType) Format(f fmt.State, verb rune) { ibv.FormatEnum(f, verb, uint64(t), t.String) }

// Format implements fmt.Formatter (ibv.FormatEnum).
func (t MWType) Format(f fmt.State, verb rune) { ibv.FormatEnum(f, verb, uint64(t), t.String) }

// Format implements fmt.Formatter (ibv.FormatEnum).
func (s SendOpsFlags) Format(f fmt.State, verb rune) { ibv.FormatEnum(f, verb, uint64(s), s.String) }
