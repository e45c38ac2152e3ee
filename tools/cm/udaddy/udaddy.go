// Package udaddy is the logic of softnic's udaddy: softnic's version of
// rdma-core's librdmacm/examples/udaddy.c, which pairs with the C tool in
// either role. The client resolves -c UD "connections" to the server
// through the RDMA CM in the UDP port space (port 7174): each is a SIDR
// REQ, answered by the server's accept with its QPN and the port space's
// Q_Key in a SIDR REP, which the client's ESTABLISHED event carries as the
// address handle, QPN and Q_Key to send to. The client then SENDs -C
// datagrams of -S bytes WITH_IMM its own QPN on each; the server makes a
// reply address handle from the first completion and the immediate data
// (ibv_create_ah_from_wc), and SENDs as many back. Flags, output lines and
// the exit status ("return status %d") are udaddy.c's; waits are bounded
// (toolnic.Env.Stall).
package udaddy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

// udaddy.c's defaults.
const (
	DefaultPort    = 7174
	DefaultSize    = 100
	DefaultCount   = 10
	resolveTimeout = 2000 * time.Millisecond
)

// Config holds a run's options, one field per udaddy.c flag.
type Config struct {
	Server    bool       // no -s
	Dst       netip.Addr // -s
	Src       netip.Addr // -b
	PortSpace cm.PortSpace
	Conns     int // -c
	Count     int // -C
	Size      int // -S
	TOS       int // -t: accepted; no effect
	Port      uint16
}

// Defaults returns udaddy.c's defaults.
func Defaults() Config {
	return Config{PortSpace: cm.PSUDP, Conns: 1, Count: DefaultCount, Size: DefaultSize, Port: DefaultPort}
}

// Status is the run's outcome as udaddy.c's main returns it (package cmkit).
type Status = cmkit.Status

// node is struct cmatest_node (package cmkit).
type node = cmkit.UDNode

type test struct {
	cfg          *Config
	env          *toolnic.Env
	ch           *cm.EventChannel
	nodes        []*node
	byID         map[*cm.ID]*node
	connIndex    int
	connectsLeft int
}

func (t *test) printf(format string, args ...any) { fmt.Fprintf(t.env.Out, format, args...) }

func (t *test) perror(what string, err error) {
	if t.env.Err != nil {
		fmt.Fprintf(t.env.Err, "%s: %v\n", what, err)
	}
}

// Run runs udaddy as cfg says; the output ends with "return status %d"
// and a failure is a *Status.
func Run(ctx context.Context, cfg Config, env toolnic.Env) error {
	if env.CM == nil {
		return errors.New("no connection manager")
	}
	env = env.WithDefaults()
	if cfg.Size == 0 {
		cfg.Count = 0
	}
	t := &test{cfg: &cfg, env: &env, byID: map[*cm.ID]*node{}, connectsLeft: cfg.Conns}
	t.ch = env.CM.CreateEventChannel()
	var err error
	t.nodes, err = cmkit.AllocNodes(env.CM, t.ch, cfg.Conns, func(i int) *node { return &node{Idx: i} }, !cfg.Server,
		cfg.PortSpace, ibv.QPTypeUD, func(n *node, id *cm.ID) {
			n.ID = id
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

// postSends is post_sends: SEND_WITH_IMM carrying the sender's QPN.
func (t *test) postSends(n *node, flags ibv.SendFlags) int {
	return n.PostSends(t.cfg.Count, t.cfg.Size, func(int) ibv.SendFlags { return flags }, t.printf)
}

func (t *test) routeHandler(n *node) int {
	ret := n.Prepare("udaddy", t.cfg.Count, t.cfg.Size, true, t.printf, t.perror)
	if ret == 0 {
		if err := n.ID.Connect(&cm.ConnParam{}); err != nil {
			t.perror("udaddy: failure connecting", err)
			ret = -1
		}
	}
	if ret != 0 {
		t.connectsLeft--
	}
	return ret
}

func (t *test) connectHandler(id *cm.ID) int {
	if t.connIndex == t.cfg.Conns {
		t.printf("udaddy: failing connection request\n")
		id.Reject(nil)
		return -12
	}
	n := t.nodes[t.connIndex]
	t.connIndex++
	n.ID = id
	t.byID[id] = n
	ret := n.Prepare("udaddy", t.cfg.Count, t.cfg.Size, true, t.printf, t.perror)
	if ret == 0 {
		if err := id.Accept(&cm.ConnParam{QPNum: id.QP().QPN()}); err != nil {
			t.perror("udaddy: failure accepting", err)
			ret = -1
		}
	}
	if ret != 0 {
		n.ID = nil
		delete(t.byID, id)
		t.connectsLeft--
		t.printf("udaddy: failing connection request\n")
		id.Reject(nil)
		return ret
	}
	n.Connected = true
	t.connectsLeft--
	return 0
}

// resolvedHandler is resolved_handler: the SIDR REP's QPN, Q_Key and
// address handle.
func (t *test) resolvedHandler(n *node, ev *cm.Event) int {
	t.connectsLeft--
	return n.SetPeer("udaddy", ev.UD, t.printf)
}

func (t *test) cmaHandler(ev *cm.Event) int {
	n := t.byID[ev.ID]
	switch ev.Type {
	case cm.EventAddrResolved:
		if err := n.ID.ResolveRoute(resolveTimeout); err != nil {
			t.perror("udaddy: resolve route failed", err)
			t.connectsLeft--
			return -1
		}
	case cm.EventRouteResolved:
		return t.routeHandler(n)
	case cm.EventConnectRequest:
		return t.connectHandler(ev.ID)
	case cm.EventEstablished:
		return t.resolvedHandler(n, ev)
	case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
		t.printf("udaddy: event: %s, error: %d\n", ev.Type, ev.Status)
		t.connectsLeft--
		return ev.Status
	}
	return 0
}

func (t *test) connectEvents(ctx context.Context) int {
	ret, err := cmkit.Events(ctx, t.ch, t.env.Stall, &t.connectsLeft, t.cmaHandler)
	if err != nil {
		t.perror("udaddy: rdma_get_cm_event", err)
		return -110
	}
	return ret
}

// pollCQs is poll_cqs: message_count completions per connected node; the
// first batch without an address handle makes the reply's
// (create_reply_ah).
func (t *test) pollCQs(ctx context.Context) int {
	wc := make([]ibv.WorkCompletion, 8)
	for _, n := range t.nodes {
		if !n.Connected {
			continue
		}
		if err := cmkit.PollCQ(ctx, n.CQ, t.cfg.Count, t.env.Stall, wc, func(wc []ibv.WorkCompletion) {
			if len(wc) > 0 && n.AH == nil {
				t.createReplyAH(n, &wc[0])
			}
		}); err != nil {
			t.printf("udaddy: failed polling CQ: %d\n", -110)
			return -110
		}
	}
	return 0
}

// createReplyAH is create_reply_ah: the AH from the completion and the
// GRH at the start of the buffer, the peer's QPN from the immediate data,
// the Q_Key our own QP's.
func (t *test) createReplyAH(n *node, wc *ibv.WorkCompletion) {
	ah, err := n.PD.CreateAHFromWC(wc, n.MR.Buf()[:cmkit.GRHSize], 1)
	if err == nil {
		n.AH = ah
	}
	n.RemoteQPN = wc.Imm
	attr, _ := n.ID.QP().Query()
	n.RemoteQKey = attr.QKey
}

func (t *test) runServer(ctx context.Context) int {
	cfg := t.cfg
	t.printf("udaddy: starting server\n")
	lid, err := t.env.CM.CreateID(t.ch, t, cfg.PortSpace, ibv.QPTypeUD)
	if err != nil {
		t.perror("udaddy: listen request failed", err)
		return -1
	}
	defer lid.Destroy()
	src := cfg.Src
	if !src.IsValid() {
		src = netip.IPv4Unspecified()
	}
	if err := lid.BindAddr(netip.AddrPortFrom(src, cfg.Port)); err != nil {
		t.perror("udaddy: bind address failed", err)
		return -1
	}
	if err := lid.Listen(0); err != nil {
		t.perror("udaddy: failure trying to listen", err)
		return -1
	}
	t.connectEvents(ctx) // udaddy.c ignores its status
	if cfg.Count > 0 {
		t.printf("receiving data transfers\n")
		if ret := t.pollCQs(ctx); ret != 0 {
			return ret
		}
		t.printf("sending replies\n")
		for _, n := range t.nodes {
			if ret := t.postSends(n, ibv.SendSignaled); ret != 0 {
				return ret
			}
		}
		if ret := t.pollCQs(ctx); ret != 0 {
			return ret
		}
		t.printf("data transfers complete\n")
	}
	return 0
}

func (t *test) runClient(ctx context.Context) int {
	cfg := t.cfg
	t.printf("udaddy: starting client\n")
	var src netip.AddrPort
	if cfg.Src.IsValid() {
		src = netip.AddrPortFrom(cfg.Src, 0)
	}
	t.printf("udaddy: connecting\n")
	for _, n := range t.nodes {
		if err := n.ID.ResolveAddr(src, netip.AddrPortFrom(cfg.Dst, cfg.Port), resolveTimeout); err != nil {
			t.perror("udaddy: failure getting addr", err)
			t.connectsLeft--
			return -1
		}
	}
	if ret := t.connectEvents(ctx); ret != 0 {
		return ret
	}
	if cfg.Count > 0 {
		t.printf("initiating data transfers\n")
		for _, n := range t.nodes {
			if ret := t.postSends(n, 0); ret != 0 {
				return ret
			}
		}
		t.printf("receiving data transfers\n")
		if ret := t.pollCQs(ctx); ret != 0 {
			return ret
		}
		t.printf("data transfers complete\n")
	}
	return 0
}

func (t *test) destroyNodes() {
	for _, n := range t.nodes {
		n.Destroy()
	}
}
