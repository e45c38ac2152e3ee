package nic

// The receive goroutine and the checks every datagram passes before its
// QP gets it (rxe_recv.c rxe_rcv: ICRC, destination, P_Key, QP and
// transport class); a reader (run.go) then runs the QPs that got
// packets.

import (
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// rxLoop is the NIC's receive goroutine: it reads datagrams in batches
// and runs each to completion (reader.read).
func (n *NIC) rxLoop() {
	r := n.newReader()
	r.hold = true
	defer r.release()
	for {
		if !n.awaitLease() {
			return
		}
		if _, ok := r.read(n.cfg.Link.ReadBatch); !ok {
			n.linkClosed()
			return
		}
	}
}

// receive checks one datagram and delivers it, noting its QP in r; it
// reports whether a QP took the packet. Every refusal is counted and dropped, never returned
// (STYLE.md 15).
func (n *NIC) receive(r *reader, p *transport.RxPacket, d *link.Datagram) bool {
	c := &n.ctr
	c.RcvdPkts.Add(1)
	c.RcvdBytes.Add(uint64(len(p.Data)))
	if err := wire.Parse(p.Data, &p.Pkt); err != nil {
		c.DropMalformed.Add(1)
		return false
	}
	// rxe_icrc.c rxe_icrc_check, as far as the link could see the header
	// (link.ICRCStatus): a guessed IPv4 identification is solved for here,
	// in the per-datagram loop, and corrected in d.Encap.
	if d.ICRC == link.ICRCUnverifiable {
		c.ICRCUnverified.Add(1)
	} else if !d.CheckICRC() {
		c.ICRCErr.Add(1)
		return false
	}
	p.Encap = d.Encap
	// rxe_recv.c rxe_chk_dgid: the destination must be our GID, or a
	// multicast group (receiveMcast: only the groups our QPs joined).
	if d := p.Encap.Dst.Unmap(); d != n.addr.Unmap() {
		if d.IsMulticast() {
			return n.receiveMcast(r, p, d)
		}
		c.DropAddr.Add(1)
		return false
	}
	// rxe_recv.c check_keys: P_Key must match the default full-member key
	// in its low 15 bits (pkey_match with 0xffff).
	if !transport.PKeyMatches(p.Pkt.BTH().PKey()) {
		c.DropPKey.Add(1)
		return false
	}
	qpn := p.Pkt.DestQP()
	e := n.lookup(qpn)
	if e == nil || !transport.ClassMatches(p.Pkt.Opcode, e.typ) {
		c.DropNoQP.Add(1)
		return false
	}
	// Note it first: once delivered, the packet is the QP's, which
	// another goroutine may be processing already.
	writes, answer := writesMemory(&p.Pkt), answerable(&p.Pkt)
	if !e.h.Deliver(p) {
		c.DropQueueFull.Add(1)
		return false
	}
	r.touch(e, writes, answer)
	return true
}
