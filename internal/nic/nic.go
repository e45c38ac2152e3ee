// Package nic is softnic's engine: a NIC bound to one address on a Link,
// its resource tables (QPs, memory, queues), the receive path that parses
// each datagram once and hands it to its QP, and a fixed pool of
// processors that run the QPs' transport work (STYLE.md 8).
//
// Applications use package verbs; nic is what verbs drives, and the one
// engine package it imports (door.go names what verbs sees of the
// packages below). The files, by job:
//
//   - nic.go: the NIC's life: its configuration, New, which starts the
//     processors and the receive goroutine, and Close.
//   - qptable.go: the QP table: each QP's entry, its transport and its
//     scheduling, registration and lookup.
//   - receive.go: the receive goroutine and the checks a datagram passes
//     before its QP gets it (rxe_recv.c).
//   - run.go: run to completion: the readers that handle a batch of
//     datagrams on the goroutine that read it, a post's pass on the
//     posting goroutine, the application's polls (Progress).
//   - lease.go: the poll lease, which steps the receive goroutine off the
//     link while the application busy-polls.
//   - processor.go: the fixed pool of processors that run what the
//     readers and posts leave.
//   - txbatch.go: the send batch a pass builds its packets into, written
//     to the link in batches.
//   - async.go: asynchronous events.
//   - port.go: the port, which follows the link's state.
//   - peerbudget.go: the budgets of what the RC requesters have in
//     flight toward each peer.
//   - qp.go, ud.go, srq.go, sharedrq.go, wq.go, xrc.go, ah.go, mcast.go,
//     drain.go, mtu.go, link.go, timerslot.go: the objects verbs makes
//     and the device's attributes.
package nic

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// ErrClosed refuses new objects, posts and modifies on a closed NIC:
// ENODEV. The NIC's other errors are errno's.
var ErrClosed = errno.New("device closed", syscall.ENODEV)

// Config configures a NIC.
type Config struct {
	// Link carries the NIC's datagrams; its LocalAddr is the NIC's address
	// and GID.
	Link link.Link
	// Clock drives timers; nil means the wall clock.
	Clock clock.Clock
	// Processors is the number of goroutines running QP work; 0 means
	// GOMAXPROCS (at most 4).
	Processors int
	// PeerPort is the UDP port peers listen on (wire.UDPPort by default;
	// tests on one host may use others).
	PeerPort uint16
	// Name names the device ("softnic0" by default).
	Name string
	// PortMTU fixes the port's active MTU (ibv_port_attr.active_mtu), the
	// largest UD message. 0, the default, makes it follow the link: the
	// MTU of the interface holding the NIC's address, as rxe derives it
	// from its netdev (ActiveMTU: 1500 gives 1024), re-read at every use
	// so that a change of the interface's MTU applies (rxe_net.c:
	// NETDEV_CHANGEMTU); DefaultPortMTU (4096) when the link cannot tell.
	PortMTU ibv.MTU
	// BusyPoll says the application busy-polls (verbs.Config.BusyPoll):
	// while it holds the poll lease, the receive goroutine steps off the
	// link at its next wake-up that finds the socket empty
	// (link.SetReadYield), woken for it if need be (link.WakeRead), so
	// that every poll may defer its ACKs for the answer. Without it the
	// receive goroutine leaves the link only between two reads of its
	// own (see pollLease).
	BusyPoll bool
	// CC turns congestion control on (DCQCN, package cc) with these
	// parameters; nil, the default, leaves it off. With it the NIC marks
	// everything it sends ECN-capable (ECT(0); the CNPs it sends are
	// not), each RC, UC, XRC and UD QP paces its requests to the rate its
	// CNPs set (cc.RP), and a CE-marked packet to one of its QPs is
	// answered with a CNP to the QP that sent it, at most one per
	// np_min_time_between_cnps per QP (receive.go: notifyCongestion).
	//
	// Who gets CNPs: only a peer whose packet arrived CE-marked, which
	// it sent ECN-capable. A softnic NIC with CC on marks its packets so;
	// rxe marks none (its TOS is the address vector's traffic class,
	// rxe_net.c prepare4, 0 unless the application asks) and has no CNP
	// opcode, so a CNP sent to it would reach its completer: a peer that
	// did not ask for ECN never gets one. A CNP that comes to the NIC
	// with CC off, or to a QP without a reaction point, is counted
	// (rp_cnp_ignored) and dropped, never handed to a transport.
	CC *ibv.CCParams
	// PeerBudget is the bytes the NIC's RC and XRC_SEND QPs may have in
	// flight toward one peer address together, each PSN charged its
	// path MTU and rc.PSNCost (rc.PeerBudget): what the peer's socket
	// buffer must hold whatever the number of QPs. 0 means
	// DefaultPeerBudget; a negative value, no budget (each QP bounded by
	// its own window alone, as rxe).
	PeerBudget int
}

// NIC is one software RDMA NIC.
type NIC struct {
	cfg     Config
	release func() // gives the link back (claimLink)
	addr    netip.Addr
	clock   clock.Clock
	mem     *mem.Table
	ctr     transport.Counters

	qpMu    sync.RWMutex
	qps     map[uint32]*qpEntry // guarded by qpMu
	nextQPN uint32              // guarded by qpMu

	srqs  atomic.Int32  // SRQs in existence
	ahs   atomic.Int32  // address handles in existence
	wqNum atomic.Uint32 // the last WQ number handed out

	xrc xrcTables // XRC SRQs by number, XRC_RECV QPs by QPN

	mcast mcastTable // multicast groups and their QPs

	peers peerBudgets // what the RC requesters may have in flight toward each peer

	procs  []*processor
	txs    txPool      // outputs of the goroutines that run QPs inline
	poll   link.Poller // the link, when it can be read without waiting
	progMu sync.Mutex  // one Progress at a time
	// rxTurn is the Seq of the next datagram to deliver (awaitTurn).
	rxTurn atomic.Uint64
	prog   *reader // guarded by progMu
	// later are the QPs whose next pass waits for the application's
	// next poll instead of their processors (deferRun); guarded by
	// progMu.
	later []*qpEntry
	// holding: the receive goroutine holds a batch's ACKs for the
	// application's answer (holdForAnswer) until they are written; a
	// Progress meanwhile does not read the link.
	holding atomic.Bool
	act     activity // WaitActivity's wake-up
	lease   *pollLease
	seed    maphash.Seed
	rxPool  sync.Pool
	wg      sync.WaitGroup // the receive goroutine
	procWG  sync.WaitGroup // the processors
	closed  atomic.Bool
	port    port // the port's state (port.go)
	// linkGone: the receive goroutine found the link closed under the
	// NIC (linkClosed).
	linkGone atomic.Bool

	asyncMu sync.Mutex
	async   []ibv.AsyncEvent // guarded by asyncMu
	asyncC  chan struct{}
	done    chan struct{} // closed by Close
}

// New starts a NIC on cfg.Link.
func New(cfg Config) (*NIC, error) {
	if cfg.Link == nil {
		return nil, fmt.Errorf("%w: no link", errno.Invalid)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Processors <= 0 {
		cfg.Processors = min(runtime.GOMAXPROCS(0), 4)
	}
	if cfg.PeerPort == 0 {
		cfg.PeerPort = wire.UDPPort
	}
	if cfg.Name == "" {
		cfg.Name = "softnic0"
	}
	if cfg.PortMTU != 0 && cfg.PortMTU.Bytes() == 0 {
		return nil, fmt.Errorf("%w: port MTU enum %d", errno.Invalid, cfg.PortMTU)
	}
	if cfg.CC != nil {
		p := *cfg.CC // the NIC's own copy: the QPs' reaction points read it
		if err := p.Check(); err != nil {
			return nil, fmt.Errorf("%w: congestion control: %v", errno.Invalid, err)
		}
		cfg.CC = &p
	}
	release, err := claimLink(cfg.Link, cfg.Name)
	if err != nil {
		return nil, err
	}
	n := &NIC{
		release: release,
		cfg:     cfg,
		addr:    cfg.Link.LocalAddr(),
		clock:   cfg.Clock,
		mem:     mem.NewTable(mem.Limits{}),
		qps:     make(map[uint32]*qpEntry),
		nextQPN: firstQPN,
		seed:    maphash.MakeSeed(),
		asyncC:  make(chan struct{}, 1),
		act:     activity{c: make(chan struct{}, 1)},
		lease:   newPollLease(link.PreferBusyPoll(cfg.Link)),
		done:    make(chan struct{}),
	}
	n.peers.init(cfg.PeerBudget)
	if link.CanPoll(cfg.Link) {
		n.poll = cfg.Link.(link.Poller)
	}
	if cfg.BusyPoll && n.lease.on {
		n.lease.stepOff = link.SetReadYield(cfg.Link, n.readYield)
	}
	// The turn starts at the link's next datagram: with the turn unset
	// (0, a link that cannot tell) the first batches of the receive
	// goroutine and of a poll were both delivered at once, and between
	// the two-host bed's namespaces, on two busy CPUs, uc_pingpong's
	// first 1 MiB SEND came to its QP out of order and was dropped (PSN
	// gaps of 15-64; 3 runs in 30 with both CPUs kept busy).
	if s, ok := link.NextSeq(cfg.Link); ok {
		n.rxTurn.Store(s)
	}
	// Received segments of a GRO-coalesced buffer stay in the link's
	// buffer (Datagram.Loan): the responder copies a WRITE's payload
	// from there into the MR, the one copy after the kernel's.
	link.Lend(cfg.Link)
	n.rxPool.New = func() any {
		p := new(transport.RxPacket)
		p.SetPool(&n.rxPool)
		return p
	}
	for range cfg.Processors {
		p := newProcessor(cfg.Link, &n.ctr, cfg.CC != nil, n.noteActivity)
		n.procs = append(n.procs, p)
		n.procWG.Add(1)
		go func() {
			defer n.procWG.Done()
			p.run()
		}()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.rxLoop()
	}()
	n.startPort()
	return n, nil
}

// firstQPN is the first QPN handed out: 0 and 1 are the special QPs and
// rxe starts its pool at 16 (RXE_MIN_QP_INDEX).
const firstQPN = 0x11

// Addr returns the NIC's IP address.
func (n *NIC) Addr() netip.Addr { return n.addr }

// GID returns the NIC's RoCEv2 GID: the IPv6 address, or the IPv4-mapped
// address for IPv4 (rxe-interop-facts.md §2.2).
func (n *NIC) GID() [16]byte {
	return netip.AddrFrom16(n.addr.As16()).As16()
}

// Link returns the link the NIC was made on (Config.Link).
func (n *NIC) Link() link.Link { return n.cfg.Link }

// Name returns the device name.
func (n *NIC) Name() string { return n.cfg.Name }

// Mem returns the NIC's memory table.
func (n *NIC) Mem() *mem.Table { return n.mem }

// Counters returns the NIC's counters.
func (n *NIC) Counters() *transport.Counters { return &n.ctr }

// CC returns the NIC's congestion control parameters, nil when it is
// off (Config.CC).
func (n *NIC) CC() *ibv.CCParams { return n.cfg.CC }

// Clock returns the NIC's clock.
func (n *NIC) Clock() clock.Clock { return n.clock }

// Closed reports whether Close was called: the NIC then refuses new
// objects, posts and modifies with ErrClosed.
func (n *NIC) Closed() bool { return n.closed.Load() }

// Close stops the NIC: it stops the processors, which finish the pass
// they are in and flush what it built, then closes the link and waits for
// every engine goroutine to exit. Stopping the processors first matters:
// a UC or UD send completes as soon as its packets are built, so an
// application may close the device right after its last completion, and
// those packets must still reach the wire. QPs still registered are
// closed.
func (n *NIC) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	close(n.done)
	if n.port.stop != nil {
		n.port.stop()
	}
	for _, p := range n.procs {
		p.close()
	}
	n.procWG.Wait()
	// A poll's deferred ACKs reach the wire, as the processors' packets
	// do; under progMu, in case the receive goroutine is writing them.
	n.progMu.Lock()
	n.flushDeferredLocked()
	n.progMu.Unlock()
	err := n.cfg.Link.Close()
	n.wg.Wait()
	n.progMu.Lock()
	if n.prog != nil {
		n.prog.release()
		n.prog = nil
	}
	n.progMu.Unlock()
	n.release()
	n.qpMu.Lock()
	for _, e := range n.qps {
		e.close(nil)
	}
	n.qps = nil
	n.qpMu.Unlock()
	return err
}
