package transport

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// MaxDatagram is the largest RoCEv2 UDP payload softnic handles
// (wire.MaxDatagram).
const MaxDatagram = wire.MaxDatagram

// RxPacket is a received datagram after the engine parsed it once: the
// buffer it lives in, its IP/UDP header and its parsed view. The engine
// hands it to a QP, which owns it until it calls Release.
type RxPacket struct {
	Encap wire.Encap
	Pkt   wire.Packet
	Data  []byte // the UDP payload, aliasing buf or a link's loan
	buf   [MaxDatagram]byte
	pool  interface{ Put(any) }
	loan  Loan
}

// Loan is a buffer lent by a link (link.Loan): Release gives it back.
type Loan interface{ Release() }

// SetLoan records that Data lies in a link's buffer (link.Datagram.Loan),
// which Release or DropLoan gives back.
func (p *RxPacket) SetLoan(l Loan) { p.loan = l }

// DropLoan gives back the link buffer Data lies in, if any, and points
// Data at nothing: the packet can be read into again.
func (p *RxPacket) DropLoan() {
	if p.loan != nil {
		p.loan.Release()
		p.loan = nil
		p.Data = nil
	}
}

// Buffer returns the packet's full-capacity receive buffer.
func (p *RxPacket) Buffer() []byte { return p.buf[:] }

// SetPool records where Release returns the packet.
func (p *RxPacket) SetPool(pool interface{ Put(any) }) { p.pool = pool }

// Release returns the packet to its pool once its consumer is done with it.
func (p *RxPacket) Release() {
	p.DropLoan()
	if p.pool != nil {
		p.pool.Put(p)
	}
}

// PKeyMatches reports whether a packet's P_Key is accepted: it must match
// the default full-member key in its low 15 bits (rxe_recv.c check_keys:
// pkey_match with 0xffff).
func PKeyMatches(pkey uint16) bool { return pkey&0x7FFF == wire.DefaultPKey&0x7FFF }

// ClassMatches reports whether opcode's transport class fits a QP of type
// t (rxe_recv.c check_type_state); for the two XRC types, also whether
// its direction does. The engine routes by it, and so does the transports'
// test kit.
func ClassMatches(op wire.Opcode, t ibv.QPType) bool {
	switch t {
	case ibv.QPTypeRC:
		return op.Class() == wire.ClassRC
	case ibv.QPTypeUC:
		return op.Class() == wire.ClassUC
	case ibv.QPTypeUD:
		return op.Class() == wire.ClassUD
	case ibv.QPTypeXRCSend:
		// The initiator has no receive side: XRC responses only.
		return op.Class() == wire.ClassXRC && op.Is(wire.MaskResponse)
	case ibv.QPTypeXRCRecv:
		// The target sends no requests: XRC requests only.
		return op.Class() == wire.ClassXRC && op.Is(wire.MaskRequest)
	}
	return false
}
