// Package ucmatose is the logic of softnic's ucmatose: softnic's version
// of rdma-core's librdmacm/examples/cmatose.c (installed as ucmatose),
// which pairs with the C tool in either role. The client opens -c
// connections to the server through the RDMA CM (port 7471 in the TCP
// port space, or the IB one with -P ib), each with an RC QP that posts -C
// receives of -S bytes; the server accepts each, SENDs -C messages on
// every connection and waits for as many replies, which the client
// SENDs once its receives completed; then the server disconnects. The
// flags, the connection parameters (responder_resources 1,
// initiator_depth 1, retry_count 5; the server accepts with librdmacm's
// defaults), the output lines and the exit status ("return status %d")
// are cmatose.c's; waits are bounded (toolnic.Env.Stall) where the C tool would
// spin for ever.
package ucmatose

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// cmatose.c's defaults.
const (
	DefaultPort     = 7471
	DefaultSize     = 100
	DefaultCount    = 10
	DefaultConns    = 1
	resolveTimeout  = 2000 * time.Millisecond
	clientRetryCnt  = 5
	clientRespRes   = 1
	clientInitDepth = 1
)

// Config holds a run's options, one field per cmatose.c flag.
type Config struct {
	Server    bool       // no -s
	Dst       netip.Addr // -s: the server's address (client)
	Src       netip.Addr // -b: the address to bind to
	PortSpace cm.PortSpace
	Conns     int    // -c
	Count     int    // -C: messages each way on each connection
	Size      int    // -S
	Port      uint16 // -p
	TOS       int    // -t: accepted; no effect (set_tos)
	Migrate   bool   // -m: refused (rdma_migrate_id is not in softnic's CM)
}

// Defaults returns cmatose.c's defaults.
func Defaults() Config {
	return Config{PortSpace: cm.PSTCP, Conns: DefaultConns, Count: DefaultCount, Size: DefaultSize, Port: DefaultPort}
}

// Status is the run's outcome as cmatose.c's main returns it (package cmkit).
type Status = cmkit.Status

// node is struct cmatest_node.
type node struct {
	idx       int
	id        *cm.ID
	connected bool
	pd        *verbs.PD
	cq        [2]*verbs.CQ // send, recv
	mr        *verbs.MR
}

const (
	sendCQ = 0
	recvCQ = 1
)

// test is struct cmkit.
type test struct {
	cfg             *Config
	env             *toolnic.Env
	ch              *cm.EventChannel
	nodes           []*node
	byID            map[*cm.ID]*node
	connIndex       int
	connectsLeft    int
	disconnectsLeft int
}

func (t *test) printf(format string, args ...any) { fmt.Fprintf(t.env.Out, format, args...) }

// Run runs ucmatose as cfg says. It returns nil when cmatose.c would
// return 0, else a *Status; either way the output ends with
// "return status %d".
func Run(ctx context.Context, cfg Config, env toolnic.Env) error {
	if cfg.Migrate {
		return errors.New("-m: migrating IDs between event channels (rdma_migrate_id) is not supported by softnic's CM")
	}
	if env.CM == nil {
		return errors.New("no connection manager")
	}
	env = env.WithDefaults()
	if cfg.Size == 0 {
		cfg.Count = 0 // create_message: no size, no messages
	}
	t := &test{cfg: &cfg, env: &env, byID: map[*cm.ID]*node{}, connectsLeft: cfg.Conns}
	t.ch = env.CM.CreateEventChannel()
	if t.ch == nil {
		t.printf("failed to create event channel\n")
		return &Status{Code: 1}
	}
	var err error
	t.nodes, err = cmkit.AllocNodes(env.CM, t.ch, cfg.Conns, func(i int) *node { return &node{idx: i} }, !cfg.Server,
		cfg.PortSpace, ibv.QPTypeRC, func(n *node, id *cm.ID) {
			n.id = id
			t.byID[id] = n
		})
	if err != nil {
		return err
	}
	var ret int
	if cfg.Server {
		ret = t.runServer(ctx)
	} else {
		ret = t.runClient(ctx)
	}
	return cmkit.End(t.printf, ret, t.destroyNodes, t.ch)
}

// initNode is init_node: PD, two CQs of message_count entries (1
// without messages), the QP (sq_sig_all), the message buffer.
func (t *test) initNode(n *node) int {
	dev := n.id.Device()
	if dev == nil {
		t.printf("cmatose: unable to allocate PD\n")
		return -12
	}
	var err error
	if n.pd, err = dev.AllocPD(); err != nil {
		t.printf("cmatose: unable to allocate PD\n")
		return -12
	}
	cqe := max(t.cfg.Count, 1)
	n.cq[sendCQ], err = dev.CreateCQ(cqe, nil)
	if err == nil {
		n.cq[recvCQ], err = dev.CreateCQ(cqe, nil)
	}
	if err != nil {
		t.printf("cmatose: unable to create CQ\n")
		return -12
	}
	if _, err := n.id.CreateQP(n.pd, verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: n.cq[sendCQ], RecvCQ: n.cq[recvCQ],
		SigAll: true, Cap: ibv.QPCap{MaxSendWR: uint32(cqe), MaxRecvWR: uint32(cqe), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.printf("cmatose: unable to create QP: %v\n", err)
		return -1
	}
	if t.cfg.Count > 0 {
		if n.mr, err = n.pd.RegMR(make([]byte, t.cfg.Size), ibv.AccessLocalWrite); err != nil {
			t.printf("failed to reg MR\n")
			t.printf("cmatose: failed to create messages: %d\n", -1)
			return -1
		}
	}
	return 0
}

// postRecvs is post_recvs: message_count receives of message_size.
func (t *test) postRecvs(n *node) int {
	for i := 0; i < t.cfg.Count; i++ {
		if _, err := n.id.QP().PostRecv(ibv.RecvWR{WRID: uint64(n.idx), SGList: []ibv.SGE{n.mr.SGE(0, t.cfg.Size)}}); err != nil {
			t.printf("failed to post receives: %d\n", -1)
			return -1
		}
	}
	return 0
}

// postSends is post_sends: message_count SENDs on a connected node.
func (t *test) postSends(n *node) int {
	if !n.connected || t.cfg.Count == 0 {
		return 0
	}
	for i := 0; i < t.cfg.Count; i++ {
		if _, err := n.id.QP().PostSend(ibv.SendWR{WRID: uint64(n.idx), Opcode: ibv.WRSend,
			SGList: []ibv.SGE{n.mr.SGE(0, t.cfg.Size)}}); err != nil {
			t.printf("failed to post sends: %d\n", -1)
			return -1
		}
	}
	return 0
}

// addrHandler is addr_handler.
func (t *test) addrHandler(n *node) int {
	if err := n.id.ResolveRoute(resolveTimeout); err != nil {
		t.printf("cmatose: resolve route failed: %v\n", err)
		t.connectsLeft--
		return -1
	}
	return 0
}

// routeHandler is route_handler: the node's resources, its receives,
// rdma_connect.
func (t *test) routeHandler(n *node) int {
	ret := t.initNode(n)
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	if ret == 0 {
		if err := n.id.Connect(&cm.ConnParam{ResponderResources: clientRespRes, InitiatorDepth: clientInitDepth,
			RetryCount: clientRetryCnt}); err != nil {
			t.printf("cmatose: failure connecting: %v\n", err)
			ret = -1
		}
	}
	if ret != 0 {
		t.connectsLeft--
	}
	return ret
}

// connectHandler is connect_handler: a request takes the next node.
func (t *test) connectHandler(id *cm.ID) int {
	if t.connIndex == t.cfg.Conns {
		t.printf("cmatose: failing connection request\n")
		id.Reject(nil)
		return -12
	}
	n := t.nodes[t.connIndex]
	t.connIndex++
	n.id = id
	t.byID[id] = n
	ret := t.initNode(n)
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	if ret == 0 {
		if err := id.Accept(nil); err != nil {
			t.printf("cmatose: failure accepting: %v\n", err)
			ret = -1
		}
	}
	if ret != 0 {
		t.connectsLeft--
		t.printf("cmatose: failing connection request\n")
		id.Reject(nil)
	}
	return ret
}

// cmaHandler is cma_handler.
func (t *test) cmaHandler(ev *cm.Event) int {
	n := t.byID[ev.ID]
	switch ev.Type {
	case cm.EventAddrResolved:
		return t.addrHandler(n)
	case cm.EventRouteResolved:
		return t.routeHandler(n)
	case cm.EventConnectRequest:
		return t.connectHandler(ev.ID)
	case cm.EventEstablished:
		if n != nil {
			n.connected = true
		}
		t.connectsLeft--
		t.disconnectsLeft++
	case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
		t.printf("cmatose: event: %s, error: %d\n", ev.Type, ev.Status)
		t.connectsLeft--
		return ev.Status
	case cm.EventDisconnected:
		ev.ID.Disconnect()
		t.disconnectsLeft--
	}
	return 0
}

// events is connect_events and disconnect_events: events until *left
// reaches 0 or a handler fails.
func (t *test) events(ctx context.Context, left *int, what string) int {
	ret, err := cmkit.Events(ctx, t.ch, t.env.Stall, left, t.cmaHandler)
	if err != nil {
		t.printf("cmatose: failure in rdma_get_cm_event in %s events: %v\n", what, err)
		return 110 // ETIMEDOUT
	}
	return ret
}

// pollCQs is poll_cqs: message_count completions on each connected
// node's CQ.
func (t *test) pollCQs(ctx context.Context, index int) int {
	wc := make([]ibv.WorkCompletion, 8)
	for _, n := range t.nodes {
		if !n.connected {
			continue
		}
		if err := cmkit.PollCQ(ctx, n.cq[index], t.cfg.Count, t.env.Stall, wc, nil); err != nil {
			t.printf("cmatose: failed polling CQ: %d\n", -110)
			return -110
		}
	}
	return 0
}

// runServer is run_server.
func (t *test) runServer(ctx context.Context) int {
	cfg := t.cfg
	t.printf("cmatose: starting server\n")
	lid, err := t.env.CM.CreateID(t.ch, t, cfg.PortSpace, ibv.QPTypeRC)
	if err != nil {
		t.printf("cmatose: listen request failed: %v\n", err)
		return -1
	}
	defer lid.Destroy()
	src := cfg.Src
	if !src.IsValid() {
		src = netip.IPv4Unspecified()
	}
	if err := lid.BindAddr(netip.AddrPortFrom(src, cfg.Port)); err != nil {
		t.printf("cmatose: bind address failed: %v\n", err)
		return -1
	}
	if err := lid.Listen(0); err != nil {
		t.printf("cmatose: failure trying to listen: %v\n", err)
		return -1
	}
	if ret := t.events(ctx, &t.connectsLeft, "connect"); ret != 0 {
		return ret
	}
	if cfg.Count > 0 {
		t.printf("initiating data transfers\n")
		for _, n := range t.nodes {
			if ret := t.postSends(n); ret != 0 {
				return ret
			}
		}
		t.printf("completing sends\n")
		if ret := t.pollCQs(ctx, sendCQ); ret != 0 {
			return ret
		}
		t.printf("receiving data transfers\n")
		if ret := t.pollCQs(ctx, recvCQ); ret != 0 {
			return ret
		}
		t.printf("data transfers complete\n")
	}
	t.printf("cmatose: disconnecting\n")
	for _, n := range t.nodes {
		if !n.connected {
			continue
		}
		n.connected = false
		n.id.Disconnect()
	}
	ret := t.events(ctx, &t.disconnectsLeft, "disconnect")
	t.printf("disconnected\n")
	return ret
}

// runClient is run_client.
func (t *test) runClient(ctx context.Context) int {
	cfg := t.cfg
	t.printf("cmatose: starting client\n")
	var src netip.AddrPort
	if cfg.Src.IsValid() {
		src = netip.AddrPortFrom(cfg.Src, 0)
	}
	t.printf("cmatose: connecting\n")
	for _, n := range t.nodes {
		if err := n.id.ResolveAddr(src, netip.AddrPortFrom(cfg.Dst, cfg.Port), resolveTimeout); err != nil {
			t.printf("cmatose: failure getting addr: %v\n", err)
			t.connectsLeft--
			return -1
		}
	}
	ret := t.events(ctx, &t.connectsLeft, "connect")
	if ret == 0 && cfg.Count > 0 {
		t.printf("receiving data transfers\n")
		ret = t.pollCQs(ctx, recvCQ)
		if ret == 0 {
			t.printf("sending replies\n")
			for _, n := range t.nodes {
				if ret = t.postSends(n); ret != 0 {
					break
				}
			}
		}
		if ret == 0 {
			t.printf("data transfers complete\n")
		}
	}
	if ret2 := t.events(ctx, &t.disconnectsLeft, "disconnect"); ret2 != 0 {
		ret = ret2
	}
	return ret
}

// destroyNodes is destroy_nodes: each node's QP, CQs, MR, PD, then ID.
func (t *test) destroyNodes() {
	for _, n := range t.nodes {
		if n.id == nil {
			continue
		}
		if n.id.QP() != nil {
			n.id.DestroyQP()
		}
		for _, cq := range n.cq {
			if cq != nil {
				cq.Destroy()
			}
		}
		if n.mr != nil {
			n.mr.Dereg()
		}
		if n.pd != nil {
			n.pd.Dealloc()
		}
		n.id.Destroy()
	}
}
