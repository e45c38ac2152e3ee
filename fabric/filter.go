package fabric

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/wire"
)

// Packet is what filters and taps see of one datagram offered to the
// fabric.
type Packet struct {
	// Src is the sending endpoint's address and Dst the destination
	// address from the Encap, both with IPv4-mapped addresses unmapped.
	Src, Dst netip.Addr
	// Encap is the IP/UDP header as sent (Src filled in if the sender left
	// it unset).
	Encap wire.Encap
	// Data is the UDP payload, BTH through ICRC. It is read-only, and
	// valid only during the call.
	Data []byte
	// Parsed reports whether Data parsed with wire.Parse; Wire is valid
	// only when it is.
	Parsed bool
	// Wire is Data parsed (its slices alias Data).
	Wire wire.Packet
	// Index is the datagram's position among those offered on its directed
	// path (Src to Dst), from 0.
	Index uint64
}

// Clone returns a copy of p whose Data (and Wire) no longer alias the
// fabric's buffer, for taps that keep packets.
func (p Packet) Clone() Packet {
	q := p
	q.Data = bytes.Clone(p.Data)
	if q.Parsed {
		_ = wire.Parse(q.Data, &q.Wire)
	}
	return q
}

// String describes p in one line, for test logs.
func (p Packet) String() string {
	if !p.Parsed {
		return fmt.Sprintf("%v->%v #%d unparsed %d bytes", p.Src, p.Dst, p.Index, len(p.Data))
	}
	return fmt.Sprintf("%v->%v #%d %v qp=%#x psn=%d len=%d", p.Src, p.Dst, p.Index,
		p.Wire.Opcode, p.Wire.DestQP(), p.Wire.PSN(), len(p.Data))
}

type actionKind uint8

const (
	actPass actionKind = iota
	actDrop
	actDuplicate
	actCorrupt
	actReorder
	actDelay
	actMarkCE
)

// Action is a filter's verdict on a datagram: Pass, Drop, Duplicate,
// Corrupt, Reorder, MarkCE or Delay(d). Actions compare with ==.
type Action struct {
	kind  actionKind
	delay time.Duration
}

// The actions a Filter returns.
var (
	// Pass lets the datagram through to the next filter and, if no filter
	// acts on it, to the random impairments.
	Pass = Action{}
	// Drop discards the datagram (counted as DropFilter).
	Drop = Action{kind: actDrop}
	// Duplicate delivers the datagram twice, back to back.
	Duplicate = Action{kind: actDuplicate}
	// Corrupt flips one bit of the datagram, chosen by the seeded random
	// source, so the receiver's ICRC check fails.
	Corrupt = Action{kind: actCorrupt}
	// Reorder holds the datagram back until the next datagram on its path
	// has been delivered (or, if none comes, for the path's
	// ReorderTimeout).
	Reorder = Action{kind: actReorder}
	// MarkCE marks an ECN-capable datagram (ECT(0) or ECT(1) in its
	// Encap's traffic class) Congestion Experienced, as a switch whose
	// queue builds does (RFC 3168 5), and delivers it; a datagram that
	// is not ECN-capable, or already CE, passes unchanged.
	MarkCE = Action{kind: actMarkCE}
)

// Delay returns the action that delivers the datagram d later, by
// Config.Clock. Delay(0) is Pass.
func Delay(d time.Duration) Action {
	if d <= 0 {
		return Pass
	}
	return Action{kind: actDelay, delay: d}
}

// String names the action.
func (a Action) String() string {
	switch a.kind {
	case actPass:
		return "Pass"
	case actDrop:
		return "Drop"
	case actDuplicate:
		return "Duplicate"
	case actCorrupt:
		return "Corrupt"
	case actReorder:
		return "Reorder"
	case actDelay:
		return fmt.Sprintf("Delay(%v)", a.delay)
	case actMarkCE:
		return "MarkCE"
	}
	return fmt.Sprintf("Action(%d)", a.kind)
}

// Filter decides what happens to a datagram; see Fabric.AddFilter. It must
// neither keep nor modify p.
type Filter func(p *Packet) Action

// Matcher selects datagrams for the filter helpers. A nil Matcher matches
// every datagram.
type Matcher func(p *Packet) bool

func (m Matcher) match(p *Packet) bool { return m == nil || m(p) }

// OnMatch returns a filter that applies a to every datagram m matches.
func OnMatch(m Matcher, a Action) Filter {
	return func(p *Packet) Action {
		if m.match(p) {
			return a
		}
		return Pass
	}
}

// OnNth returns a filter that applies a to the nth datagram (counting
// from 1) that m matches, and passes every other. Matches are counted
// across all paths in the order the fabric sees them; restrict m with From
// or To for a deterministic count.
func OnNth(n int, m Matcher, a Action) Filter {
	var seen atomic.Int64
	return func(p *Packet) Action {
		if m.match(p) && seen.Add(1) == int64(n) {
			return a
		}
		return Pass
	}
}

// DropNth returns a filter that drops the nth datagram (counting from 1)
// that m matches: DropNth(3, OpcodeIs(wire.RCWriteMiddle)) loses the third
// RDMA WRITE MIDDLE.
func DropNth(n int, m Matcher) Filter { return OnNth(n, m, Drop) }

// DropIf returns a filter that drops every datagram m matches.
func DropIf(m Matcher) Filter { return OnMatch(m, Drop) }

// OpcodeIs matches parsed datagrams with any of the opcodes ops.
func OpcodeIs(ops ...wire.Opcode) Matcher {
	ops = slices.Clone(ops)
	return func(p *Packet) bool { return p.Parsed && slices.Contains(ops, p.Wire.Opcode) }
}

// MaskIs matches parsed datagrams whose opcode has every bit of m, e.g.
// wire.MaskAck for every ACK.
func MaskIs(m wire.Mask) Matcher {
	return func(p *Packet) bool { return p.Parsed && p.Wire.Is(m) }
}

// PSNIs matches parsed datagrams with BTH PSN psn.
func PSNIs(psn wire.PSN) Matcher {
	return func(p *Packet) bool { return p.Parsed && p.Wire.PSN() == psn }
}

// DestQPIs matches parsed datagrams with BTH destination QP qpn.
func DestQPIs(qpn uint32) Matcher {
	return func(p *Packet) bool { return p.Parsed && p.Wire.DestQP() == qpn }
}

// From matches datagrams sent by the endpoint at addr.
func From(addr netip.Addr) Matcher {
	a := canon(addr)
	return func(p *Packet) bool { return p.Src == a }
}

// To matches datagrams addressed to addr.
func To(addr netip.Addr) Matcher {
	a := canon(addr)
	return func(p *Packet) bool { return p.Dst == a }
}

// IndexIs matches the datagram with index i on its path.
func IndexIs(i uint64) Matcher {
	return func(p *Packet) bool { return p.Index == i }
}

// And matches datagrams every one of ms matches (all datagrams when ms is
// empty).
func And(ms ...Matcher) Matcher {
	ms = slices.Clone(ms)
	return func(p *Packet) bool {
		for _, m := range ms {
			if !m.match(p) {
				return false
			}
		}
		return true
	}
}

// Or matches datagrams any one of ms matches (none when ms is empty).
func Or(ms ...Matcher) Matcher {
	ms = slices.Clone(ms)
	return func(p *Packet) bool {
		for _, m := range ms {
			if m.match(p) {
				return true
			}
		}
		return false
	}
}

// Not matches datagrams m does not match.
func Not(m Matcher) Matcher {
	return func(p *Packet) bool { return !m.match(p) }
}
