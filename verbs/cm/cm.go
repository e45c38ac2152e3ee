// Package cm is the RDMA connection manager (librdmacm, rdma_cma.h) in
// userspace: event channels, IDs in the TCP, UDP and IB port spaces,
// address and route resolution on RoCE (an IP address and the route to
// it; no SA), connect/listen/accept/reject/disconnect with private data,
// UD (SIDR) and multicast joins, speaking the IB CM protocol (package
// internal/ibcm) in MADs on each device's QP1 exactly as the kernel's
// ib_cm and rdma_cm do.
//
// SKELETON: the exported API the tools build on; the CM helper
// implements it. Names follow librdmacm: rdma_X is X here.
package cm

import (
	"context"
	"errors"
	"net/netip"
	"syscall"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

var errSkeleton = errors.New("cm: not built yet")

// PortSpace is enum rdma_port_space: the service ID's port space.
type PortSpace uint16

// Port spaces (rdma_cma.h).
const (
	PSIPoIB PortSpace = 0x0002
	PSIB    PortSpace = 0x013F
	PSTCP   PortSpace = 0x0106
	PSUDP   PortSpace = 0x0111
)

// EventType is enum rdma_cm_event_type, with librdmacm's values.
type EventType int

// Event types (rdma_cma.h), in librdmacm's order and values.
const (
	EventAddrResolved EventType = iota
	EventAddrError
	EventRouteResolved
	EventRouteError
	EventConnectRequest
	EventConnectResponse
	EventConnectError
	EventUnreachable
	EventRejected
	EventEstablished
	EventDisconnected
	EventDeviceRemoval
	EventMulticastJoin
	EventMulticastError
	EventAddrChange
	EventTimewaitExit
)

// String returns rdma_event_str's text, e.g. "RDMA_CM_EVENT_ESTABLISHED".
func (t EventType) String() string { return "" }

// ConnParam is struct rdma_conn_param.
type ConnParam struct {
	PrivateData        []byte
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8 // ignored by Accept
	RNRRetryCount      uint8
	SRQ                bool   // ignored if the ID has a QP
	QPNum              uint32 // ignored if the ID has a QP
}

// UDParam is struct rdma_ud_param: what a UD (SIDR) resolution or a
// multicast join gives: the address handle attributes, QPN and Q_Key to
// send to.
type UDParam struct {
	PrivateData []byte
	AHAttr      ibv.AHAttr
	QPNum       uint32
	QKey        uint32
}

// Event is struct rdma_cm_event. Every event got from GetEvent is acked
// with Ack (rdma_ack_cm_event); Destroy of an ID waits for its events'
// acks as librdmacm's rdma_destroy_id does.
type Event struct {
	ID       *ID // the ID the event is for (the new ID for CONNECT_REQUEST)
	ListenID *ID // for CONNECT_REQUEST: the listening ID
	Type     EventType
	// Status is librdmacm's: 0, a negative errno (-ETIMEDOUT,
	// -ECONNREFUSED, ...) or for REJECTED the IB CM reject reason.
	Status int
	Conn   ConnParam // connected port spaces (TCP, IB)
	UD     UDParam   // UDP and IPoIB port spaces, multicast joins
}

// Ack acknowledges the event (rdma_ack_cm_event).
func (e *Event) Ack() error { return errSkeleton }

// Config configures a CM.
type Config struct {
	// Devices are the devices IDs may bind to: an ID's source address
	// selects the device with that address (rdma_get_devices). The CM
	// creates each one's GSI QP (QP1) and answers MADs on it.
	Devices []*verbs.Device
	// Clock drives the CM's timers (retransmissions, timewait); nil
	// means the wall clock.
	Clock clock.Clock
}

// CM is one process's connection manager over a set of devices: what the
// kernel's rdma_cm and ib_cm are to librdmacm.
type CM struct{}

// New starts a CM on cfg.Devices.
func New(cfg Config) (*CM, error) { return nil, errSkeleton }

// Close destroys every ID and stops the CM's agents.
func (c *CM) Close() error { return errSkeleton }

// EventChannel is struct rdma_event_channel.
type EventChannel struct{}

// CreateEventChannel is rdma_create_event_channel.
func (c *CM) CreateEventChannel() *EventChannel { return nil }

// GetEvent waits for the next event (rdma_get_cm_event).
func (ch *EventChannel) GetEvent(ctx context.Context) (*Event, error) { return nil, errSkeleton }

// Close destroys the channel (rdma_destroy_event_channel); EBUSY while
// IDs use it.
func (ch *EventChannel) Close() error { return errSkeleton }

// ID is struct rdma_cm_id.
type ID struct{}

// CreateID creates an ID (rdma_create_id / rdma_create_id with a QP type
// through rdma_create_ep): qpType is QPTypeRC or QPTypeUC for PSTCP and
// PSIB, QPTypeUD for PSUDP and PSIPoIB. With a nil channel the ID is
// synchronous, as in librdmacm: ResolveAddr, ResolveRoute, Connect and
// Accept block until their event and return its error, and GetRequest
// returns the next connection request of a listening ID.
func (c *CM) CreateID(ch *EventChannel, context any, ps PortSpace, qpType ibv.QPType) (*ID, error) {
	return nil, errSkeleton
}

// Context is the context given to CreateID (rdma_cm_id.context).
func (id *ID) Context() any { return nil }

// PortSpace and QPType are those given to CreateID.
func (id *ID) PortSpace() PortSpace { return 0 }
func (id *ID) QPType() ibv.QPType   { return 0 }

// BindAddr binds the ID to a local address and port (rdma_bind_addr); an
// unspecified address binds to all devices (listen only); port 0 picks one.
func (id *ID) BindAddr(addr netip.AddrPort) error { return errSkeleton }

// ResolveAddr resolves dst and, when src is invalid (zero), picks a
// device and source address for it (rdma_resolve_addr); ADDR_RESOLVED or
// ADDR_ERROR follows.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error { return errSkeleton }

// ResolveRoute resolves the route to the destination (rdma_resolve_route):
// on RoCE the GIDs, hop limit, traffic class and path MTU; ROUTE_RESOLVED
// or ROUTE_ERROR follows.
func (id *ID) ResolveRoute(timeout time.Duration) error { return errSkeleton }

// Device is the device the ID is bound to (rdma_cm_id.verbs), nil before.
func (id *ID) Device() *verbs.Device { return nil }

// PD is the protection domain CreateQP made when given none (rdma_cm_id.pd).
func (id *ID) PD() *verbs.PD { return nil }

// CreateQP creates the ID's QP on its device (rdma_create_qp); pd nil
// allocates one. The CM moves the QP through INIT, RTR and RTS from the
// connection's attributes (UD: INIT..RTS at once with the port space's Q_Key).
func (id *ID) CreateQP(pd *verbs.PD, attr verbs.QPInitAttr) (*verbs.QP, error) {
	return nil, errSkeleton
}

// QP is the ID's QP (rdma_cm_id.qp), nil before CreateQP.
func (id *ID) QP() *verbs.QP { return nil }

// DestroyQP destroys the ID's QP (rdma_destroy_qp).
func (id *ID) DestroyQP() error { return errSkeleton }

// Connect sends a REQ (rdma_connect); for UD IDs a SIDR REQ.
func (id *ID) Connect(p *ConnParam) error { return errSkeleton }

// Listen listens for connection requests (rdma_listen).
func (id *ID) Listen(backlog int) error { return errSkeleton }

// GetRequest returns the next connection request's ID on a synchronous
// listening ID (rdma_get_request).
func (id *ID) GetRequest(ctx context.Context) (*ID, error) { return nil, errSkeleton }

// Accept accepts a connection request (rdma_accept).
func (id *ID) Accept(p *ConnParam) error { return errSkeleton }

// Reject rejects a connection request with private data (rdma_reject):
// an IB CM REJ with reason 28, consumer reject.
func (id *ID) Reject(privateData []byte) error { return errSkeleton }

// Disconnect sends a DREQ (or answers one with a DREP) and moves the QP
// to ERR (rdma_disconnect).
func (id *ID) Disconnect() error { return errSkeleton }

// JoinMulticast joins the multicast group addr (rdma_join_multicast);
// MULTICAST_JOIN carries the UDParam to send to it, context in the
// event's ID context. On RoCE no SA is asked: the join is local.
func (id *ID) JoinMulticast(addr netip.Addr, context any) error { return errSkeleton }

// LeaveMulticast leaves a group (rdma_leave_multicast).
func (id *ID) LeaveMulticast(addr netip.Addr) error { return errSkeleton }

// LocalAddr and PeerAddr are rdma_get_local_addr and rdma_get_peer_addr
// with their ports (rdma_get_src_port, rdma_get_dst_port).
func (id *ID) LocalAddr() netip.AddrPort { return netip.AddrPort{} }
func (id *ID) PeerAddr() netip.AddrPort  { return netip.AddrPort{} }

// InitQPAttr is rdma_init_qp_attr: the attributes to move the ID's QP to
// state.
func (id *ID) InitQPAttr(state ibv.QPState) (ibv.QPAttr, ibv.AttrMask, error) {
	return ibv.QPAttr{}, 0, errSkeleton
}

// Destroy destroys the ID (rdma_destroy_id).
func (id *ID) Destroy() error { return errSkeleton }

// AddrInfo is struct rdma_addrinfo.
type AddrInfo struct {
	Flags     int // AIPassive, AINumericHost, ...
	Family    int // syscall.AF_INET, AF_INET6 or 0
	QPType    ibv.QPType
	PortSpace PortSpace
	Src, Dst  netip.AddrPort
}

// AddrInfo flags (rdma_cma.h RAI_*).
const (
	AIPassive     = 0x01
	AINumericHost = 0x02
	AINoAddr      = 0x04
	AIFamily      = 0x08
)

// GetAddrInfo resolves node and service (rdma_getaddrinfo): names through
// the system resolver, services as port numbers or names.
func GetAddrInfo(ctx context.Context, node, service string, hints *AddrInfo) ([]AddrInfo, error) {
	return nil, errSkeleton
}

// CreateEP makes a synchronous ID from ai (rdma_create_ep): bound to
// ai.Src (AIPassive) or resolved to ai.Dst with its route, and with a QP
// when attr is not nil.
func (c *CM) CreateEP(ai *AddrInfo, pd *verbs.PD, attr *verbs.QPInitAttr) (*ID, error) {
	return nil, errSkeleton
}

var _ = syscall.ENOSYS
