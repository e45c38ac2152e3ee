// Package ibcm is the InfiniBand connection manager of the Linux kernel
// (drivers/infiniband/core/cm.c, include/rdma/ib_cm.h) as a Go state
// machine over a MAD port: connection IDs with every state of enum
// ib_cm_state, REQ/MRA/REJ/REP/RTU/DREQ/DREP and SIDR_REQ/SIDR_REP in
// 256-byte MADs (package wire), the kernel's matching of REQs (duplicates,
// stale connections, listeners by service ID and mask), retransmission of
// the messages that expect an answer with the timeouts they carry and the
// retry count, timewait, and the events the kernel gives its consumer
// (the RDMA CM, package verbs/cm).
//
// An Agent is one port's CM (cm.c's cm_port with its MAD agent): the owner
// gives it a Port to send MADs to a remote GID's QP1 and calls Receive with
// every MAD that arrives on its QP1. Every timer runs on the injected
// clock. Malformed or unexpected MADs are counted (Agent.Counters) and
// dropped, never returned as errors and never panicked on.
//
// Not done: alternate paths (LAP, APR: counted and dropped, as cm.c drops
// them without a loaded alternate path), XRC, and ClassPortInfo queries.
package ibcm

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/wire"
)

// State is enum ib_cm_state.
type State int

// The states of a CM ID (ib_cm.h enum ib_cm_state, in its order).
const (
	StateIdle State = iota
	StateListen
	StateReqSent
	StateReqRcvd
	StateMRAReqSent
	StateMRAReqRcvd
	StateRepSent
	StateRepRcvd
	StateMRARepSent
	StateMRARepRcvd
	StateEstablished
	StateDreqSent
	StateDreqRcvd
	StateTimewait
	StateSIDRReqSent
	StateSIDRReqRcvd
)

var stateNames = [...]string{"IB_CM_IDLE", "IB_CM_LISTEN", "IB_CM_REQ_SENT", "IB_CM_REQ_RCVD",
	"IB_CM_MRA_REQ_SENT", "IB_CM_MRA_REQ_RCVD", "IB_CM_REP_SENT", "IB_CM_REP_RCVD",
	"IB_CM_MRA_REP_SENT", "IB_CM_MRA_REP_RCVD", "IB_CM_ESTABLISHED", "IB_CM_DREQ_SENT",
	"IB_CM_DREQ_RCVD", "IB_CM_TIMEWAIT", "IB_CM_SIDR_REQ_SENT", "IB_CM_SIDR_REQ_RCVD"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// EventType is enum ib_cm_event_type.
type EventType int

// CM events (ib_cm.h, in its order; LAP and APR are not generated).
const (
	EventReqError EventType = iota
	EventReqReceived
	EventRepError
	EventRepReceived
	EventRTUReceived
	EventUserEstablished
	EventDreqError
	EventDreqReceived
	EventDrepReceived
	EventTimewaitExit
	EventMRAReceived
	EventRejReceived
	EventLAPError
	EventLAPReceived
	EventAPRReceived
	EventSIDRReqError
	EventSIDRReqReceived
	EventSIDRRepReceived
)

var eventNames = [...]string{"IB_CM_REQ_ERROR", "IB_CM_REQ_RECEIVED", "IB_CM_REP_ERROR",
	"IB_CM_REP_RECEIVED", "IB_CM_RTU_RECEIVED", "IB_CM_USER_ESTABLISHED", "IB_CM_DREQ_ERROR",
	"IB_CM_DREQ_RECEIVED", "IB_CM_DREP_RECEIVED", "IB_CM_TIMEWAIT_EXIT", "IB_CM_MRA_RECEIVED",
	"IB_CM_REJ_RECEIVED", "IB_CM_LAP_ERROR", "IB_CM_LAP_RECEIVED", "IB_CM_APR_RECEIVED",
	"IB_CM_SIDR_REQ_ERROR", "IB_CM_SIDR_REQ_RECEIVED", "IB_CM_SIDR_REP_RECEIVED"}

func (t EventType) String() string {
	if t >= 0 && int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// SIDR_REP statuses (ib_cm.h enum ib_cm_sidr_status).
const (
	SIDRSuccess            = 0
	SIDRUnsupported        = 1
	SIDRReject             = 2
	SIDRNoQP               = 3
	SIDRRedirect           = 4
	SIDRUnsupportedVersion = 5
)

// MRAFlagDelay in an MRA's service timeout moves the ID to MRA_*_SENT
// without sending: the MRA goes out only when a duplicate arrives
// (ib_cm.h IB_CM_MRA_FLAG_DELAY).
const MRAFlagDelay = 0x80

// QP types the CM connects (cm.c cm_req_set_qp_type). QPTypeXRC is XRC:
// the active side's QP an XRC initiator (IB_QPT_XRC_INI), the passive
// side's an XRC target (IB_QPT_XRC_TGT); its REQ has transport service
// type 3 with extended transport type 1 (cm_msgs.h cm_req_get_qp_type).
const (
	QPTypeRC  = wire.CMTransportRC
	QPTypeUC  = wire.CMTransportUC
	QPTypeXRC = wire.CMTransportXRC
)

// extTransportXRC is the REQ's extended transport type of XRC.
const extTransportXRC = 1

// Path is what a REQ carries of the primary path (struct sa_path_rec as
// cm_format_req reads it), for RoCE: GIDs are IP addresses.
type Path struct {
	SGID, DGID     netip.Addr
	FlowLabel      uint32
	HopLimit       uint8
	TrafficClass   uint8
	SL             uint8
	Rate           uint8
	PKey           uint16
	MTU            uint8 // enum ib_mtu: 1 = 256 ... 5 = 4096
	PacketLifeTime uint8 // exponent: 4.096 µs × 2^PacketLifeTime
}

// ReqParam is struct ib_cm_req_param.
type ReqParam struct {
	Path                    Path
	ServiceID               uint64
	QPNum                   uint32
	QPType                  uint8 // QPTypeRC, QPTypeUC or QPTypeXRC
	StartingPSN             uint32
	PrivateData             []byte
	ResponderResources      uint8
	InitiatorDepth          uint8
	RemoteCMResponseTimeout uint8
	FlowControl             bool
	LocalCMResponseTimeout  uint8
	RetryCount              uint8
	RNRRetryCount           uint8
	MaxCMRetries            uint8
	SRQ                     bool
}

// RepParam is struct ib_cm_rep_param.
type RepParam struct {
	QPNum              uint32
	StartingPSN        uint32
	PrivateData        []byte
	ResponderResources uint8
	InitiatorDepth     uint8
	FailoverAccepted   uint8
	FlowControl        bool
	RNRRetryCount      uint8
	SRQ                bool
}

// SIDRReqParam is struct ib_cm_sidr_req_param.
type SIDRReqParam struct {
	DGID         netip.Addr
	ServiceID    uint64
	PKey         uint16
	Timeout      time.Duration // timeout_ms: the wait for a SIDR_REP
	MaxCMRetries uint8
	PrivateData  []byte
}

// SIDRRepParam is struct ib_cm_sidr_rep_param.
type SIDRRepParam struct {
	QPNum       uint32
	QKey        uint32
	Status      uint8
	Info        []byte
	PrivateData []byte
}

// ReqEvent is struct ib_cm_req_event_param: a REQ as the passive side
// sees it, with responder resources and initiator depth already swapped
// to this side's view (cm.c cm_format_req_event).
type ReqEvent struct {
	Listen                  *ID
	Path                    Path // SGID is this side's GID, DGID the requester's
	RemoteCAGUID            uint64
	RemoteQKey              uint32
	RemoteQPN               uint32
	QPType                  uint8
	StartingPSN             uint32
	ResponderResources      uint8
	InitiatorDepth          uint8
	LocalCMResponseTimeout  uint8
	FlowControl             bool
	RemoteCMResponseTimeout uint8
	RetryCount              uint8
	RNRRetryCount           uint8
	SRQ                     bool
	ServiceID               uint64
}

// RepEvent is struct ib_cm_rep_event_param, swapped to this side's view.
type RepEvent struct {
	RemoteCAGUID       uint64
	RemoteQKey         uint32
	RemoteQPN          uint32
	StartingPSN        uint32
	ResponderResources uint8
	InitiatorDepth     uint8
	TargetACKDelay     uint8
	FailoverAccepted   uint8
	FlowControl        bool
	RNRRetryCount      uint8
	SRQ                bool
}

// SIDREvent is what a SIDR_REQ (ib_cm_sidr_req_event_param) or a SIDR_REP
// (ib_cm_sidr_rep_event_param) gives.
type SIDREvent struct {
	Listen    *ID
	ServiceID uint64
	PKey      uint16
	SrcGID    netip.Addr // the requester's GID (SIDR_REQ)
	Status    uint8      // SIDR_REP
	QPN       uint32
	QKey      uint32
	Info      []byte
}

// Event is struct ib_cm_event: Type, the ID it is for (the new ID for
// REQ_RECEIVED and SIDR_REQ_RECEIVED), its parameters and the message's
// whole private data field (a copy).
type Event struct {
	Type        EventType
	ID          *ID
	Req         *ReqEvent
	Rep         *RepEvent
	SIDR        *SIDREvent
	RejReason   uint16 // REJ_RECEIVED
	ARI         []byte // REJ_RECEIVED: the additional rejection information
	MRATimeout  uint8  // MRA_RECEIVED: the service timeout
	PrivateData []byte
	// Err is, for the errors of a message that expected an answer
	// (REQ_ERROR, REP_ERROR, DREQ_ERROR, SIDR_REQ_ERROR), why it failed:
	// ETIMEDOUT when its retries ran out, ECONNREFUSED when the network
	// said no CM listens at its destination (Agent.PortUnreachable).
	Err syscall.Errno
}

// Handler receives an ID's events (ib_cm_handler). It runs on the
// goroutine that received the MAD or fired the timer, never with the
// agent's lock held, one event at a time per agent, so it may call the
// agent back (Accept, Reject, Destroy...).
type Handler func(*Event)

// Port sends MADs: what the MAD layer and QP1 are to cm.c. SendMAD sends
// the 256-byte mad to QP1 of the port whose GID is dst; it must not keep
// mad after it returns. A failed send is counted and treated as a lost
// datagram (the retransmission timer still runs).
type Port interface {
	SendMAD(dst netip.Addr, mad []byte) error
}

// Config configures an Agent.
type Config struct {
	Port  Port
	Clock clock.Clock // nil: the wall clock
	// GID is the port's GID (its IP address): REQs whose primary remote
	// port GID is another are refused with REJ invalid GID. Invalid: no check.
	GID netip.Addr
	// CAGUID is the node GUID sent as the local CA GUID (rxe derives it
	// from the MAC address).
	CAGUID uint64
	// AckDelay is the CA's local ACK delay exponent (rxe: 15) sent as the
	// REP's target ACK delay and used in cm_ack_timeout.
	AckDelay uint8
	// HiTID is the MAD agent's hi_tid, the top 32 bits of every TID the
	// agent forms (the kernel numbers its MAD agents from 1); 0 means 1.
	HiTID uint32
	// Seed seeds the local comm ID operand (cm.c random_id_operand); 0
	// picks a random one.
	Seed uint64
}

// Counters are an agent's statistics: the kernel's cm counters
// (/sys/class/infiniband_cm/*/counters) and what it drops silently.
type Counters struct {
	Sent       [wire.CMAttrAPR + 1]uint64 // MADs sent, by attribute ID (retries included)
	Received   [wire.CMAttrAPR + 1]uint64 // MADs received and parsed, by attribute ID
	Retries    uint64                     // retransmissions
	Duplicates uint64                     // duplicate REQ/REP/DREQ/MRA/RTU received
	Malformed  uint64                     // MADs refused by wire.ParseCM or a message parser
	Unmatched  uint64                     // MADs for no ID, or in a state that drops them
	SendErrors uint64                     // Port.SendMAD failures
}

type remoteKey struct {
	id   uint32
	guid uint64
}

type sidrKey struct {
	id  uint32
	gid netip.Addr
}

// Agent is one port's connection manager.
type Agent struct {
	cfg      Config
	clk      clock.Clock
	operand  uint32
	mu       sync.Mutex
	nextID   uint32
	ids      map[uint32]*ID    // by local comm ID (cm.local_id_table)
	remoteID map[remoteKey]*ID // cm.remote_id_table: remote comm ID + CA GUID
	remoteQP map[remoteKey]*ID // cm.remote_qp_table: remote QPN + CA GUID
	sidr     map[sidrKey]*ID   // cm.remote_sidr_table
	listens  []*ID             // cm.listen_service_table
	cnt      Counters
	closed   bool
	queue    []Event // events waiting for delivery
	draining bool
}

// New starts an agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Port == nil {
		return nil, fmt.Errorf("ibcm: no port: %w", syscall.EINVAL)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.HiTID == 0 {
		cfg.HiTID = 1
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &Agent{
		cfg: cfg, clk: cfg.Clock, operand: r.Uint32(), nextID: r.Uint32() & 0xffff,
		ids: map[uint32]*ID{}, remoteID: map[remoteKey]*ID{}, remoteQP: map[remoteKey]*ID{},
		sidr: map[sidrKey]*ID{},
	}, nil
}

// Counters returns a snapshot of the agent's counters.
func (a *Agent) Counters() Counters {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cnt
}

// IDs is the number of live IDs (listeners included): a leak check.
func (a *Agent) IDs() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}

// Close destroys every ID (as Destroy does: REJ, DREQ... as the state
// asks) and stops every timer; later calls fail with ENODEV.
func (a *Agent) Close() {
	a.mu.Lock()
	var ids []*ID
	for _, id := range a.ids {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, id := range ids {
		id.Destroy()
	}
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
}

// ID is struct ib_cm_id with cm.c's cm_id_private.
type ID struct {
	a       *Agent
	handler Handler
	// Context is the consumer's (ib_cm_id.context); set it before events
	// can arrive.
	Context any

	state       State
	destroyed   bool
	localID     uint32
	remoteID    uint32
	serviceID   uint64
	serviceMask uint64
	tid         uint64
	dgid        netip.Addr // the peer's GID: where this ID's MADs go (av)
	avTimeout   uint8      // av.timeout: packet life time + 1 (cm_init_av_by_path)
	timeout     time.Duration
	maxRetries  int
	msg         *sendMsg // the outstanding message that expects an answer

	remoteCAGUID uint64
	localQPN     uint32
	remoteQPN    uint32
	qpType       uint8
	sqPSN, rqPSN uint32
	initDepth    uint8
	respRes      uint8
	retryCount   uint8
	rnrRetry     uint8
	pathMTU      uint8
	targetDelay  uint8
	path         Path

	inRemoteID, inRemoteQP, inSIDR bool
	serviceTimeout                 uint8
	privateData                    []byte // the last private data sent (cm_set_private_data)
	twTimer                        clock.Timer
	twGen                          int
}

// CreateID creates an ID with the given event handler (ib_create_cm_id).
func (a *Agent) CreateID(h Handler, context any) (*ID, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, fmt.Errorf("ibcm: agent closed: %w", syscall.ENODEV)
	}
	return a.allocID(h, context), nil
}

// allocID is cm_alloc_id_priv + cm_finalize_id: a cyclic ID XORed with the
// random operand. a.mu is held.
func (a *Agent) allocID(h Handler, context any) *ID {
	for {
		a.nextID++
		lid := a.nextID ^ a.operand
		if lid == 0 || a.ids[lid] != nil {
			continue
		}
		id := &ID{a: a, handler: h, Context: context, localID: lid}
		a.ids[lid] = id
		return id
	}
}

// State returns the ID's state.
func (id *ID) State() State {
	id.a.mu.Lock()
	defer id.a.mu.Unlock()
	return id.state
}

// LocalID and RemoteID are the comm IDs (ib_cm_id.local_id, remote_id).
func (id *ID) LocalID() uint32 { id.a.mu.Lock(); defer id.a.mu.Unlock(); return id.localID }
func (id *ID) RemoteID() uint32 {
	id.a.mu.Lock()
	defer id.a.mu.Unlock()
	return id.remoteID
}

// Peer is the GID the ID's messages go to.
func (id *ID) Peer() netip.Addr { id.a.mu.Lock(); defer id.a.mu.Unlock(); return id.dgid }

// formTID is cm.c cm_form_tid: the MAD agent's hi_tid over the local comm
// ID as the kernel casts a __be32 to u64 on a little-endian host
// (byte-swapped; verified in the rping capture).
func (id *ID) formTID() uint64 {
	return uint64(id.a.cfg.HiTID)<<32 | uint64(bits.ReverseBytes32(id.localID))
}

// ConvertToDuration is cm.c cm_convert_to_ms: the kernel's approximation
// of 4.096 µs × 2^t, 2^(t-8) ms (at least 1 ms).
func ConvertToDuration(t uint8) time.Duration {
	return time.Duration(1<<max(int(t)-8, 0)) * time.Millisecond
}

// AckTimeout is cm.c cm_ack_timeout: the local ACK timeout a REQ carries,
// from the CA's ACK delay and the path's packet life time.
func AckTimeout(caAckDelay, packetLifeTime uint8) uint8 {
	t := int(packetLifeTime) + 1
	d := int(caAckDelay)
	if t >= d {
		if d >= t-1 {
			t++
		}
	} else {
		t = d
		if int(packetLifeTime)+1 >= d-1 {
			t++
		}
	}
	return uint8(min(31, t))
}

func copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// queue adds an event for delivery after the lock is released. a.mu held.
func (a *Agent) queueEvent(ev Event) { a.queue = append(a.queue, ev) }

// unlockAndDeliver releases a.mu and delivers the queued events in order,
// unless another goroutine is already delivering (it then delivers ours).
func (a *Agent) unlockAndDeliver() {
	if a.draining || len(a.queue) == 0 {
		a.mu.Unlock()
		return
	}
	a.draining = true
	for len(a.queue) > 0 {
		ev := a.queue[0]
		a.queue = a.queue[1:]
		h := ev.ID.handler
		if ev.ID.destroyed {
			continue
		}
		a.mu.Unlock()
		if h != nil {
			h(&ev)
		}
		a.mu.Lock()
	}
	a.queue = nil
	a.draining = false
	a.mu.Unlock()
}

func errState(op string, s State) error {
	return fmt.Errorf("ibcm: %s in state %v: %w", op, s, syscall.EINVAL)
}
