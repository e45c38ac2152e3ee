package link

// The optional capabilities of a Link, all in this file. Link is what
// every link does; each interface below is something only some links do.
// The engine (package nic) asks for one through the function beside it
// (CanPoll, Lend, ...), which hears a wrapper's answer (PcapLink forwards
// what the link it wraps says); it asserts an interface itself only to
// use it once the function said yes (Poller, Multicaster), or where there
// is no function (LinkCloser, Unwrapper). A link without a capability
// still carries every datagram: the engine takes a slower or plainer
// way, which each interface's comment says.
//
// Who has what, as the functions answer (TestCapabilities checks this
// table, so that a capability a wrapper loses is a failed test, not a
// slower NIC):
//
//	capability              UDPLink (Linux)   fabric.Endpoint   PcapLink
//	Poller                  yes               yes               the inner link's (ConditionalPoller)
//	Multicaster             yes               yes               the inner link's (ConditionalMulticaster)
//	BusyPollPreferrer       yes               -                 the inner link's
//	ReadYielder             yes               -                 the inner link's
//	ReadWaker               yes               -                 the inner link's
//	Sequencer               yes               yes               the inner link's
//	Lender                  with GRO          -                 the inner link's
//	SplitSender             yes               -                 - (it records Buf alone)
//	LinkCloser              yes               yes               - (the engine unwraps it)
//	Unwrapper               -                 -                 yes
//	StateWatcher            yes               yes               the inner link's
//	ErrorWatcher            yes               yes               the inner link's
//	Resolver                yes               -                 the inner link's
//
// A link's counters (UDPLink.Stats, fabric.Endpoint.Stats) are not a
// capability: the engine never reads them; the tools and package metrics
// do (metrics.LinkStatser).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Poller is implemented by links that can read without waiting. It lets
// an application busy-polling an empty completion queue drive the NIC's
// receive itself, as DPDK's rx burst and UCX's progress do, instead of
// waiting for the NIC's receive goroutine to be scheduled. That goroutine
// stays blocked in ReadBatch on the same link; each datagram goes to
// whichever of the two reads first. Without it (CanPoll false) the
// receive goroutine carries the receive alone and a poll of an empty
// completion queue reads nothing.
type Poller interface {
	// TryReadBatch is ReadBatch without the wait: it fills msgs[:n]
	// (reslicing each Buf within its capacity, as ReadBatch does) with
	// datagrams that have already arrived, n possibly 0, and returns at
	// once. It may run while another goroutine is blocked in ReadBatch
	// on the same link and never waits for that reader: a datagram goes
	// to exactly one of the two, and the blocked reader keeps waiting
	// for later datagrams (or wakes, finds nothing, and waits again).
	// Callers serialize their TryReadBatch calls with each other. After
	// Close it returns ErrLinkClosed.
	TryReadBatch(msgs []Datagram) (n int, err error)
}

// ConditionalPoller is a Poller whose TryReadBatch reads the network only
// sometimes: a wrapper, whose method set is fixed by its type whatever it
// wraps (PcapLink over a link that is not a Poller). CanPoll says whether
// it does now.
type ConditionalPoller interface {
	Poller
	// CanPoll reports whether TryReadBatch reads the network (the
	// package's CanPoll asks it).
	CanPoll() bool
}

// CanPoll reports whether TryReadBatch on l reads the network: l is a
// Poller and, if it has a CanPoll method of its own (a wrapper such as
// PcapLink, a Poller whatever it wraps: ConditionalPoller), that says
// yes. A caller busy-polls l only then; otherwise l's TryReadBatch, if
// any, finds nothing and ReadBatch carries the receive alone.
func CanPoll(l Link) bool {
	if _, ok := l.(Poller); !ok {
		return false
	}
	if c, ok := l.(ConditionalPoller); ok {
		return c.CanPoll()
	}
	return true
}

// BusyPollPreferrer is implemented by links on which a NIC should keep its
// receive goroutine off the link while an application busy-polls it (the
// NIC's poll lease). The UDP link is one; the fabric is not, and a NIC on
// it leaves its receive goroutine reading beside the polls.
type BusyPollPreferrer interface {
	// PreferBusyPoll reports whether the link prefers it (the package's
	// PreferBusyPoll).
	PreferBusyPoll() bool
}

// PreferBusyPoll reports whether a NIC on l should keep its receive
// goroutine off the link while an application busy-polls it (the NIC's
// poll lease): l can poll (CanPoll) and says so with a PreferBusyPoll
// method of its own (BusyPollPreferrer). A UDP link does: a reader parked
// on a socket is a second thread the kernel may wake for a datagram the
// poll would have found, and the two readers race for it. The fabric does
// not: its readers wake for free, and the lease would only add its timer
// to a test's schedule.
func PreferBusyPoll(l Link) bool {
	if !CanPoll(l) {
		return false
	}
	c, ok := l.(BusyPollPreferrer)
	return ok && c.PreferBusyPoll()
}

// ReadYielder is implemented by links whose ReadBatch can step off at a
// wake-up that found nothing, when a question it is given says so. The
// UDP link is one; without it (the fabric) the engine's poll lease
// cannot take the receive goroutine off the link while it waits there,
// only between two reads.
type ReadYielder interface {
	// SetReadYield sets the question and reports whether ReadBatch will
	// ask it (the package's SetReadYield).
	SetReadYield(yield func() bool) bool
}

// SetReadYield gives l a question its ReadBatch asks whenever it finds
// the socket empty: when yield reports true, ReadBatch returns 0
// datagrams instead of waiting on. It reports whether l asks it (l has a
// SetReadYield method that says so: ReadYielder); set it before the
// first ReadBatch. The engine's poll lease uses it: while an application
// busy-polls the link, its receive goroutine, woken for a datagram a poll
// took first, steps off the link at that wake-up, which costs no extra
// system call and no timer (see the engine's pollLease). yield must be
// cheap and must not block: it runs inside the read.
func SetReadYield(l Link, yield func() bool) bool {
	c, ok := l.(ReadYielder)
	return ok && c.SetReadYield(yield)
}

// ReadWaker is implemented by links that can wake a waiting ReadBatch
// without a datagram, so that it asks its read yield (ReadYielder). The
// UDP link is one; without it the engine waits for a datagram (or Go's
// scheduler) to wake its receive goroutine.
type ReadWaker interface {
	// WakeRead wakes the reader and reports whether it could (the
	// package's WakeRead).
	WakeRead() bool
}

// WakeRead wakes a ReadBatch waiting on l as a datagram would, so that
// it asks its read yield (SetReadYield) now, and reports whether l can
// (it has a WakeRead method that says so: ReadWaker). With none waiting,
// the next ReadBatch asks at once anyway. The engine asks when its
// receive goroutine should step off the link for a busy-polling
// application but no datagram has woken it: Go's scheduler polls the
// network only when it has nothing else to run (or every 10 ms), so with
// one P and an application spinning, such a wake-up may not come.
func WakeRead(l Link) bool {
	c, ok := l.(ReadWaker)
	return ok && c.WakeRead()
}

// Sequencer is implemented by links that number the datagrams they hand
// out (Datagram.Seq) and can say where the numbering stands. The UDP link
// and the fabric are; without it a NIC's readers (the receive goroutine
// and a busy poll) have no turn until the first delivery, and the first
// batches of both may be delivered at once, out of the link's order.
type Sequencer interface {
	// NextSeq returns the Seq of the next datagram the link hands out
	// and whether it can tell (the package's NextSeq).
	NextSeq() (uint64, bool)
}

// NextSeq returns the Seq l will give the next datagram it hands out, and
// whether l numbers its datagrams and can tell (a NextSeq method:
// Sequencer). A NIC asks once, before it reads: its readers then deliver
// in Seq order from its first datagram on (nic.NIC.awaitTurn), whatever
// an earlier user of the link was handed. A wrapper (the pcap recorder)
// asks the link it wraps.
func NextSeq(l Link) (uint64, bool) {
	c, ok := l.(Sequencer)
	if !ok {
		return 0, false
	}
	return c.NextSeq()
}

// Lender is implemented by links that can hand datagrams over in place,
// in a buffer of their own (Datagram.Loan), instead of copying them into
// the caller's. The UDP link is one, with GRO; without it every datagram
// arrives in the engine's own buffer (the UDP link copies each segment of
// a GRO-coalesced buffer into one).
type Lender interface {
	// Lend asks the link to lend from now on and reports whether it
	// will (the package's Lend).
	Lend() bool
}

// Lend asks l to hand datagrams over in place from now on, where it can
// (Datagram.Loan), and reports whether it may: l has a Lend method that
// says so (Lender). The UDP link lends the segments of a GRO-coalesced
// buffer, which it would otherwise copy one by one into the caller's
// buffers; a wrapper (the pcap recorder) asks the link it wraps. A caller
// that asks must release every Loan it is given.
func Lend(l Link) bool {
	c, ok := l.(Lender)
	return ok && c.Lend()
}

// SplitSender is implemented by links whose WriteBatch takes datagrams
// with a Payload (Datagram.Payload) and sends it from where it lies. The
// UDP link is one, in the iovec of its sendmmsg; without it (the fabric,
// the pcap recorder, which would only copy the pieces together again)
// the NIC copies the payload into the datagram itself, once.
type SplitSender interface {
	// SendsSplit reports whether WriteBatch takes them (the package's
	// CanSendSplit).
	SendsSplit() bool
}

// CanSendSplit reports whether l's WriteBatch takes datagrams with a
// Payload (Datagram.Payload), sending the payload from where it lies: l
// has a SendsSplit method that says so (SplitSender). The UDP link does,
// in the iovec of its sendmmsg; a link that would only copy the pieces
// together again (the fabric, the pcap recorder) does not, and the NIC
// copies the payload into the datagram itself, once.
func CanSendSplit(l Link) bool {
	c, ok := l.(SplitSender)
	return ok && c.SendsSplit()
}

// Multicaster is implemented by links that can receive IP multicast: the
// engine joins a group when the first of its QPs attaches to it
// (ibv_attach_mcast) and leaves it when the last one detaches, as rxe
// joins the group on its netdev (rxe_mcast.c rxe_mcast_add: IP_ADD_MEMBERSHIP
// or IPV6_JOIN_GROUP on the receive socket) and leaves it with the group's
// last QP. While a group is joined, ReadBatch (and TryReadBatch) also
// return the datagrams sent to it, with Encap.Dst the group address. Any
// link can send to a multicast address; only a Multicaster receives.
// Without it (CanMulticast false) the device reports max_mcast_grp 0 and
// refuses an attach.
type Multicaster interface {
	// JoinGroup starts receiving datagrams sent to the multicast address
	// group (IPv4 unmapped, or IPv6). Joining a group twice is an error
	// (EADDRINUSE, as IP_ADD_MEMBERSHIP).
	JoinGroup(group netip.Addr) error
	// LeaveGroup stops receiving them; leaving a group not joined is an
	// error (EADDRNOTAVAIL, as IP_DROP_MEMBERSHIP).
	LeaveGroup(group netip.Addr) error
}

// ConditionalMulticaster is a Multicaster that receives multicast only
// sometimes: a wrapper, whose method set is fixed by its type whatever it
// wraps (PcapLink). CanMulticast says whether it does.
type ConditionalMulticaster interface {
	Multicaster
	// CanMulticast reports whether JoinGroup can succeed (the package's
	// CanMulticast asks it).
	CanMulticast() bool
}

// CanMulticast reports whether l receives multicast: l is a Multicaster
// and, if it has a CanMulticast method of its own (a wrapper such as
// PcapLink: ConditionalMulticaster), that says yes.
func CanMulticast(l Link) bool {
	if _, ok := l.(Multicaster); !ok {
		return false
	}
	if c, ok := l.(ConditionalMulticaster); ok {
		return c.CanMulticast()
	}
	return true
}

// LinkCloser is implemented by links that report whether they were
// closed; the engine refuses a closed one. The UDP link and the fabric
// are; a wrapper need not be (the engine asks the link it wraps,
// Unwrapper). Without it the engine takes the link as open.
type LinkCloser interface {
	Closed() bool
}

// Unwrapper is implemented by links that wrap another and say which (the
// pcap recorder). The engine looks through them to the link that carries
// the datagrams: a link carries one NIC's traffic, whatever wraps it, and
// a closed one is refused (LinkCloser).
type Unwrapper interface {
	// Unwrap returns the wrapped link.
	Unwrap() Link
}

// LinkState is the state of the network interface under a link, as the
// kernel's netdev flags and ethtool give it: what rxe's port follows
// (rxe_verbs.c rxe_query_port: the state from ib_get_curr_port_state,
// the physical state from IFF_UP, the speed and width from
// ib_get_eth_speed). The zero LinkState is a link that is down: a
// closed one.
type LinkState struct {
	// Up: the interface is administratively up (IFF_UP, netif_running).
	Up bool
	// Carrier: the interface has a carrier (IFF_LOWER_UP,
	// netif_carrier_ok).
	Carrier bool
	// Speed is the interface's speed in Mb/s as ethtool reports it
	// (ETHTOOL_GLINKSETTINGS), 0 when unknown: SPEED_UNKNOWN, or a
	// driver that has no link settings (loopback, dummy).
	Speed int
}

// Active reports whether a port on the interface is ACTIVE: up with a
// carrier (ib_get_curr_port_state).
func (s LinkState) Active() bool { return s.Up && s.Carrier }

// StateWatcher is implemented by links on a network interface that can go
// down and come up again, and that say so: the UDP link follows its
// interface through netlink, a fabric endpoint is taken down by its test
// (fabric.Endpoint.SetLinkState). The engine's port follows it as rxe's
// follows its netdev (rxe_net.c rxe_notify). Without it the port is
// ACTIVE while the link is open, at 1X SDR.
type StateWatcher interface {
	// LinkState returns the interface's state now and whether the link
	// can tell (the package's State).
	LinkState() (LinkState, bool)
	// WatchLinkState has the link call fn after every change of its
	// interface's Up or Carrier, and once when the link is closed; it
	// returns the function that stops the calls and whether the link
	// makes them (the package's WatchState).
	WatchLinkState(fn func()) (stop func(), ok bool)
}

// State returns the state of l's network interface and whether l can tell
// (l has a LinkState method that says so: StateWatcher). A link that
// cannot tell is taken as up, with a carrier, of unknown speed, while it
// is open.
func State(l Link) (LinkState, bool) {
	w, ok := l.(StateWatcher)
	if !ok {
		return LinkState{}, false
	}
	return w.LinkState()
}

// WatchState has l call fn after every change of its interface's state
// (Up or Carrier) and once when l is closed, and reports whether it will
// (StateWatcher). fn runs on a goroutine of the link's (the UDP link's
// netlink reader) or of whoever changed the state (a fabric test, Close):
// it must not block, and may call State. stop ends the calls; it is a
// no-op when ok is false.
func WatchState(l Link, fn func()) (stop func(), ok bool) {
	w, ok := l.(StateWatcher)
	if !ok {
		return func() {}, false
	}
	return w.WatchLinkState(fn)
}

// SendError is what the network reported back about a datagram a link
// sent: an ICMP or ICMPv6 destination unreachable that the UDP link read
// from its socket's error queue (IP_RECVERR), or a fabric's model of one.
type SendError struct {
	// Dst is where the datagram was going: its destination address and
	// UDP port.
	Dst netip.AddrPort
	// From is who reported it: the destination host itself for a port
	// unreachable, a router on the way, or this host (a neighbour that
	// did not answer).
	From netip.Addr
	// Errno is the error as the kernel maps the ICMP: ECONNREFUSED for a
	// port unreachable (no socket at Dst: no RoCE NIC listens there),
	// EHOSTUNREACH, ENETUNREACH, EACCES (administratively prohibited),
	// EMSGSIZE (fragmentation needed), ...
	Errno syscall.Errno
}

// ErrorWatcher is implemented by links that hear what the network reports
// back about the datagrams they send (SendError): the UDP link, from its
// socket's error queue; a fabric endpoint, for datagrams to a host
// without a RoCE NIC (fabric.Fabric.AddHost). The RDMA CM listens: a port
// unreachable for its MAD means no CM is there. Without it nothing is
// heard and a lost datagram is only a timeout.
type ErrorWatcher interface {
	// WatchSendErrors has the link call fn with every error reported
	// back; it returns the function that stops the calls and whether
	// the link makes them (the package's WatchSendErrors).
	WatchSendErrors(fn func(SendError)) (stop func(), ok bool)
}

// WatchSendErrors has l call fn with every error the network reports back
// about a datagram l sent, and reports whether it will (ErrorWatcher). fn
// runs on the goroutine that reads l (the NIC's receive goroutine, or an
// application's poll): it must not block, nor wait for anything that
// reads l. stop ends the calls; it is a no-op when ok is false.
func WatchSendErrors(l Link, fn func(SendError)) (stop func(), ok bool) {
	w, ok := l.(ErrorWatcher)
	if !ok {
		return func() {}, false
	}
	return w.WatchSendErrors(fn)
}

// Route is the route a link's host takes to a destination and the next
// hop's link-layer address, as the kernel's rdma_resolve_addr resolves
// them (drivers/infiniband/core/addr.c: addr4_resolve / addr6_resolve,
// then the neighbour, fetch_ha).
type Route struct {
	// Src is the source address the route prefers (RTA_PREFSRC).
	Src netip.Addr
	// Gateway is the next hop when the destination is not on a network
	// the host is on; invalid otherwise.
	Gateway netip.Addr
	// Iface is the index of the interface the route leaves by.
	Iface int
	// Local: the destination is an address of the host (a local route),
	// reached without a neighbour.
	Local bool
	// HWAddr is the next hop's link-layer address once resolved; nil for
	// a local or multicast destination, an interface without neighbours
	// (IFF_NOARP), or a neighbour softnic could not ask the kernel to
	// resolve (see UDPLink.ResolveRoute).
	HWAddr net.HardwareAddr
}

// Resolver is implemented by links on a host's network stack, which can
// ask it for the route and the neighbour to a destination (the UDP link,
// through netlink, in the network namespace it was opened in). The RDMA
// CM resolves addresses through it (rdma_resolve_addr). Without it (the
// fabric, which has no routing table) there is nothing to ask:
// ResolveRoute fails with ErrNoRouting.
type Resolver interface {
	// ResolveRoute resolves the route to dst and its neighbour (the
	// package's ResolveRoute).
	ResolveRoute(ctx context.Context, dst netip.Addr) (Route, error)
}

// ErrNoRouting is ResolveRoute's error for a link that has no routing
// table to ask (not a Resolver). It wraps errors.ErrUnsupported.
var ErrNoRouting = fmt.Errorf("link: no routing table: %w", errors.ErrUnsupported)

// ResolveRoute resolves, on l's host, the route from l's address to dst
// and the next hop's link-layer address, waiting for the neighbour until
// ctx ends (Resolver). Its errors carry the kernel's errno, as
// rdma_resolve_addr's ADDR_ERROR does: ENETUNREACH (no route),
// EHOSTUNREACH (an unreachable route), EACCES (a prohibit route), EINVAL
// (a blackhole route), ETIMEDOUT (no neighbour answered before ctx
// ended). ErrNoRouting when l has no routing table.
func ResolveRoute(ctx context.Context, l Link, dst netip.Addr) (Route, error) {
	r, ok := l.(Resolver)
	if !ok {
		return Route{}, ErrNoRouting
	}
	return r.ResolveRoute(ctx, dst)
}
