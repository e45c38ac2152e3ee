package fabric

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// Defaults for the zero fields of a Config.
const (
	DefaultQueueLen  = 4096
	DefaultBatchSize = 64
)

// Errors returned by Attach.
var (
	// ErrAddrInUse is returned by Attach when the address already has an
	// endpoint (IPv4 and IPv4-mapped IPv6 forms of an address are the same).
	ErrAddrInUse = errors.New("fabric: address already attached")
	// ErrClosed is returned by Attach after Fabric.Close.
	ErrClosed = errors.New("fabric: closed")
)

// Config configures a Fabric. The zero value is usable.
type Config struct {
	// Seed seeds every random impairment decision.
	Seed int64
	// Clock times delayed packets and pcap records; nil means clock.Real.
	Clock clock.Clock
	// QueueLen is each endpoint's receive queue length in datagrams;
	// datagrams arriving at a full queue are dropped and counted. Zero
	// means DefaultQueueLen.
	QueueLen int
	// BatchSize is what endpoints report from BatchSize; zero means
	// DefaultBatchSize.
	BatchSize int
	// Pcap, when set, receives a pcap capture (LINKTYPE_RAW: raw IPv4 and
	// IPv6 packets) of every datagram offered to the fabric, as sent, with
	// the IP and UDP headers its Encap describes; only datagrams with no
	// possible IP header (destination unset, or of the other IP family than
	// the source) and oversize ones are left out. Writes are buffered: call
	// Fabric.Flush or Fabric.Close before reading the capture. The fabric
	// does not close it.
	Pcap io.Writer
}

// Fabric is an in-memory network connecting Endpoints. It is safe for
// concurrent use.
type Fabric struct {
	clk       clock.Clock
	seed      uint64
	queueLen  int
	batchSize int

	mu  sync.RWMutex
	eps map[netip.Addr]*Endpoint // by canonical address; guarded by mu
	// groups are the members of each multicast group (Endpoint.JoinGroup),
	// by canonical group address; each slice is replaced, never changed,
	// so a sender may range over one after releasing mu.
	groups map[netip.Addr][]*Endpoint // guarded by mu
	paths  map[pathKey]*path          // guarded by mu
	hosts  map[netip.Addr]bool        // AddHost's addresses, canonical; guarded by mu
	closed bool                       // guarded by mu

	imp    atomic.Pointer[impairment] // fabric-wide; nil when none
	hooks  atomic.Pointer[hooks]      // copy on write
	hookMu sync.Mutex                 // serializes hook updates
	hookID uint64                     // guarded by hookMu

	pool  framePool
	sched scheduler
	pcap  *pcapWriter // nil without Config.Pcap
	stats counters
}

// New returns a Fabric configured by cfg.
func New(cfg Config) *Fabric {
	f := &Fabric{
		clk:       cfg.Clock,
		seed:      uint64(cfg.Seed),
		queueLen:  cfg.QueueLen,
		batchSize: cfg.BatchSize,
		eps:       make(map[netip.Addr]*Endpoint),
		paths:     make(map[pathKey]*path),
	}
	if f.clk == nil {
		f.clk = clock.New()
	}
	if f.queueLen <= 0 {
		f.queueLen = DefaultQueueLen
	}
	if f.batchSize <= 0 {
		f.batchSize = DefaultBatchSize
	}
	f.pool.max = max(2*f.queueLen, 1024)
	f.sched.init(f)
	f.hooks.Store(&hooks{})
	if cfg.Pcap != nil {
		f.pcap = newPcapWriter(cfg.Pcap)
	}
	return f
}

// canon returns the form of a that routing compares: IPv4-mapped
// addresses unmapped, zone dropped.
func canon(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// Attach adds an endpoint at addr. It fails with ErrAddrInUse if addr
// already has one and with ErrClosed after Close.
func (f *Fabric) Attach(addr netip.Addr) (*Endpoint, error) {
	if !addr.IsValid() {
		return nil, fmt.Errorf("fabric: attach: invalid address")
	}
	key := canon(addr)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if _, ok := f.eps[key]; ok {
		return nil, fmt.Errorf("%w: %v", ErrAddrInUse, addr)
	}
	e := &Endpoint{f: f, addr: addr, key: key, q: make([]*frame, f.queueLen)}
	e.mtu.Store(DefaultMTU)
	e.state.Store(&link.LinkState{Up: true, Carrier: true})
	e.cond.L = &e.mu
	f.eps[key] = e
	return e, nil
}

// detach removes e from the address map, if it is still there, and from
// every multicast group it joined.
func (f *Fabric) detach(e *Endpoint) {
	f.mu.Lock()
	if f.eps[e.key] == e {
		delete(f.eps, e.key)
	}
	for g, ms := range f.groups {
		if slices.Contains(ms, e) {
			f.setGroup(g, slices.DeleteFunc(slices.Clone(ms), func(m *Endpoint) bool { return m == e }))
		}
	}
	f.mu.Unlock()
}

// setGroup replaces group g's members with ms (nil or empty: none); f.mu
// is held.
func (f *Fabric) setGroup(g netip.Addr, ms []*Endpoint) {
	if len(ms) == 0 {
		delete(f.groups, g)
		return
	}
	if f.groups == nil {
		f.groups = make(map[netip.Addr][]*Endpoint)
	}
	f.groups[g] = ms
}

// members returns the endpoints that joined group g (canonical); the
// slice is never modified.
func (f *Fabric) members(g netip.Addr) []*Endpoint {
	f.mu.RLock()
	ms := f.groups[g]
	f.mu.RUnlock()
	return ms
}

// endpoint returns the endpoint at canonical address a, or nil.
func (f *Fabric) endpoint(a netip.Addr) *Endpoint {
	f.mu.RLock()
	e := f.eps[a]
	f.mu.RUnlock()
	return e
}

// AddHost makes addr a host without a RoCE NIC: it has no endpoint, and a
// datagram sent to it is answered as a kernel answers a UDP datagram to a
// port no socket is bound to, with an ICMP port unreachable, which the
// sender's endpoint reports to its watchers (Endpoint.WatchSendErrors:
// ECONNREFUSED, from addr) when it next reads. A datagram to an address
// that is neither an endpoint nor a host is lost silently (DropNoRoute),
// as one to a host that does not exist. Attaching an endpoint at addr
// later makes it an endpoint again.
func (f *Fabric) AddHost(addr netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hosts == nil {
		f.hosts = make(map[netip.Addr]bool)
	}
	f.hosts[canon(addr)] = true
}

// isHost reports whether canonical address a was added by AddHost.
func (f *Fabric) isHost(a netip.Addr) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.hosts[a]
}

// route returns the path from src to dst (creating it) and the endpoint at
// dst (nil if none). Both addresses are canonical.
func (f *Fabric) route(src, dst netip.Addr) (*path, *Endpoint) {
	k := pathKey{src, dst}
	f.mu.RLock()
	p, e := f.paths[k], f.eps[dst]
	f.mu.RUnlock()
	if p == nil {
		p = f.path(src, dst)
	}
	return p, e
}

// path returns the path from src to dst, creating it if needed.
func (f *Fabric) path(src, dst netip.Addr) *path {
	k := pathKey{src, dst}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.paths[k]
	if p == nil {
		p = &path{src: src, dst: dst, key: pathSeed(f.seed, src, dst)}
		f.paths[k] = p
	}
	return p
}

// SetImpairment sets the random impairments of every path that has no
// path impairment of its own. The zero Impairment turns them off.
func (f *Fabric) SetImpairment(imp Impairment) {
	f.imp.Store(newImpairment(imp, false))
}

// SetPathImpairment sets the random impairments of the directed path from
// src to dst, overriding the fabric-wide ones (a zero Impairment makes the
// path clean). The reverse direction is not affected.
func (f *Fabric) SetPathImpairment(src, dst netip.Addr, imp Impairment) {
	f.path(canon(src), canon(dst)).imp.Store(newImpairment(imp, true))
}

// ClearPathImpairment makes the path from src to dst follow the
// fabric-wide impairments again.
func (f *Fabric) ClearPathImpairment(src, dst netip.Addr) {
	f.path(canon(src), canon(dst)).imp.Store(nil)
}

// hooks are the filters and taps, replaced as a whole on every change.
type hooks struct {
	filters []filterHook
	taps    []tapHook
}

type filterHook struct {
	id uint64
	f  Filter
}

type tapHook struct {
	id uint64
	f  func(Packet)
}

func (h *hooks) empty() bool { return len(h.filters) == 0 && len(h.taps) == 0 }

func (f *Fabric) updateHooks(fn func(h *hooks, id uint64)) {
	f.hookMu.Lock()
	defer f.hookMu.Unlock()
	old := f.hooks.Load()
	h := &hooks{filters: slices.Clone(old.filters), taps: slices.Clone(old.taps)}
	f.hookID++
	fn(h, f.hookID)
	f.hooks.Store(h)
}

// AddFilter adds flt after the existing filters and returns a function that
// removes it. Every filter sees every routable datagram, in the order they
// were added, and the first action other than Pass is taken; a datagram a
// filter acts on skips the random impairments. Filters run in the sending
// goroutine, without fabric locks held, and must neither keep nor modify
// the Packet.
func (f *Fabric) AddFilter(flt Filter) (remove func()) {
	var id uint64
	f.updateHooks(func(h *hooks, i uint64) {
		id = i
		h.filters = append(h.filters, filterHook{i, flt})
	})
	return func() {
		f.updateHooks(func(h *hooks, _ uint64) {
			h.filters = slices.DeleteFunc(h.filters, func(x filterHook) bool { return x.id == id })
		})
	}
}

// Tap adds fn, called with every datagram offered to the fabric (routable
// or not, before filters and impairments; oversize datagrams are only
// counted), in the sending goroutine and
// without fabric locks held; it returns a function that removes fn. The
// Packet's Data and Wire alias a fabric buffer that is reused after fn
// returns: use Packet.Clone to keep them.
func (f *Fabric) Tap(fn func(Packet)) (remove func()) {
	var id uint64
	f.updateHooks(func(h *hooks, i uint64) {
		id = i
		h.taps = append(h.taps, tapHook{i, fn})
	})
	return func() {
		f.updateHooks(func(h *hooks, _ uint64) {
			h.taps = slices.DeleteFunc(h.taps, func(x tapHook) bool { return x.id == id })
		})
	}
}

// Stats returns the fabric-wide counters.
func (f *Fabric) Stats() Stats { return f.stats.snapshot() }

// Flush writes buffered pcap records to Config.Pcap and returns the first
// pcap write error, if any. It does nothing without Config.Pcap.
func (f *Fabric) Flush() error {
	if f.pcap == nil {
		return nil
	}
	return f.pcap.flush()
}

// Close closes every endpoint, stops the delay timer, discards datagrams in
// flight and flushes the pcap capture, returning the first pcap write
// error. Attach fails afterwards. Close is idempotent.
func (f *Fabric) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return f.Flush()
	}
	f.closed = true
	eps := make([]*Endpoint, 0, len(f.eps))
	for _, e := range f.eps {
		eps = append(eps, e)
	}
	paths := make([]*path, 0, len(f.paths))
	for _, p := range f.paths {
		paths = append(paths, p)
	}
	f.mu.Unlock()

	for _, e := range eps {
		e.Close()
	}
	f.sched.close()
	for _, p := range paths {
		p.mu.Lock()
		held := p.held
		p.held = nil
		p.holdGen++
		p.holding.Store(false)
		p.mu.Unlock()
		f.freeChain(held)
	}
	return f.Flush()
}

// send routes one datagram from e (STYLE.md 12: drop and count, never block).
func (f *Fabric) send(e *Endpoint, m *link.Datagram, h *hooks) {
	n := len(m.Buf)
	f.count(e, cSent, n)
	if n > link.MaxDatagram {
		f.count(e, cOversize, n)
		return
	}
	enc := m.Encap
	if !enc.Src.IsValid() {
		enc.Src = e.addr
	}
	ipHdr := 40
	if enc.Src.Unmap().Is4() {
		ipHdr = 20
	}
	if ipHdr+8+n > e.MTU() {
		// The kernel refuses such a send with EMSGSIZE (IP_PMTUDISC_DO).
		f.count(e, cOversize, n)
		return
	}
	dst := canon(enc.Dst)
	// PutHeaders needs both addresses of one family.
	routable := dst.IsValid() && enc.Src.Unmap().Is4() == dst.Is4()
	if routable && dst.IsMulticast() {
		f.sendGroup(e, m, enc, dst, h)
		return
	}
	p, to := f.route(e.key, dst)
	idx := p.next.Add(1) - 1

	fr := f.pool.get()
	fr.data = fr.buf[:n]
	copy(fr.data, m.Buf)
	fr.enc = enc
	fr.dst = dst
	fr.from = e
	fr.path = p

	var now time.Time
	if f.pcap != nil && routable {
		now = f.clk.Now()
		f.pcap.write(now, &fr.enc, fr.data)
	}
	if !h.empty() {
		fr.pkt = Packet{Src: e.key, Dst: dst, Encap: enc, Data: fr.data, Index: idx}
		if wire.Parse(fr.data, &fr.pkt.Wire) == nil {
			fr.pkt.Parsed = true
		} else {
			fr.pkt.Wire = wire.Packet{}
		}
		for _, t := range h.taps {
			t.f(fr.pkt)
		}
	}
	if !routable || to == nil {
		f.count(e, cNoRoute, n)
		f.pool.put(fr)
		if routable && f.isHost(dst) {
			e.reportError(link.SendError{Dst: netip.AddrPortFrom(dst, enc.DstPort), From: dst, Errno: syscall.ECONNREFUSED})
		}
		return
	}
	f.pass(e, fr, to, idx, h, now)
}

// sendGroup sends a datagram to multicast group dst: a copy to every
// endpoint that joined it (the sender's own too), each on the directed
// path from the sender to that member, through its filters and
// impairments as a unicast datagram to the member would go. Taps and the
// pcap capture see the datagram once, as offered; a group without members
// drops it as no route.
func (f *Fabric) sendGroup(e *Endpoint, m *link.Datagram, enc wire.Encap, dst netip.Addr, h *hooks) {
	n := len(m.Buf)
	var now time.Time
	if f.pcap != nil {
		now = f.clk.Now()
		f.pcap.write(now, &enc, m.Buf)
	}
	gp := f.path(e.key, dst)
	gidx := gp.next.Add(1) - 1
	if len(h.taps) > 0 {
		pkt := Packet{Src: e.key, Dst: dst, Encap: enc, Data: m.Buf, Index: gidx}
		if wire.Parse(pkt.Data, &pkt.Wire) == nil {
			pkt.Parsed = true
		} else {
			pkt.Wire = wire.Packet{}
		}
		for _, t := range h.taps {
			t.f(pkt)
		}
	}
	ms := f.members(dst)
	if len(ms) == 0 {
		f.count(e, cNoRoute, n)
		return
	}
	for i, to := range ms {
		if i > 0 {
			f.count(e, cReplicated, n)
		}
		p, _ := f.route(e.key, to.key)
		idx := p.next.Add(1) - 1
		fr := f.pool.get()
		fr.data = fr.buf[:n]
		copy(fr.data, m.Buf)
		fr.enc = enc
		fr.dst = to.key // where a delayed copy is delivered
		fr.from = e
		fr.path = p
		if !h.empty() {
			fr.pkt = Packet{Src: e.key, Dst: dst, Encap: enc, Data: fr.data, Index: idx}
			if wire.Parse(fr.data, &fr.pkt.Wire) == nil {
				fr.pkt.Parsed = true
			} else {
				fr.pkt.Wire = wire.Packet{}
			}
		}
		f.pass(e, fr, to, idx, h, now)
	}
}

// pass takes frame fr, datagram idx of its path, from e to endpoint to
// through the filters and the random impairments, and forwards it.
func (f *Fabric) pass(e *Endpoint, fr *frame, to *Endpoint, idx uint64, h *hooks, now time.Time) {
	n := len(fr.data)
	p := fr.path
	act := Pass
	for _, flt := range h.filters {
		if a := flt.f(&fr.pkt); act == Pass {
			act = a
		}
	}
	var (
		delay   time.Duration
		dup     bool
		reorder bool
		wait    = defaultReorderTimeout
	)
	if act != Pass {
		switch act.kind {
		case actDrop:
			f.count(e, cFilter, n)
			f.pool.put(fr)
			return
		case actDuplicate:
			dup = true
		case actCorrupt:
			f.corrupt(fr, p.draw(idx, slotCorruptBit))
		case actReorder:
			reorder = true
		case actDelay:
			delay = act.delay
		}
	} else if imp := p.impairment(f); imp != nil && imp.active {
		if imp.Loss > 0 && p.uniform(idx, slotLoss) < imp.Loss {
			f.count(e, cImpairment, n)
			f.pool.put(fr)
			return
		}
		if imp.Corrupt > 0 && p.uniform(idx, slotCorrupt) < imp.Corrupt {
			f.corrupt(fr, p.draw(idx, slotCorruptBit))
		}
		dup = imp.Duplicate > 0 && p.uniform(idx, slotDuplicate) < imp.Duplicate
		reorder = imp.Reorder > 0 && p.uniform(idx, slotReorder) < imp.Reorder
		delay = imp.Delay
		if imp.Jitter > 0 {
			delay += time.Duration(p.draw(idx, slotJitter) % uint64(imp.Jitter))
		}
		wait = imp.ReorderTimeout
	}
	if dup {
		d := f.pool.get()
		d.data = d.buf[:n]
		copy(d.data, fr.data)
		d.enc, d.dst, d.from, d.path = fr.enc, fr.dst, fr.from, fr.path
		fr.next = d
		f.count(e, cDuplicated, n)
	}
	if (delay > 0 || reorder) && now.IsZero() {
		now = f.clk.Now()
	}
	f.forward(fr, to, now, delay, reorder, wait)
}

// corrupt flips bit r mod (8·len) of fr's datagram.
func (f *Fabric) corrupt(fr *frame, r uint64) {
	if len(fr.data) == 0 {
		return
	}
	bit := r % uint64(8*len(fr.data))
	fr.data[bit/8] ^= 1 << (bit % 8)
	f.count(fr.from, cCorrupted, len(fr.data))
}

// forward delivers chain fr (a datagram and its duplicate) after delay, or
// holds it back when reorder is set, releasing any datagram held on the
// path after it.
func (f *Fabric) forward(fr *frame, to *Endpoint, now time.Time, delay time.Duration, reorder bool, wait time.Duration) {
	p := fr.path
	if reorder || p.holding.Load() {
		p.mu.Lock()
		if reorder && p.held == nil {
			// Once p.mu is released another sender on the path may
			// deliver fr and its reader recycle it: read it before.
			from, n := fr.from, len(fr.data)
			p.held = fr
			p.holdGen++
			gen := p.holdGen
			p.holding.Store(true)
			p.mu.Unlock()
			f.count(from, cReordered, n)
			f.sched.add(now.Add(delay+wait), nil, p, gen)
			return
		}
		prev := p.held
		p.held = nil
		p.holding.Store(false)
		p.mu.Unlock()
		if prev != nil {
			last := fr
			for last.next != nil {
				last = last.next
			}
			last.next = prev
		}
	}
	if delay > 0 {
		f.count(fr.from, cDelayed, len(fr.data))
		f.sched.add(now.Add(delay), fr, nil, 0)
		return
	}
	f.deliverChain(fr, to)
}

// deliverChain hands each frame of a chain to to (looking it up by the
// destination address when nil).
func (f *Fabric) deliverChain(fr *frame, to *Endpoint) {
	if fr != nil && to == nil {
		to = f.endpoint(fr.dst)
	}
	for fr != nil {
		next := fr.next
		fr.next = nil
		f.deliver(fr, to)
		fr = next
	}
}

// deliver queues fr at to, or drops and counts it.
func (f *Fabric) deliver(fr *frame, to *Endpoint) {
	n := len(fr.data)
	if to == nil {
		f.count(fr.from, cNoRoute, n)
		f.pool.put(fr)
		return
	}
	if !to.state.Load().Active() {
		f.count(to, cLinkDown, n)
		f.pool.put(fr)
		return
	}
	switch to.enqueue(fr) {
	case enqueued:
		f.count(to, cDelivered, n)
	case queueFull:
		f.count(to, cQueueFull, n)
		f.pool.put(fr)
	case endpointClosed:
		f.count(fr.from, cNoRoute, n)
		f.pool.put(fr)
	}
}

func (f *Fabric) freeChain(fr *frame) {
	for fr != nil {
		next := fr.next
		f.pool.put(fr)
		fr = next
	}
}

// count adds one packet of n bytes to counter c of e and of the fabric.
func (f *Fabric) count(e *Endpoint, c counter, n int) {
	e.stats.add(c, n)
	f.stats.add(c, n)
}

// frame is a fabric-owned copy of one datagram in flight.
type frame struct {
	buf  []byte // link.MaxDatagram bytes
	data []byte // buf[:len(datagram)]
	enc  wire.Encap
	dst  netip.Addr // canonical destination
	from *Endpoint
	path *path
	next *frame // the next frame of a chain (duplicate, released reordered datagram)
	pkt  Packet // the view filters get a pointer to, kept here so it does not escape per packet
}

// framePool is a bounded free list of frames (STYLE.md 12; wireguard-go
// device/pools.go): it allocates when empty and lets the garbage collector
// have frames returned while it is full.
type framePool struct {
	mu   sync.Mutex
	free []*frame // guarded by mu
	max  int
}

func (p *framePool) get() *frame {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		fr := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return fr
	}
	p.mu.Unlock()
	return &frame{buf: make([]byte, link.MaxDatagram)}
}

func (p *framePool) put(fr *frame) {
	fr.data = nil
	fr.from = nil
	fr.path = nil
	fr.next = nil
	fr.pkt = Packet{}
	p.mu.Lock()
	if len(p.free) < p.max {
		p.free = append(p.free, fr)
	}
	p.mu.Unlock()
}
