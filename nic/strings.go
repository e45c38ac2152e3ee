package nic

import (
	"fmt"
	"strings"
)

// eventDescriptions is ibv_event_type_str's table (rdma-core
// libibverbs/enum_strs.c).
var eventDescriptions = [...]string{
	EventCQErr:            "CQ error",
	EventQPFatal:          "local work queue catastrophic error",
	EventQPReqErr:         "invalid request local work queue error",
	EventQPAccessErr:      "local access violation work queue error",
	EventCommEst:          "communication established",
	EventSQDrained:        "send queue drained",
	EventPathMig:          "path migrated",
	EventPathMigErr:       "path migration request error",
	EventDeviceFatal:      "local catastrophic error",
	EventPortActive:       "port active",
	EventPortErr:          "port error",
	EventLIDChange:        "LID change",
	EventPKeyChange:       "P_Key change",
	EventSMChange:         "SM change",
	EventSRQErr:           "SRQ catastrophic error",
	EventSRQLimitReached:  "SRQ limit reached",
	EventQPLastWQEReached: "last WQE reached",
	EventClientReregister: "client reregistration",
	EventGIDChange:        "GID table change",
	EventWQFatal:          "WQ fatal",
}

// Description returns ibv_event_type_str's text ("local work queue
// catastrophic error"); String gives the enum name. A type with no name
// is "AsyncEventType(n)" where ibv_event_type_str says "unknown".
func (t AsyncEventType) Description() string {
	if int(t) < len(eventDescriptions) {
		return eventDescriptions[t]
	}
	return t.String()
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
