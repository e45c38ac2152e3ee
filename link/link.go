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
// field as it was on the wire, or says why not: the UDP link solves for
// an IPv4 identification (wire.SolveIPv4ID) while checking the ICRC and
// passes its verdict in Datagram.ICRC, so the engine checks only what a
// link left unchecked and asks the link nothing on a packet's way.
//
// See UDPLink for how the UDP link was designed and what it costs.
package link

import (
	"errors"
	"fmt"
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
	// field the ICRC covers as it was on the wire (a link that cannot see
	// one solves for it or says so in ICRC).
	Encap wire.Encap
	// Buf is the UDP payload, BTH through ICRC. On receive the caller
	// provides buffers of capacity MaxDatagram and the link reslices them.
	Buf []byte
	// ICRC says, on receive, what the link knows of the ICRC (see
	// ICRCStatus); transmit ignores it.
	ICRC ICRCStatus
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

// LinkCloser is implemented by links that report whether they were
// closed; the engine refuses a closed one.
type LinkCloser interface {
	Closed() bool
}

// ICRCStatus is what a link knows of a received datagram's ICRC.
type ICRCStatus uint8

const (
	// ICRCUnchecked: the link saw every header field the ICRC covers and
	// left the check to the receiver (wire.CheckICRC over Encap). The
	// fabric and the UDP link's IPv6 datagrams.
	ICRCUnchecked ICRCStatus = iota
	// ICRCGood: the link checked the ICRC over Encap, having solved for
	// the one field it could not see (an IPv4 identification,
	// wire.SolveIPv4ID), which Encap now holds.
	ICRCGood
	// ICRCBad: the link checked the ICRC and no value of the field it
	// could not see makes it right; the receiver drops the datagram and
	// counts it (icrc_err), as for a failed check of its own.
	ICRCBad
	// ICRCUnverifiable: the link could not see every covered field and
	// did not solve for it (IPv4ICRCSkip); the receiver accepts the
	// datagram and counts it (ICRCUnverified).
	ICRCUnverifiable
)

func (s ICRCStatus) String() string {
	switch s {
	case ICRCUnchecked:
		return "unchecked"
	case ICRCGood:
		return "good"
	case ICRCBad:
		return "bad"
	case ICRCUnverifiable:
		return "unverifiable"
	}
	return fmt.Sprintf("ICRCStatus(%d)", uint8(s))
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
