package nic

// The receive goroutine and the checks every datagram passes before its
// QP gets it (rxe_recv.c rxe_rcv: ICRC, destination, P_Key, QP and
// transport class); a reader (run.go) then runs the QPs that got
// packets.

import (
	"net/netip"

	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/internal/transport/rc"
	"github.com/softnic/softnic/internal/transport/ud"
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
	if p.Pkt.Opcode == wire.CNP {
		n.receiveCNP(e, &p.Pkt, p.Encap.Src)
		return false
	}
	if e == nil || !transport.ClassMatches(p.Pkt.Opcode, e.typ) {
		c.DropNoQP.Add(1)
		return false
	}
	if n.cfg.CC != nil && wire.ECN(p.Encap.TrafficClass) == wire.ECNCE {
		n.notifyCongestion(r, e, p)
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

// notifyCongestion is congestion control's notification point (DCQCN;
// RoCEv2 A17.9.3): p, for QP e, arrived marked Congestion Experienced,
// and the QP that sent it gets a CNP, unless the NIC sent one for e
// less than np_min_time_between_cnps ago. The QP that sent it is the
// peer of a connected QP and a UD datagram's DETH source QP. The CNP
// goes out with the reader's batch, not ECN-capable, with
// np_cnp_dscp. Only CE-marked packets are answered, so only a peer that
// sends ECN-capable packets, which asks for CNPs, ever gets one (Config.CC).
func (n *NIC) notifyCongestion(r *reader, e *qpEntry, p *transport.RxPacket) {
	c := &n.ctr
	c.NPECNMarkedRoCEPackets.Add(1)
	var dqp uint32
	if d := p.Pkt.DETH(); d != nil {
		dqp = d.SrcQP()
	} else if q, ok := e.h.(peerQPNer); ok {
		dqp = q.PeerQPN()
	} else {
		return
	}
	cfg := n.cfg.CC
	if !e.np.Allow(n.clock.Now(), cfg.NPMinTimeBetweenCNPs) {
		return
	}
	enc := wire.Encap{
		Src: p.Encap.Dst, Dst: p.Encap.Src,
		SrcPort: n.cfg.Link.SrcPort(), DstPort: n.cfg.PeerPort,
		TrafficClass: cfg.NPCNPDSCP << 2, HopLimit: transport.RouteHopLimit,
	}
	if enc.SrcPort == 0 {
		enc.SrcPort = wire.ConnectedSrcPort(e.qpn, dqp)
	}
	if enc.IsIPv4() {
		enc.Src, enc.Dst = enc.Src.Unmap(), enc.Dst.Unmap()
		enc.FragOff = wire.IPv4DF
	}
	k, err := wire.BuildCNP(r.out.Buf(), &enc, dqp)
	if err != nil {
		return // unreachable: a CNP fits any buffer
	}
	r.out.Send(k, &enc)
	c.NPCNPSent.Add(1)
}

// receiveCNP is congestion control's reaction point's end of a CNP for
// QP e (nil: no such QP): the QP's reaction point notes it (cc.RP.Note)
// and the QP's next pass cuts its rate. A CNP for a QP without one (CC
// off, an XRC_RECV QP, which sends no requests, no such QP), or from
// another address than a connected QP's peer (rc.QP.NoteCNP), is counted
// as rp_cnp_ignored and dropped; a CNP never reaches a transport's
// receive path.
func (n *NIC) receiveCNP(e *qpEntry, p *wire.Packet, src netip.Addr) {
	c := &n.ctr
	if e != nil && n.cfg.CC != nil && p.CheckCNP() == nil {
		if q, ok := e.h.(cnpNoter); ok && q.NoteCNP(src) {
			c.RPCNPHandled.Add(1)
			return
		}
	}
	c.RPCNPIgnored.Add(1)
}

// peerQPNer is a connected transport, which can say its peer's QPN
// (rc.QP.PeerQPN); cnpNoter one with a reaction point (rc.QP.NoteCNP,
// ud.QP.NoteCNP).
type (
	peerQPNer interface{ PeerQPN() uint32 }
	cnpNoter  interface{ NoteCNP(src netip.Addr) bool }
)

var (
	_ peerQPNer = (*rc.QP)(nil)
	_ cnpNoter  = (*rc.QP)(nil)
	_ cnpNoter  = (*ud.QP)(nil)
)
