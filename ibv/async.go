package ibv

import "fmt"

// AsyncEvent is an asynchronous event (struct ibv_async_event), as
// verbs Device.GetAsyncEvent and Device.AsyncEvents report it.
type AsyncEvent struct {
	Type AsyncEventType // event_type
	// QPN is the number of the QP a QP event is about (element.qp's
	// qp_num).
	QPN uint32
	// Other is the object the event is about (element.cq, .qp, .srq or
	// .wq), as its creator gave it: the verbs *CQ of EventCQErr, the *QP
	// of a QP event, the *SRQ or the *WQ; nil for port and device events
	// (element.port_num is always 1).
	Other any
}

// AsyncEventType is an asynchronous event's type (enum ibv_event_type).
// verbs' async.go says which softnic raises and when.
type AsyncEventType uint8

const (
	EventCQErr            AsyncEventType = 0  // IBV_EVENT_CQ_ERR: a CQ overran
	EventQPFatal          AsyncEventType = 1  // IBV_EVENT_QP_FATAL: the QP went to ERR on its own
	EventQPReqErr         AsyncEventType = 2  // IBV_EVENT_QP_REQ_ERR: the QP received an invalid request
	EventQPAccessErr      AsyncEventType = 3  // IBV_EVENT_QP_ACCESS_ERR: the QP refused a remote access
	EventCommEst          AsyncEventType = 4  // IBV_EVENT_COMM_EST: the first packet arrived in RTR
	EventSQDrained        AsyncEventType = 5  // IBV_EVENT_SQ_DRAINED
	EventPathMig          AsyncEventType = 6  // IBV_EVENT_PATH_MIG
	EventPathMigErr       AsyncEventType = 7  // IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal      AsyncEventType = 8  // IBV_EVENT_DEVICE_FATAL
	EventPortActive       AsyncEventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventPortErr          AsyncEventType = 10 // IBV_EVENT_PORT_ERR
	EventLIDChange        AsyncEventType = 11 // IBV_EVENT_LID_CHANGE
	EventPKeyChange       AsyncEventType = 12 // IBV_EVENT_PKEY_CHANGE
	EventSMChange         AsyncEventType = 13 // IBV_EVENT_SM_CHANGE
	EventSRQErr           AsyncEventType = 14 // IBV_EVENT_SRQ_ERR
	EventSRQLimitReached  AsyncEventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED: fewer WRs than the armed limit
	EventQPLastWQEReached AsyncEventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED: a QP on an SRQ went to ERR
	EventClientReregister AsyncEventType = 17 // IBV_EVENT_CLIENT_REREGISTER
	EventGIDChange        AsyncEventType = 18 // IBV_EVENT_GID_CHANGE
	EventWQFatal          AsyncEventType = 19 // IBV_EVENT_WQ_FATAL
)

// Which object an asynchronous event is about (the union element of
// struct ibv_async_event): none for port and device events.
const (
	evDevice uint8 = iota // device or port: no object
	evQP
	evCQ
	evSRQ
	evWQ
)

// asyncEventInfo is the ibv_event_type table: each event's enum name and
// the kind of object it is about.
var asyncEventInfo = [...]struct {
	name string
	obj  uint8
}{
	EventCQErr:            {"CQ_ERR", evCQ},
	EventQPFatal:          {"QP_FATAL", evQP},
	EventQPReqErr:         {"QP_REQ_ERR", evQP},
	EventQPAccessErr:      {"QP_ACCESS_ERR", evQP},
	EventCommEst:          {"COMM_EST", evQP},
	EventSQDrained:        {"SQ_DRAINED", evQP},
	EventPathMig:          {"PATH_MIG", evQP},
	EventPathMigErr:       {"PATH_MIG_ERR", evQP},
	EventDeviceFatal:      {"DEVICE_FATAL", evDevice},
	EventPortActive:       {"PORT_ACTIVE", evDevice},
	EventPortErr:          {"PORT_ERR", evDevice},
	EventLIDChange:        {"LID_CHANGE", evDevice},
	EventPKeyChange:       {"PKEY_CHANGE", evDevice},
	EventSMChange:         {"SM_CHANGE", evDevice},
	EventSRQErr:           {"SRQ_ERR", evSRQ},
	EventSRQLimitReached:  {"SRQ_LIMIT_REACHED", evSRQ},
	EventQPLastWQEReached: {"QP_LAST_WQE_REACHED", evQP},
	EventClientReregister: {"CLIENT_REREGISTER", evDevice},
	EventGIDChange:        {"GID_CHANGE", evDevice},
	EventWQFatal:          {"WQ_FATAL", evWQ},
}

// String returns the event type's enum name without its IBV_EVENT_
// prefix ("QP_FATAL", "SRQ_LIMIT_REACHED").
func (t AsyncEventType) String() string {
	if int(t) < len(asyncEventInfo) {
		return asyncEventInfo[t].name
	}
	return fmt.Sprintf("AsyncEventType(%d)", uint8(t))
}

// IsQPEvent reports whether the event is about a QP (element.qp): its
// AsyncEvent carries the QP's number and object.
func (t AsyncEventType) IsQPEvent() bool {
	return int(t) < len(asyncEventInfo) && asyncEventInfo[t].obj == evQP
}

// String describes the event for logs: its type and its object.
func (e AsyncEvent) String() string {
	switch {
	case e.Type.IsQPEvent():
		return fmt.Sprintf("%v QP %#x", e.Type, e.QPN)
	case e.Other != nil:
		return fmt.Sprintf("%v %T", e.Type, e.Other)
	}
	return e.Type.String()
}

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
