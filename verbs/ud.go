package verbs

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// UD QPs (ibv.QPTypeUD) send SEND and SEND_WITH_IMM work requests of at most
// the port MTU (QueryPort's ActiveMTU, as it is when the WR is sent) to the destination each
// WR names: ibv.SendWR.AH (an *AH), RemoteQPN and RemoteQKey. A RemoteQKey
// with its high-order bit set stands for the sending QP's own Q_Key (IBTA
// 10.2.5; rxe sends the value verbatim instead). A message longer than the
// port MTU is completed successfully without a packet being sent (IBTA
// C10-93.1.1, as rxe does). A UD QP is moved RESET→INIT with
// QPAttrPKeyIndex, QPAttrPort and QPAttrQKey, INIT→RTR with the state
// alone, RTR→RTS with QPAttrSQPSN. A send WR that fails (an SGE the MR
// table refuses, a destroyed AH) completes in error and moves the QP to
// SQE, from which a modify to RTS resumes sending; receives go on.
//
// A UD QP created with QPInitAttr.MaxTSOHeader also sends TSO work
// requests (ibv.WRTSO, QPEx.WrSendTSO): the payload in pieces of MSS
// bytes, each a datagram of its own that starts with a copy of the
// header, a receive WQE each at the receiver; rxe has no TSO.
//
// Every UD receive buffer starts with GRHLen bytes for the datagram's
// network header, then holds the payload: for an IPv4 datagram 20 zero
// bytes and the IPv4 header, for IPv6 the IPv6 header (rxe's union
// rdma_network_hdr). The completion has WCGRH set, SrcQP the sender's QP
// number and ByteLen the payload plus the GRHLen bytes. A datagram whose
// Q_Key is not the QP's is dropped and counted (Counters.DropQKey); one
// that finds no receive WQE is dropped (DropNoRecvWQE); one too long for
// the receive buffer is dropped (DropLength), the WQE kept for the next
// datagram, or, when the QP takes its WQEs from an SRQ, that WQE completes
// with WCRemInvReqErr (rxe_resp.c RESPST_ERR_LENGTH). Nothing is
// acknowledged: a lost datagram is simply never received.

// GRHLen is the size of the network-header area at the start of every UD
// receive buffer (sizeof(struct ibv_grh)).
const GRHLen = nic.GRHLen

// WrSetUDAddr gives the last WR built its UD destination
// (ibv_wr_set_ud_addr). Only a UD QP has one: on any other QP it fails
// the batch with EINVAL (WrComplete reports it), as mlx5 gives only UD
// QPs the setter (mlx5_qp_fill_wr_pfns: wr_set_ud_addr for IBV_QPT_UD
// alone); rxe's provider sets it on every QP and the kernel ignores the
// address on RC and UC, which would hide the mistake.
func (x *QPEx) WrSetUDAddr(ah ibv.AddressHandle, remoteQPN, remoteQKey uint32) {
	w, _ := x.cur()
	if w == nil {
		return
	}
	if t := x.qp.init.Type; t != ibv.QPTypeUD {
		x.fail(fmt.Errorf("%w: ibv_wr_set_ud_addr on a %v QP: only a UD QP takes an address per WR", EINVAL, t))
		return
	}
	w.AH, w.RemoteQPN, w.RemoteQKey = ah, remoteQPN, remoteQKey
}

// GRH is the network header a UD receive buffer starts with, decoded.
type GRH struct {
	// Src and Dst are the datagram's IP addresses (IPv4 ones unmapped).
	Src, Dst netip.Addr
	// TrafficClass is the IPv4 TOS or IPv6 traffic class; HopLimit the
	// TTL or hop limit; FlowLabel the IPv6 flow label.
	TrafficClass uint8
	HopLimit     uint8
	FlowLabel    uint32
}

// ParseGRH decodes the GRHLen bytes at the start of a UD receive buffer:
// an IPv6 header, or 20 bytes and an IPv4 header.
func ParseGRH(b []byte) (GRH, error) {
	if len(b) < GRHLen {
		return GRH{}, fmt.Errorf("%w: GRH of %d bytes, want %d", EINVAL, len(b), GRHLen)
	}
	switch {
	case b[0]>>4 == 6:
		w := binary.BigEndian.Uint32(b)
		return GRH{
			Src: netip.AddrFrom16([16]byte(b[8:24])), Dst: netip.AddrFrom16([16]byte(b[24:40])),
			TrafficClass: uint8(w >> 20), FlowLabel: w & 0xFFFFF, HopLimit: b[7],
		}, nil
	case b[20]>>4 == 4:
		h := b[20:]
		return GRH{
			Src: netip.AddrFrom4([4]byte(h[12:16])), Dst: netip.AddrFrom4([4]byte(h[16:20])),
			TrafficClass: h[1], HopLimit: h[8],
		}, nil
	}
	return GRH{}, fmt.Errorf("%w: GRH holds neither an IPv6 nor an IPv4 header", EINVAL)
}

// InitAHFromWC returns the address vector that answers the sender of a UD
// completion whose receive buffer started with grh (ibv_init_ah_from_wc
// for RoCEv2: the destination is the datagram's source, the traffic class
// its own, hop limit 0xFF, and for IPv6 its flow label). The datagram's
// destination must be this device's GID; without WCGRH there is no route
// back and the result is EINVAL.
func (d *Device) InitAHFromWC(port uint8, wc *ibv.WorkCompletion, grh []byte) (ibv.AHAttr, error) {
	if !d.ok() {
		return ibv.AHAttr{}, errNil("Device")
	}
	if port != 1 {
		return ibv.AHAttr{}, fmt.Errorf("%w: port %d (the device has port 1)", EINVAL, port)
	}
	if wc == nil || wc.Flags&ibv.WCGRH == 0 {
		return ibv.AHAttr{}, fmt.Errorf("%w: completion without IBV_WC_GRH", EINVAL)
	}
	g, err := ParseGRH(grh)
	if err != nil {
		return ibv.AHAttr{}, err
	}
	if g.Dst.Unmap() != d.Addr().Unmap() {
		return ibv.AHAttr{}, fmt.Errorf("%w: GRH destination %v is not a GID of the device (%v)", EINVAL, g.Dst, d.Addr())
	}
	a := ibv.AHAttr{IsGlobal: true, PortNum: port, SL: wc.SL, DLID: wc.SLID,
		GRH: ibv.GlobalRoute{DGID: g.Src, TrafficClass: g.TrafficClass, HopLimit: 0xFF}}
	if g.Src.Is6() {
		a.GRH.FlowLabel = g.FlowLabel
	}
	return a, nil
}

// CreateAHFromWC creates an address handle that answers the sender of a
// UD completion (ibv_create_ah_from_wc); see Device.InitAHFromWC.
func (pd *PD) CreateAHFromWC(wc *ibv.WorkCompletion, grh []byte, port uint8) (*AH, error) {
	if !pd.ok() {
		return nil, errNil("PD")
	}
	a, err := pd.d.InitAHFromWC(port, wc, grh)
	if err != nil {
		return nil, err
	}
	return pd.CreateAH(a)
}
