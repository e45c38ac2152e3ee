// Package nic is softnic's engine: a NIC bound to one address on a Link,
// its resource tables (QPs, memory, queues), the receive path that parses
// each datagram once and hands it to its QP, and a fixed pool of
// processors that run the QPs' transport work (STYLE.md 8).
//
// Applications use package verbs; nic is what verbs drives.
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
	"github.com/softnic/softnic/internal/transport/rc"
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
}

// Transport is a QP's transport as the engine drives it: package rc's QP
// (RC, UC and XRC) or package ud's. The engine hands it received packets
// and runs it; the transport never runs itself: its timers wake the QP
// through the transport.Waker it was made with, and an application's
// call tells the engine what to run (transport.Run, NIC.run).
type Transport interface {
	// Deliver queues a received packet for the QP, which releases it; it
	// reports false, the caller keeping the packet, when the QP's inbox
	// is full.
	Deliver(p *transport.RxPacket) bool
	// Process makes one pass over the QP's work (received packets,
	// timers, the send queue) within a budget, building packets into
	// out, and reports whether work remains.
	Process(out transport.Output) bool
	// Close stops the QP's timers and releases what it holds (destroy).
	Close()
}

// qpEntry is a QP in the NIC's table: its transport and its scheduling.
//
// A QP's transport runs on one goroutine at a time, whichever asked
// (run): the receive goroutine for the packets it just read, a posting
// goroutine for the WRs it just posted, an application polling its CQ,
// or the QP's processor for timers and for work left over. running is
// that exclusion; pending is work that arrived while another goroutine
// ran the QP, which that goroutine then runs too.
type qpEntry struct {
	qpn       uint32
	typ       ibv.QPType
	h         Transport
	proc      *processor
	scheduled atomic.Bool // queued on proc
	running   atomic.Bool // a goroutine is in h.Process (or the QP is closed)
	pending   atomic.Bool // work for the QP since its runner's last pass began
}

// Wake schedules the QP on its processor unless it already is (a
// coalesced wake-up per QP, STYLE.md 8). It is the QP's transport.Waker.
func (e *qpEntry) Wake() {
	if e.scheduled.CompareAndSwap(false, true) {
		e.proc.push(e)
	}
}

// run makes one pass over the QP's transport on the calling goroutine,
// with out, unless another goroutine is running it: that one then makes
// another pass (pending), so no work is lost. The QP stays taken until
// out is flushed (txBatch.flush releases it): a second goroutine could
// otherwise build the QP's next packets and write them before these,
// and a peer would see its PSNs out of order. The caller finishes out
// (txBatch.finish), which makes the further passes the QP needs.
//
// The handshake: a caller sets pending, then tries to take running; a
// runner clears pending before its pass and, after releasing running,
// looks at pending again. Either the caller takes running itself or the
// runner sees its pending.
func (e *qpEntry) run(out *txBatch) {
	e.pending.Store(true)
	if !e.running.CompareAndSwap(false, true) {
		return
	}
	e.pending.Store(false)
	out.begin()
	more := e.h.Process(out)
	out.held = append(out.held, heldQP{e, more})
}

// close waits for a pass in progress to end and closes the transport;
// the QP is never run again (running stays set).
func (e *qpEntry) close() {
	for !e.running.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
	e.h.Close()
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

	procs  []*processor
	txs    txPool      // outputs of the goroutines that run QPs inline
	poll   link.Poller // the link, when it can be read without waiting
	progMu sync.Mutex  // one Progress at a time
	// rxTurn is the Seq of the next datagram to deliver (awaitTurn).
	rxTurn atomic.Uint64
	prog   *reader // guarded by progMu
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
		p := newProcessor(cfg.Link, &n.ctr, n.noteActivity)
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
	n.postAsync(ibv.AsyncEvent{Type: ibv.EventPortActive})
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

// Name returns the device name.
func (n *NIC) Name() string { return n.cfg.Name }

// Mem returns the NIC's memory table.
func (n *NIC) Mem() *mem.Table { return n.mem }

// Counters returns the NIC's counters.
func (n *NIC) Counters() *transport.Counters { return &n.ctr }

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
		e.close()
	}
	n.qps = nil
	n.qpMu.Unlock()
	return err
}

// RegisterQP allocates a QPN and registers a transport built by mk for it.
// mk receives the QPN and the Waker the transport's timers wake the QP
// with.
func (n *NIC) RegisterQP(typ ibv.QPType, mk func(qpn uint32, w transport.Waker) (Transport, error)) (uint32, error) {
	e, err := n.registerQP(typ, 0, mk)
	if err != nil {
		return 0, err
	}
	return e.qpn, nil
}

// GSIQPN is the QP number of the General Services QP, QP1.
const GSIQPN = 1

// registerQP registers a transport built by mk under QPN fixed, or under
// the next free QPN from firstQPN up when fixed is 0, and returns its
// entry in the table. Fixed is GSIQPN for QP1, the General Services QP:
// errno.Busy while the NIC has one. (The kernel makes one per port,
// ib_mad's; rxe_qp.c rxe_qp_chk_init refuses a second one, "GSI QP
// exists for port", with EINVAL: softnic says EBUSY, the number being in
// use.) UnregisterQP(GSIQPN) frees the number again.
func (n *NIC) registerQP(typ ibv.QPType, fixed uint32, mk func(qpn uint32, w transport.Waker) (Transport, error)) (*qpEntry, error) {
	if n.closed.Load() {
		return nil, ErrClosed
	}
	n.qpMu.Lock()
	defer n.qpMu.Unlock()
	qpn := fixed
	if fixed != 0 {
		if _, used := n.qps[qpn]; used {
			return nil, fmt.Errorf("%w: QP %#x exists", errno.Busy, qpn)
		}
	} else {
		qpn = n.nextQPN
		for i := 0; ; i++ {
			if i > wire.QPNMask {
				return nil, fmt.Errorf("%w: no free QPN", errno.NoMemory)
			}
			if _, used := n.qps[qpn]; !used && qpn > 1 && qpn != wire.MulticastQPN {
				break
			}
			qpn = (qpn + 1) & wire.QPNMask
		}
		n.nextQPN = (qpn + 1) & wire.QPNMask
	}
	e := &qpEntry{qpn: qpn, typ: typ}
	e.proc = n.procs[int(maphash.Comparable(n.seed, qpn)%uint64(len(n.procs)))]
	h, err := mk(qpn, e)
	if err != nil {
		return nil, err
	}
	e.h = h
	n.qps[qpn] = e
	return e, nil
}

// UnregisterQP removes a QP; its transport is closed.
func (n *NIC) UnregisterQP(qpn uint32) {
	n.qpMu.Lock()
	e := n.qps[qpn]
	delete(n.qps, qpn)
	n.qpMu.Unlock()
	if e != nil {
		n.flushDeferred() // a poll's deferred output may hold the QP (reader.deferred)
		e.close()
	}
}

func (n *NIC) lookup(qpn uint32) *qpEntry {
	n.qpMu.RLock()
	e := n.qps[qpn]
	n.qpMu.RUnlock()
	return e
}

// rxLoop is the NIC's receive goroutine: it reads datagrams in batches
// and runs each to completion (reader.handle).
func (n *NIC) rxLoop() {
	r := n.newReader()
	r.hold = true
	defer r.release()
	for {
		if !n.awaitLease() {
			return
		}
		if _, ok := r.read(n.cfg.Link.ReadBatch); !ok {
			return
		}
	}
}

// receive checks one datagram and delivers it, noting its QP in r; it
// reports whether a QP took the packet. Every refusal is counted and dropped, never returned
// (STYLE.md 15).
func (n *NIC) receive(r *reader, p *transport.RxPacket, d *link.Datagram) bool {
	c := &n.ctr
	c.RcvdPkts.Add(1)
	c.RcvdBytes.Add(uint64(len(p.Data)))
	if err := wire.Parse(p.Data, &p.Pkt); err != nil {
		c.DropMalformed.Add(1)
		return false
	}
	// rxe_icrc.c rxe_icrc_check, as far as the link could see the header
	// (link.ICRCStatus): a guessed IPv4 identification is solved for here,
	// in the per-datagram loop, and corrected in d.Encap.
	if d.ICRC == link.ICRCUnverifiable {
		c.ICRCUnverified.Add(1)
	} else if !d.CheckICRC() {
		c.ICRCErr.Add(1)
		return false
	}
	p.Encap = d.Encap
	// rxe_recv.c rxe_chk_dgid: the destination must be our GID, or a
	// multicast group (receiveMcast: only the groups our QPs joined).
	if d := p.Encap.Dst.Unmap(); d != n.addr.Unmap() {
		if d.IsMulticast() {
			return n.receiveMcast(r, p, d)
		}
		c.DropAddr.Add(1)
		return false
	}
	// rxe_recv.c check_keys: P_Key must match the default full-member key
	// in its low 15 bits (pkey_match with 0xffff).
	if pk := p.Pkt.BTH().PKey(); pk&0x7FFF != wire.DefaultPKey&0x7FFF {
		c.DropPKey.Add(1)
		return false
	}
	qpn := p.Pkt.DestQP()
	e := n.lookup(qpn)
	if e == nil || !classMatches(p.Pkt.Opcode, e.typ) {
		c.DropNoQP.Add(1)
		return false
	}
	// Note it first: once delivered, the packet is the QP's, which
	// another goroutine may be processing already.
	writes, answer := writesMemory(&p.Pkt), answerable(&p.Pkt)
	if !e.h.Deliver(p) {
		c.DropQueueFull.Add(1)
		return false
	}
	r.touch(e, writes, answer)
	return true
}

// classMatches reports whether opcode's transport class fits the QP type
// (rxe_recv.c check_type_state); for the two XRC types, also whether its
// direction does.
func classMatches(op wire.Opcode, t ibv.QPType) bool {
	switch t {
	case ibv.QPTypeRC:
		return op.Class() == wire.ClassRC
	case ibv.QPTypeUC:
		return op.Class() == wire.ClassUC
	case ibv.QPTypeUD:
		return op.Class() == wire.ClassUD
	case ibv.QPTypeXRCSend:
		// The initiator has no receive side: XRC responses only.
		return op.Class() == wire.ClassXRC && op.Is(wire.MaskResponse)
	case ibv.QPTypeXRCRecv:
		// The target sends no requests: XRC requests only.
		return op.Class() == wire.ClassXRC && op.Is(wire.MaskRequest)
	}
	return false
}

// postAsync queues an asynchronous event.
func (n *NIC) postAsync(ev ibv.AsyncEvent) {
	n.asyncMu.Lock()
	if len(n.async) < 4096 {
		n.async = append(n.async, ev)
	}
	n.asyncMu.Unlock()
	n.signalAsync()
}

// PostAsync queues an asynchronous event from another part of the engine.
func (n *NIC) PostAsync(ev ibv.AsyncEvent) { n.postAsync(ev) }

// AsyncEvents returns and clears the queued asynchronous events.
func (n *NIC) AsyncEvents() []ibv.AsyncEvent {
	n.asyncMu.Lock()
	defer n.asyncMu.Unlock()
	evs := n.async
	n.async = nil
	return evs
}

// AsyncReady is signalled when events are queued.
func (n *NIC) AsyncReady() <-chan struct{} { return n.asyncC }

// processor is one of the NIC's fixed pool of goroutines running QP work.
type processor struct {
	mu     sync.Mutex
	cond   sync.Cond
	queue  []*qpEntry // guarded by mu
	spare  []*qpEntry
	closed bool // guarded by mu
	out    txBatch
	// onActivity wakes a WaitActivity after a pass: leftovers of a
	// receive batch may have been handled here.
	onActivity func()
}

func newProcessor(lk link.Link, ctr *transport.Counters, onActivity func()) *processor {
	p := &processor{onActivity: onActivity}
	p.cond.L = &p.mu
	p.out.init(lk, ctr)
	return p
}

func (p *processor) push(e *qpEntry) {
	p.mu.Lock()
	p.queue = append(p.queue, e)
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *processor) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *processor) run() {
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closed {
			p.cond.Wait()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		batch := p.queue
		p.queue = p.spare[:0]
		p.mu.Unlock()
		for _, e := range batch {
			// Clear before processing: a wake during Process re-queues.
			e.scheduled.Store(false)
			e.run(&p.out)
		}
		p.out.finish()
		p.onActivity()
		clear(batch)
		p.spare = batch
	}
}

// txBatch is a processor's output: datagrams built in place in
// preallocated buffers and written to the link in batches.
//
// Send errors: the link marks each datagram it could not send (Datagram.
// Err); flush counts each as send_err, as rxe_net.c rxe_xmit_packet
// counts RXE_CNT_SEND_ERR for every packet rxe_send fails. RC and UC need
// nothing more (an RC packet lost here is recovered by the retransmit
// timer like one lost on the wire). For UD, which has no retransmission,
// txBatch is a transport.Flusher: the UD transport flushes after each
// pass and gets the errno of each datagram it queued.
type txBatch struct {
	link link.Link
	ctr  *transport.Counters
	dgs  []link.Datagram
	bufs [][]byte
	n    int
	// split: the link takes datagrams with a Payload (SendSplit).
	split bool
	// mark is the first datagram in dgs that the current Process call
	// queued; errs holds the results of that call's datagrams already
	// flushed.
	mark int
	errs []syscall.Errno
	// held are the QPs whose packets are queued here: each stays taken
	// (qpEntry.running) until they are written. again are the QPs
	// released with work pending, for finish.
	held  []heldQP
	again []*qpEntry
	spare []*qpEntry // again's other buffer
}

// heldQP is a QP a pass was made over; more is what its Process said.
type heldQP struct {
	e    *qpEntry
	more bool
}

// maxInlinePasses bounds the passes finish makes over a QP; what remains
// after them goes to the QP's processor, so that a post or a receive
// batch does a bounded amount of work (STYLE.md 8).
const maxInlinePasses = 4

var (
	_ transport.Output      = (*txBatch)(nil)
	_ transport.Flusher     = (*txBatch)(nil)
	_ transport.SplitOutput = (*txBatch)(nil)
)

func (t *txBatch) init(lk link.Link, ctr *transport.Counters) {
	t.link = lk
	t.ctr = ctr
	bs := max(lk.BatchSize(), 1)
	t.dgs = make([]link.Datagram, bs)
	t.bufs = make([][]byte, bs)
	for i := range t.bufs {
		t.bufs[i] = make([]byte, link.MaxDatagram)
	}
	t.errs = make([]syscall.Errno, 0, 2*bs)
	t.split = link.CanSendSplit(lk)
}

// begin starts a QP's Process call: Flush reports from here.
func (t *txBatch) begin() {
	t.mark = t.n
	t.errs = t.errs[:0]
}

// Buf returns the buffer for the next datagram, flushing a full batch.
func (t *txBatch) Buf() []byte {
	if t.n == len(t.dgs) {
		t.flush()
	}
	return t.bufs[t.n]
}

// Send queues Buf()[:n].
func (t *txBatch) Send(n int, e *wire.Encap) { t.SendSplit(n, 0, nil, e) }

// SendsSplit reports whether the link takes a payload where it lies
// (link.CanSendSplit).
func (t *txBatch) SendsSplit() bool { return t.split }

// SendSplit queues Buf()[:split], payload, Buf()[split:n]; with a nil
// payload, Buf()[:n] (Send).
func (t *txBatch) SendSplit(n, split int, payload []byte, e *wire.Encap) {
	d := &t.dgs[t.n]
	d.Encap = *e
	d.Buf = t.bufs[t.n][:n]
	d.Payload = payload
	d.Split = split
	d.Err = 0
	t.n++
}

// Flush writes the queued datagrams and returns the errno of each one
// the current Process call queued, in order (0: sent).
func (t *txBatch) Flush() []syscall.Errno {
	t.flush()
	return t.errs
}

// finish flushes, then makes the passes the QPs released with pending
// work need, flushing after each, up to maxInlinePasses; a QP whose
// transport said more, or still pending after them, goes to its
// processor.
func (t *txBatch) finish() {
	for pass := 1; ; pass++ {
		t.flush()
		if len(t.again) == 0 {
			return
		}
		// A pass below may flush (a full batch) and release QPs with
		// pending work of their own: they go to the fresh list, for the
		// next round.
		again := t.again
		t.again = t.spare[:0]
		for _, e := range again {
			if pass >= maxInlinePasses {
				e.Wake()
			} else {
				e.run(t)
			}
		}
		clear(again)
		t.spare = again[:0]
	}
}

// flush writes the queued datagrams, then releases the QPs that built
// them.
func (t *txBatch) flush() {
	t.write()
	for i, h := range t.held {
		h.e.running.Store(false)
		switch {
		case h.more:
			h.e.Wake()
		case h.e.pending.Load():
			t.again = append(t.again, h.e)
		}
		t.held[i] = heldQP{}
	}
	t.held = t.held[:0]
}

// gsoPair reports whether a, a datagram queued after b, can go out
// before it so that the two leave in one UDP GSO send: a is longer (a
// link joins a run of equal datagrams and a shorter last one, not a
// shorter first one), they go to one destination, and their order does
// not matter to the receiver: one is a response (an ACK, a read
// response) and the other a request, or they are for two QPs. That is a
// round trip's turn: the ACK of the peer's request and the
// application's answer (reader.holdForAnswer, the poll lease's
// deferral). On loopback the two then cross the kernel as one buffer
// and the peer's GRO socket wakes once for both: write_lat 8 B's
// typical went from 10.9 to 6.8 µs on the bench machine. Between the
// bench's TCG guests, whose virtio NIC hands the peer two datagrams all
// the same, it made no measurable difference.
func gsoPair(a, b *link.Datagram) bool {
	if a.Len() <= b.Len() || len(a.Buf) < wire.BTHLen || len(b.Buf) < wire.BTHLen {
		return false
	}
	ea, eb := &a.Encap, &b.Encap
	if ea.Dst != eb.Dst || ea.DstPort != eb.DstPort || ea.TrafficClass != eb.TrafficClass || ea.HopLimit != eb.HopLimit {
		return false
	}
	ha, hb := wire.BTH(a.Buf), wire.BTH(b.Buf)
	return ha.Opcode().Is(wire.MaskResponse) != hb.Opcode().Is(wire.MaskResponse) || ha.DestQP() != hb.DestQP()
}

// anyPending reports whether a QP held here has work pending: a post or
// a wake-up that found it taken (qpEntry.run).
func (t *txBatch) anyPending() bool {
	for _, h := range t.held {
		if h.e.pending.Load() {
			return true
		}
	}
	return false
}

// requestsInFlight is a handler whose requester can say how many of its
// requests await the peer's response (rc.QP.RequestsInFlight).
type requestsInFlight interface{ RequestsInFlight() int }

var _ requestsInFlight = (*rc.QP)(nil)

// awaitsOwnRequest reports whether a QP this batch holds has exactly one
// request of its own in flight: the mark of a ping-pong or an RPC whose
// application may be waiting for that request's completion before it
// answers what the batch brought (reader.holdForAnswer). A stream has
// more than one in flight, or none.
func (t *txBatch) awaitsOwnRequest() bool {
	for _, h := range t.held {
		if q, ok := h.e.h.(requestsInFlight); ok && q.RequestsInFlight() == 1 {
			return true
		}
	}
	return false
}

// repass makes another pass, into this batch, over each held QP with
// work pending, before the batch is written (reader.holdForAnswer). A
// QP stays taken throughout: it leaves held for its pass (a pass that
// fills the batch flushes it and releases what is held) and goes back
// with what the new pass said.
func (t *txBatch) repass() {
	var again [maxInlineQPs]*qpEntry
	k := 0
	for i := 0; i < len(t.held); {
		if e := t.held[i].e; e.pending.Load() && k < len(again) {
			again[k] = e
			k++
			t.held = append(t.held[:i], t.held[i+1:]...)
			continue
		}
		i++
	}
	for _, e := range again[:k] {
		e.pending.Store(false)
		t.begin()
		more := e.h.Process(t)
		t.held = append(t.held, heldQP{e, more})
	}
}

func (t *txBatch) write() {
	if t.n == 0 {
		return
	}
	swap := t.n == 2 && gsoPair(&t.dgs[1], &t.dgs[0])
	if swap {
		t.dgs[0], t.dgs[1] = t.dgs[1], t.dgs[0]
	}
	t.link.WriteBatch(t.dgs[:t.n])
	if swap {
		t.dgs[0], t.dgs[1] = t.dgs[1], t.dgs[0]
	}
	for i := range t.n {
		t.dgs[i].Payload = nil // the application's memory: not kept past the write
		e := t.dgs[i].Err
		if e != 0 {
			t.ctr.SendErr.Add(1)
		}
		if i >= t.mark {
			t.errs = append(t.errs, e)
		}
	}
	t.n, t.mark = 0, 0
}
