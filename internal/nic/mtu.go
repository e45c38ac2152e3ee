package nic

import (
	"github.com/softnic/softnic/ibv"
)

// RoCEHeaderRoom is what rxe keeps free of a netdev's MTU for headers when
// it picks the port's IB MTU: RXE_MAX_HDR_LENGTH (rxe_param.h), 80 bytes =
// IPv6 40 + UDP 8 + BTH 12 + RETH 16 + ICRC 4.
const RoCEHeaderRoom = 80

// ActiveMTU returns the port's active IB MTU on a network interface whose
// MTU (the netdev MTU, IP header included) is netdevMTU bytes, exactly as
// rxe computes it (rxe.c rxe_set_mtu, called at device creation and on
// NETDEV_CHANGEMTU from rxe_net.c rxe_notify): the largest IB MTU not
// above netdevMTU - RXE_MAX_HDR_LENGTH (rxe_param.h eth_mtu_int_to_enum),
// IB_MTU_256 when even that does not fit ("mtu ? ... : IB_MTU_256"), at
// most IB_MTU_4096. So 1500 gives 1024, 9000 and loopback's 65536 give
// 4096, and the thresholds are 336, 592, 1104, 2128 and 4176.
func ActiveMTU(netdevMTU int) ibv.MTU {
	if m := ibv.MTUFromBytes(netdevMTU - RoCEHeaderRoom); m != 0 {
		return m
	}
	return ibv.MTU256
}
