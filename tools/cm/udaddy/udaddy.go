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
	"net/netip"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

// udaddy.c's defaults.
const (
	DefaultPort  = 7174
	DefaultSize  = 100
	DefaultCount = 10
)

const prog = "udaddy"

// Config holds a run's options, one field per udaddy.c flag (-p and -P
// set the port space; the port is udaddy.c's 7174).
type Config struct{ cmkit.Options }

// Defaults returns udaddy.c's defaults.
func Defaults() Config {
	return Config{cmkit.Options{PortSpace: cm.PSUDP, Conns: 1, Count: DefaultCount, Size: DefaultSize, Port: DefaultPort}}
}

// Status is the run's outcome as udaddy.c's main returns it (package cmkit).
type Status = cmkit.Status

type node = cmkit.Node

type test struct {
	*cmkit.Test
	cfg *Config
}

// Run runs udaddy as cfg says; the output ends with "return status %d"
// and a failure is a *Status.
func Run(ctx context.Context, cfg Config, env toolnic.Env) error {
	return cmkit.Run(ctx, prog, env, &cfg.Options, ibv.QPTypeUD, func(ct *cmkit.Test) *test { return &test{Test: ct, cfg: &cfg} },
		(*test).runServer, (*test).runClient)
}

// postSends is post_sends: SEND_WITH_IMM carrying the sender's QPN.
func (t *test) postSends(n *node, flags ibv.SendFlags) int {
	return n.PostUDSends(t.cfg.Count, t.cfg.Size, func(int) ibv.SendFlags { return flags }, t.Printf)
}

func (t *test) prepare(n *node) int {
	return n.PrepareUD(prog, t.cfg.Count, t.cfg.Size, true, t.Printf, t.Perror)
}

func (t *test) routeHandler(n *node) int {
	return t.Connect(n, t.prepare, &cm.ConnParam{}, func(err error) { t.Perror("udaddy: failure connecting", err) })
}

// connectHandler is connect_handler: a request takes the next node,
// whose QP the SIDR REP names.
func (t *test) connectHandler(id *cm.ID) int {
	n, ret := t.Accept(id, t.prepare, func(id *cm.ID) *cm.ConnParam { return &cm.ConnParam{QPNum: id.QP().QPN()} },
		func(err error) { t.Perror("udaddy: failure accepting", err) })
	switch {
	case n == nil:
	case ret != 0:
		t.Release(n)
	default:
		n.Connected = true
		t.ConnectsLeft--
	}
	return ret
}

// resolvedHandler is resolved_handler: the SIDR REP's QPN, Q_Key and
// address handle.
func (t *test) resolvedHandler(n *node, ev *cm.Event) int {
	t.ConnectsLeft--
	return n.SetPeer(prog, ev.UD, t.Printf)
}

func (t *test) cmaHandler(ev *cm.Event) int {
	n := t.Node(ev.ID)
	switch ev.Type {
	case cm.EventAddrResolved:
		if err := n.ID.ResolveRoute(cmkit.ResolveTimeout); err != nil {
			t.Perror("udaddy: resolve route failed", err)
			t.ConnectsLeft--
			return -1
		}
	case cm.EventRouteResolved:
		return t.routeHandler(n)
	case cm.EventConnectRequest:
		return t.connectHandler(ev.ID)
	case cm.EventEstablished:
		return t.resolvedHandler(n, ev)
	case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
		t.Printf("udaddy: event: %s, error: %d\n", ev.Type, ev.Status)
		t.ConnectsLeft--
		return ev.Status
	}
	return 0
}

func (t *test) connectEvents(ctx context.Context) int {
	ret, err := t.Events(ctx, &t.ConnectsLeft, t.cmaHandler)
	if err != nil {
		t.Perror("udaddy: rdma_get_cm_event", err)
		return -110
	}
	return ret
}

// pollCQs is poll_cqs: message_count completions per connected node; the
// first batch without an address handle makes the reply's
// (create_reply_ah).
func (t *test) pollCQs(ctx context.Context) int {
	return t.PollCQs(ctx, cmkit.SendCQ, t.cfg.Count, func(n *node, wc []ibv.WorkCompletion) {
		if len(wc) > 0 && n.AH == nil {
			t.createReplyAH(n, &wc[0])
		}
	})
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
	t.Printf("udaddy: starting server\n")
	lid, step, err := t.Listen(cfg.PortSpace, ibv.QPTypeUD, cfg.Src, cfg.Port)
	if err != nil {
		t.Perror("udaddy: "+step, err)
		return -1
	}
	defer lid.Destroy()
	t.connectEvents(ctx) // udaddy.c ignores its status
	if cfg.Count > 0 {
		t.Printf("receiving data transfers\n")
		if ret := t.pollCQs(ctx); ret != 0 {
			return ret
		}
		t.Printf("sending replies\n")
		for _, n := range t.Nodes {
			if ret := t.postSends(n, ibv.SendSignaled); ret != 0 {
				return ret
			}
		}
		if ret := t.pollCQs(ctx); ret != 0 {
			return ret
		}
		t.Printf("data transfers complete\n")
	}
	return 0
}

func (t *test) runClient(ctx context.Context) int {
	cfg := t.cfg
	t.Printf("udaddy: starting client\n")
	t.Printf("udaddy: connecting\n")
	if err := t.ResolveAll(cfg.Src, netip.AddrPortFrom(cfg.Dst, cfg.Port)); err != nil {
		t.Perror("udaddy: failure getting addr", err)
		return -1
	}
	if ret := t.connectEvents(ctx); ret != 0 {
		return ret
	}
	if cfg.Count > 0 {
		t.Printf("initiating data transfers\n")
		for _, n := range t.Nodes {
			if ret := t.postSends(n, 0); ret != 0 {
				return ret
			}
		}
		t.Printf("receiving data transfers\n")
		if ret := t.pollCQs(ctx); ret != 0 {
			return ret
		}
		t.Printf("data transfers complete\n")
	}
	return 0
}
