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
	"net/netip"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs/cm"
)

// mckey.c's defaults.
const (
	DefaultSize   = 100
	DefaultCount  = 10
	DefaultSettle = 3 * time.Second // sleep(3)
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

type node = cmkit.Node

type test struct {
	*cmkit.Test
	cfg *Config
	env *Env
}

const prog = "mckey"

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
	ct, err := cmkit.NewTest(prog, &env.Env, cfg.Conns, true, cfg.PortSpace, ibv.QPTypeUD)
	if err != nil {
		return err
	}
	t := &test{Test: ct, cfg: &cfg, env: &env}
	return t.End(t.run(ctx))
}

func (t *test) postSends(n *node) int {
	// mckey.c posts every datagram unsignaled and leaves the group at
	// once; softnic signals the last one and waits for it (lastSent)
	// before the QP goes, so that none is destroyed unsent. Only the
	// local completion differs: the wire is the same.
	return n.PostUDSends(t.cfg.Count, t.cfg.Size, func(i int) ibv.SendFlags {
		if i == t.cfg.Count-1 {
			return ibv.SendSignaled
		}
		return 0
	}, t.Printf)
}

// addrHandler is addr_handler: resources, receives (not the sender's),
// rdma_join_multicast.
func (t *test) addrHandler(n *node) int {
	ret := n.PrepareUD(prog, t.cfg.Count, t.cfg.Size, !t.cfg.Sender, t.Printf, t.Perror)
	if ret == 0 {
		if err := n.ID.JoinMulticast(t.cfg.Group, n); err != nil {
			t.Perror("mckey: failure joining", err)
			ret = -1
		}
	}
	if ret != 0 {
		t.ConnectsLeft--
	}
	return ret
}

// joinHandler is join_handler: the group's address handle, QPN and
// Q_Key.
func (t *test) joinHandler(n *node, p cm.UDParam) int {
	dgid := netip.AddrFrom16(p.AHAttr.GRH.DGID.As16())
	t.Printf("mckey: joined dgid: %s mlid 0x%x sl %d\n", dgid, p.AHAttr.DLID, p.AHAttr.SL)
	t.ConnectsLeft--
	return n.SetPeer(prog, p, t.Printf)
}

func (t *test) cmaHandler(ev *cm.Event) int {
	n := t.Node(ev.ID)
	switch ev.Type {
	case cm.EventAddrResolved:
		return t.addrHandler(n)
	case cm.EventMulticastJoin:
		return t.joinHandler(n, ev.UD)
	case cm.EventAddrError, cm.EventRouteError, cm.EventMulticastError:
		t.Printf("mckey: event: %s, error: %d\n", ev.Type, ev.Status)
		t.ConnectsLeft--
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
	t.Printf("mckey: starting %s\n", role)
	t.Printf("mckey: joining\n")
	var src netip.AddrPort
	if cfg.Src.IsValid() {
		src = netip.AddrPortFrom(cfg.Src, 0)
	}
	for _, n := range t.Nodes {
		if src.IsValid() {
			if err := n.ID.BindAddr(src); err != nil {
				t.Perror("mckey: addr bind failure", err)
				return -1
			}
		}
		if err := n.ID.ResolveAddr(src, netip.AddrPortFrom(cfg.Group, 0), cmkit.ResolveTimeout); err != nil {
			t.Perror("mckey: resolve addr failure", err)
			return -1
		}
	}
	ret, err := t.Events(ctx, &t.ConnectsLeft, t.cmaHandler)
	if err != nil {
		t.Perror("rdma_get_cm_event", err)
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
				ev, err := t.Ch.GetEvent(cctx)
				if err != nil {
					return
				}
				if ev.Type == cm.EventMulticastError || ev.Type == cm.EventAddrChange {
					t.Printf("mckey: event: %s, status: %d\n", ev.Type, ev.Status)
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
				t.Printf("initiating data transfers\n")
				for _, n := range t.Nodes {
					if ret = t.postSends(n); ret != 0 {
						break
					}
				}
				if ret == 0 {
					ret = t.lastSent(ctx)
				}
			} else {
				t.Printf("receiving data transfers\n")
				ret = t.pollCQs(ctx)
			}
			if ret == 0 {
				t.Printf("data transfers complete\n")
			}
		}
	}
	for _, n := range t.Nodes {
		if err := n.ID.LeaveMulticast(cfg.Group); err != nil {
			t.Perror("mckey: failure leaving", err)
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
	for _, n := range t.Nodes {
		if !n.Connected || t.cfg.Count == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, t.env.Stall)
		_, err := n.CQ[cmkit.SendCQ].Wait(wctx, wc)
		cancel()
		if err != nil || wc[0].Status != ibv.WCSuccess {
			t.Printf("mckey: failed polling CQ: %d\n", -110)
			return -110
		}
	}
	return 0
}

func (t *test) pollCQs(ctx context.Context) int {
	return t.PollCQs(ctx, cmkit.SendCQ, t.cfg.Count, nil)
}
