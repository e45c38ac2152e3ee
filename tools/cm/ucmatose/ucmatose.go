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
	"net/netip"

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
	clientRetryCnt  = 5
	clientRespRes   = 1
	clientInitDepth = 1
)

const prog = "cmatose"

// Config holds a run's options, one field per cmatose.c flag.
type Config struct {
	cmkit.Options
	Migrate bool // -m: refused (rdma_migrate_id is not in softnic's CM)
}

// Defaults returns cmatose.c's defaults.
func Defaults() Config {
	return Config{Options: cmkit.Options{PortSpace: cm.PSTCP, Conns: DefaultConns, Count: DefaultCount, Size: DefaultSize,
		Port: DefaultPort}}
}

// Status is the run's outcome as cmatose.c's main returns it (package cmkit).
type Status = cmkit.Status

type node = cmkit.Node

// test is struct cmatest.
type test struct {
	*cmkit.Test
	cfg *Config
}

// Run runs ucmatose as cfg says. It returns nil when cmatose.c would
// return 0, else a *Status; either way the output ends with
// "return status %d".
func Run(ctx context.Context, cfg Config, env toolnic.Env) error {
	if cfg.Migrate {
		return errors.New("-m: migrating IDs between event channels (rdma_migrate_id) is not supported by softnic's CM")
	}
	return cmkit.Run(ctx, prog, env, &cfg.Options, ibv.QPTypeRC, func(ct *cmkit.Test) *test { return &test{Test: ct, cfg: &cfg} },
		(*test).runServer, (*test).runClient)
}

// initNode is init_node: PD, two CQs of message_count entries (1
// without messages), the QP (sq_sig_all), the message buffer.
func (t *test) initNode(n *node) int {
	dev := n.ID.Device()
	if dev == nil {
		t.Printf("cmatose: unable to allocate PD\n")
		return -12
	}
	var err error
	if n.PD, err = dev.AllocPD(); err != nil {
		t.Printf("cmatose: unable to allocate PD\n")
		return -12
	}
	cqe := max(t.cfg.Count, 1)
	n.CQ[cmkit.SendCQ], err = dev.CreateCQ(cqe, nil)
	if err == nil {
		n.CQ[cmkit.RecvCQ], err = dev.CreateCQ(cqe, nil)
	}
	if err != nil {
		t.Printf("cmatose: unable to create CQ\n")
		return -12
	}
	if _, err := n.ID.CreateQP(n.PD, verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: n.CQ[cmkit.SendCQ], RecvCQ: n.CQ[cmkit.RecvCQ],
		SigAll: true, Cap: ibv.QPCap{MaxSendWR: uint32(cqe), MaxRecvWR: uint32(cqe), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Printf("cmatose: unable to create QP: %v\n", err)
		return -1
	}
	return n.CreateMessages(prog, t.cfg.Count, t.cfg.Size, t.Printf)
}

// prepare is init_node and post_recvs.
func (t *test) prepare(n *node) int {
	ret := t.initNode(n)
	if ret == 0 {
		ret = n.PostRecvs(t.cfg.Count, t.cfg.Size, t.Printf)
	}
	return ret
}

// postSends is post_sends: message_count SENDs on a connected node.
func (t *test) postSends(n *node) int {
	return n.PostSends(t.cfg.Count, t.cfg.Size, func(int, *ibv.SendWR) {}, t.Printf)
}

// addrHandler is addr_handler.
func (t *test) addrHandler(n *node) int {
	if err := n.ID.ResolveRoute(cmkit.ResolveTimeout); err != nil {
		t.Printf("cmatose: resolve route failed: %v\n", err)
		t.ConnectsLeft--
		return -1
	}
	return 0
}

// routeHandler is route_handler: the node's resources, its receives,
// rdma_connect.
func (t *test) routeHandler(n *node) int {
	return t.Connect(n, t.prepare, &cm.ConnParam{ResponderResources: clientRespRes, InitiatorDepth: clientInitDepth,
		RetryCount: clientRetryCnt}, func(err error) { t.Printf("cmatose: failure connecting: %v\n", err) })
}

// connectHandler is connect_handler: a request takes the next node.
func (t *test) connectHandler(id *cm.ID) int {
	_, ret := t.Accept(id, t.prepare, func(*cm.ID) *cm.ConnParam { return nil },
		func(err error) { t.Printf("cmatose: failure accepting: %v\n", err) })
	return ret
}

// cmaHandler is cma_handler.
func (t *test) cmaHandler(ev *cm.Event) int {
	n := t.Node(ev.ID)
	switch ev.Type {
	case cm.EventAddrResolved:
		return t.addrHandler(n)
	case cm.EventRouteResolved:
		return t.routeHandler(n)
	case cm.EventConnectRequest:
		return t.connectHandler(ev.ID)
	case cm.EventEstablished:
		if n != nil {
			n.Connected = true
		}
		t.ConnectsLeft--
		t.DisconnectsLeft++
	case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
		t.Printf("cmatose: event: %s, error: %d\n", ev.Type, ev.Status)
		t.ConnectsLeft--
		return ev.Status
	case cm.EventDisconnected:
		ev.ID.Disconnect()
		t.DisconnectsLeft--
	}
	return 0
}

// events is connect_events and disconnect_events: events until *left
// reaches 0 or a handler fails.
func (t *test) events(ctx context.Context, left *int, what string) int {
	ret, err := t.Events(ctx, left, t.cmaHandler)
	if err != nil {
		t.Printf("cmatose: failure in rdma_get_cm_event in %s events: %v\n", what, err)
		return 110 // ETIMEDOUT
	}
	return ret
}

// runServer is run_server.
func (t *test) runServer(ctx context.Context) int {
	cfg := t.cfg
	t.Printf("cmatose: starting server\n")
	lid, step, err := t.Listen(cfg.PortSpace, ibv.QPTypeRC, cfg.Src, cfg.Port)
	if err != nil {
		t.Printf("cmatose: %s: %v\n", step, err)
		return -1
	}
	defer lid.Destroy()
	if ret := t.events(ctx, &t.ConnectsLeft, "connect"); ret != 0 {
		return ret
	}
	if cfg.Count > 0 {
		t.Printf("initiating data transfers\n")
		for _, n := range t.Nodes {
			if ret := t.postSends(n); ret != 0 {
				return ret
			}
		}
		t.Printf("completing sends\n")
		if ret := t.PollCQs(ctx, cmkit.SendCQ, cfg.Count, nil); ret != 0 {
			return ret
		}
		t.Printf("receiving data transfers\n")
		if ret := t.PollCQs(ctx, cmkit.RecvCQ, cfg.Count, nil); ret != 0 {
			return ret
		}
		t.Printf("data transfers complete\n")
	}
	t.Printf("cmatose: disconnecting\n")
	for _, n := range t.Nodes {
		if !n.Connected {
			continue
		}
		n.Connected = false
		n.ID.Disconnect()
	}
	ret := t.events(ctx, &t.DisconnectsLeft, "disconnect")
	t.Printf("disconnected\n")
	return ret
}

// runClient is run_client.
func (t *test) runClient(ctx context.Context) int {
	cfg := t.cfg
	t.Printf("cmatose: starting client\n")
	t.Printf("cmatose: connecting\n")
	if err := t.ResolveAll(cfg.Src, netip.AddrPortFrom(cfg.Dst, cfg.Port)); err != nil {
		t.Printf("cmatose: failure getting addr: %v\n", err)
		return -1
	}
	ret := t.events(ctx, &t.ConnectsLeft, "connect")
	if ret == 0 && cfg.Count > 0 {
		t.Printf("receiving data transfers\n")
		ret = t.PollCQs(ctx, cmkit.RecvCQ, cfg.Count, nil)
		if ret == 0 {
			t.Printf("sending replies\n")
			for _, n := range t.Nodes {
				if ret = t.postSends(n); ret != 0 {
					break
				}
			}
		}
		if ret == 0 {
			t.Printf("data transfers complete\n")
		}
	}
	if ret2 := t.events(ctx, &t.DisconnectsLeft, "disconnect"); ret2 != 0 {
		ret = ret2
	}
	return ret
}
