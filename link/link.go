// Package link carries softnic's RoCEv2 datagrams: the Link interface the
// engine sends and receives through, the UDP link on port 4791 (batched
// sendmmsg/recvmmsg, UDP GSO and GRO, errors counted by errno, the
// interface's MTU and state followed through netlink, the ICMP errors of
// its error queue, routes and neighbours asked through rtnetlink) and the
// pcap recorder that
// wraps any link. The in-memory network of package fabric implements the
// same interface. The engine (package nic) knows links only through Link,
// as wireguard-go's device knows its conn.Bind, and through the optional
// capabilities some links add (reading without waiting, multicast,
// lending, ...): each an interface of caps.go, asked through the
// function beside it (CanPoll, CanMulticast, Lend, ...).
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
