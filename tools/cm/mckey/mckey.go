// Package mckey is the logic of softnic's mckey: softnic's version of
// rdma-core's librdmacm/examples/mckey.c, which pairs with the C tool in
// either role. Each of -c IDs in the UDP port space (or IPoIB's) resolves
// the multicast address -m, makes a UD QP and joins the group through the
// RDMA CM (rdma_join_multicast; on RoCE the join is local); the receiver
// posts -C receives and waits for them, the sender (-s) SENDs -C
// datagrams of -S bytes WITH_IMM its QPN to the group. Flags, output
// lines ("mckey: joined dgid: ... mlid 0x... sl ...") and the exit status
// ("return status %d") are mckey.c's; waits are bounded (toolnic.Env.Stall), and
// the C tool's 3-second pause after the join (for a subnet manager) is
// Env.Settle.
package mckey

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

// mckey.c's defaults.
const (
	DefaultSize    = 100
	DefaultCount   = 10
	DefaultSettle  = 3 * time.Second // sleep(3)
	resolveTimeout = 2000 * time.Millisecond
)

// Config holds a run's options, one field per mckey.c flag.
type Config struct {
	Group     netip.Addr // -m
	Sender    bool       // -s
	Src       netip.Addr // -b
	Conns     int        // -c
	Count     int        // -C
	Size      int        // -S
	PortSpace cm.PortSpace
}

// Defaults returns mckey.c's defaults.
func Defaults() Config {
	return Config{Conns: 1, Count: DefaultCount, Size: DefaultSize, PortSpace: cm.PSUDP}
}

// Env is what a run needs from outside: the tools' environment and
// mckey's pause.
type Env struct {
	toolnic.Env
	// Settle is the pause between the joins and the transfers; negative
	// means none, 0 the C tool's 3 s.
	Settle time.Duration
}

// Status is the run's outcome as mckey.c's main returns it (package cmkit).
type Status = cmkit.Status

// node is struct cmatest_node (package cmkit).
type node = cmkit.UDNode

type test struct {
	cfg          *Config
	env          *Env
	ch           *cm.EventChannel
	nodes        []*node
	byID         map[*cm.ID]*node
	connectsLeft int
	outMu        sync.Mutex
}

func (t *test) printf(format string, args ...any) {
	t.outMu.Lock()
	fmt.Fprintf(t.env.Out, format, args...)
	t.outMu.Unlock()
}

func (t *test) perror(what string, err error) {
	if t.env.Err != nil {
		fmt.Fprintf(t.env.Err, "%s: %v\n", what, err)
	}
}

// Run runs mckey as cfg says; the output ends with "return status %d"
// and a failure is a *Status.
func Run(ctx context.Context, cfg Config, env Env) error {
	if env.CM == nil {
		return errors.New("no connection manager")
	}
	env.Env = env.Env.WithDefaults()
	if !cfg.Group.IsValid() {
		return errors.New("no multicast address (-m)")
	}
	if cfg.Size == 0 {
		cfg.Count = 0
	}
	t := &test{cfg: &cfg, env: &env, byID: map[*cm.ID]*node{}, connectsLeft: cfg.Conns}
	t.ch = env.CM.CreateEventChannel()
	var err error
	t.nodes, err = cmkit.AllocNodes(env.CM, t.ch, cfg.Conns, func(i int) *node { return &node{Idx: i} }, true,
		cfg.PortSpace, ibv.QPTypeUD, func(n *node, id *cm.ID) { t.byID[id] = n; n.ID = id })
	if err != nil {
		return err
	}
	ret := t.run(ctx)
	return cmkit.End(t.printf, ret, t.destroyNodes, t.ch)
}

func (t *test) postSends(n *node) int {
	// mckey.c posts every datagram unsignaled and leaves the group at
	// once; softnic signals the last one and waits for it (lastSent)
	// before the QP goes, so that none is destroyed unsent. Only the
	// local completion differs: the wire is the same.
	return n.PostSends(t.cfg.Count, t.cfg.Size, func(i int) ibv.SendFlags {
		if i == t.cfg.Count-1 {
			return ibv.SendSignaled
		}
		return 0
	}, t.printf)
}

// addrHandler is addr_handler: resources, receives (not the sender's),
// rdma_join_multicast.
func (t *test) addrHandler(n *node) int {
	ret := n.Prepare("mckey", t.cfg.Count, t.cfg.Size, !t.cfg.Sender, t.printf, t.perror)
	if ret == 0 {
		if err := n.ID.JoinMulticast(t.cfg.Group, n); err != nil {
			t.perror("mckey: failure joining", err)
			ret = -1
		}
	}
	if ret != 0 {
		t.connectsLeft--
	}
	return ret
}

// joinHandler is join_handler: the group's address handle, QPN and
// Q_Key.
func (t *test) joinHandler(n *node, p cm.UDParam) int {
	dgid := netip.AddrFrom16(p.AHAttr.GRH.DGID.As16())
	t.printf("mckey: joined dgid: %s mlid 0x%x sl %d\n", dgid, p.AHAttr.DLID, p.AHAttr.SL)
	t.connectsLeft--
	return n.SetPeer("mckey", p, t.printf)
}

func (t *test) cmaHandler(ev *cm.Event) int {
	n := t.byID[ev.ID]
	switch ev.Type {
	case cm.EventAddrResolved:
		return t.addrHandler(n)
	case cm.EventMulticastJoin:
		return t.joinHandler(n, ev.UD)
	case cm.EventAddrError, cm.EventRouteError, cm.EventMulticastError:
		t.printf("mckey: event: %s, error: %d\n", ev.Type, ev.Status)
		t.connectsLeft--
		return ev.Status
	}
	return 0
}

func (t *test) run(ctx context.Context) int {
	cfg := t.cfg
	role := "server"
	if cfg.Sender {
		role = "client"
	}
	t.printf("mckey: starting %s\n", role)
	t.printf("mckey: joining\n")
	var src netip.AddrPort
	if cfg.Src.IsValid() {
		src = netip.AddrPortFrom(cfg.Src, 0)
	}
	for _, n := range t.nodes {
		if src.IsValid() {
			if err := n.ID.BindAddr(src); err != nil {
				t.perror("mckey: addr bind failure", err)
				return -1
			}
		}
		if err := n.ID.ResolveAddr(src, netip.AddrPortFrom(cfg.Group, 0), resolveTimeout); err != nil {
			t.perror("mckey: resolve addr failure", err)
			return -1
		}
	}
	ret, err := cmkit.Events(ctx, t.ch, t.env.Stall, &t.connectsLeft, t.cmaHandler)
	if err != nil {
		t.perror("rdma_get_cm_event", err)
		ret = -110
	}
	if ret == 0 {
		// cma_thread: later events are printed (MULTICAST_ERROR,
		// ADDR_CHANGE) and acked until the channel closes.
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			cctx, cancel := context.WithCancel(context.Background())
			go func() { <-stop; cancel() }()
			for {
				ev, err := t.ch.GetEvent(cctx)
				if err != nil {
					return
				}
				if ev.Type == cm.EventMulticastError || ev.Type == cm.EventAddrChange {
					t.printf("mckey: event: %s, status: %d\n", ev.Type, ev.Status)
				}
				ev.Ack()
			}
		}()
		defer func() { close(stop); <-done }()
		settle := t.env.Settle
		if settle == 0 {
			settle = DefaultSettle
		}
		if settle > 0 {
			select {
			case <-time.After(settle):
			case <-ctx.Done():
			}
		}
		if cfg.Count > 0 {
			if cfg.Sender {
				t.printf("initiating data transfers\n")
				for _, n := range t.nodes {
					if ret = t.postSends(n); ret != 0 {
						break
					}
				}
				if ret == 0 {
					ret = t.lastSent(ctx)
				}
			} else {
				t.printf("receiving data transfers\n")
				ret = t.pollCQs(ctx)
			}
			if ret == 0 {
				t.printf("data transfers complete\n")
			}
		}
	}
	for _, n := range t.nodes {
		if err := n.ID.LeaveMulticast(cfg.Group); err != nil {
			t.perror("mckey: failure leaving", err)
			ret = -1
		} else {
			ret = 0
		}
	}
	return ret
}

// lastSent waits for each connected node's last, signaled, datagram.
func (t *test) lastSent(ctx context.Context) int {
	wc := make([]ibv.WorkCompletion, 1)
	for _, n := range t.nodes {
		if !n.Connected || t.cfg.Count == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, t.env.Stall)
		_, err := n.CQ.Wait(wctx, wc)
		cancel()
		if err != nil || wc[0].Status != ibv.WCSuccess {
			t.printf("mckey: failed polling CQ: %d\n", -110)
			return -110
		}
	}
	return 0
}

func (t *test) pollCQs(ctx context.Context) int {
	wc := make([]ibv.WorkCompletion, 8)
	for _, n := range t.nodes {
		if !n.Connected {
			continue
		}
		if err := cmkit.PollCQ(ctx, n.CQ, t.cfg.Count, t.env.Stall, wc, nil); err != nil {
			t.printf("mckey: failed polling CQ: %d\n", -110)
			return -110
		}
	}
	return 0
}

func (t *test) destroyNodes() {
	for _, n := range t.nodes {
		n.Destroy()
	}
}
