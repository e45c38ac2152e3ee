package nic

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// UD multicast (ibv_attach_mcast) on RoCEv2: a group is an IP multicast
// address, its GID the address itself (IPv4-mapped for IPv4). A UD QP
// attached to a group receives every datagram sent to the group's address
// with DestQP 0xFFFFFF (wire.MulticastQPN), a copy each, each QP checking
// its own state and Q_Key (rxe_recv.c rxe_rcv_mcast_pkt). The NIC's link
// joins the group while at least one QP is attached (rxe_mcast.c
// rxe_mcast_add/rxe_mcast_del). Sending needs nothing of this: a UD WR
// whose address handle names a multicast GID goes to that address.

// Multicast limits, rxe's (rxe_param.h: RXE_MAX_MCAST_GRP,
// RXE_MAX_MCAST_QP_ATTACH, RXE_MAX_TOT_MCAST_QP_ATTACH), reported in
// QueryDevice when the link can receive multicast.
const (
	MaxMcastGroups        = 8192
	MaxMcastQPAttach      = 56
	MaxTotalMcastQPAttach = 0x70000
)

// mcastTable is a NIC's multicast groups: the QPs attached to each.
type mcastTable struct {
	mu sync.RWMutex
	// groups maps a group address (IPv4 unmapped) to the QPNs attached to
	// it, in attach order; each slice is replaced, never changed, so the
	// receive path may range over one after releasing mu.
	groups map[netip.Addr][]uint32 // guarded by mu
	total  int                     // attachments, all groups; guarded by mu
}

// members returns the QPNs attached to group g.
func (t *mcastTable) members(g netip.Addr) []uint32 {
	t.mu.RLock()
	qpns := t.groups[g]
	t.mu.RUnlock()
	return qpns
}

// IsMulticastGID reports whether gid is a multicast GID
// (rdma_is_multicast_addr: ff00::/8, or IPv4-mapped 224.0.0.0/4) and
// returns its group address (IPv4 unmapped).
func IsMulticastGID(gid [16]byte) (netip.Addr, bool) {
	a := netip.AddrFrom16(gid).Unmap()
	return a, a.IsMulticast()
}

// checkMcast checks an attach or detach of qp to gid as ib_attach_mcast
// and ib_detach_mcast do (verbs.c: the GID must be multicast and the QP
// UD, else EINVAL; the LID is not looked at on RoCE) and returns the
// group address.
func (qp *QP) checkMcast(gid [16]byte) (netip.Addr, error) {
	g, ok := IsMulticastGID(gid)
	switch {
	case qp.typ != ibv.QPTypeUD || qp.gsi:
		// QP1 is IB_QPT_GSI in the kernel: not UD there.
		return g, fmt.Errorf("%w: multicast on a %v QP (UD only)", errno.Invalid, qp.describe())
	case !ok:
		return g, fmt.Errorf("%w: GID %v is not a multicast GID (ff00::/8 or ::ffff:224.0.0.0/4)", errno.Invalid, netip.AddrFrom16(gid))
	case g.Is4() != qp.n.addr.Unmap().Is4():
		return g, fmt.Errorf("%w: group %v is not of the device address %v's family", errno.Invalid, g, qp.n.addr)
	}
	return g, nil
}

// describe names the QP's type for errors.
func (qp *QP) describe() string {
	if qp.gsi {
		return "GSI"
	}
	return qp.typ.String()
}

// AttachMcast attaches the QP to the multicast group gid
// (ibv_attach_mcast; rxe_mcast.c rxe_attach_mcast). Attaching a QP
// already attached does nothing (rxe_attach_mcg). The limits are rxe's,
// each EINVAL when exceeded: MaxMcastGroups groups, MaxMcastQPAttach QPs
// a group, MaxTotalMcastQPAttach attachments in all. The first QP of a
// group makes the link join it; a link that cannot receive multicast
// refuses every attach with EINVAL (rxe: max_mcast_grp 0).
func (qp *QP) AttachMcast(gid [16]byte) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if err := qp.usable(); err != nil {
		return err
	}
	g, err := qp.checkMcast(gid)
	if err != nil {
		return err
	}
	n := qp.n
	m, ok := n.cfg.Link.(link.Multicaster)
	if !ok || !link.CanMulticast(n.cfg.Link) {
		return fmt.Errorf("%w: the device's link cannot receive multicast (max_mcast_grp 0)", errno.Invalid)
	}
	t := &n.mcast
	t.mu.Lock()
	defer t.mu.Unlock()
	qpns := t.groups[g]
	switch {
	case slices.Contains(qpns, qp.qpn):
		return nil
	case len(qpns) == 0 && len(t.groups) >= MaxMcastGroups:
		return fmt.Errorf("%w: %d multicast groups (max_mcast_grp)", errno.Invalid, MaxMcastGroups)
	case len(qpns) >= MaxMcastQPAttach:
		return fmt.Errorf("%w: %d QPs on group %v (max_mcast_qp_attach)", errno.Invalid, MaxMcastQPAttach, g)
	case t.total >= MaxTotalMcastQPAttach:
		return fmt.Errorf("%w: %d multicast attachments (max_total_mcast_qp_attach)", errno.Invalid, MaxTotalMcastQPAttach)
	}
	if len(qpns) == 0 {
		if err := m.JoinGroup(g); err != nil {
			return fmt.Errorf("join multicast group %v: %w", g, err)
		}
	}
	if t.groups == nil {
		t.groups = make(map[netip.Addr][]uint32)
	}
	t.groups[g] = append(slices.Clone(qpns), qp.qpn)
	t.total++
	qp.mcast = append(qp.mcast, g)
	return nil
}

// DetachMcast detaches the QP from group gid (ibv_detach_mcast; rxe_mcast.c
// rxe_detach_mcast): EINVAL if it is not attached. The last QP of a group
// makes the link leave it.
func (qp *QP) DetachMcast(gid [16]byte) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if err := qp.usable(); err != nil {
		return err
	}
	g, err := qp.checkMcast(gid)
	if err != nil {
		return err
	}
	if !slices.Contains(qp.mcast, g) {
		return fmt.Errorf("%w: QP %#x is not attached to group %v", errno.Invalid, qp.qpn, g)
	}
	qp.detachMcastLocked(g)
	return nil
}

// detachMcastLocked removes the QP from group g, which it is attached to;
// qp.mu is held.
func (qp *QP) detachMcastLocked(g netip.Addr) {
	qp.mcast = slices.DeleteFunc(qp.mcast, func(a netip.Addr) bool { return a == g })
	n := qp.n
	t := &n.mcast
	t.mu.Lock()
	defer t.mu.Unlock()
	qpns := slices.DeleteFunc(slices.Clone(t.groups[g]), func(q uint32) bool { return q == qp.qpn })
	t.total--
	if len(qpns) > 0 {
		t.groups[g] = qpns
		return
	}
	delete(t.groups, g)
	if m, ok := n.cfg.Link.(link.Multicaster); ok && !n.closed.Load() {
		// A failure leaves nothing to undo here: the group is gone from
		// the table, and datagrams still arriving for it are dropped
		// (rxe_mcast_del's errors are ignored the same way).
		_ = m.LeaveGroup(g)
	}
}

// detachAllMcastLocked detaches the QP from every group (destroy: the
// kernel detaches a QP's groups before destroying it,
// ib_uverbs_detach_umcast); qp.mu is held.
func (qp *QP) detachAllMcastLocked() {
	for len(qp.mcast) > 0 {
		qp.detachMcastLocked(qp.mcast[len(qp.mcast)-1])
	}
}

// McastGroups returns the groups the QP is attached to.
func (qp *QP) McastGroups() []netip.Addr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return slices.Clone(qp.mcast)
}

// receiveMcast handles a datagram whose destination is the multicast
// address group (rxe_recv.c rxe_rcv_mcast_pkt): a copy to each UD QP
// attached to the group, which checks its state and Q_Key as for any
// datagram. It is off the unicast path: receive calls it only for a
// destination that is not the NIC's address. It reports false: the
// caller keeps p (every QP got a copy).
func (n *NIC) receiveMcast(r *reader, p *transport.RxPacket, group netip.Addr) bool {
	c := &n.ctr
	qpns := n.mcast.members(group)
	if len(qpns) == 0 {
		// A group no QP here is attached to: not addressed to us (rxe:
		// no mcg for the GID, dropped).
		c.DropAddr.Add(1)
		return false
	}
	if pk := p.Pkt.BTH().PKey(); pk&0x7FFF != wire.DefaultPKey&0x7FFF {
		c.DropPKey.Add(1)
		return false
	}
	if p.Pkt.DestQP() != wire.MulticastQPN {
		// A multicast datagram to a QP number: the IBTA's multicast
		// packets carry DestQP 0xFFFFFF. (rxe hands such a datagram to
		// the unicast QP it names, hdr_check; softnic drops it.)
		c.DropNoQP.Add(1)
		return false
	}
	writes, answer := writesMemory(&p.Pkt), answerable(&p.Pkt)
	for _, qpn := range qpns {
		e := n.lookup(qpn)
		if e == nil || !transport.ClassMatches(p.Pkt.Opcode, e.typ) {
			c.DropNoQP.Add(1) // rxe_rcv_mcast_pkt: check_type_state fails, skipped
			continue
		}
		q := n.rxPool.Get().(*transport.RxPacket)
		q.Encap = p.Encap
		q.Data = q.Buffer()[:len(p.Data)]
		copy(q.Data, p.Data)
		if err := wire.Parse(q.Data, &q.Pkt); err != nil {
			q.Release() // parsed once already: unreachable
			c.DropMalformed.Add(1)
			continue
		}
		if !e.h.Deliver(q) {
			q.Release()
			c.DropQueueFull.Add(1)
			continue
		}
		r.touch(e, writes, answer)
	}
	return false
}
