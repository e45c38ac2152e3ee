package transporttest

// The packet checker, in the style of gVisor's pkg/tcpip/checker: an
// assertion is a list of small functions over a captured packet,
//
//	Check(t, pkt, Opcode(wire.RCAck), PSN(3), Syndrome(wire.NakPSNSequence))
//
// each reporting what it found against what it wanted.

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/wire"
)

// A Checker checks one property of a captured packet, failing t
// (t.Errorf) when it does not hold.
type Checker func(t testing.TB, p *Packet)

// Check fails the test unless p parsed and every checker holds for it.
func Check(t testing.TB, p *Packet, checkers ...Checker) {
	t.Helper()
	if !p.Parsed {
		t.Errorf("%s: not a RoCEv2 packet", p.Desc())
		return
	}
	for _, c := range checkers {
		c(t, p)
	}
}

// CheckEach checks every packet of ps.
func CheckEach(t testing.TB, ps []Packet, checkers ...Checker) {
	t.Helper()
	for i := range ps {
		Check(t, &ps[i], checkers...)
	}
}

// Opcode checks the BTH opcode.
func Opcode(op wire.Opcode) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := p.Wire.Opcode; got != op {
			t.Errorf("%s: opcode %v, want %v", p.Desc(), got, op)
		}
	}
}

// Class checks the opcode's transport class (wire.ClassRC, ClassUC, ...).
func Class(c wire.Opcode) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := p.Wire.Opcode.Class(); got != c {
			t.Errorf("%s: class %#x, want %#x", p.Desc(), uint8(got), uint8(c))
		}
	}
}

// PSN checks the BTH PSN.
func PSN(psn wire.PSN) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := p.Wire.PSN(); got != psn {
			t.Errorf("%s: PSN %d, want %d", p.Desc(), got, psn)
		}
	}
}

// DestQP checks the BTH destination QP.
func DestQP(qpn uint32) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := p.Wire.DestQP(); got != qpn {
			t.Errorf("%s: destination QP %#x, want %#x", p.Desc(), got, qpn)
		}
	}
}

// AckReq checks the BTH AckReq bit.
func AckReq(want bool) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := p.Wire.AckReq(); got != want {
			t.Errorf("%s: AckReq %v, want %v", p.Desc(), got, want)
		}
	}
}

// SE checks the BTH solicited-event bit.
func SE(want bool) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := p.Wire.SE(); got != want {
			t.Errorf("%s: SE %v, want %v", p.Desc(), got, want)
		}
	}
}

// Mask checks that the opcode has every bit of m (wire.MaskStart, ...)
// when want is set, and not all of them when it is not.
func Mask(m wire.Mask, want bool) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := p.Wire.Is(m); got != want {
			t.Errorf("%s: opcode mask %#x present %v, want %v", p.Desc(), m, got, want)
		}
	}
}

// Syndrome checks the AETH syndrome.
func Syndrome(s wire.Syndrome) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		a := p.Wire.AETH()
		switch {
		case a == nil:
			t.Errorf("%s: no AETH, want syndrome %v", p.Desc(), s)
		case a.Syndrome() != s:
			t.Errorf("%s: syndrome %v (%#x), want %v (%#x)", p.Desc(), a.Syndrome(), uint8(a.Syndrome()), s, uint8(s))
		}
	}
}

// MSN checks the AETH message sequence number.
func MSN(msn uint32) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		a := p.Wire.AETH()
		switch {
		case a == nil:
			t.Errorf("%s: no AETH, want MSN %d", p.Desc(), msn)
		case a.MSN() != msn:
			t.Errorf("%s: MSN %d, want %d", p.Desc(), a.MSN(), msn)
		}
	}
}

// RETH checks the RETH; the zero RETHFields checks there is none.
func RETH(f wire.RETHFields) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		r := p.Wire.RETH()
		switch {
		case r == nil && f != (wire.RETHFields{}):
			t.Errorf("%s: no RETH, want %+v", p.Desc(), f)
		case r != nil && f == (wire.RETHFields{}):
			t.Errorf("%s: RETH %+v, want none", p.Desc(), r.Fields())
		case r != nil && r.Fields() != f:
			t.Errorf("%s: RETH %+v, want %+v", p.Desc(), r.Fields(), f)
		}
	}
}

// HasRETH checks whether the packet carries a RETH.
func HasRETH(want bool) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := p.Wire.RETH() != nil; got != want {
			t.Errorf("%s: RETH present %v, want %v", p.Desc(), got, want)
		}
	}
}

// DETH checks the DETH's Q_Key and source QP.
func DETH(qkey, srcQP uint32) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		d := p.Wire.DETH()
		switch {
		case d == nil:
			t.Errorf("%s: no DETH", p.Desc())
		case d.QKey() != qkey || d.SrcQP() != srcQP:
			t.Errorf("%s: DETH Q_Key %#x source QP %#x, want %#x %#x", p.Desc(), d.QKey(), d.SrcQP(), qkey, srcQP)
		}
	}
}

// XRCSRQ checks the XRCETH's SRQ number.
func XRCSRQ(num uint32) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		x := p.Wire.XRCETH()
		switch {
		case x == nil:
			t.Errorf("%s: no XRCETH, want XRC SRQ %d", p.Desc(), num)
		case x.XRCSRQ() != num:
			t.Errorf("%s: XRC SRQ %d, want %d", p.Desc(), x.XRCSRQ(), num)
		}
	}
}

// Imm checks the immediate data.
func Imm(v uint32) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		im := p.Wire.ImmDt()
		switch {
		case im == nil:
			t.Errorf("%s: no immediate data, want %#x", p.Desc(), v)
		case im.Imm() != v:
			t.Errorf("%s: immediate %#x, want %#x", p.Desc(), im.Imm(), v)
		}
	}
}

// AtomicOrig checks an atomic ACK's original value.
func AtomicOrig(v uint64) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		a := p.Wire.AtomicAckETH()
		switch {
		case a == nil:
			t.Errorf("%s: no AtomicAckETH, want %d", p.Desc(), v)
		case a.Orig() != v:
			t.Errorf("%s: original value %d, want %d", p.Desc(), a.Orig(), v)
		}
	}
}

// PayloadLen checks the payload's length (pad excluded).
func PayloadLen(n int) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got := len(p.Wire.Payload); got != n {
			t.Errorf("%s: payload of %d bytes, want %d", p.Desc(), got, n)
		}
	}
}

// Payload checks the payload's bytes.
func Payload(b []byte) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if !bytes.Equal(p.Wire.Payload, b) {
			t.Errorf("%s: payload % x, want % x", p.Desc(), p.Wire.Payload, b)
		}
	}
}

// Pad checks the BTH pad count is what the payload's length needs.
func Pad() Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if got, want := p.Wire.BTH().Pad(), wire.PadFor(len(p.Wire.Payload)); got != want {
			t.Errorf("%s: pad %d, want %d", p.Desc(), got, want)
		}
	}
}

// From checks the sender's address.
func From(a netip.Addr) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if p.Src != a.Unmap() {
			t.Errorf("%s: from %v, want %v", p.Desc(), p.Src, a)
		}
	}
}

// Ports checks the UDP source and destination ports.
func Ports(src, dst uint16) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if e := &p.Encap; e.SrcPort != src || e.DstPort != dst {
			t.Errorf("%s: UDP ports %d->%d, want %d->%d", p.Desc(), e.SrcPort, e.DstPort, src, dst)
		}
	}
}

// IPHeader checks the traffic class, hop limit and, on IPv6, flow label
// of the IP header.
func IPHeader(tc, hop uint8, flow uint32) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if e := &p.Encap; e.TrafficClass != tc || e.HopLimit != hop || e.FlowLabel != flow {
			t.Errorf("%s: traffic class %#x hop limit %d flow label %#x, want %#x %d %#x",
				p.Desc(), e.TrafficClass, e.HopLimit, e.FlowLabel, tc, hop, flow)
		}
	}
}

// At checks the fake time the packet left at.
func At(when time.Time) Checker {
	return func(t testing.TB, p *Packet) {
		t.Helper()
		if !p.At.Equal(when) {
			t.Errorf("%s: sent at %v, want %v (%+v)", p.Desc(), p.At.Sub(Epoch), when.Sub(Epoch), p.At.Sub(when))
		}
	}
}
