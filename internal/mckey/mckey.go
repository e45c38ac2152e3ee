// Package mckey is the logic of softnic's mckey: softnic's version of
// rdma-core's librdmacm/examples/mckey.c, which pairs with the C tool in
// either role. Each of -c IDs in the UDP port space (or IPoIB's) resolves
// the multicast address -m, makes a UD QP and joins the group through the
// RDMA CM (rdma_join_multicast; on RoCE the join is local); the receiver
// posts -C receives and waits for them, the sender (-s) SENDs -C
// datagrams of -S bytes WITH_IMM its QPN to the group. Flags, output
// lines ("mckey: joined dgid: ... mlid 0x... sl ...") and the exit status
// ("return status %d") are mckey.c's; waits are bounded (Env.Stall), and
// the C tool's 3-second pause after the join (for a subnet manager) is
// Env.Settle.
package mckey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// mckey.c's defaults.
const (
	DefaultSize    = 100
	DefaultCount   = 10
	DefaultSettle  = 3 * time.Second // sleep(3)
	resolveTimeout = 2000 * time.Millisecond
	grhSize        = 40
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

// Env is what a run needs from outside.
type Env struct {
	CM    *cm.CM
	Out   io.Writer
	Err   io.Writer
	Stall time.Duration // bound of each wait (0: 30 s)
	// Settle is the pause between the joins and the transfers; negative
	// means none, 0 the C tool's 3 s.
	Settle time.Duration
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
	if !cfg.Group.IsValid() {
		return errors.New("no multicast address (-m)")
	}
	if cfg.Size == 0 {
		cfg.Count = 0
	}
	t := &test{cfg: &cfg, env: &env, byID: map[*cm.ID]*node{}, connectsLeft: cfg.Conns}
	t.ch = env.CM.CreateEventChannel()
	for i := 0; i < cfg.Conns; i++ {
		n := &node{idx: i}
		id, err := env.CM.CreateID(t.ch, n, cfg.PortSpace, ibv.QPTypeUD)
		if err != nil {
			for _, n := range t.nodes {
				n.id.Destroy()
			}
			t.ch.Close()
			return &Status{1}
		}
		n.id = id
		t.byID[id] = n
		t.nodes = append(t.nodes, n)
	}
	ret := t.run(ctx)
	t.printf("test complete\n")
	t.destroyNodes()
	t.ch.Close()
	t.printf("return status %d\n", ret)
	if ret != 0 {
		return &Status{ret}
	}
	return nil
}

func (t *test) verifyParams(n *node) int {
	port, err := n.id.Device().QueryPort(1)
	if err != nil {
		return -1
	}
	if mtu := port.ActiveMTU.Bytes(); t.cfg.Count > 0 && t.cfg.Size > mtu {
		t.printf("mckey: message_size %d is larger than active mtu %d\n", t.cfg.Size, mtu)
		return -22
	}
	return 0
}

func (t *test) initNode(n *node) int {
	dev := n.id.Device()
	var err error
	if n.pd, err = dev.AllocPD(); err != nil {
		t.printf("mckey: unable to allocate PD\n")
		return -12
	}
	cqe, wr := 2, 1
	if t.cfg.Count > 0 {
		cqe, wr = 2*t.cfg.Count, t.cfg.Count
	}
	if n.cq, err = dev.CreateCQ(cqe, nil); err != nil {
		t.printf("mckey: unable to create CQ\n")
		return -12
	}
	if _, err := n.id.CreateQP(n.pd, verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: ibv.QPCap{MaxSendWR: uint32(wr), MaxRecvWR: uint32(wr), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.perror("mckey: unable to create QP", err)
		return -1
	}
	if t.cfg.Count > 0 {
		if n.mr, err = n.pd.RegMR(make([]byte, t.cfg.Size+grhSize), ibv.AccessLocalWrite); err != nil {
			t.printf("failed to reg MR\n")
			t.printf("mckey: failed to create messages: %d\n", -1)
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

func (t *test) postSends(n *node) int {
	if !n.connected || t.cfg.Count == 0 {
		return 0
	}
	for i := 0; i < t.cfg.Count; i++ {
		// mckey.c posts every datagram unsignaled and leaves the group at
		// once; softnic signals the last one and waits for it (lastSent)
		// before the QP goes, so that none is destroyed unsent. Only the
		// local completion differs: the wire is the same.
		var flags ibv.SendFlags
		if i == t.cfg.Count-1 {
			flags = ibv.SendSignaled
		}
		if _, err := n.id.QP().PostSend(ibv.SendWR{WRID: uint64(n.idx), Opcode: ibv.WRSendWithImm, Flags: flags,
			Imm: n.id.QP().QPN(), AH: n.ah, RemoteQPN: n.remoteQPN, RemoteQKey: n.remoteQKey,
			SGList: []ibv.SGE{n.mr.SGE(0, t.cfg.Size)}}); err != nil {
			t.printf("failed to post sends: %d\n", -1)
			return -1
		}
	}
	return 0
}

// addrHandler is addr_handler: resources, receives (not the sender's),
// rdma_join_multicast.
func (t *test) addrHandler(n *node) int {
	ret := t.verifyParams(n)
	if ret == 0 {
		ret = t.initNode(n)
	}
	if ret == 0 && !t.cfg.Sender {
		ret = t.postRecvs(n)
	}
	if ret == 0 {
		if err := n.id.JoinMulticast(t.cfg.Group, n); err != nil {
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
	n.remoteQPN, n.remoteQKey = p.QPNum, p.QKey
	ah, err := n.pd.CreateAH(p.AHAttr)
	if err != nil {
		t.printf("mckey: failure creating address handle\n")
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
			if err := n.id.BindAddr(src); err != nil {
				t.perror("mckey: addr bind failure", err)
				return -1
			}
		}
		if err := n.id.ResolveAddr(src, netip.AddrPortFrom(cfg.Group, 0), resolveTimeout); err != nil {
			t.perror("mckey: resolve addr failure", err)
			return -1
		}
	}
	ret := 0
	for t.connectsLeft > 0 && ret == 0 {
		wctx, cancel := context.WithTimeout(ctx, t.env.stall())
		ev, err := t.ch.GetEvent(wctx)
		cancel()
		if err != nil {
			t.perror("rdma_get_cm_event", err)
			ret = -110
			break
		}
		ret = t.cmaHandler(ev)
		ev.Ack()
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
		if err := n.id.LeaveMulticast(cfg.Group); err != nil {
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
		if !n.connected || t.cfg.Count == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, t.env.stall())
		_, err := n.cq.Wait(wctx, wc)
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
		if !n.connected {
			continue
		}
		for done := 0; done < t.cfg.Count; {
			wctx, cancel := context.WithTimeout(ctx, t.env.stall())
			got, err := n.cq.Wait(wctx, wc)
			cancel()
			if err != nil {
				t.printf("mckey: failed polling CQ: %d\n", -110)
				return -110
			}
			done += got
		}
	}
	return 0
}

func (t *test) destroyNodes() {
	for _, n := range t.nodes {
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
