package cm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm/internal/ibcm"
	"github.com/softnic/softnic/wire"
)

// Errno values the CM returns beyond verbs' (errors.Is works with both:
// they are syscall.Errno values).
var (
	EADDRINUSE    error = syscall.EADDRINUSE
	EADDRNOTAVAIL error = syscall.EADDRNOTAVAIL
	ETIMEDOUT     error = syscall.ETIMEDOUT
	ECONNREFUSED  error = syscall.ECONNREFUSED
	ENETUNREACH   error = syscall.ENETUNREACH
)

// cma.c constants for RoCE.
const (
	cmaCMResponseTimeout = 20 // CMA_CM_RESPONSE_TIMEOUT
	cmaMaxCMRetries      = 15 // CMA_MAX_CM_RETRIES
	cmaMRASetting        = ibcm.MRAFlagDelay | 24
	cmaPacketLifeTime    = 18 // CMA_IBOE_PACKET_LIFETIME
	cmaHopLimit          = 64 // the route's hop limit (IPv4 TTL / IPv6 default)
	defaultPKey          = 0xFFFF
	mcastQPN             = 0xFFFFFF // IB_MULTICAST_QPN
	ephemeralLo          = 32768    // inet_get_local_port_range
	ephemeralHi          = 60999
)

// cmaState is cma.c's enum rdma_cm_state.
type cmaState int

const (
	stIdle cmaState = iota
	stAddrQuery
	stAddrResolved
	stRouteQuery
	stRouteResolved
	stConnect
	stDisconnect
	stAddrBound
	stListen
	stDeviceRemoval
	stDestroying
)

// ID is struct rdma_cm_id.
type ID struct {
	cm     *CM
	ch     *EventChannel
	sync   bool
	ctx    any
	ps     PortSpace
	qpType ibv.QPType

	state    cmaState
	dev      *cmDev
	src, dst netip.AddrPort
	bound    bool
	path     ibcm.Path
	seq      uint32 // id_priv->seq_num: the PSN this side starts with
	qkey     uint32
	ib       *ibcm.ID
	active   bool // made the connection (Connect)

	listenDevs  []*cmDev
	backlog     int
	backlogUsed int
	epPD        *verbs.PD
	epAttr      *verbs.QPInitAttr

	qp     *verbs.QP
	pd     *verbs.PD
	own    idCQs  // the CQs CreateQP made for the QP
	qpNum  uint32 // conn_param.qp_num when the ID has no QP
	srq    bool
	resp   uint8 // id_priv->responder_resources
	init   uint8 // id_priv->initiator_depth
	connEr bool  // librdmacm connect_error

	// cancelQuery ends the address query in progress (ResolveAddr).
	cancelQuery context.CancelFunc

	mcast map[netip.Addr]*mcJoin
	opt   idOptions // rdma_set_option's (option.go)

	reported, completed int
	destroyed           bool
}

type mcJoin struct {
	mgid netip.Addr
	ctx  any
}

func errf(err error, format string, a ...any) error {
	return fmt.Errorf("cm: "+format+": %w", append(a, err)...)
}

// CreateID creates an ID (rdma_create_id / rdma_create_id with a QP type
// through rdma_create_ep): qpType is QPTypeRC or QPTypeUC for PSTCP and
// PSIB, or for PSIB QPTypeXRCSend (an XRC initiator, which connects) or
// QPTypeXRCRecv (an XRC target, which listens and accepts: ucma.c
// ucma_get_qp_type takes the QP type of RDMA_PS_IB only), QPTypeUD for
// PSUDP and PSIPoIB. With a nil channel the ID is
// synchronous, as in librdmacm: ResolveAddr, ResolveRoute, Connect and
// Accept block until their event and return its error, and GetRequest
// returns the next connection request of a listening ID.
func (c *CM) CreateID(ch *EventChannel, context any, ps PortSpace, qpType ibv.QPType) (*ID, error) {
	if c == nil {
		return nil, errf(verbs.EINVAL, "nil CM")
	}
	switch ps {
	case PSTCP, PSIB:
		xrc := ps == PSIB && (qpType == ibv.QPTypeXRCSend || qpType == ibv.QPTypeXRCRecv)
		if qpType != ibv.QPTypeRC && qpType != ibv.QPTypeUC && !xrc {
			return nil, errf(verbs.EINVAL, "port space %#x takes RC or UC QPs, not %v", uint16(ps), qpType)
		}
	case PSUDP, PSIPoIB:
		if qpType != ibv.QPTypeUD {
			return nil, errf(verbs.EINVAL, "port space %#x takes UD QPs, not %v", uint16(ps), qpType)
		}
	default:
		return nil, errf(verbs.EINVAL, "unknown port space %#x", uint16(ps))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errf(verbs.ENODEV, "CM closed")
	}
	if ch != nil && (ch.c != c || ch.closed) {
		return nil, errf(verbs.EINVAL, "channel of another CM or closed")
	}
	return c.newID(ch, context, ps, qpType), nil
}

// newID makes an ID; a nil ch makes it synchronous. c.mu held.
func (c *CM) newID(ch *EventChannel, context any, ps PortSpace, qpType ibv.QPType) *ID {
	id := &ID{cm: c, ch: ch, ctx: context, ps: ps, qpType: qpType, seq: c.rnd.Uint32() & wire.PSNMask}
	if ch == nil {
		id.ch = &EventChannel{c: c, notify: make(chan struct{}, 1), sync: true}
		id.sync = true
		c.chans[id.ch] = struct{}{}
	}
	id.ch.users++
	if ps == PSUDP || ps == PSIB || ps == PSIPoIB {
		id.qkey = UDPQKey // cma.c cma_set_default_qkey
	}
	c.ids[id] = struct{}{}
	return id
}

func (id *ID) ok() bool { return id != nil && id.cm != nil }

// lock takes the CM's lock for a live ID.
func (id *ID) lock() error {
	if !id.ok() {
		return errf(verbs.EINVAL, "nil ID")
	}
	id.cm.mu.Lock()
	if id.destroyed || id.cm.closed {
		id.cm.mu.Unlock()
		return errf(verbs.EINVAL, "destroyed ID")
	}
	return nil
}

// Context is the context given to CreateID (rdma_cm_id.context).
func (id *ID) Context() any {
	if !id.ok() {
		return nil
	}
	return id.ctx
}

// PortSpace and QPType are those given to CreateID.
func (id *ID) PortSpace() PortSpace {
	if !id.ok() {
		return 0
	}
	return id.ps
}
func (id *ID) QPType() ibv.QPType {
	if !id.ok() {
		return 0
	}
	return id.qpType
}

// post queues an event for the ID on its channel. c.mu held.
func (id *ID) post(ev *Event) {
	ev.ID = id
	if ev.owner == nil {
		ev.owner = id
	}
	ev.owner.ch.post(ev)
}

// syncWait is librdmacm's ucma_complete: on a synchronous ID, wait for the
// next event, ack it and turn its status into an error.
func (id *ID) syncWait() error {
	if !id.sync {
		return nil
	}
	ev, err := id.ch.GetEvent(context.Background())
	if err != nil {
		return err
	}
	ev.Ack()
	switch {
	case ev.Status == 0:
		return nil
	case ev.Type == EventRejected:
		return errf(ECONNREFUSED, "rejected, reason %d", ev.Status)
	case ev.Status < 0:
		return errf(syscall.Errno(-ev.Status), "%v", ev.Type)
	default:
		return errf(syscall.Errno(ev.Status), "%v", ev.Type)
	}
}

// devByAddr returns the device whose address is a.
func (c *CM) devByAddr(a netip.Addr) *cmDev {
	a = a.Unmap()
	for _, d := range c.devs {
		if d.addr == a {
			return d
		}
	}
	return nil
}

// bindPort takes port (0: an ephemeral one) in the ID's port space for
// addr (cma.c cma_get_port): EADDRINUSE if an ID holds it on the same or
// the unspecified address. c.mu held.
func (c *CM) bindPort(id *ID, addr netip.Addr, port uint16) (uint16, error) {
	conflict := func(p uint16) bool {
		for _, o := range c.binds[bindKey{id.ps, p}] {
			oa := o.src.Addr()
			if id.opt.sharesPort(&o.opt, o.state == stListen, addr, oa) {
				continue
			}
			if oa.IsUnspecified() || addr.IsUnspecified() || oa == addr {
				return true
			}
		}
		return false
	}
	if port == 0 {
		n := ephemeralHi - ephemeralLo + 1
		start := c.rnd.IntN(n)
		for i := range n {
			p := uint16(ephemeralLo + (start+i)%n)
			if !conflict(p) {
				port = p
				break
			}
		}
		if port == 0 {
			return 0, errf(EADDRINUSE, "no free port")
		}
	} else if conflict(port) {
		return 0, errf(EADDRINUSE, "port %d in use", port)
	}
	k := bindKey{id.ps, port}
	c.binds[k] = append(c.binds[k], id)
	id.bound = true
	return port, nil
}

func (c *CM) unbind(id *ID) {
	if !id.bound {
		return
	}
	k := bindKey{id.ps, id.src.Port()}
	l := c.binds[k]
	for i, o := range l {
		if o == id {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(c.binds, k)
	} else {
		c.binds[k] = l
	}
	id.bound = false
}

// BindAddr binds the ID to a local address and port (rdma_bind_addr); an
// unspecified address binds to all devices (listen only); port 0 picks one.
// An address no device has is EADDRNOTAVAIL, a port taken EADDRINUSE.
func (id *ID) BindAddr(addr netip.AddrPort) error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	return id.bindLocked(addr)
}

func (id *ID) bindLocked(addr netip.AddrPort) error {
	c := id.cm
	if id.state != stIdle {
		return errf(verbs.EINVAL, "bind in state %d", id.state)
	}
	if !addr.Addr().IsValid() {
		return errf(verbs.EINVAL, "no address")
	}
	a := addr.Addr().Unmap()
	var d *cmDev
	if !a.IsUnspecified() {
		// rdma_translate_ip: no interface has the address.
		if d = c.devByAddr(a); d == nil {
			return errf(EADDRNOTAVAIL, "no device has address %v", a)
		}
	}
	port, err := c.bindPort(id, a, addr.Port())
	if err != nil {
		return err
	}
	id.src = netip.AddrPortFrom(a, port)
	id.dev = d
	id.state = stAddrBound
	return nil
}

// ResolveAddr resolves dst and, when src is invalid (zero), picks a
// device and source address for it (rdma_resolve_addr); ADDR_RESOLVED or
// ADDR_ERROR follows, with the errno the kernel reports in the event's
// Status. On RoCE the device chosen for a zero source is the one whose
// address dst is, else the only device of dst's family, else one of that
// family in dst's subnet (/24, /64); none is ADDR_ERROR -ENETUNREACH.
//
// Then, as the kernel's rdma_resolve_addr (drivers/infiniband/core/
// addr.c), it resolves the route from the device's address to dst and
// the next hop's neighbour, through the host's routing and neighbour
// tables, on a device whose link can ask them (link.ResolveRoute: a UDP
// link): no route is ADDR_ERROR -ENETUNREACH (an unreachable route
// -EHOSTUNREACH, a prohibit route -EACCES), and a neighbour that does not
// answer within timeout (addr.c's timeout_ms) -ETIMEDOUT; the wait goes
// on in the background, the ID in the address query meanwhile (a
// synchronous ID waits for it). A device on the fabric, which has no
// routing table, resolves any address of its family at once, as before:
// an address with no endpoint shows only when Connect gets no answer.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	if err := id.lock(); err != nil {
		return err
	}
	c := id.cm
	da := dst.Addr().Unmap()
	if !da.IsValid() || da.IsUnspecified() {
		c.mu.Unlock()
		return errf(verbs.EINVAL, "no destination")
	}
	if id.state == stIdle {
		s := src
		if !s.Addr().IsValid() {
			if da.Is4() {
				s = netip.AddrPortFrom(netip.IPv4Unspecified(), src.Port())
			} else {
				s = netip.AddrPortFrom(netip.IPv6Unspecified(), src.Port())
			}
		}
		if err := id.bindLocked(s); err != nil {
			c.mu.Unlock()
			return err
		}
	}
	if id.state != stAddrBound {
		c.mu.Unlock()
		return errf(verbs.EINVAL, "resolve address in state %d", id.state)
	}
	d := id.dev
	var why error
	if d != nil && d.addr.Is4() != da.Is4() {
		why = fmt.Errorf("cm: %v from %v: %w", da, d.addr, syscall.EAFNOSUPPORT)
	} else if d == nil {
		if d = c.routeDev(da); d == nil {
			why = fmt.Errorf("cm: no device in the subnet of %v: %w", da, syscall.ENETUNREACH)
		}
	}
	if why != nil {
		id.post(&Event{Type: EventAddrError, Status: -int(errno(why)), Err: why})
		c.mu.Unlock()
		return id.syncWait()
	}
	bound, boundSrc := id.dev, id.src
	id.dev = d
	id.src = netip.AddrPortFrom(d.addr, id.src.Port())
	id.dst = netip.AddrPortFrom(da, dst.Port())
	if _, ok := d.dev.Link().(link.Resolver); !ok {
		id.state = stAddrResolved
		id.post(&Event{Type: EventAddrResolved})
		c.mu.Unlock()
		return id.syncWait()
	}
	// addr.c rdma_resolve_ip: the query runs on its own, bounded by
	// timeout; the ID is in ADDR_QUERY until it ends (cma.c addr_handler
	// moves it on only from there: cma_comp_exch).
	id.state = stAddrQuery
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, 0))
	id.cancelQuery = cancel
	c.wg.Go(func() {
		defer cancel()
		_, err := link.ResolveRoute(ctx, d.dev.Link(), da)
		c.mu.Lock()
		defer c.mu.Unlock()
		if id.state != stAddrQuery || id.destroyed {
			return
		}
		id.cancelQuery = nil
		if err != nil {
			// cma.c addr_handler: back to ADDR_BOUND, ADDR_ERROR with
			// the resolution's status.
			id.state = stAddrBound
			id.dev, id.src, id.dst = bound, boundSrc, netip.AddrPort{}
			id.post(&Event{Type: EventAddrError, Status: -int(errno(err)), Err: err})
			return
		}
		id.state = stAddrResolved
		id.post(&Event{Type: EventAddrResolved})
	})
	c.mu.Unlock()
	return id.syncWait()
}

// routeDev picks the device to reach dst from (addr.c addr_resolve, with
// the devices standing for the host's interfaces).
func (c *CM) routeDev(dst netip.Addr) *cmDev {
	var fam []*cmDev
	for _, d := range c.devs {
		if d.addr == dst {
			return d
		}
		if d.addr.Is4() == dst.Is4() {
			fam = append(fam, d)
		}
	}
	if len(fam) == 1 {
		return fam[0]
	}
	bitsN := 24
	if !dst.Is4() {
		bitsN = 64
	}
	pfx, _ := dst.Prefix(bitsN)
	for _, d := range fam {
		if pfx.Contains(d.addr) {
			return d
		}
	}
	return nil
}

// ResolveRoute resolves the route to the destination (rdma_resolve_route):
// on RoCE the GIDs, hop limit, traffic class and path MTU; ROUTE_RESOLVED
// or ROUTE_ERROR follows.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	if err := id.lock(); err != nil {
		return err
	}
	c := id.cm
	if id.state != stAddrResolved {
		c.mu.Unlock()
		return errf(verbs.EINVAL, "resolve route in state %d", id.state)
	}
	pa, err := id.dev.dev.QueryPort(1)
	if err != nil {
		id.post(&Event{Type: EventRouteError, Status: -int(syscall.ENODEV)})
		c.mu.Unlock()
		return id.syncWait()
	}
	// cma.c cma_resolve_iboe_route: GIDs from the addresses, the
	// route's hop limit, the flow label from the ports
	// (cma_get_roce_udp_flow_label), the port's MTU, RoCE's packet life time.
	id.path = ibcm.Path{
		SGID: id.src.Addr(), DGID: id.dst.Addr(), HopLimit: cmaHopLimit,
		FlowLabel: (uint32(id.src.Port())*31 + uint32(id.dst.Port())) & 0xFFFFF,
		PKey:      defaultPKey, MTU: uint8(pa.ActiveMTU), PacketLifeTime: cmaPacketLifeTime,
		TrafficClass: id.opt.tos,
	}
	id.state = stRouteResolved
	id.post(&Event{Type: EventRouteResolved})
	c.mu.Unlock()
	return id.syncWait()
}

// Device is the device the ID is bound to (rdma_cm_id.verbs), nil before.
func (id *ID) Device() *verbs.Device {
	if !id.ok() {
		return nil
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	if id.dev == nil {
		return nil
	}
	return id.dev.dev
}

// PD is the protection domain of the ID's QP (rdma_cm_id.pd): the one
// given to CreateQP, or the device's PD the CM shares among its IDs when
// given none (librdmacm's ucma_get_pd), which lives until the CM's Close.
func (id *ID) PD() *verbs.PD {
	if !id.ok() {
		return nil
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.pd
}

// CreateQP creates the ID's QP on its device (rdma_create_qp); pd nil
// takes the device's shared PD (see PD), a nil send or receive CQ one of
// the ID's, each on a completion channel (SendCQ, RecvCQ).
// The CM moves the QP through INIT, RTR and RTS from the connection's
// attributes (UD: INIT..RTS at once with the port space's Q_Key).
func (id *ID) CreateQP(pd *verbs.PD, attr verbs.QPInitAttr) (*verbs.QP, error) {
	if err := id.lock(); err != nil {
		return nil, err
	}
	defer id.cm.mu.Unlock()
	return id.createQPLocked(pd, attr)
}

func (id *ID) createQPLocked(pd *verbs.PD, attr verbs.QPInitAttr) (*verbs.QP, error) {
	if id.dev == nil {
		return nil, errf(verbs.EINVAL, "ID bound to no device")
	}
	if id.qp != nil {
		return nil, errf(verbs.EINVAL, "ID has a QP")
	}
	if attr.Type == 0 {
		attr.Type = id.qpType
	}
	if attr.Type != id.qpType {
		return nil, errf(verbs.EINVAL, "QP type %v on a %v ID", attr.Type, id.qpType)
	}
	if pd == nil {
		// librdmacm ucma_get_pd: one PD per device, shared by its IDs.
		var err error
		if pd, err = id.dev.userPD(); err != nil {
			return nil, err
		}
	}
	var own idCQs
	if err := own.create(id.dev.dev, &attr); err != nil {
		return nil, err
	}
	qp, err := pd.CreateQP(attr)
	if err == nil {
		err = id.initQP(qp)
		if err != nil {
			qp.Destroy()
		}
	}
	if err != nil {
		own.destroy()
		return nil, err
	}
	id.qp, id.own = qp, own
	id.srq = attr.SRQ != nil
	id.pd = pd
	return qp, nil
}

// idCQs are the CQs and completion channels the CM made for an ID's QP
// (rdma_cm_id's send_cq_channel, send_cq, recv_cq_channel, recv_cq).
type idCQs struct {
	sendCh, recvCh *verbs.CompChannel
	send, recv     *verbs.CQ
}

// create makes, as librdmacm's rdma_create_qp does (ucma_create_cqs), a
// send CQ of max_send_wr entries on a channel of its own when attr has
// no send CQ, and a receive CQ of max_recv_wr entries on another when it
// has none (and no SRQ or WQ to receive through), and puts them in attr.
// librdmacm makes no CQ of 0 entries, and the QP's creation then fails;
// softnic makes one of 1.
func (o *idCQs) create(d *verbs.Device, attr *verbs.QPInitAttr) error {
	mk := func(n uint32) (*verbs.CompChannel, *verbs.CQ, error) {
		ch := d.CreateCompChannel()
		cq, err := d.CreateCQ(max(int(n), 1), ch)
		if err != nil {
			ch.Close()
			return nil, nil, err
		}
		return ch, cq, nil
	}
	var err error
	if attr.RecvCQ == nil && attr.SRQ == nil && attr.WQ == nil {
		if o.recvCh, o.recv, err = mk(attr.Cap.MaxRecvWR); err != nil {
			return err
		}
		attr.RecvCQ = o.recv
	}
	if attr.SendCQ == nil {
		if o.sendCh, o.send, err = mk(attr.Cap.MaxSendWR); err != nil {
			o.destroy()
			return err
		}
		attr.SendCQ = o.send
	}
	return nil
}

// destroy destroys what create made (ucma_destroy_cqs).
func (o *idCQs) destroy() {
	for _, cq := range []*verbs.CQ{o.send, o.recv} {
		if cq != nil {
			cq.Destroy()
		}
	}
	for _, ch := range []*verbs.CompChannel{o.sendCh, o.recvCh} {
		if ch != nil {
			ch.Close()
		}
	}
	*o = idCQs{}
}

// SendCQ is the CQ the CM made for the sends of the ID's QP
// (rdma_cm_id.send_cq): CreateQP makes one, on a completion channel of
// its own (SendCQChannel), when given no send CQ, as librdmacm's
// rdma_create_qp does; nil otherwise, and after DestroyQP, which
// destroys it.
func (id *ID) SendCQ() *verbs.CQ {
	if !id.ok() {
		return nil
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.own.send
}

// RecvCQ is the CQ the CM made for the receives of the ID's QP
// (rdma_cm_id.recv_cq): CreateQP makes one, on a completion channel of
// its own (RecvCQChannel), when given no receive CQ, SRQ or WQ; nil
// otherwise.
func (id *ID) RecvCQ() *verbs.CQ {
	if !id.ok() {
		return nil
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.own.recv
}

// SendCQChannel is the completion channel of SendCQ
// (rdma_cm_id.send_cq_channel), nil without it.
func (id *ID) SendCQChannel() *verbs.CompChannel {
	if !id.ok() {
		return nil
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.own.sendCh
}

// RecvCQChannel is the completion channel of RecvCQ
// (rdma_cm_id.recv_cq_channel), nil without it.
func (id *ID) RecvCQChannel() *verbs.CompChannel {
	if !id.ok() {
		return nil
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.own.recvCh
}

// initQP is librdmacm's ucma_init_conn_qp / ucma_init_ud_qp. c.mu held.
func (id *ID) initQP(qp *verbs.QP) error {
	a, m, err := id.initQPAttrLocked(ibv.QPStateInit)
	if err != nil {
		return err
	}
	if err := qp.Modify(&a, m); err != nil {
		return err
	}
	if id.qpType != ibv.QPTypeUD {
		return nil
	}
	if err := qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState); err != nil {
		return err
	}
	return qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState|ibv.QPAttrSQPSN)
}

// QP is the ID's QP (rdma_cm_id.qp), nil before CreateQP.
func (id *ID) QP() *verbs.QP {
	if !id.ok() {
		return nil
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.qp
}

// DestroyQP destroys the ID's QP (rdma_destroy_qp) and the CQs and
// channels CreateQP made for it.
func (id *ID) DestroyQP() error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	return id.destroyQPLocked()
}

func (id *ID) destroyQPLocked() error {
	if id.qp == nil {
		return errf(verbs.EINVAL, "ID has no QP")
	}
	if err := id.qp.Destroy(); err != nil {
		return err
	}
	id.qp = nil
	id.own.destroy()
	return nil
}

// InitQPAttr is rdma_init_qp_attr: the attributes to move the ID's QP to
// state.
func (id *ID) InitQPAttr(state ibv.QPState) (ibv.QPAttr, ibv.AttrMask, error) {
	if err := id.lock(); err != nil {
		return ibv.QPAttr{}, 0, err
	}
	defer id.cm.mu.Unlock()
	return id.initQPAttrLocked(state)
}

// initQPAttrLocked is cma.c rdma_init_qp_attr with cm.c's
// cm_init_qp_init_attr, cm_init_qp_rtr_attr and cm_init_qp_rts_attr.
func (id *ID) initQPAttrLocked(state ibv.QPState) (ibv.QPAttr, ibv.AttrMask, error) {
	var a ibv.QPAttr
	a.State = state
	ud := id.qpType == ibv.QPTypeUD
	var conn ibcm.Conn
	var ibState ibcm.State = ibcm.StateIdle
	if id.ib != nil && !ud {
		conn, ibState = id.ib.Conn(), id.ib.State()
	}
	inConn := func(states ...ibcm.State) bool {
		for _, s := range states {
			if ibState == s {
				return true
			}
		}
		return false
	}
	switch state {
	case ibv.QPStateInit:
		a.PKeyIndex, a.PortNum = 0, 1
		mask := ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort
		switch {
		case ud:
			a.QKey = id.qkey
			mask |= ibv.QPAttrQKey
		case id.ib == nil:
			// cma_ib_init_qp_attr: no remote access before the CM knows the peer.
			mask |= ibv.QPAttrAccessFlags
		case inConn(ibcm.StateReqSent, ibcm.StateMRAReqRcvd, ibcm.StateReqRcvd, ibcm.StateMRAReqSent,
			ibcm.StateRepRcvd, ibcm.StateMRARepSent, ibcm.StateRepSent, ibcm.StateMRARepRcvd, ibcm.StateEstablished):
			// cm_init_qp_init_attr.
			a.AccessFlags = ibv.AccessRemoteWrite
			if conn.ResponderResources > 0 {
				a.AccessFlags |= ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
			}
			mask |= ibv.QPAttrAccessFlags
		default:
			return a, 0, errf(verbs.EINVAL, "INIT attributes in CM state %v", ibState)
		}
		return a, mask, nil
	case ibv.QPStateRTR:
		if ud {
			return a, ibv.QPAttrState, nil
		}
		if !inConn(ibcm.StateReqRcvd, ibcm.StateMRAReqSent, ibcm.StateRepRcvd, ibcm.StateMRARepSent,
			ibcm.StateRepSent, ibcm.StateMRARepRcvd, ibcm.StateEstablished) {
			return a, 0, errf(verbs.EINVAL, "RTR attributes in CM state %v", ibState)
		}
		p := conn.Path
		a.AHAttr = ibv.AHAttr{IsGlobal: true, PortNum: 1, SL: p.SL, GRH: ibv.GlobalRoute{DGID: p.DGID,
			FlowLabel: p.FlowLabel, HopLimit: p.HopLimit, TrafficClass: p.TrafficClass}}
		a.PathMTU = ibv.MTU(conn.PathMTU)
		a.DestQPN = conn.RemoteQPN
		a.RQPSN = id.seq // cma.c: rq_psn = id_priv->seq_num
		mask := ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN
		if id.qpType == ibv.QPTypeRC || id.qpType == ibv.QPTypeXRCRecv {
			a.MaxDestRdAtomic = conn.ResponderResources
			a.MinRNRTimer = 0
			mask |= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
		}
		return a, mask, nil
	case ibv.QPStateRTS:
		if ud {
			return a, ibv.QPAttrState | ibv.QPAttrSQPSN, nil
		}
		if !inConn(ibcm.StateReqRcvd, ibcm.StateMRAReqSent, ibcm.StateRepRcvd, ibcm.StateMRARepSent,
			ibcm.StateRepSent, ibcm.StateMRARepRcvd, ibcm.StateEstablished) {
			return a, 0, errf(verbs.EINVAL, "RTS attributes in CM state %v", ibState)
		}
		a.SQPSN = conn.SQPSN
		mask := ibv.QPAttrState | ibv.QPAttrSQPSN
		switch id.qpType {
		case ibv.QPTypeRC, ibv.QPTypeXRCSend:
			a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = conn.RetryCount, conn.RNRRetryCount, conn.InitiatorDepth
			mask |= ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic
			fallthrough
		case ibv.QPTypeXRCRecv:
			// cm_init_qp_rts_attr: an XRC target takes the timeout only.
			a.Timeout = conn.Timeout
			if id.opt.ackTimeoutSet {
				a.Timeout = id.opt.ackTimeout // rdma_init_qp_attr: the ID's own
			}
			mask |= ibv.QPAttrTimeout
		}
		return a, mask, nil
	case ibv.QPStateErr:
		return a, ibv.QPAttrState, nil
	}
	return a, 0, errf(verbs.EINVAL, "no CM attributes for state %v", state)
}

// modifyRTRRTS is librdmacm's ucma_modify_qp_rtr and ucma_modify_qp_rts:
// INIT again (the CM's access flags, now that it knows the peer), RTR
// with resp as max_dest_rd_atomic, RTS with init as max_rd_atomic
// (0xFF: the CM's values). c.mu held.
func (id *ID) modifyRTRRTS(resp, init uint8) error {
	if id.qp == nil {
		return nil
	}
	for _, st := range []ibv.QPState{ibv.QPStateInit, ibv.QPStateRTR, ibv.QPStateRTS} {
		a, m, err := id.initQPAttrLocked(st)
		if err != nil {
			return err
		}
		if st == ibv.QPStateRTR && resp != MaxResponderResources && m&ibv.QPAttrMaxDestRdAtomic != 0 {
			a.MaxDestRdAtomic = resp
		}
		if st == ibv.QPStateRTS && init != MaxInitiatorDepth && m&ibv.QPAttrMaxQPRdAtomic != 0 {
			a.MaxRdAtomic = init
		}
		if err := id.qp.Modify(&a, m); err != nil {
			return err
		}
	}
	return nil
}

// qpErr moves the ID's QP to ERR (ucma_modify_qp_err). c.mu held.
func (id *ID) qpErr() {
	if id.qp != nil {
		id.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
	}
}

// devMax returns the device's responder resources and initiator depth
// limits (cma_device max_responder_resources, max_initiator_depth).
func (id *ID) devMax() (uint8, uint8) {
	a := id.dev.dev.QueryDevice()
	return uint8(min(a.MaxQPRdAtom, 255)), uint8(min(a.MaxQPInitRdAtom, 255))
}

// cmaHeader returns the private data of a REQ or SIDR_REQ: the CMA header
// (cma.c cma_format_hdr) then the user's.
func (id *ID) cmaHeader(user []byte) []byte {
	b := make([]byte, wire.CMAHdrLen+len(user))
	v := uint8(6)
	if id.src.Addr().Is4() {
		v = 4
	}
	wire.PutCMAHeader(b, wire.CMAHeader{Version: wire.CMAHdrVersion, IPVersion: v, SrcPort: id.src.Port(),
		Src: id.src.Addr(), Dst: id.dst.Addr()})
	copy(b[wire.CMAHdrLen:], user)
	return b
}

// Connect sends a REQ (rdma_connect); for UD IDs a SIDR REQ. The user's
// private data follows the 36-byte CMA header: at most 56 bytes for a REQ,
// 180 for a SIDR_REQ (EINVAL beyond).
func (id *ID) Connect(p *ConnParam) error {
	if err := id.lock(); err != nil {
		return err
	}
	c := id.cm
	err := id.connectLocked(p)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return id.syncWait()
}

func (id *ID) connectLocked(p *ConnParam) error {
	if id.state != stRouteResolved {
		return errf(verbs.EINVAL, "connect in state %d", id.state)
	}
	var user []byte
	if p != nil {
		user = p.PrivateData
	}
	d := id.dev
	ib, err := d.agent.CreateID(id.cm.handleIB, d)
	if err != nil {
		return err
	}
	service := wire.RDMAServiceID(uint16(id.ps), id.dst.Port())
	if id.qpType == ibv.QPTypeUD {
		if len(user) > wire.CMSIDRReqPrivateDataLen-wire.CMAHdrLen {
			ib.Destroy()
			return errf(verbs.EINVAL, "%d bytes of private data, a SIDR_REQ takes %d", len(user), wire.CMSIDRReqPrivateDataLen-wire.CMAHdrLen)
		}
		id.cm.byCM[ib] = id
		// cma.c cma_resolve_ib_udp.
		err = ib.SendSIDRReq(&ibcm.SIDRReqParam{DGID: id.dst.Addr(), ServiceID: service, PKey: defaultPKey,
			Timeout: ibcm.ConvertToDuration(cmaCMResponseTimeout), MaxCMRetries: cmaMaxCMRetries,
			PrivateData: id.cmaHeader(user)})
	} else {
		if len(user) > wire.CMReqPrivateDataLen-wire.CMAHdrLen {
			ib.Destroy()
			return errf(verbs.EINVAL, "%d bytes of private data, a REQ takes %d", len(user), wire.CMReqPrivateDataLen-wire.CMAHdrLen)
		}
		maxResp, maxInit := id.devMax()
		id.init, id.resp = maxInit, maxResp
		retry, rnr := uint8(7), uint8(7)
		flow := false
		if p != nil {
			if p.InitiatorDepth != MaxInitiatorDepth {
				if p.InitiatorDepth > maxInit {
					ib.Destroy()
					return errf(verbs.EINVAL, "initiator depth %d over the device's %d", p.InitiatorDepth, maxInit)
				}
				id.init = p.InitiatorDepth
			}
			if p.ResponderResources != MaxResponderResources {
				if p.ResponderResources > maxResp {
					ib.Destroy()
					return errf(verbs.EINVAL, "responder resources %d over the device's %d", p.ResponderResources, maxResp)
				}
				id.resp = p.ResponderResources
			}
			retry, rnr, flow = min(p.RetryCount, 7), min(p.RNRRetryCount, 7), p.FlowControl != 0
		}
		qpn, srq := id.qpNum, id.srq
		if id.qp != nil {
			qpn = id.qp.QPN()
		} else if p != nil {
			qpn, srq = p.QPNum, p.SRQ
		}
		tt := uint8(ibcm.QPTypeRC)
		switch id.qpType {
		case ibv.QPTypeUC:
			tt = ibcm.QPTypeUC
		case ibv.QPTypeXRCSend:
			tt = ibcm.QPTypeXRC
		case ibv.QPTypeXRCRecv:
			ib.Destroy()
			return errf(verbs.EINVAL, "connect on an XRC target ID")
		}
		id.cm.byCM[ib] = id
		// cma.c cma_connect_ib.
		err = ib.SendREQ(&ibcm.ReqParam{Path: id.path, ServiceID: service, QPNum: qpn, QPType: tt,
			StartingPSN: id.seq, PrivateData: id.cmaHeader(user), ResponderResources: id.resp,
			InitiatorDepth: id.init, RemoteCMResponseTimeout: cmaCMResponseTimeout, FlowControl: flow,
			LocalCMResponseTimeout: cmaCMResponseTimeout, RetryCount: retry, RNRRetryCount: rnr,
			MaxCMRetries: cmaMaxCMRetries, SRQ: srq})
	}
	if err != nil {
		delete(id.cm.byCM, ib)
		ib.Destroy()
		return err
	}
	id.ib, id.active = ib, true
	id.state = stConnect
	return nil
}

// Listen listens for connection requests (rdma_listen). An ID bound to the
// unspecified address listens on every device; one not bound is bound to
// 0.0.0.0 with an ephemeral port first. backlog bounds the requests
// reported and not yet got (ucma.c; 0 or less: 1024).
func (id *ID) Listen(backlog int) error {
	if err := id.lock(); err != nil {
		return err
	}
	c := id.cm
	defer c.mu.Unlock()
	if id.state == stIdle {
		if err := id.bindLocked(netip.AddrPortFrom(netip.IPv4Unspecified(), 0)); err != nil {
			return err
		}
	}
	if id.state != stAddrBound {
		return errf(verbs.EINVAL, "listen in state %d", id.state)
	}
	if backlog <= 0 {
		backlog = 1024
	}
	service := wire.RDMAServiceID(uint16(id.ps), id.src.Port())
	devs := c.devs
	if id.dev != nil {
		devs = []*cmDev{id.dev}
	}
	var done []*cmDev
	for _, d := range devs {
		if d.addr.Is4() != id.src.Addr().Is4() && !id.src.Addr().IsUnspecified() {
			continue
		}
		if err := d.listen(service); err != nil {
			for _, u := range done {
				u.unlisten(service)
			}
			return err
		}
		done = append(done, d)
	}
	id.listenDevs = done
	id.backlog = backlog
	id.state = stListen
	return nil
}

// listen shares the device's ibcm listener on service. c.mu held.
func (d *cmDev) listen(service uint64) error {
	if l := d.listeners[service]; l != nil {
		l.refs++
		return nil
	}
	ib, err := d.agent.CreateID(d.c.handleIB, d)
	if err != nil {
		return err
	}
	if err := ib.Listen(service, 0); err != nil {
		ib.Destroy()
		return err
	}
	d.listeners[service] = &devListen{id: ib, refs: 1}
	return nil
}

func (d *cmDev) unlisten(service uint64) {
	l := d.listeners[service]
	if l == nil {
		return
	}
	if l.refs--; l.refs == 0 {
		l.id.Destroy()
		delete(d.listeners, service)
	}
}

// GetRequest returns the next connection request's ID on a synchronous
// listening ID (rdma_get_request). A listener made by CreateEP with QP
// attributes gives the new ID its QP.
func (id *ID) GetRequest(ctx context.Context) (*ID, error) {
	if err := id.lock(); err != nil {
		return nil, err
	}
	c := id.cm
	if !id.sync || id.state != stListen {
		c.mu.Unlock()
		return nil, errf(verbs.EINVAL, "GetRequest needs a synchronous listening ID")
	}
	c.mu.Unlock()
	if ctx == nil {
		return nil, errf(verbs.EINVAL, "nil context")
	}
	ev, err := id.ch.GetEvent(ctx)
	if err != nil {
		return nil, err
	}
	ev.Ack()
	// cma.c rdma_get_request: any other event is EINVAL.
	if ev.Type != EventConnectRequest {
		return nil, errf(verbs.EINVAL, "%v on a listening ID", ev.Type)
	}
	nid := ev.ID
	c.mu.Lock()
	if id.epAttr != nil && !nid.destroyed {
		if _, err := nid.createQPLocked(id.epPD, *id.epAttr); err != nil {
			c.mu.Unlock()
			nid.Destroy()
			return nil, err
		}
	}
	c.mu.Unlock()
	return nid, nil
}

// Accept accepts a connection request (rdma_accept): the ID's QP goes to
// RTR and RTS and a REP (a SIDR_REP for UD) answers; ESTABLISHED follows
// the RTU. On an active ID without a QP, after CONNECT_RESPONSE, it sends
// the RTU.
func (id *ID) Accept(p *ConnParam) error {
	if err := id.lock(); err != nil {
		return err
	}
	c := id.cm
	wait, err := id.acceptLocked(p)
	c.mu.Unlock()
	if err != nil || !wait {
		return err
	}
	return id.syncWait()
}

func (id *ID) acceptLocked(p *ConnParam) (bool, error) {
	if id.ib == nil || id.state != stConnect {
		return false, errf(verbs.EINVAL, "accept in state %d", id.state)
	}
	var user []byte
	if p != nil {
		user = p.PrivateData
	}
	if id.qpType == ibv.QPTypeUD {
		if len(user) > wire.CMSIDRRepPrivateDataLen {
			return false, errf(verbs.EINVAL, "%d bytes of SIDR_REP private data", len(user))
		}
		qpn := id.qpNum
		if id.qp != nil {
			qpn = id.qp.QPN()
		} else if p != nil {
			qpn = p.QPNum
		}
		// cma.c cma_send_sidr_rep.
		return false, id.ib.SendSIDRRep(&ibcm.SIDRRepParam{QPNum: qpn, QKey: id.qkey, Status: ibcm.SIDRSuccess, PrivateData: user})
	}
	if id.active {
		// librdmacm ucma_process_conn_resp's ACCEPT: the RTU.
		if st := id.ib.State(); st != ibcm.StateRepRcvd && st != ibcm.StateMRARepSent {
			return false, errf(verbs.EINVAL, "accept on an active ID in CM state %v", st)
		}
		return false, id.ib.SendRTU(nil)
	}
	if len(user) > wire.CMRepPrivateDataLen {
		return false, errf(verbs.EINVAL, "%d bytes of REP private data", len(user))
	}
	maxResp, maxInit := id.devMax()
	resp, init := id.resp, id.init
	rnr := uint8(7)
	flow, srq, qpn := false, id.srq, id.qpNum
	if p != nil {
		if p.ResponderResources != MaxResponderResources {
			if p.ResponderResources > maxResp {
				return false, errf(verbs.EINVAL, "responder resources %d over the device's %d", p.ResponderResources, maxResp)
			}
			resp = p.ResponderResources
		}
		if p.InitiatorDepth != MaxInitiatorDepth {
			if p.InitiatorDepth > maxInit {
				return false, errf(verbs.EINVAL, "initiator depth %d over the device's %d", p.InitiatorDepth, maxInit)
			}
			init = p.InitiatorDepth
		}
		rnr, flow = min(p.RNRRetryCount, 7), p.FlowControl != 0
		if id.qp == nil {
			qpn, srq = p.QPNum, p.SRQ
		}
	}
	if id.qp != nil {
		qpn = id.qp.QPN()
		if err := id.modifyRTRRTS(resp, init); err != nil {
			return false, err
		}
	}
	// cma.c cma_accept_ib.
	err := id.ib.SendREP(&ibcm.RepParam{QPNum: qpn, StartingPSN: id.seq, PrivateData: user,
		ResponderResources: resp, InitiatorDepth: init, FlowControl: flow, RNRRetryCount: rnr, SRQ: srq})
	return err == nil, err
}

// Establish tells the CM that the ID's QP received data before the
// connection's RTU (rdma_establish, for IBV_EVENT_COMM_EST): the passive
// side is established at once (ESTABLISHED) and stops resending its REP.
func (id *ID) Establish() error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	if id.ib == nil || id.state != stConnect || id.qpType == ibv.QPTypeUD {
		return errf(verbs.EINVAL, "establish in state %d", id.state)
	}
	return id.ib.Establish()
}

// Reject rejects a connection request with private data (rdma_reject):
// an IB CM REJ with reason 28, consumer reject (a SIDR_REP with status
// reject for UD).
func (id *ID) Reject(privateData []byte) error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	if id.ib == nil || id.state != stConnect || id.active {
		return errf(verbs.EINVAL, "reject in state %d", id.state)
	}
	if id.qpType == ibv.QPTypeUD {
		return id.ib.SendSIDRRep(&ibcm.SIDRRepParam{Status: ibcm.SIDRReject, PrivateData: privateData})
	}
	return id.ib.SendREJ(wire.CMRejConsumerDefined, nil, privateData)
}

// Disconnect sends a DREQ (or answers one with a DREP) and moves the QP
// to ERR (rdma_disconnect). A synchronous ID waits for DISCONNECTED; with
// neither message to send (not connected, already disconnecting) it
// returns EINVAL where an asynchronous one returns nil, as the kernel.
func (id *ID) Disconnect() error {
	if err := id.lock(); err != nil {
		return err
	}
	c := id.cm
	if id.ib == nil {
		c.mu.Unlock()
		return errf(verbs.EINVAL, "disconnect of an unconnected ID")
	}
	id.qpErr()
	// cma.c rdma_disconnect: initiate or respond to a disconnect.
	if err := id.ib.SendDREQ(nil); err != nil {
		if err := id.ib.SendDREP(nil); err != nil && id.sync {
			// Neither: no DISCONNECTED will come to wait for (the kernel
			// returns 0 and librdmacm would wait for ever).
			c.mu.Unlock()
			return errf(verbs.EINVAL, "disconnect: the connection is not up")
		}
	}
	c.mu.Unlock()
	return id.syncWait()
}

// JoinMulticast joins the multicast group addr (rdma_join_multicast);
// MULTICAST_JOIN carries the UDParam to send to it (the group's GID: an
// IPv6 group as it is, an IPv4 one ::ffff-mapped as cma.c
// cma_iboe_set_mgid maps it for RoCEv2, which softnic's AHAttr writes as
// the IPv4 address; QPN 0xFFFFFF; Q_Key RDMA_UDP_QKEY) and context in
// McastContext; the ID's QP is attached to the group. On RoCE no SA is
// asked: the join is local.
func (id *ID) JoinMulticast(addr netip.Addr, context any) error {
	if err := id.lock(); err != nil {
		return err
	}
	c := id.cm
	defer c.mu.Unlock()
	if id.qpType != ibv.QPTypeUD || id.dev == nil {
		return errf(verbs.EINVAL, "multicast needs a UD ID bound to a device")
	}
	a := addr.Unmap()
	if !a.IsMulticast() {
		return errf(verbs.EINVAL, "%v is not a multicast address", addr)
	}
	if id.mcast[a] != nil {
		return errf(EADDRINUSE, "already joined %v", a)
	}
	mgid := netip.AddrFrom16(a.As16()) // IPv4: ::ffff:a.b.c.d
	ev := &Event{Type: EventMulticastJoin, McastContext: context, UD: UDParam{
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: a, HopLimit: cmaHopLimit}},
		QPNum:  mcastQPN, QKey: UDPQKey,
	}}
	if id.qp != nil {
		// librdmacm ucma_process_join.
		if err := id.qp.AttachMcast(verbs.GIDFromAddr(mgid), 0); err != nil {
			var en syscall.Errno
			if errors.As(err, &en) {
				ev.Status = -int(en)
			} else {
				ev.Status = -int(syscall.EINVAL)
			}
		}
	}
	if id.mcast == nil {
		id.mcast = map[netip.Addr]*mcJoin{}
	}
	id.mcast[a] = &mcJoin{mgid: mgid, ctx: context}
	id.post(ev)
	return nil
}

// LeaveMulticast leaves a group (rdma_leave_multicast): EADDRNOTAVAIL if
// the ID has not joined it.
func (id *ID) LeaveMulticast(addr netip.Addr) error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	a := addr.Unmap()
	m := id.mcast[a]
	if m == nil {
		return errf(EADDRNOTAVAIL, "not joined to %v", addr)
	}
	delete(id.mcast, a)
	if id.qp != nil {
		id.qp.DetachMcast(verbs.GIDFromAddr(m.mgid), 0)
	}
	return nil
}

// LocalAddr and PeerAddr are rdma_get_local_addr and rdma_get_peer_addr
// with their ports (rdma_get_src_port, rdma_get_dst_port).
func (id *ID) LocalAddr() netip.AddrPort {
	if !id.ok() {
		return netip.AddrPort{}
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.src
}
func (id *ID) PeerAddr() netip.AddrPort {
	if !id.ok() {
		return netip.AddrPort{}
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	return id.dst
}

// Destroy destroys the ID (rdma_destroy_id): what the IB CM sends for its
// state (a REJ, a DREQ...), its multicast groups left, its port freed. It
// waits until every event GetEvent returned for it is acked, as
// librdmacm does; events not yet got are dropped. Its QP is not
// destroyed (DestroyQP), as in librdmacm.
func (id *ID) Destroy() error {
	if !id.ok() {
		return errf(verbs.EINVAL, "nil ID")
	}
	return id.destroy(true)
}

func (id *ID) destroy(wait bool) error {
	c := id.cm
	c.mu.Lock()
	if id.destroyed {
		c.mu.Unlock()
		return errf(verbs.EINVAL, "ID destroyed twice")
	}
	id.destroyed = true
	id.state = stDestroying
	if id.cancelQuery != nil {
		id.cancelQuery()
		id.cancelQuery = nil
	}
	for _, d := range id.listenDevs {
		d.unlisten(wire.RDMAServiceID(uint16(id.ps), id.src.Port()))
	}
	id.listenDevs = nil
	for a, m := range id.mcast {
		if id.qp != nil {
			id.qp.DetachMcast(verbs.GIDFromAddr(m.mgid), 0)
		}
		delete(id.mcast, a)
	}
	c.unbind(id)
	// Drop the events not got yet; the IDs of connection requests never
	// reported go too (ucma.c ucma_cleanup_events), rejecting them.
	q := id.ch.q[:0]
	var orphans []*ID
	for _, ev := range id.ch.q {
		switch {
		case ev.owner != id:
			q = append(q, ev)
		case ev.Type == EventConnectRequest && ev.ID != id:
			orphans = append(orphans, ev.ID)
		}
	}
	id.ch.q = q
	id.ch.changed()
	for wait && id.completed < id.reported && !c.closed {
		c.cond.Wait()
	}
	id.ch.users--
	if id.sync {
		id.ch.closed = true
		delete(c.chans, id.ch)
		select {
		case id.ch.notify <- struct{}{}:
		default:
		}
	}
	ib := id.ib
	if ib != nil {
		delete(c.byCM, ib)
	}
	delete(c.ids, id)
	c.mu.Unlock()
	if ib != nil {
		ib.Destroy()
	}
	for _, o := range orphans {
		o.destroy(false)
	}
	return nil
}
