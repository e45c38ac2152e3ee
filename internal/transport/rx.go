package transport

import "github.com/softnic/softnic/wire"

// MaxDatagram is the largest RoCEv2 UDP payload softnic handles
// (wire.MaxDatagram).
const MaxDatagram = wire.MaxDatagram

// RxPacket is a received datagram after the engine parsed it once: the
// buffer it lives in, its IP/UDP header and its parsed view. The engine
// hands it to a QP, which owns it until it calls Release.
type RxPacket struct {
	Encap wire.Encap
	Pkt   wire.Packet
	Data  []byte // the UDP payload, aliasing buf
	buf   [MaxDatagram]byte
	pool  interface{ Put(any) }
}

// Buffer returns the packet's full-capacity receive buffer.
func (p *RxPacket) Buffer() []byte { return p.buf[:] }

// SetPool records where Release returns the packet.
func (p *RxPacket) SetPool(pool interface{ Put(any) }) { p.pool = pool }

// Release returns the packet to its pool once its consumer is done with it.
func (p *RxPacket) Release() {
	if p.pool != nil {
		p.pool.Put(p)
	}
}
