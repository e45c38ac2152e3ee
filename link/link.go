// Package link carries softnic's RoCEv2 datagrams: the Link interface the
// engine sends and receives through, the UDP link on port 4791 (batched
// sendmmsg/recvmmsg, UDP GSO and GRO, errors counted by errno, the
// interface's MTU followed through netlink) and the pcap recorder that
// wraps any link. The in-memory network of package fabric implements the
// same interface. The engine (package nic) knows links only through Link,
// as wireguard-go's device knows its conn.Bind.
package link

import (
	"errors"
	"net/netip"
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
	// link to put on the wire (the ICRC in Buf was computed over it); on
	// receive, what arrived.
	Encap wire.Encap
	// Buf is the UDP payload, BTH through ICRC. On receive the caller
	// provides buffers of capacity MaxDatagram and the link reslices them.
	Buf []byte
	// ICRCUnverifiable is set on receive when the link could not see every
	// IP header field the ICRC covers (an IPv4 datagram from a plain UDP
	// socket hides the IP identification); the engine counts such packets
	// instead of checking their ICRC.
	ICRCUnverifiable bool
	// Err is set by WriteBatch on a datagram the link could not send: the
	// errno of the failed send (EMSGSIZE, ENETUNREACH, EPERM, ...), or for
	// a datagram the link refused before sending, EAFNOSUPPORT (another
	// address family) or EDESTADDRREQ (no destination address or port).
	// WriteBatch never clears it: the caller sets it to 0 before writing.
	// A link that cannot fail a send (the in-memory fabric, where loss
	// happens on the way) leaves it 0.
	Err syscall.Errno
}

// Link moves RoCEv2 datagrams for one NIC address: the in-memory fabric
// in tests, a UDP socket on port 4791 on a real network (STYLE.md 11).
type Link interface {
	// ReadBatch blocks until at least one datagram is available, fills
	// msgs[:n] (reslicing each Buf within its capacity) and returns n.
	// It returns ErrLinkClosed once the link is closed.
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
	// MTU is the MTU in bytes (IP header included: the netdev MTU) of
	// the network interface holding LocalAddr, as it is now; 0 when the
	// link cannot tell. The engine derives the port's active MTU from it
	// at every use, as rxe does from its netdev (ActiveMTU), so a link
	// whose interface MTU changes reports the new value.
	MTU() int
	// Close unblocks ReadBatch and releases the link.
	Close() error
}

// LinkCloser is implemented by links that report whether they were
// closed; the engine refuses a closed one.
type LinkCloser interface {
	Closed() bool
}

// IPv4IDGuesser is implemented by links whose receive path cannot see the
// IPv4 identification (a plain UDP socket): when GuessesIPv4ID reports
// true, the ID in the Encap of a received IPv4 datagram is a guess, which
// the engine's ICRC check corrects (wire.SolveIPv4ID). Links that wrap another
// link should forward it.
type IPv4IDGuesser interface {
	GuessesIPv4ID() bool
}

// GuessesIPv4ID reports whether l returns guessed IPv4 identifications.
func GuessesIPv4ID(l Link) bool {
	g, ok := l.(IPv4IDGuesser)
	return ok && g.GuessesIPv4ID()
}

// VerifyICRC reports whether pkt's ICRC is right for e, as the engine
// checks every datagram a link could fully see (rxe_icrc.c rxe_icrc_check).
// For an IPv4 datagram from a link that guesses the identification, a
// mismatch is resolved by solving for the identification (wire.SolveIPv4ID):
// e.ID is corrected and the datagram passes if some identification makes
// the ICRC right. The success path costs one CRC pass, like
// wire.CheckICRC; the correction costs one multiplication.
func VerifyICRC(l Link, e *wire.Encap, pkt []byte) bool {
	if len(pkt) < wire.BTHLen+wire.ICRCLen {
		return false
	}
	got, want := wire.ComputeICRC(e, pkt), wire.StoredICRC(pkt)
	if got == want {
		return true
	}
	if !e.IsIPv4() || !GuessesIPv4ID(l) {
		return false
	}
	x, ok := wire.SolveIPv4ID(got, want, len(pkt))
	if ok {
		e.ID ^= x
	}
	return ok
}
