package link

// The headers the kernel puts on what the link sends, which the ICRC
// covers: the bound source port, DF, and identification 0, or i for the
// i-th segment of a GSO send (wireEncap), and the ICRC patched to them.
// On receive, the IPv4 identification a socket hides is guessed in
// deliver (udp_recv_linux.go) and solved by the engine's check
// (Datagram.CheckICRC, icrc.go).

import (
	"github.com/softnic/softnic/wire"
)

// wireEncap returns the headers the kernel will send for e, as segment
// seg of its send.
func (l *UDPLink) wireEncap(e *wire.Encap, seg int) wire.Encap {
	w := wire.Encap{Src: l.addr, Dst: e.Dst, SrcPort: l.port, DstPort: e.DstPort,
		TrafficClass: e.TrafficClass, HopLimit: e.HopLimit}
	if w.HopLimit == 0 {
		w.HopLimit = l.ttl
	}
	if l.v4 {
		w.Dst = w.Dst.Unmap()
		w.ID = uint16(seg)
		w.FragOff = wire.IPv4DF
	}
	return w
}

// icrcOf returns the four bytes of d's ICRC, the end of its Buf (nil if
// Buf is shorter).
func icrcOf(d *Datagram) []byte {
	if len(d.Buf) < wire.ICRCLen {
		return nil
	}
	return d.Buf[len(d.Buf)-wire.ICRCLen:]
}
