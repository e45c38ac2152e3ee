package verbs

import "syscall"

// AttachMcast attaches a UD QP to the multicast group gid
// (ibv_attach_mcast): datagrams sent to the group (destination QPN
// 0xFFFFFF, IB_MULTICAST_QPN) reach every attached QP, on every host. On
// RoCEv2 the group's IP multicast address is the GID itself (an IPv6
// multicast address, or ::ffff:224.0.0.0/4 for IPv4), which the device's
// link joins while a QP is attached. lid is ignored on RoCE (0 or 0xFFFF).
//
// SKELETON: the multicast helper implements it.
func (qp *QP) AttachMcast(gid GID, lid uint16) error { return syscall.ENOSYS }

// DetachMcast detaches a QP from a multicast group (ibv_detach_mcast).
//
// SKELETON: the multicast helper implements it.
func (qp *QP) DetachMcast(gid GID, lid uint16) error { return syscall.ENOSYS }
