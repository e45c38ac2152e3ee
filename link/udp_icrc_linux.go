package link

// The headers the kernel puts on what the link sends, which the ICRC
// covers: the bound source port, DF, and identification 0, or i for the
// i-th segment of a GSO send (wireEncap), and the ICRC patched to them.
// On receive, the IPv4 identification a socket hides is guessed in
// deliver (udp_recv_linux.go) and solved by the engine's check
// (Datagram.CheckICRC, icrc.go).

import "github.com/softnic/softnic/wire"

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

// patchWire rewrites the Encap of every datagram in t's first nm
// messages to the headers the kernel will send (wireEncap), segment s of
// a GSO send with identification s, and patches its ICRC to them.
func (t *udpTx) patchWire(msgs []Datagram, nm int) {
	l := t.l
	for g := range nm {
		for s := range t.count[g] {
			d := &msgs[t.first[g]+s]
			seg := 0
			if t.count[g] > 1 {
				seg = s
			}
			w := l.wireEncap(&d.Encap, seg)
			t.idp.PatchEncapAt(icrcOf(d), d.Len(), &d.Encap, &w)
			d.Encap = w
		}
	}
}

// patchPlain patches the datagrams of ds that a first pass checked and
// patched as GSO segments back to identification 0 (sendPlain sends each
// in a message of its own); it skips those the first pass dropped.
func (l *UDPLink) patchPlain(ds []Datagram) {
	for i := range ds {
		d := &ds[i]
		if d.Err != 0 || !d.Encap.Dst.IsValid() {
			continue
		}
		if w := l.wireEncap(&d.Encap, 0); d.Encap != w {
			wire.PatchICRCAt(icrcOf(d), d.Len(), &d.Encap, &w)
			d.Encap = w
		}
	}
}
