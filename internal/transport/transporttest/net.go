package transporttest

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// Handler is a transport QP as the engine drives it (nic.Handler): the
// node delivers the packets addressed to it and runs Process when it has
// work; Close stops its timers when the test ends.
type Handler interface {
	Deliver(p *transport.RxPacket) bool
	Process(out transport.Output) bool
	Close()
}

// Epoch is the manual clock's time when a Net is made.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// maxPasses bounds the passes of one Settle: a network still busy after
// them is livelocked (two QPs answering each other for ever).
const maxPasses = 1 << 20

// Net is a fabric on a manual clock with the nodes attached to it, run on
// the test's goroutine.
type Net struct {
	t      testing.TB
	clk    *clock.Manual
	fabric *fabric.Fabric
	nodes  []*Node
	rec    *Recorder
	pool   rxPool
}

// NewNet makes an empty network whose random impairments are seeded with
// seed. It must be called inside a testing/synctest bubble. When the test
// ends it closes every bound QP and the fabric, and fails if a timer is
// left on the clock.
func NewNet(t testing.TB, seed int64) *Net {
	t.Helper()
	if !inBubble() {
		t.Fatal("transporttest.NewNet outside a testing/synctest bubble: run the test in synctest.Test, which checks that no goroutine outlives it")
	}
	n := &Net{t: t, clk: clock.NewManual(Epoch)}
	n.fabric = fabric.New(fabric.Config{Seed: seed, Clock: n.clk})
	t.Cleanup(n.close)
	return n
}

// inBubble reports whether the caller runs in a synctest bubble, where
// synctest.Wait does not panic.
func inBubble() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	synctest.Wait()
	return true
}

func (n *Net) close() {
	for _, nd := range n.nodes {
		for _, p := range nd.ports {
			if p.h != nil {
				p.h.Close()
			}
		}
	}
	if n.rec != nil {
		n.rec.remove()
	}
	if err := n.fabric.Close(); err != nil {
		n.t.Errorf("fabric close: %v", err)
	}
	if k := n.clk.Pending(); k != 0 {
		n.t.Errorf("%d timers still armed after every QP was closed", k)
	}
}

// Fabric returns the network's fabric, for filters and impairments.
func (n *Net) Fabric() *fabric.Fabric { return n.fabric }

// Clock returns the network's manual clock, the QPs' Config.Clock.
func (n *Net) Clock() *clock.Manual { return n.clk }

// Now returns the clock's time.
func (n *Net) Now() time.Time { return n.clk.Now() }

// Since returns the time passed since t0.
func (n *Net) Since(t0 time.Time) time.Duration { return n.clk.Now().Sub(t0) }

// Recorder returns the recorder of the datagrams offered to the fabric;
// it records from the first call on (a test that looks at no packet
// pays for no copies).
func (n *Net) Recorder() *Recorder {
	if n.rec == nil {
		n.rec = newRecorder(n.fabric, n.clk)
	}
	return n.rec
}

// Node attaches a node at addr.
func (n *Net) Node(addr string) *Node {
	n.t.Helper()
	a := netip.MustParseAddr(addr)
	ep, err := n.fabric.Attach(a)
	if err != nil {
		n.t.Fatal(err)
	}
	nd := &Node{net: n, addr: a, ep: ep, nextQPN: 0x11}
	nd.out.init(ep, &nd.Counters)
	nd.rd = make([]link.Datagram, ep.BatchSize())
	nd.rx = make([]*transport.RxPacket, ep.BatchSize())
	for i := range nd.rx {
		nd.rx[i] = n.pool.get()
		nd.rd[i].Buf = nd.rx[i].Buffer()[:0]
	}
	n.nodes = append(n.nodes, nd)
	return nd
}

// Settle runs every node until the network is quiet at the current time:
// no datagram waits at an endpoint and no QP has work. Each pass reads a
// node's endpoint (a batch, as the engine's receive goroutine does),
// delivers what passes the engine's checks, then runs Process on each of
// its QPs that has packets or asked to run (Port.Wake, or Process
// reporting more), in the order the ports were made, and writes what it
// sent to the fabric at the end of the call.
func (n *Net) Settle() {
	n.t.Helper()
	for range maxPasses {
		busy := false
		for _, nd := range n.nodes {
			if nd.receive() {
				busy = true
			}
			for _, p := range nd.ports {
				if p.h == nil || !p.woken.Swap(false) {
					continue
				}
				busy = true
				nd.out.begin()
				if p.h.Process(&nd.out) {
					p.woken.Store(true)
				}
				nd.out.flush()
			}
		}
		if !busy {
			return
		}
	}
	n.t.Fatalf("the network is still busy after %d passes at %v", maxPasses, n.Since(Epoch))
}

// Run settles, then lets d of fake time pass: the clock moves from one
// timer to the next (retransmit and RNR timers, delayed datagrams), and
// the network settles after each.
func (n *Net) Run(d time.Duration) {
	n.t.Helper()
	end := n.clk.Now().Add(d)
	n.Settle()
	for {
		next, ok := n.clk.NextDeadline()
		if !ok || next.After(end) {
			break
		}
		n.clk.AdvanceToNext()
		n.Settle()
	}
	n.clk.Set(end)
	n.Settle()
}

// RunUntil settles and moves the clock from timer to timer until cond
// holds; it fails the test when limit of fake time passed, or the clock
// has no timer left, before it does. It returns the time it took.
func (n *Net) RunUntil(what string, limit time.Duration, cond func() bool) time.Duration {
	n.t.Helper()
	start := n.clk.Now()
	end := start.Add(limit)
	n.Settle()
	for !cond() {
		next, ok := n.clk.NextDeadline()
		if !ok {
			n.t.Fatalf("waiting for %s: nothing left to happen after %v", what, n.Since(start))
		}
		if next.After(end) {
			n.t.Fatalf("waiting for %s: %v passed", what, limit)
		}
		n.clk.AdvanceToNext()
		n.Settle()
	}
	return n.Since(start)
}

// Node is one NIC on the network: an endpoint, the counters its QPs
// share and the QPs bound to its ports.
type Node struct {
	net     *Net
	addr    netip.Addr
	ep      *fabric.Endpoint
	ports   []*Port
	nextQPN uint32
	out     output
	rd      []link.Datagram
	rx      []*transport.RxPacket

	// Counters are the node's protocol counters: the engine's receive
	// drops, and the QPs' own (their Config.Counters).
	Counters transport.Counters
}

// Addr returns the node's address, its QPs' Config.LocalAddr.
func (nd *Node) Addr() netip.Addr { return nd.addr }

// Endpoint returns the node's fabric endpoint.
func (nd *Node) Endpoint() *fabric.Endpoint { return nd.ep }

// Port makes a place for a QP of type typ on the node with the next QP
// number: 0x11, 0x12, ... in the order the ports are made.
func (nd *Node) Port(typ ibv.QPType) *Port {
	p := nd.PortAt(nd.nextQPN, typ)
	nd.nextQPN++
	return p
}

// PortAt makes a place for a QP of type typ with QP number qpn.
func (nd *Node) PortAt(qpn uint32, typ ibv.QPType) *Port {
	for _, p := range nd.ports {
		if p.qpn == qpn {
			nd.net.t.Fatalf("node %v: QPN %#x taken", nd.addr, qpn)
		}
	}
	p := &Port{node: nd, qpn: qpn, typ: typ}
	nd.ports = append(nd.ports, p)
	return p
}

// receive reads one batch from the endpoint and delivers it; it reports
// whether it read anything.
func (nd *Node) receive() bool {
	k, err := nd.ep.TryReadBatch(nd.rd)
	if err != nil || k == 0 {
		return false
	}
	for i := range k {
		p := nd.rx[i]
		p.Data = nd.rd[i].Buf
		if nd.deliver(p, &nd.rd[i]) {
			p = nd.net.pool.get() // the QP owns the delivered one
			nd.rx[i] = p
		}
		nd.rd[i] = link.Datagram{Buf: p.Buffer()[:0]}
	}
	return true
}

// deliver makes the checks package nic makes on a received datagram
// before any QP sees it, in its order, counting each refusal as it does
// (nic engine.go receive; rxe_recv.c rxe_rcv), and delivers the packet
// to its QP's port. It reports whether the QP took the packet.
func (nd *Node) deliver(p *transport.RxPacket, d *link.Datagram) bool {
	c := &nd.Counters
	c.RcvdPkts.Add(1)
	c.RcvdBytes.Add(uint64(len(p.Data)))
	if err := wire.Parse(p.Data, &p.Pkt); err != nil {
		c.DropMalformed.Add(1)
		return false
	}
	if !d.CheckICRC() { // rxe_icrc.c rxe_icrc_check
		c.ICRCErr.Add(1)
		return false
	}
	p.Encap = d.Encap
	if p.Encap.Dst.Unmap() != nd.addr.Unmap() { // rxe_recv.c rxe_chk_dgid (no multicast here)
		c.DropAddr.Add(1)
		return false
	}
	if !transport.PKeyMatches(p.Pkt.BTH().PKey()) { // rxe_recv.c check_keys
		c.DropPKey.Add(1)
		return false
	}
	port := nd.port(p.Pkt.DestQP())
	if port == nil || port.h == nil || !transport.ClassMatches(p.Pkt.Opcode, port.typ) {
		c.DropNoQP.Add(1)
		return false
	}
	if !port.h.Deliver(p) {
		c.DropQueueFull.Add(1)
		return false
	}
	port.woken.Store(true)
	return true
}

func (nd *Node) port(qpn uint32) *Port {
	for _, p := range nd.ports {
		if p.qpn == qpn {
			return p
		}
	}
	return nil
}

// Port is the place of one QP on a node: the QP number the node routes to
// it and the wake-ups that make the node run it.
type Port struct {
	node  *Node
	qpn   uint32
	typ   ibv.QPType
	h     Handler
	woken atomic.Bool
}

// QPN returns the port's QP number, the QP's Config.QPN.
func (p *Port) QPN() uint32 { return p.qpn }

// Bind makes h the port's QP: the node delivers its packets to it and
// runs it; it closes it when the test ends.
func (p *Port) Bind(h Handler) { p.h = h }

// Wake asks the node to run the QP at its next pass (the QP's
// Config.Wake: its timers and its posts call it). It never blocks.
func (p *Port) Wake() { p.woken.Store(true) }

// output is a node's transport.Output: the datagrams a Process call
// builds, written to the fabric when it returns or when the transport
// flushes (transport.Flusher, as UD does to learn each datagram's fate).
type output struct {
	ep   *fabric.Endpoint
	ctr  *transport.Counters
	bufs [][]byte // the datagrams' buffers, reused: the fabric copies what it is given
	dgs  []link.Datagram
	errs []syscall.Errno
}

var (
	_ transport.Output  = (*output)(nil)
	_ transport.Flusher = (*output)(nil)
)

func (o *output) init(ep *fabric.Endpoint, ctr *transport.Counters) { o.ep, o.ctr = ep, ctr }

func (o *output) begin() { o.errs = o.errs[:0] }

func (o *output) Buf() []byte {
	if len(o.bufs) == len(o.dgs) {
		o.bufs = append(o.bufs, make([]byte, transport.MaxDatagram))
	}
	return o.bufs[len(o.dgs)]
}

func (o *output) Send(n int, e *wire.Encap) {
	o.dgs = append(o.dgs, link.Datagram{Encap: *e, Buf: o.Buf()[:n]})
}

// Flush writes the queued datagrams; the fabric takes every one.
func (o *output) Flush() []syscall.Errno {
	k := len(o.dgs)
	o.flush()
	for range k {
		o.errs = append(o.errs, 0)
	}
	return o.errs
}

func (o *output) flush() {
	if len(o.dgs) == 0 {
		return
	}
	if _, err := o.ep.WriteBatch(o.dgs); err != nil {
		panic(fmt.Sprintf("transporttest: fabric write: %v", err))
	}
	// sent_pkts and the bytes, for the datagrams the fabric took, as
	// the engine's Output counts them.
	for i := range o.dgs {
		if o.dgs[i].Err == 0 {
			o.ctr.SentPkts.Add(1)
			o.ctr.SentBytes.Add(uint64(o.dgs[i].Len()))
		}
	}
	clear(o.dgs)
	o.dgs = o.dgs[:0]
}

// rxPool recycles received packets (transport.RxPacket.Release).
type rxPool struct{ free []*transport.RxPacket }

func (r *rxPool) get() *transport.RxPacket {
	if k := len(r.free); k > 0 {
		p := r.free[k-1]
		r.free = r.free[:k-1]
		return p
	}
	p := new(transport.RxPacket)
	p.SetPool(r)
	return p
}

// Put takes back a packet its QP released.
func (r *rxPool) Put(x any) {
	p := x.(*transport.RxPacket)
	p.Data = nil
	r.free = append(r.free, p)
}
