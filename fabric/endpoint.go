package fabric

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/softnic/softnic/link"
)

// Endpoint is one address on a Fabric: a link.Link whose datagrams travel
// through the fabric. It is safe for concurrent use.
type Endpoint struct {
	f      *Fabric
	addr   netip.Addr // as attached
	key    netip.Addr // canonical
	stats  counters
	closed atomic.Bool  // mirrors qclosed for the lock-free check in WriteBatch
	mtu    atomic.Int32 // the interface MTU the endpoint reports and sends within
	// state is the interface's state (SetLinkState), replaced whole.
	state   atomic.Pointer[link.LinkState]
	stateMu sync.Mutex // serializes SetLinkState's change and its calls
	stateW  link.Watchers[func()]
	errW    link.Watchers[func(link.SendError)]

	mu      sync.Mutex
	cond    sync.Cond // L is &mu; signalled when the queue gains frames or closes
	q       []*frame  // receive ring of QueueLen frames; guarded by mu
	head    int       // guarded by mu
	n       int       // guarded by mu
	qclosed bool      // guarded by mu
	// qbytes are the bytes of the datagrams queued, rcvbuf the most
	// they may be (SetRecvBuffer; 0: no bound but the queue's length);
	// guarded by mu.
	qbytes, rcvbuf int
	seq            uint64 // the last datagram handed out (link.Datagram.Seq); guarded by mu
	// errq are the errors reported back (Fabric.AddHost) that the next
	// read hands to the error watchers; guarded by mu.
	errq []link.SendError
}

// maxErrQueue bounds the errors reported back that wait for a read, as
// the kernel bounds a socket's error queue by its receive buffer.
const maxErrQueue = 64

// The link capabilities an Endpoint has (link/caps.go): it reads without
// waiting, receives multicast, numbers its datagrams, says when it is
// closed, has a state a test sets (SetLinkState) and reports the errors a
// host without a RoCE NIC answers (Fabric.AddHost). It has no use for the
// UDP link's busy-poll preference, read yield, read wake-up, lending or
// split sends, and no routing table to resolve routes in.
var (
	_ link.Link         = (*Endpoint)(nil)
	_ link.Poller       = (*Endpoint)(nil)
	_ link.Multicaster  = (*Endpoint)(nil)
	_ link.Sequencer    = (*Endpoint)(nil)
	_ link.LinkCloser   = (*Endpoint)(nil)
	_ link.StateWatcher = (*Endpoint)(nil)
	_ link.ErrorWatcher = (*Endpoint)(nil)
)

// JoinGroup makes the endpoint a member of multicast group g
// (link.Multicaster): every datagram sent to g from then on is delivered
// to it, a copy to each member, through the impairments of the path from
// the sender to the member. g must be a multicast address (IPv4, IPv4-mapped
// or IPv6: EINVAL otherwise); joining a group twice is EADDRINUSE, as
// IP_ADD_MEMBERSHIP. Close leaves every group.
func (e *Endpoint) JoinGroup(g netip.Addr) error {
	k := canon(g)
	if !k.IsMulticast() {
		return fmt.Errorf("fabric: join %v: %w (not a multicast address)", g, syscall.EINVAL)
	}
	f := e.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.closed.Load() {
		return link.ErrLinkClosed
	}
	ms := f.groups[k]
	if slices.Contains(ms, e) {
		return fmt.Errorf("fabric: join %v: %w", g, syscall.EADDRINUSE)
	}
	f.setGroup(k, append(slices.Clone(ms), e))
	return nil
}

// LeaveGroup ends the endpoint's membership of group g; leaving a group
// it is not a member of is EADDRNOTAVAIL, as IP_DROP_MEMBERSHIP.
func (e *Endpoint) LeaveGroup(g netip.Addr) error {
	k := canon(g)
	f := e.f
	f.mu.Lock()
	defer f.mu.Unlock()
	ms := f.groups[k]
	i := slices.Index(ms, e)
	if i < 0 {
		return fmt.Errorf("fabric: leave %v: %w", g, syscall.EADDRNOTAVAIL)
	}
	f.setGroup(k, slices.Delete(slices.Clone(ms), i, i+1))
	return nil
}

// Closed reports whether Close was called (link.LinkCloser): verbs.Open
// refuses a closed endpoint.
func (e *Endpoint) Closed() bool { return e.closed.Load() }

// LocalAddr returns the address the endpoint was attached at.
func (e *Endpoint) LocalAddr() netip.Addr { return e.addr }

// DefaultMTU is an endpoint's MTU until SetMTU: loopback's, 65536, on
// which a NIC's port MTU is 4096 (nic.ActiveMTU).
const DefaultMTU = 65536

// MTU returns the endpoint's interface MTU in bytes, IP header included:
// DefaultMTU or what SetMTU set. A NIC on the endpoint derives its port's
// active MTU from it (link.Link).
func (e *Endpoint) MTU() int { return int(e.mtu.Load()) }

// SrcPort returns 0: the fabric carries each datagram's source port as
// sent (link.Link).
func (e *Endpoint) SrcPort() uint16 { return 0 }

// SetMTU sets the endpoint's interface MTU (at least 68, IPv4's minimum,
// at most 65536), as `ip link set DEV mtu N` does for a real one; it
// applies at once, to what the NIC reports and to what it sends. Like a
// kernel UDP socket with path MTU discovery on (IP_PMTUDISC_DO), the
// endpoint refuses a datagram whose IP packet would exceed it: counted as
// DropOversize.
func (e *Endpoint) SetMTU(n int) error {
	if n < 68 || n > 65536 {
		return fmt.Errorf("fabric: MTU %d not in 68..65536", n)
	}
	e.mtu.Store(int32(n))
	return nil
}

// SetRecvBuffer bounds the bytes of the datagrams (UDP payloads) queued
// for the endpoint's reader to n, as a UDP socket's receive buffer
// (SO_RCVBUF) bounds what waits for its reader: a datagram arriving
// while the queue holds more than n less its size is dropped and counted
// (DropQueueFull), as the kernel drops one that finds the buffer full
// (UdpRcvbufErrors). 0, the default, leaves only the queue's length
// (Config.QueueLen). It applies to the datagrams that arrive from then
// on.
func (e *Endpoint) SetRecvBuffer(n int) {
	e.mu.Lock()
	e.rcvbuf = max(n, 0)
	e.mu.Unlock()
}

// SetLinkState sets the state of the endpoint's interface, as `ip link
// set DEV down` (Up false) or a cable pulled (Carrier false) would a
// real one's; it applies at once. An endpoint that is down or has no
// carrier receives nothing: what arrives is dropped and counted
// (DropLinkDown). One administratively down refuses every send, each
// datagram marked ENETDOWN, as the kernel refuses a packet through a
// netdev without IFF_UP; one up without a carrier takes them and loses
// them (DropLinkDown), as a netdev's queue without a carrier does. Speed
// is what LinkState reports (Mb/s, 0 unknown): a NIC's port derives its
// speed and width from it. The watchers (WatchLinkState) are called,
// before SetLinkState returns, when Up or Carrier changed. A new
// endpoint is up, with a carrier, of unknown speed.
func (e *Endpoint) SetLinkState(s link.LinkState) {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	old := e.state.Swap(&s)
	if old.Up != s.Up || old.Carrier != s.Carrier {
		e.stateW.Each(func(fn func()) { fn() })
	}
}

// LinkState returns the state SetLinkState set (link.StateWatcher); the
// zero LinkState, down, once the endpoint is closed.
func (e *Endpoint) LinkState() (link.LinkState, bool) {
	if e.closed.Load() {
		return link.LinkState{}, true
	}
	return *e.state.Load(), true
}

// WatchLinkState has the endpoint call fn after each SetLinkState that
// changed Up or Carrier, and once at Close (link.StateWatcher).
func (e *Endpoint) WatchLinkState(fn func()) (stop func(), ok bool) {
	return e.stateW.Add(fn), true
}

// WatchSendErrors has the endpoint call fn with every error reported back
// about a datagram it sent: the ICMP port unreachable a host without a
// RoCE NIC answers (Fabric.AddHost), ECONNREFUSED from that host
// (link.ErrorWatcher). As on the UDP link, whose reader finds them in
// its socket's error queue, the calls come from the endpoint's next read
// (ReadBatch, TryReadBatch), which a report wakes, never from the
// sender's WriteBatch. Errors reported while no one watches are
// discarded.
func (e *Endpoint) WatchSendErrors(fn func(link.SendError)) (stop func(), ok bool) {
	return e.errW.Add(fn), true
}

// reportError queues an error reported back about a datagram e sent and
// wakes a reader to hand it over.
func (e *Endpoint) reportError(se link.SendError) {
	if !e.errW.Any() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.qclosed || len(e.errq) >= maxErrQueue {
		return
	}
	e.errq = append(e.errq, se)
	e.cond.Signal()
}

// takeErrors takes the queued errors; e.mu is held.
func (e *Endpoint) takeErrors() []link.SendError {
	q := e.errq
	e.errq = nil
	return q
}

// tellErrors hands errors to the watchers; e.mu is not held.
func (e *Endpoint) tellErrors(q []link.SendError) {
	for _, se := range q {
		e.errW.Each(func(fn func(link.SendError)) { fn(se) })
	}
}

// BatchSize returns Config.BatchSize.
func (e *Endpoint) BatchSize() int { return e.f.batchSize }

// Stats returns the endpoint's counters: Sent and the drops of what it
// sent (no route, impairment, filter, oversize) and what the fabric did to
// it (duplicated, corrupted, reordered, delayed) on the sending side;
// Delivered and DropQueueFull (the queue's length or SetRecvBuffer) on
// the receiving side.
func (e *Endpoint) Stats() Stats { return e.stats.snapshot() }

// WriteBatch offers msgs to the fabric and returns len(msgs): every
// datagram is accepted, then delivered or dropped and counted. Each Buf is
// copied, so the caller may reuse it at once. A datagram whose Encap.Src is
// unset is sent from the endpoint's address; it is routed to the endpoint
// at Encap.Dst. WriteBatch never blocks. While the endpoint is
// administratively down (SetLinkState) it takes none, each marked
// ENETDOWN; without a carrier it takes them and loses them. After Close
// it returns link.ErrLinkClosed, each datagram marked EBADF, as the UDP
// link does.
func (e *Endpoint) WriteBatch(msgs []link.Datagram) (int, error) {
	if e.closed.Load() {
		markErr(msgs, syscall.EBADF)
		return 0, link.ErrLinkClosed
	}
	switch s := e.state.Load(); {
	case !s.Up:
		for i := range msgs {
			e.f.count(e, cSent, len(msgs[i].Buf))
			e.f.count(e, cLinkDown, len(msgs[i].Buf))
		}
		markErr(msgs, syscall.ENETDOWN)
		return 0, nil
	case !s.Carrier:
		for i := range msgs {
			e.f.count(e, cSent, len(msgs[i].Buf))
			e.f.count(e, cLinkDown, len(msgs[i].Buf))
		}
		return len(msgs), nil
	}
	h := e.f.hooks.Load()
	for i := range msgs {
		e.f.send(e, &msgs[i], h)
	}
	return len(msgs), nil
}

// markErr sets Err to errno on each datagram that has none.
func markErr(msgs []link.Datagram, errno syscall.Errno) {
	for i := range msgs {
		if msgs[i].Err == 0 {
			msgs[i].Err = errno
		}
	}
}

// NextSeq returns the Seq of the next datagram a read hands out
// (link.NextSeq).
func (e *Endpoint) NextSeq() (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seq + 1, true
}

// ReadBatch blocks until at least one datagram has arrived, then fills
// msgs[:n] with up to len(msgs) datagrams in arrival order: Encap as sent
// (Src filled in if the sender left it unset), Buf resliced within its
// capacity to the datagram (a datagram longer than cap(Buf) is
// truncated), ICRC link.ICRCUnchecked: the header is exact, the engine
// checks the ICRC (and catches the fabric's corruption). It waits on a sync.Cond, so a reader
// blocked here is durably blocked for testing/synctest. After Close it
// returns link.ErrLinkClosed.
func (e *Endpoint) ReadBatch(msgs []link.Datagram) (int, error) {
	e.mu.Lock()
	for {
		for e.n == 0 && !e.qclosed && len(e.errq) == 0 && len(msgs) > 0 {
			e.cond.Wait()
		}
		if e.qclosed {
			e.mu.Unlock()
			return 0, link.ErrLinkClosed
		}
		if q := e.takeErrors(); len(q) > 0 {
			e.mu.Unlock()
			e.tellErrors(q)
			e.mu.Lock()
			continue
		}
		n := e.take(msgs)
		e.mu.Unlock()
		return n, nil
	}
}

// TryReadBatch is ReadBatch without the wait (link.Poller): it fills
// msgs[:n] as ReadBatch does with the datagrams queued, n possibly 0,
// and returns at once. It needs only the queue's lock, which a reader
// blocked in ReadBatch does not hold while it waits (sync.Cond.Wait
// releases it); that reader is woken by each delivery and waits again if
// TryReadBatch took everything. After Close it returns
// link.ErrLinkClosed.
func (e *Endpoint) TryReadBatch(msgs []link.Datagram) (int, error) {
	e.mu.Lock()
	if e.qclosed {
		e.mu.Unlock()
		return 0, link.ErrLinkClosed
	}
	if q := e.takeErrors(); len(q) > 0 {
		e.mu.Unlock()
		e.tellErrors(q)
		e.mu.Lock()
	}
	n := e.take(msgs)
	e.mu.Unlock()
	return n, nil
}

// take moves up to len(msgs) queued datagrams into msgs; e.mu is held.
func (e *Endpoint) take(msgs []link.Datagram) int {
	n := 0
	for n < len(msgs) && e.n > 0 {
		fr := e.q[e.head]
		e.q[e.head] = nil
		e.head++
		if e.head == len(e.q) {
			e.head = 0
		}
		e.n--
		e.qbytes -= len(fr.data)
		m := &msgs[n]
		m.Encap = fr.enc
		m.Buf = m.Buf[:copy(m.Buf[:cap(m.Buf)], fr.data)]
		m.ICRC = link.ICRCUnchecked
		e.seq++
		m.Seq = e.seq
		e.f.pool.put(fr)
		n++
	}
	if e.n > 0 {
		e.cond.Signal() // another reader may take the rest
	}
	return n
}

// Close detaches the endpoint, discards its queued datagrams and errors,
// unblocks ReadBatch and tells the state watchers (WatchLinkState): the
// link is down for good. It is idempotent and always returns nil.
func (e *Endpoint) Close() error {
	e.f.detach(e)
	e.mu.Lock()
	if e.qclosed {
		e.mu.Unlock()
		return nil
	}
	e.qclosed = true
	e.closed.Store(true)
	for e.n > 0 {
		e.f.pool.put(e.q[e.head])
		e.q[e.head] = nil
		e.head = (e.head + 1) % len(e.q)
		e.n--
	}
	e.qbytes = 0
	e.errq = nil
	e.cond.Broadcast()
	e.mu.Unlock()
	e.stateMu.Lock()
	e.stateW.Each(func(fn func()) { fn() })
	e.stateMu.Unlock()
	return nil
}

type enqueueResult uint8

const (
	enqueued enqueueResult = iota
	queueFull
	endpointClosed
)

// enqueue appends fr to the receive queue and wakes a reader.
func (e *Endpoint) enqueue(fr *frame) enqueueResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.qclosed:
		return endpointClosed
	case e.n == len(e.q), e.rcvbuf > 0 && e.qbytes+len(fr.data) > e.rcvbuf:
		return queueFull
	}
	e.qbytes += len(fr.data)
	i := e.head + e.n
	if i >= len(e.q) {
		i -= len(e.q)
	}
	e.q[i] = fr
	e.n++
	e.cond.Signal()
	return enqueued
}
