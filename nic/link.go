package nic

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sync"
	"syscall"

	"github.com/softnic/softnic/transport"
	"github.com/softnic/softnic/wire"
)

// MaxDatagram is the largest RoCEv2 UDP payload softnic sends or accepts:
// BTH and the longest header set, a 4096-byte PMTU, pad and ICRC.
const MaxDatagram = transport.MaxDatagram

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
// closed; New refuses a closed one.
type LinkCloser interface {
	Closed() bool
}

// linkUsers maps the links of open NICs, unwrapped (PcapLink), to the
// name of the NIC using them. A link carries one NIC's traffic: two NICs
// on one would share every datagram and hand out the same QPNs. Close
// removes the entry, so a closed NIC is not kept alive by it.
var linkUsers struct {
	mu sync.Mutex
	m  map[any]string // guarded by mu
}

// innerLink returns l without the wrappers that say what they wrap
// (Unwrap() Link).
func innerLink(l Link) Link {
	for {
		u, ok := l.(interface{ Unwrap() Link })
		if !ok {
			return l
		}
		l = u.Unwrap()
	}
}

// claimLink records that NIC name uses l, or fails with ErrBusy naming the
// NIC that already does, or ErrClosed when l was closed (NIC.Close closes
// its link). It returns the function that releases l.
func claimLink(l Link, name string) (release func(), err error) {
	in := innerLink(l)
	if c, ok := in.(LinkCloser); ok && c.Closed() {
		return nil, fmt.Errorf("%w: link %v is closed (closing a device closes its link; attach a new one)", ErrClosed, l.LocalAddr())
	}
	if !reflect.ValueOf(in).Comparable() {
		return func() {}, nil // cannot be a map key: not tracked
	}
	linkUsers.mu.Lock()
	defer linkUsers.mu.Unlock()
	if user, ok := linkUsers.m[in]; ok {
		return nil, fmt.Errorf("%w: link %v is already in use by device %s", ErrBusy, l.LocalAddr(), user)
	}
	if linkUsers.m == nil {
		linkUsers.m = make(map[any]string)
	}
	linkUsers.m[in] = name
	return func() {
		linkUsers.mu.Lock()
		delete(linkUsers.m, in)
		linkUsers.mu.Unlock()
	}, nil
}
