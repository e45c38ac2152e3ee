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
// (Env.Stall).
package udaddy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// udaddy.c's defaults.
const (
	DefaultPort    = 7174
	DefaultSize    = 100
	DefaultCount   = 10
	resolveTimeout = 2000 * time.Millisecond
	grhSize        = 40 // sizeof(struct ibv_grh)
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

// Env is what a run needs from outside.
type Env struct {
	CM    *cm.CM
	Out   io.Writer
	Err   io.Writer     // perror's lines
	Stall time.Duration // bound of each wait (0: 30 s)
}

func (e *Env) stall() time.Duration {
	if e.Stall > 0 {
		return e.Stall
	}
	return 30 * time.Second
}

// Status is a failed run: the exit status is Code & 0xff.
type Status struct{ Code int }

func (s *Status) Error() string { return fmt.Sprintf("return status %d", s.Code) }

type node struct {
	idx        int
	id         *cm.ID
	connected  bool
	pd         *verbs.PD
	cq         *verbs.CQ
	mr         *verbs.MR
	ah         *verbs.AH
	remoteQPN  uint32
	remoteQKey uint32
}

type test struct {
	cfg          *Config
	env          *Env
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
func Run(ctx context.Context, cfg Config, env Env) error {
	if env.CM == nil {
		return errors.New("no connection manager")
	}
	if cfg.Size == 0 {
		cfg.Count = 0
	}
	t := &test{cfg: &cfg, env: &env, byID: map[*cm.ID]*node{}, connectsLeft: cfg.Conns}
	t.ch = env.CM.CreateEventChannel()
	t.nodes = make([]*node, cfg.Conns)
	for i := range t.nodes {
		t.nodes[i] = &node{idx: i}
		if !cfg.Server {
			id, err := env.CM.CreateID(t.ch, t.nodes[i], cfg.PortSpace, ibv.QPTypeUD)
			if err != nil {
				for _, n := range t.nodes[:i] {
					n.id.Destroy()
				}
				t.ch.Close()
				return &Status{1}
			}
			t.nodes[i].id = id
			t.byID[id] = t.nodes[i]
		}
	}
	var ret int
	if cfg.Server {
		ret = t.runServer(ctx)
	} else {
		ret = t.runClient(ctx)
	}
	t.printf("test complete\n")
	t.destroyNodes()
	t.ch.Close()
	t.printf("return status %d\n", ret)
	if ret != 0 {
		return &Status{ret}
	}
	return nil
}

// verifyParams is verify_test_params: a message must fit the port's
// active MTU.
func (t *test) verifyParams(n *node) int {
	port, err := n.id.Device().QueryPort(1)
	if err != nil {
		return -1
	}
	if mtu := port.ActiveMTU.Bytes(); t.cfg.Count > 0 && t.cfg.Size > mtu {
		t.printf("udaddy: message_size %d is larger than active mtu %d\n", t.cfg.Size, mtu)
		return -22
	}
	return 0
}

// initNode is init_node: PD, one CQ of 2*message_count, the UD QP, the
// buffer with room for the GRH.
func (t *test) initNode(n *node) int {
	dev := n.id.Device()
	var err error
	if n.pd, err = dev.AllocPD(); err != nil {
		t.printf("udaddy: unable to allocate PD\n")
		return -12
	}
	cqe, wr := 2, 1
	if t.cfg.Count > 0 {
		cqe, wr = 2*t.cfg.Count, t.cfg.Count
	}
	if n.cq, err = dev.CreateCQ(cqe, nil); err != nil {
		t.printf("udaddy: unable to create CQ\n")
		return -12
	}
	if _, err := n.id.CreateQP(n.pd, verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: ibv.QPCap{MaxSendWR: uint32(wr), MaxRecvWR: uint32(wr), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.perror("udaddy: unable to create QP", err)
		return -1
	}
	if t.cfg.Count > 0 {
		if n.mr, err = n.pd.RegMR(make([]byte, t.cfg.Size+grhSize), ibv.AccessLocalWrite); err != nil {
			t.printf("failed to reg MR\n")
			t.printf("udaddy: failed to create messages: %d\n", -1)
			return -1
		}
	}
	return 0
}

func (t *test) postRecvs(n *node) int {
	for i := 0; i < t.cfg.Count; i++ {
		if _, err := n.id.QP().PostRecv(ibv.RecvWR{WRID: uint64(n.idx),
			SGList: []ibv.SGE{n.mr.SGE(0, t.cfg.Size+grhSize)}}); err != nil {
			t.printf("failed to post receives: %d\n", -1)
			return -1
		}
	}
	return 0
}

// postSends is post_sends: SEND_WITH_IMM carrying the sender's QPN.
func (t *test) postSends(n *node, flags ibv.SendFlags) int {
	if !n.connected || t.cfg.Count == 0 {
		return 0
	}
	for i := 0; i < t.cfg.Count; i++ {
		if _, err := n.id.QP().PostSend(ibv.SendWR{WRID: uint64(n.idx), Opcode: ibv.WRSendWithImm, Flags: flags,
			Imm: n.id.QP().QPN(), AH: n.ah, RemoteQPN: n.remoteQPN, RemoteQKey: n.remoteQKey,
			SGList: []ibv.SGE{n.mr.SGE(0, t.cfg.Size)}}); err != nil {
			t.printf("failed to post sends: %d\n", -1)
			return -1
		}
	}
	return 0
}

func (t *test) routeHandler(n *node) int {
	ret := t.verifyParams(n)
	if ret == 0 {
		ret = t.initNode(n)
	}
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	if ret == 0 {
		if err := n.id.Connect(&cm.ConnParam{}); err != nil {
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
	n.id = id
	t.byID[id] = n
	ret := t.verifyParams(n)
	if ret == 0 {
		ret = t.initNode(n)
	}
	if ret == 0 {
		ret = t.postRecvs(n)
	}
	if ret == 0 {
		if err := id.Accept(&cm.ConnParam{QPNum: id.QP().QPN()}); err != nil {
			t.perror("udaddy: failure accepting", err)
			ret = -1
		}
	}
	if ret != 0 {
		n.id = nil
		delete(t.byID, id)
		t.connectsLeft--
		t.printf("udaddy: failing connection request\n")
		id.Reject(nil)
		return ret
	}
	n.connected = true
	t.connectsLeft--
	return 0
}

// resolvedHandler is resolved_handler: the SIDR REP's QPN, Q_Key and
// address handle.
func (t *test) resolvedHandler(n *node, ev *cm.Event) int {
	n.remoteQPN, n.remoteQKey = ev.UD.QPNum, ev.UD.QKey
	ah, err := n.pd.CreateAH(ev.UD.AHAttr)
	if err != nil {
		t.printf("udaddy: failure creating address handle\n")
		t.connectsLeft--
		return -1
	}
	n.ah = ah
	n.connected = true
	t.connectsLeft--
	return 0
}

func (t *test) cmaHandler(ev *cm.Event) int {
	n := t.byID[ev.ID]
	switch ev.Type {
	case cm.EventAddrResolved:
		if err := n.id.ResolveRoute(resolveTimeout); err != nil {
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
	ret := 0
	for t.connectsLeft > 0 && ret == 0 {
		wctx, cancel := context.WithTimeout(ctx, t.env.stall())
		ev, err := t.ch.GetEvent(wctx)
		cancel()
		if err != nil {
			t.perror("udaddy: rdma_get_cm_event", err)
			return -110
		}
		ret = t.cmaHandler(ev)
		ev.Ack()
	}
	return ret
}

// pollCQs is poll_cqs: message_count completions per connected node; the
// first batch without an address handle makes the reply's
// (create_reply_ah).
func (t *test) pollCQs(ctx context.Context) int {
	wc := make([]ibv.WorkCompletion, 8)
	for _, n := range t.nodes {
		if !n.connected {
			continue
		}
		for done := 0; done < t.cfg.Count; {
			wctx, cancel := context.WithTimeout(ctx, t.env.stall())
			got, err := n.cq.Wait(wctx, wc)
			cancel()
			if err != nil {
				t.printf("udaddy: failed polling CQ: %d\n", -110)
				return -110
			}
			if got > 0 && n.ah == nil {
				t.createReplyAH(n, &wc[0])
			}
			done += got
		}
	}
	return 0
}

// createReplyAH is create_reply_ah: the AH from the completion and the
// GRH at the start of the buffer, the peer's QPN from the immediate data,
// the Q_Key our own QP's.
func (t *test) createReplyAH(n *node, wc *ibv.WorkCompletion) {
	ah, err := n.pd.CreateAHFromWC(wc, n.mr.Buf()[:grhSize], 1)
	if err == nil {
		n.ah = ah
	}
	n.remoteQPN = wc.Imm
	attr, _ := n.id.QP().Query()
	n.remoteQKey = attr.QKey
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
		if err := n.id.ResolveAddr(src, netip.AddrPortFrom(cfg.Dst, cfg.Port), resolveTimeout); err != nil {
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
		if n.id == nil {
			continue
		}
		if n.ah != nil {
			n.ah.Destroy()
		}
		if n.id.QP() != nil {
			n.id.DestroyQP()
		}
		if n.cq != nil {
			n.cq.Destroy()
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
