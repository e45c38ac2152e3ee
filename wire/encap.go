package wire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// RoCEv2 encapsulation constants (IBTA A17.2; rxe_net.c).
const (
	// UDPPort is the RoCEv2 UDP destination port (ROCE_V2_UDP_DPORT).
	UDPPort = 4791
	// SrcPortBase is the bottom of the UDP source-port range RoCEv2
	// senders use for flow entropy (0xC000..0xFFFF; rxe.h RXE_ROCE_V2_SPORT).
	SrcPortBase = 0xC000

	IPv4HeaderLen = 20
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8

	// IPv4DF is the Don't Fragment bit of the IPv4 flags/fragment field;
	// rxe sets it on every packet (rxe_net.c prepare_ipv4_hdr).
	IPv4DF = 0x4000

	ipProtoUDP = 17
)

// Encap is the IP and UDP header of one RoCEv2 datagram: every field the
// ICRC covers, plus the masked ones (traffic class, hop limit, flow label,
// UDP checksum) for building real headers. Lengths are not stored; they
// follow from the UDP payload.
type Encap struct {
	Src, Dst         netip.Addr // both IPv4 (or IPv4-mapped) or both IPv6
	SrcPort, DstPort uint16
	TrafficClass     uint8  // IPv4 TOS / IPv6 traffic class (masked by the ICRC)
	HopLimit         uint8  // IPv4 TTL / IPv6 hop limit (masked)
	FlowLabel        uint32 // IPv6 only (masked)
	ID               uint16 // IPv4 identification (covered by the ICRC)
	FragOff          uint16 // IPv4 flags and fragment offset (covered; IPv4DF normally)
	UDPChecksum      uint16 // as carried (masked); 0 means none
}

// IsIPv4 reports whether e describes an IPv4 datagram (IPv4-mapped GIDs
// are IPv4 on the wire, as in rxe_av_fill_ip_info).
func (e *Encap) IsIPv4() bool { return e.Src.Unmap().Is4() }

// HeaderLen returns the length of the IP and UDP headers.
func (e *Encap) HeaderLen() int {
	if e.IsIPv4() {
		return IPv4HeaderLen + UDPHeaderLen
	}
	return IPv6HeaderLen + UDPHeaderLen
}

// PutHeaders writes the IP and UDP headers for a UDP payload of payloadLen
// bytes into b (which must hold HeaderLen bytes) and returns their length.
// The IPv4 header checksum is computed; the UDP checksum is written as
// e.UDPChecksum.
func (e *Encap) PutHeaders(b []byte, payloadLen int) int {
	n := e.putIP(b, payloadLen)
	putUDP(b[n:], e.SrcPort, e.DstPort, payloadLen, e.UDPChecksum)
	return n + UDPHeaderLen
}

func (e *Encap) putIP(b []byte, payloadLen int) int {
	if e.IsIPv4() {
		_ = b[IPv4HeaderLen-1]
		b[0] = 0x45
		b[1] = e.TrafficClass
		binary.BigEndian.PutUint16(b[2:], uint16(IPv4HeaderLen+UDPHeaderLen+payloadLen))
		binary.BigEndian.PutUint16(b[4:], e.ID)
		binary.BigEndian.PutUint16(b[6:], e.FragOff)
		b[8] = e.HopLimit
		b[9] = ipProtoUDP
		b[10], b[11] = 0, 0
		src, dst := as4(e.Src), as4(e.Dst)
		copy(b[12:16], src[:])
		copy(b[16:20], dst[:])
		binary.BigEndian.PutUint16(b[10:], ipv4Checksum(b[:IPv4HeaderLen]))
		return IPv4HeaderLen
	}
	_ = b[IPv6HeaderLen-1]
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(e.TrafficClass)<<20|e.FlowLabel&0xFFFFF)
	binary.BigEndian.PutUint16(b[4:], uint16(UDPHeaderLen+payloadLen))
	b[6] = ipProtoUDP
	b[7] = e.HopLimit
	src, dst := e.Src.As16(), e.Dst.As16()
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
	return IPv6HeaderLen
}

// as4 returns a's IPv4 bytes, or zeros when a is not IPv4: a mixed-family
// Encap is a caller's bug, and building its header must not panic.
func as4(a netip.Addr) [4]byte {
	if a = a.Unmap(); a.Is4() {
		return a.As4()
	}
	return [4]byte{}
}

func putUDP(b []byte, sport, dport uint16, payloadLen int, csum uint16) {
	_ = b[UDPHeaderLen-1]
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(UDPHeaderLen+payloadLen))
	binary.BigEndian.PutUint16(b[6:], csum)
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xFFFF {
		sum = sum>>16 + sum&0xFFFF
	}
	return ^uint16(sum)
}

// ParseEncap parses an IPv4 or IPv6 datagram carrying UDP and returns its
// Encap and UDP payload (trimmed to the lengths the headers state, so
// link-layer padding is dropped). It refuses IPv4 options, IPv6 extension
// headers, IPv4-mapped addresses in an IPv6 header, fragments and non-UDP
// protocols with an error wrapping ErrNotRoCE: rxe handles none of them
// (rxe_net.c uses a bare iphdr).
// It does not check the UDP port.
func ParseEncap(b []byte) (Encap, []byte, error) {
	var e Encap
	if len(b) < 1 {
		return e, nil, ErrTruncated
	}
	var rest []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < IPv4HeaderLen {
			return e, nil, ErrTruncated
		}
		if b[0]&0x0F != 5 {
			return e, nil, fmt.Errorf("%w: IPv4 header with options (IHL %d)", ErrNotRoCE, b[0]&0x0F)
		}
		if b[9] != ipProtoUDP {
			return e, nil, fmt.Errorf("%w: IP protocol %d", ErrNotRoCE, b[9])
		}
		total := int(binary.BigEndian.Uint16(b[2:]))
		if total < IPv4HeaderLen || total > len(b) {
			return e, nil, ErrTruncated
		}
		e.FragOff = binary.BigEndian.Uint16(b[6:])
		if e.FragOff&0x3FFF != 0 { // MF or a fragment offset
			return e, nil, fmt.Errorf("%w: IPv4 fragment", ErrNotRoCE)
		}
		e.TrafficClass = b[1]
		e.ID = binary.BigEndian.Uint16(b[4:])
		e.HopLimit = b[8]
		e.Src = netip.AddrFrom4([4]byte(b[12:16]))
		e.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		rest = b[IPv4HeaderLen:total]
	case 6:
		if len(b) < IPv6HeaderLen {
			return e, nil, ErrTruncated
		}
		if b[6] != ipProtoUDP {
			return e, nil, fmt.Errorf("%w: IPv6 next header %d", ErrNotRoCE, b[6])
		}
		plen := int(binary.BigEndian.Uint16(b[4:]))
		if IPv6HeaderLen+plen > len(b) {
			return e, nil, ErrTruncated
		}
		w := binary.BigEndian.Uint32(b)
		e.TrafficClass = uint8(w >> 20)
		e.FlowLabel = w & 0xFFFFF
		e.HopLimit = b[7]
		e.Src = netip.AddrFrom16([16]byte(b[8:24]))
		e.Dst = netip.AddrFrom16([16]byte(b[24:40]))
		if e.Src.Is4In6() || e.Dst.Is4In6() {
			// An Encap with a mapped address means IPv4 (IsIPv4), so the
			// ICRC would be computed over the wrong header; such
			// addresses never appear on the wire (RFC 4291 2.5.5.2).
			return Encap{}, nil, fmt.Errorf("%w: IPv4-mapped address in an IPv6 header", ErrNotRoCE)
		}
		rest = b[IPv6HeaderLen : IPv6HeaderLen+plen]
	default:
		return e, nil, fmt.Errorf("%w: IP version %d", ErrNotRoCE, b[0]>>4)
	}
	if len(rest) < UDPHeaderLen {
		return e, nil, ErrTruncated
	}
	ulen := int(binary.BigEndian.Uint16(rest[4:]))
	if ulen < UDPHeaderLen || ulen > len(rest) {
		return e, nil, fmt.Errorf("%w: UDP length %d of %d", ErrBadLength, ulen, len(rest))
	}
	e.SrcPort = binary.BigEndian.Uint16(rest[0:])
	e.DstPort = binary.BigEndian.Uint16(rest[2:])
	e.UDPChecksum = binary.BigEndian.Uint16(rest[6:])
	return e, rest[UDPHeaderLen:ulen], nil
}

// RxeSrcPort returns the UDP source port rxe gives a UD QP (and a QP
// without a flow label): 0xC000 + hash_32(qpn, 14) (rxe_qp.c rxe_qp_init_req).
func RxeSrcPort(qpn uint32) uint16 {
	return SrcPortBase + uint16((qpn*0x61C88647)>>18)
}

// FlowLabelSrcPort maps a 20-bit flow label to a UDP source port
// (ib_verbs.h rdma_flow_label_to_udp_sport).
func FlowLabelSrcPort(fl uint32) uint16 {
	fl &= 0xFFFFF
	return uint16(SrcPortBase | (fl&0x3FFF ^ fl>>14))
}

// ConnectedSrcPort returns the UDP source port rxe uses for an RC/UC QP
// connected with ibv_modify_qp and no flow label:
// rdma_get_udp_sport(0, lqpn, rqpn), symmetric in the two QPNs, so both ends
// of a connection send from the same port (captures/FACTS.md; ib_verbs.h
// rdma_calc_flow_label).
func ConnectedSrcPort(lqpn, rqpn uint32) uint16 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return FlowLabelSrcPort(uint32(v & 0xFFFFF))
}
