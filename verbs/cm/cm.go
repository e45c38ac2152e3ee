// Package cm is the RDMA connection manager (librdmacm, rdma_cma.h) in
// userspace: event channels, IDs in the TCP, UDP and IB port spaces,
// address and route resolution on RoCE (an IP address and the route to
// it; no SA), connect/listen/accept/reject/disconnect with private data,
// UD (SIDR) and multicast joins, speaking the IB CM protocol (package
// verbs/cm/internal/ibcm) in MADs on each device's QP1 exactly as the kernel's
// ib_cm and rdma_cm do.
//
// Names follow librdmacm: rdma_X is X here. What librdmacm does in the
// library (moving the ID's QP through INIT, RTR and RTS from the CM's
// attributes, sending the RTU when a connect is answered, attaching a
// QP to a joined group) this package does too, and the kernel's part
// (cma.c and cm.c) runs in the CM: one goroutine per device reads its
// QP1 and one delivers the IB CM's events.
//
// Events carry the whole private data field of the message they come
// from, as librdmacm reports it (a REQ's 92 bytes less the 36-byte CMA
// header, a REP's 196, a REJ's 148): the peer's data, then zeros.
//
// Addresses resolve as the kernel's rdma_resolve_addr resolves them
// (addr.c): on a device whose link is a UDP link, through the host's
// routing and neighbour tables in the link's network namespace
// (link.ResolveRoute), ADDR_ERROR with the kernel's errno when there is
// no route or no neighbour answers within timeout_ms. Deliberate
// differences: a device on the fabric, which has no routing table,
// resolves any address of its family at once; the device for an ID
// bound to no address is chosen among the CM's devices (ID.ResolveAddr),
// not from the route's source address; and the CM hears the network's
// ICMP port unreachable for its MADs (link.WatchSendErrors), which the
// kernel's CM does not for rxe's socket: Connect to an address where no
// RoCE NIC listens ends with UNREACHABLE -ECONNREFUSED within a round
// trip, not with -ETIMEDOUT after 16 REQs and 98 s.
package cm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm/internal/ibcm"
)

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

var eventNames = [...]string{
	"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
	"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
	"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
	"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
	"RDMA_CM_EVENT_TIMEWAIT_EXIT",
}

// String returns rdma_event_str's text, e.g. "RDMA_CM_EVENT_ESTABLISHED"
// ("UNKNOWN EVENT" for a value it does not know).
func (t EventType) String() string {
	if t >= 0 && int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "UNKNOWN EVENT"
}

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

// MaxResponderResources and MaxInitiatorDepth in a ConnParam ask for the
// device's maximum (rdma_cma.h RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH).
const (
	MaxResponderResources = 0xFF
	MaxInitiatorDepth     = 0xFF
)

// UDPQKey is the Q_Key of the UDP port space and of multicast groups
// (cma.c RDMA_UDP_QKEY).
const UDPQKey = 0x01234567

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
	// Err says why, for an error event whose cause softnic found itself
	// (ADDR_ERROR from the route lookup: "link: route to ... : invalid
	// argument"); nil otherwise. librdmacm has only Status.
	Err  error
	Conn ConnParam // connected port spaces (TCP, IB)
	UD   UDParam   // UDP and IPoIB port spaces, multicast joins
	// McastContext is, for MULTICAST_JOIN and MULTICAST_ERROR, the
	// context given to JoinMulticast (librdmacm puts it in
	// param.ud.private_data).
	McastContext any

	owner *ID // the ID whose events_completed an ack counts (the listener for CONNECT_REQUEST)
	acked bool
}

// Ack acknowledges the event (rdma_ack_cm_event).
func (e *Event) Ack() error {
	if e == nil || e.owner == nil {
		return fmt.Errorf("cm: ack of an event not got from GetEvent: %w", verbs.EINVAL)
	}
	c := e.owner.cm
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.acked {
		return fmt.Errorf("cm: event acked twice: %w", verbs.EINVAL)
	}
	e.acked = true
	e.owner.completed++
	c.cond.Broadcast()
	return nil
}

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
type CM struct {
	cfg  Config
	clk  clock.Clock
	devs []*cmDev

	mu     sync.Mutex
	cond   *sync.Cond
	ids    map[*ID]struct{}
	chans  map[*EventChannel]struct{}
	binds  map[bindKey][]*ID
	byCM   map[*ibcm.ID]*ID
	closed bool
	rnd    *rand.Rand

	// The IB CM's events, delivered in order by one goroutine (cm.c's
	// work queue): its handlers only queue, so the CM may call ibcm with
	// its own lock held.
	qmu    sync.Mutex
	qcond  *sync.Cond
	queue  []work
	qstop  bool
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

type bindKey struct {
	ps   PortSpace
	port uint16
}

// New starts a CM on cfg.Devices.
func New(cfg Config) (*CM, error) {
	if len(cfg.Devices) == 0 {
		return nil, fmt.Errorf("cm: no devices: %w", verbs.EINVAL)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	c := &CM{cfg: cfg, clk: cfg.Clock, ids: map[*ID]struct{}{}, binds: map[bindKey][]*ID{},
		byCM: map[*ibcm.ID]*ID{}, chans: map[*EventChannel]struct{}{}, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	c.cond = sync.NewCond(&c.mu)
	c.qcond = sync.NewCond(&c.qmu)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	for i, d := range cfg.Devices {
		if d == nil {
			c.closeDevs()
			return nil, fmt.Errorf("cm: device %d is nil: %w", i, verbs.EINVAL)
		}
		cd, err := newCMDev(c, d, uint32(i+1))
		if err != nil {
			c.closeDevs()
			return nil, err
		}
		c.devs = append(c.devs, cd)
	}
	for _, d := range c.devs {
		c.wg.Go(func() { d.recvLoop(ctx) })
	}
	c.wg.Go(c.work)
	return c, nil
}

// closeDrain bounds how long Close waits for QP1's posted MADs to leave.
const closeDrain = time.Second

func (c *CM) closeDevs() {
	for _, d := range c.devs {
		d.close()
	}
}

// Close destroys every ID (as Destroy does, without waiting for acks)
// and stops the CM's agents; GetEvent on its channels then returns the
// events left and ENODEV.
func (c *CM) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	var ids []*ID
	for id := range c.ids {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		id.destroy(false)
	}
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	for ch := range c.chans {
		// Waiters in GetEvent see the CM gone.
		select {
		case ch.notify <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	for _, d := range c.devs {
		d.agent.Close()
	}
	// The MADs the destroys above sent (DREQ, DREP, REJ) and those posted
	// before leave first; QP1's receive loop still runs and frees their
	// slots.
	for _, d := range c.devs {
		d.drainSends(closeDrain)
	}
	c.qmu.Lock()
	c.qstop = true
	c.qcond.Broadcast()
	c.qmu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.closeDevs()
	return nil
}

// work is what the CM's work goroutine does, in order: an IB CM event
// to deliver, or news from a device's link that no CM listens at an
// address (cmDev.sendError), for its agent.
type work struct {
	ev          *ibcm.Event
	dev         *cmDev
	unreachable netip.Addr
}

// queueWork queues w for the work goroutine.
func (c *CM) queueWork(w work) {
	c.qmu.Lock()
	if !c.qstop {
		c.queue = append(c.queue, w)
		c.qcond.Signal()
	}
	c.qmu.Unlock()
}

// handleIB is every ibcm ID's handler: it only queues.
func (c *CM) handleIB(ev *ibcm.Event) { c.queueWork(work{ev: ev}) }

// work delivers the IB CM's events in order, and the links' news.
func (c *CM) work() {
	for {
		c.qmu.Lock()
		for len(c.queue) == 0 && !c.qstop {
			c.qcond.Wait()
		}
		if c.qstop {
			c.queue = nil
			c.qmu.Unlock()
			return
		}
		w := c.queue[0]
		c.queue[0] = work{}
		c.queue = c.queue[1:]
		c.qmu.Unlock()
		if w.ev != nil {
			c.ibEvent(w.ev)
		} else {
			w.dev.agent.PortUnreachable(w.unreachable)
		}
	}
}

// EventChannel is struct rdma_event_channel.
type EventChannel struct {
	c      *CM
	q      []*Event
	notify chan struct{}
	users  int
	closed bool
	sync   bool // an ID's private channel (a synchronous ID)

	onReady func(bool) // SetNotify's
	ready   bool       // what onReady last heard
}

// CreateEventChannel is rdma_create_event_channel.
func (c *CM) CreateEventChannel() *EventChannel {
	if c == nil {
		return nil
	}
	ch := &EventChannel{c: c, notify: make(chan struct{}, 1)}
	c.mu.Lock()
	c.chans[ch] = struct{}{}
	c.mu.Unlock()
	return ch
}

// post queues ev on the channel. c.mu held.
func (ch *EventChannel) post(ev *Event) {
	ch.q = append(ch.q, ev)
	ch.changed()
	select {
	case ch.notify <- struct{}{}:
	default:
	}
}

// GetEvent waits for the next event (rdma_get_cm_event).
func (ch *EventChannel) GetEvent(ctx context.Context) (*Event, error) {
	if ch == nil || ch.c == nil || ctx == nil {
		return nil, fmt.Errorf("cm: GetEvent: %w", verbs.EINVAL)
	}
	c := ch.c
	for {
		c.mu.Lock()
		if ch.closed {
			c.mu.Unlock()
			return nil, fmt.Errorf("cm: channel closed: %w", verbs.EINVAL)
		}
		if len(ch.q) > 0 {
			ev := ch.q[0]
			ch.q = ch.q[1:]
			ch.changed()
			if len(ch.q) > 0 {
				select {
				case ch.notify <- struct{}{}:
				default:
				}
			}
			ev.owner.reported++
			if ev.Type == EventConnectRequest && ev.ListenID != nil {
				// ucma.c: a request got frees its backlog slot.
				ev.ListenID.backlogUsed--
			}
			c.mu.Unlock()
			return ev, nil
		}
		if c.closed {
			c.mu.Unlock()
			return nil, fmt.Errorf("cm: CM closed: %w", verbs.ENODEV)
		}
		c.mu.Unlock()
		select {
		case <-ch.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close destroys the channel (rdma_destroy_event_channel); EBUSY while
// IDs use it.
func (ch *EventChannel) Close() error {
	if ch == nil || ch.c == nil {
		return fmt.Errorf("cm: nil channel: %w", verbs.EINVAL)
	}
	ch.c.mu.Lock()
	defer ch.c.mu.Unlock()
	if ch.users > 0 {
		return fmt.Errorf("cm: channel has %d IDs: %w", ch.users, verbs.EBUSY)
	}
	ch.closed = true
	delete(ch.c.chans, ch)
	return nil
}
