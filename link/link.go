// Package link carries softnic's RoCEv2 datagrams: the Link interface the
// engine sends and receives through, the UDP link on port 4791 (batched
// sendmmsg/recvmmsg, UDP GSO and GRO, errors counted by errno, the
// interface's MTU followed through netlink) and the pcap recorder that
// wraps any link. The in-memory network of package fabric implements the
// same interface. The engine (package nic) knows links only through Link,
// as wireguard-go's device knows its conn.Bind.
//
// A datagram's ICRC covers its IP and UDP headers, which a kernel UDP
// socket partly chooses: it sends from the port it is bound to, numbers
// the IPv4 identifications of GSO segments, and on receive hides the IPv4
// identification. Each fact flows one way. A link says the source port
// it sends from (Link.SrcPort) and the transports compute the ICRC over
// it, so what they build is what goes on the wire; the UDP link's only
// fix-up on the way out is the identification of GSO segments 1, 2, ...
// (wire.PatchICRC), and WriteBatch reports the headers sent in each
// Datagram's Encap. On receive, a link hands over every covered header
// field as it was on the wire, or says in Datagram.ICRC which one it
// could not see: the UDP link guesses the IPv4 identification a socket
// hides, and the engine's check (Datagram.CheckICRC) solves for it
// (wire.SolveIPv4ID) from the datagram alone, asking the link nothing on
// a packet's way. The check runs in the engine's per-datagram receive
// loop, not in ReadBatch: solving there put a CRC pass per datagram of a
// batch before the first was delivered, and 64 KiB RDMA WRITEs over GSO
// and GRO (BenchmarkUDPVerbsWrite) went 7 % slower.
//
// See UDPLink for how the UDP link was designed and what it costs.
package link

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/softnic/softnic/wire"
)

// MaxDatagram is the largest RoCEv2 UDP payload softnic sends or accepts:
// BTH and the longest header set, a 4096-byte PMTU, pad and ICRC.
const MaxDatagram = wire.MaxDatagram

// ErrLinkClosed is returned by a Link's methods after Close.
var ErrLinkClosed = errors.New("link closed")

// Datagram is one RoCEv2 UDP datagram crossing a Link.
type Datagram struct {
	// Encap is the IP/UDP header: on transmit, what the sender asks the
	// link to put on the wire (the ICRC in Buf was computed over it, with
	// the link's SrcPort when it has one); on receive, what arrived, every
	// field the ICRC covers as it was on the wire except one the link
	// could not see, which ICRC names.
	Encap wire.Encap
	// Buf is the UDP payload, BTH through ICRC. On receive the caller
	// provides buffers of capacity MaxDatagram and the link reslices them.
	// On transmit with a Payload, it is the rest of the datagram.
	Buf []byte
	// Payload, on transmit, is a part of the datagram the link sends from
	// where it lies (an application's registered memory) rather than
	// from a copy in Buf: the datagram is Buf[:Split], Payload,
	// Buf[Split:], and Buf[Split:] holds at least the ICRC. Only a link
	// that says it sends such datagrams (CanSendSplit) is given one; nil
	// otherwise, and always on receive.
	Payload []byte
	// Split is where Payload goes in Buf; see Payload.
	Split int
	// Loan, on receive, is set when the link handed the datagram over in
	// place, in a buffer of its own, instead of copying it into the
	// caller's (only a link lending, Lend): Buf is then a slice of that
	// buffer, which the link reuses once the caller released it
	// (Loan.Release), and the caller's buffer is left as it was. nil
	// otherwise; transmit ignores it.
	Loan *Loan
	// ICRC says, on receive, what the link knows of the ICRC and of
	// Encap (ICRCStatus; CheckICRC acts on it); a link that leaves it as
	// the caller set it (ICRCUnchecked, the zero value) says it saw the
	// whole header. Transmit ignores it.
	ICRC ICRCStatus
	// Err is set by WriteBatch on a datagram the link could not send: the
	// errno of the failed send (EMSGSIZE, ENETUNREACH, EPERM, ...), or for
	// a datagram the link refused before sending, EAFNOSUPPORT (another
	// address family), EDESTADDRREQ (no destination address or port) or
	// EINVAL (a Payload whose Split is outside Buf or leaves no ICRC
	// after it).
	// WriteBatch never clears it: the caller sets it to 0 before writing.
	// A link that cannot fail a send (the in-memory fabric, where loss
	// happens on the way) leaves it 0.
	Err syscall.Errno
	// Seq numbers, on receive, the datagrams a link hands out in the order
	// they arrived, from 1: one read's datagrams are consecutive, and a
	// reader that runs beside another (TryReadBatch beside a ReadBatch)
	// delivers its batch only after the batches numbered before it, so
	// that a QP sees its packets in the order the network gave them (UC
	// drops a message at a gap in its PSNs). 0: not numbered (a link that
	// has one reader, a multicast group's datagrams, which come from
	// other sockets). Transmit ignores it.
	Seq uint64
}

// Len returns the datagram's length: Buf's, plus Payload's on transmit.
func (d *Datagram) Len() int { return len(d.Buf) + len(d.Payload) }

// Link moves RoCEv2 datagrams for one NIC address: the in-memory fabric
// in tests, a UDP socket on port 4791 on a real network (STYLE.md 11).
type Link interface {
	// ReadBatch blocks until at least one datagram is available, fills
	// msgs[:n] (reslicing each Buf within its capacity) and returns n;
	// msgs[n:] are left as they were (the engine refills only msgs[:n]).
	// It returns 0 datagrams only when its read yield says so
	// (SetReadYield), and ErrLinkClosed once the link is closed.
	ReadBatch(msgs []Datagram) (n int, err error)
	// WriteBatch sends msgs and returns how many were accepted. A link
	// never blocks indefinitely: what it cannot queue it drops and counts.
	// Each datagram it drops on a send error gets that errno in its Err,
	// so that the caller can tell which datagrams were lost; err is only
	// for the link itself failing (ErrLinkClosed).
	WriteBatch(msgs []Datagram) (n int, err error)
	// BatchSize is the number of datagrams worth passing per call.
	BatchSize() int
	// LocalAddr is the IP address the link sends from and receives on.
	LocalAddr() netip.Addr
	// SrcPort is the UDP source port of every datagram the link sends, 0
	// when it sends each datagram's Encap.SrcPort. The ICRC covers the
	// source port, so the engine builds its datagrams with it (instead of
	// its per-QP ports) and their ICRCs are right as computed: a UDP
	// socket bound to 4791 sends from 4791.
	SrcPort() uint16
	// MTU is the MTU in bytes (IP header included: the netdev MTU) of
	// the network interface holding LocalAddr, as it is now; 0 when the
	// link cannot tell. The engine derives the port's active MTU from it
	// at every use, as rxe does from its netdev (ActiveMTU), so a link
	// whose interface MTU changes reports the new value.
	MTU() int
	// Close unblocks ReadBatch and releases the link.
	Close() error
}

// Poller is implemented by links that can read without waiting. It lets
// an application busy-polling an empty completion queue drive the NIC's
// receive itself, as DPDK's rx burst and UCX's progress do, instead of
// waiting for the NIC's receive goroutine to be scheduled. That goroutine
// stays blocked in ReadBatch on the same link; each datagram goes to
// whichever of the two reads first.
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

// CanPoll reports whether TryReadBatch on l reads the network: l is a
// Poller and, if it has a CanPoll method of its own (a wrapper such as
// PcapLink, a Poller whatever it wraps), that says yes. A caller
// busy-polls l only then; otherwise l's TryReadBatch, if any, finds
// nothing and ReadBatch carries the receive alone.
func CanPoll(l Link) bool {
	if _, ok := l.(Poller); !ok {
		return false
	}
	if c, ok := l.(interface{ CanPoll() bool }); ok {
		return c.CanPoll()
	}
	return true
}

// PreferBusyPoll reports whether a NIC on l should keep its receive
// goroutine off the link while an application busy-polls it (the NIC's
// poll lease): l can poll (CanPoll) and says so with a PreferBusyPoll
// method of its own. A UDP link does: a reader parked on a socket is a
// second thread the kernel may wake for a datagram the poll would have
// found, and the two readers race for it. The fabric does not: its
// readers wake for free, and the lease would only add its timer to a
// test's schedule.
func PreferBusyPoll(l Link) bool {
	if !CanPoll(l) {
		return false
	}
	c, ok := l.(interface{ PreferBusyPoll() bool })
	return ok && c.PreferBusyPoll()
}

// SetReadYield gives l a question its ReadBatch asks whenever it finds
// the socket empty: when yield reports true, ReadBatch returns 0
// datagrams instead of waiting on. It reports whether l asks it (l has a
// SetReadYield method that says so); set it before the first ReadBatch.
// The engine's poll lease uses it: while an application busy-polls the
// link, its receive goroutine, woken for a datagram a poll took first,
// steps off the link at that wake-up, which costs no extra system call
// and no timer (see the engine's pollLease). yield must be cheap and must
// not block: it runs inside the read.
func SetReadYield(l Link, yield func() bool) bool {
	c, ok := l.(interface{ SetReadYield(func() bool) bool })
	return ok && c.SetReadYield(yield)
}

// WakeRead wakes a ReadBatch waiting on l as a datagram would, so that
// it asks its read yield (SetReadYield) now, and reports whether l can
// (it has a WakeRead method that says so). With none waiting, the next
// ReadBatch asks at once anyway. The engine asks when its receive
// goroutine should step off the link for a busy-polling application but
// no datagram has woken it: Go's scheduler polls the network only when
// it has nothing else to run (or every 10 ms), so with one P and an
// application spinning, such a wake-up may not come.
func WakeRead(l Link) bool {
	c, ok := l.(interface{ WakeRead() bool })
	return ok && c.WakeRead()
}

// NextSeq returns the Seq l will give the next datagram it hands out, and
// whether l numbers its datagrams and can tell (a NextSeq method). A NIC
// asks once, before it reads: its readers then deliver in Seq order from
// its first datagram on (nic.NIC.awaitTurn), whatever an earlier user of
// the link was handed. A wrapper (the pcap recorder) asks the link it
// wraps.
func NextSeq(l Link) (uint64, bool) {
	c, ok := l.(interface{ NextSeq() (uint64, bool) })
	if !ok {
		return 0, false
	}
	return c.NextSeq()
}

// Lend asks l to hand datagrams over in place from now on, where it can
// (Datagram.Loan), and reports whether it may: l has a Lend method that
// says so. The UDP link lends the segments of a GRO-coalesced buffer,
// which it would otherwise copy one by one into the caller's buffers; a
// wrapper (the pcap recorder) asks the link it wraps. A caller that asks
// must release every Loan it is given.
func Lend(l Link) bool {
	c, ok := l.(interface{ Lend() bool })
	return ok && c.Lend()
}

// Loan is a link's receive buffer lent out with the datagrams handed over
// in it (Datagram.Loan). Each such datagram holds one reference, which
// its consumer gives back with Release once done with the datagram's
// Buf; the link reuses the buffer only when none is held, and takes
// another for its next read while any is.
type Loan struct {
	buf []byte
	// state: the references held (low bits), and loanDetached once the
	// link has let go of the buffer with references held, after which
	// the last Release returns it to pool. Only the link adds references,
	// and only while it holds the buffer.
	state    atomic.Int32
	pool     *sync.Pool
	released *atomic.Uint64 // counts Release calls (UDPStats.RxLentReleased)
}

const loanDetached = 1 << 30

// newLoanPool returns a pool of loans with buffers of n bytes, whose
// releases are counted in released.
func newLoanPool(n int, released *atomic.Uint64) *sync.Pool {
	p := new(sync.Pool)
	p.New = func() any { return &Loan{buf: make([]byte, n), pool: p, released: released} }
	return p
}

// Release gives back the reference of one datagram handed over in the
// loan; its Buf must not be used after.
func (l *Loan) Release() {
	l.released.Add(1)
	if l.state.Add(-1) == loanDetached {
		l.state.Store(0)
		l.pool.Put(l)
	}
}

// lend adds the reference of a datagram handed over in the loan.
func (l *Loan) lend() { l.state.Add(1) }

// keep reports whether the link can read into the loan's buffer again:
// no reference is held. Otherwise the loan is detached (its last Release
// returns it to the pool) and the link must take another.
func (l *Loan) keep() bool {
	if l.state.Add(loanDetached) == loanDetached {
		l.state.Store(0) // no reference: nobody else touches it
		return true
	}
	return false
}

// CanSendSplit reports whether l's WriteBatch takes datagrams with a
// Payload (Datagram.Payload), sending the payload from where it lies: l
// has a SendsSplit method that says so. The UDP link does, in the
// iovec of its sendmmsg; a link that would only copy the pieces together
// again (the fabric, the pcap recorder) does not, and the NIC copies the
// payload into the datagram itself, once.
func CanSendSplit(l Link) bool {
	c, ok := l.(interface{ SendsSplit() bool })
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
type Multicaster interface {
	// JoinGroup starts receiving datagrams sent to the multicast address
	// group (IPv4 unmapped, or IPv6). Joining a group twice is an error
	// (EADDRINUSE, as IP_ADD_MEMBERSHIP).
	JoinGroup(group netip.Addr) error
	// LeaveGroup stops receiving them; leaving a group not joined is an
	// error (EADDRNOTAVAIL, as IP_DROP_MEMBERSHIP).
	LeaveGroup(group netip.Addr) error
}

// CanMulticast reports whether l receives multicast: l is a Multicaster
// and, if it has a CanMulticast method of its own (a wrapper such as
// PcapLink), that says yes.
func CanMulticast(l Link) bool {
	if _, ok := l.(Multicaster); !ok {
		return false
	}
	if c, ok := l.(interface{ CanMulticast() bool }); ok {
		return c.CanMulticast()
	}
	return true
}

// LinkCloser is implemented by links that report whether they were
// closed; the engine refuses a closed one.
type LinkCloser interface {
	Closed() bool
}

// ICRCStatus is what a link knows of a received datagram's ICRC. The
// receiver checks it with Datagram.CheckICRC, which acts on the status
// alone: a link states what it saw in each datagram, and is never asked.
type ICRCStatus uint8

const (
	// ICRCUnchecked: Encap holds every header field the ICRC covers as it
	// was on the wire; the ICRC is not checked yet (wire.CheckICRC). The
	// fabric and the UDP link's IPv6 datagrams.
	ICRCUnchecked ICRCStatus = iota
	// ICRCGuessedIPv4ID: Encap is as on the wire except the IPv4
	// identification, which the link could not see (a UDP socket hides
	// it) and guessed; the check solves for the right one
	// (wire.SolveIPv4ID) and corrects Encap.ID. The UDP link's IPv4
	// datagrams in the IPv4ICRCSolve mode.
	ICRCGuessedIPv4ID
	// ICRCGood: the ICRC was checked and is right for Encap.
	ICRCGood
	// ICRCBad: the ICRC was checked and is wrong (for every IPv4
	// identification, if it was guessed); the receiver drops the datagram
	// and counts it (icrc_err).
	ICRCBad
	// ICRCUnverifiable: the link could not see every covered field and
	// did not guess (IPv4ICRCSkip); the receiver accepts the datagram
	// unchecked and counts it (ICRCUnverified).
	ICRCUnverifiable
)

func (s ICRCStatus) String() string {
	switch s {
	case ICRCUnchecked:
		return "unchecked"
	case ICRCGuessedIPv4ID:
		return "guessed-ipv4-id"
	case ICRCGood:
		return "good"
	case ICRCBad:
		return "bad"
	case ICRCUnverifiable:
		return "unverifiable"
	}
	return fmt.Sprintf("ICRCStatus(%d)", uint8(s))
}

// CheckICRC checks the ICRC of a received datagram as its status says
// (rxe_icrc.c rxe_icrc_check) and reports whether it is right:
// ICRCUnchecked is checked over Encap; ICRCGuessedIPv4ID is checked with
// the guessed identification and, on a mismatch, solved for the one that
// makes it right, which replaces Encap.ID; ICRCGood and ICRCBad are the
// verdicts of an earlier check; ICRCUnverifiable reports true (nothing to
// check against). A check records its verdict in d.ICRC, so a second
// call (a PcapLink checked before recording) costs nothing. One CRC pass
// at most, plus one multiplication when the guess was wrong.
func (d *Datagram) CheckICRC() bool {
	switch d.ICRC {
	case ICRCGood, ICRCUnverifiable:
		return true
	case ICRCUnchecked:
		d.ICRC = ICRCBad
		if wire.CheckICRC(&d.Encap, d.Buf) == nil {
			d.ICRC = ICRCGood
		}
	case ICRCGuessedIPv4ID:
		d.ICRC = ICRCBad
		if d.Encap.IsIPv4() {
			d.ICRC = solveIPv4ICRC(&d.Encap, d.Buf)
		}
	}
	return d.ICRC == ICRCGood
}

// solveIPv4ICRC checks pkt's ICRC over the IPv4 header e whose
// identification is a guess (a UDP socket hides it): when the ICRC does
// not match, it solves for the only identification that makes it right
// (wire.SolveIPv4ID) and stores it in e.ID. One CRC pass, as for
// wire.CheckICRC, plus one multiplication on a mismatch; what is lost is
// 16 of the ICRC's 32 bits against corruption.
func solveIPv4ICRC(e *wire.Encap, pkt []byte) ICRCStatus {
	if len(pkt) < wire.BTHLen+wire.ICRCLen {
		return ICRCBad
	}
	got, want := wire.ComputeICRC(e, pkt), wire.StoredICRC(pkt)
	if got == want {
		return ICRCGood
	}
	x, ok := wire.SolveIPv4ID(got, want, len(pkt))
	if !ok {
		return ICRCBad
	}
	e.ID ^= x
	return ICRCGood
}
