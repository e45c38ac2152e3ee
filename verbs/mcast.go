package verbs

import (
	"github.com/softnic/softnic/internal/nic"
)

// AttachMcast attaches a UD QP to the multicast group gid
// (ibv_attach_mcast): datagrams sent to the group (destination QPN
// 0xFFFFFF, IB_MULTICAST_QPN) reach every attached QP, on every host. On
// RoCEv2 the group's IP multicast address is the GID itself (an IPv6
// multicast address, or ::ffff:224.0.0.0/4 for IPv4), which the device's
// link joins while a QP is attached. lid is ignored on RoCE (0 or 0xFFFF).
//
// As the kernel's ib_attach_mcast and rxe_attach_mcast: a QP other than
// UD (the GSI QP included) or a GID that is not multicast
// (rdma_is_multicast_addr) is EINVAL, and so is a group of the other
// address family than the device's; attaching a QP twice is harmless;
// the limits are QueryDevice's MaxMcastGrp groups, MaxMcastQPAttach QPs a
// group and MaxTotalMcastQPAttach attachments in all (EINVAL beyond, as
// rxe). A device whose link cannot receive multicast (its MaxMcastGrp is
// 0) refuses every attach with EINVAL; the in-memory fabric's endpoints
// and the UDP link can. An error of the link joining the group is
// returned as it is (an errno: ENODEV when no interface takes multicast,
// for instance).
//
// Each attached QP gets its own copy of a group's datagram and checks its
// state and Q_Key as for any datagram (rxe_rcv_mcast_pkt); the completion
// and GRH are those of a unicast UD receive, the GRH's destination the
// group address. A datagram to the group with a DestQP other than
// 0xFFFFFF is dropped (Counters.DropNoQP), and one to a group no QP of the
// device is attached to is dropped as not addressed to it (DropAddr).
//
// To send to a group, post a UD SEND whose AH has the group's GID as its
// DGID and RemoteQPN 0xFFFFFF (MulticastQPN): it goes to the IP multicast
// address with the AH's hop limit (not the route's, as for unicast). A
// sender attached to the group receives its own datagrams (the UDP link
// sets IP_MULTICAST_LOOP).
func (qp *QP) AttachMcast(gid GID, lid uint16) error {
	if err := qp.live(); err != nil {
		return err
	}
	return qp.qp.AttachMcast(gid)
}

// DetachMcast detaches a QP from a multicast group (ibv_detach_mcast):
// EINVAL for a group it is not attached to, and for the GIDs and QPs
// AttachMcast refuses. The link leaves the group with its last QP;
// destroying a QP detaches it from its groups.
func (qp *QP) DetachMcast(gid GID, lid uint16) error {
	if err := qp.live(); err != nil {
		return err
	}
	return qp.qp.DetachMcast(gid)
}

// MulticastQPN is the destination QP number of a datagram to a multicast
// group (IB_MULTICAST_QPN).
const MulticastQPN = 0xFFFFFF

// IsMulticastGID reports whether gid is a multicast GID
// (rdma_is_multicast_addr: ff00::/8, or IPv4-mapped 224.0.0.0/4).
func IsMulticastGID(gid GID) bool {
	_, ok := nic.IsMulticastGID(gid)
	return ok
}
