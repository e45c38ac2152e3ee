package capture

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gopacket/gopacket/layers"
)

// Link-layer types a capture may hold besides gopacket's named ones: DLT_RAW
// as some BSDs number it (LINKTYPE_RAW is 101 in files; 12 and 14 appear in
// old captures).
const (
	linkTypeRawBSD     layers.LinkType = 12
	linkTypeRawOpenBSD layers.LinkType = 14
)

// EtherTypes the link decoder follows.
const (
	etherTypeIPv4   = 0x0800
	etherTypeIPv6   = 0x86DD
	etherTypeVLAN   = 0x8100 // IEEE 802.1Q
	etherTypeQinQ   = 0x88A8 // IEEE 802.1ad service tag
	etherTypeQinQv1 = 0x9100 // pre-standard double tag

	ethHeaderLen  = 14
	vlanTagLen    = 4
	sllHeaderLen  = 16
	sll2HeaderLen = 20
)

var (
	// errNotIP marks a frame that carries no IPv4 or IPv6 datagram.
	errNotIP = errors.New("not an IP packet")
	// errLinkTruncated marks a frame too short for its link-layer header.
	errLinkTruncated = errors.New("frame shorter than its link-layer header")
)

// supportedLink reports whether ipFromFrame understands link type lt.
func supportedLink(lt layers.LinkType) bool {
	switch lt {
	case layers.LinkTypeEthernet, layers.LinkTypeRaw, linkTypeRawBSD, linkTypeRawOpenBSD,
		layers.LinkTypeIPv4, layers.LinkTypeIPv6, layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2,
		layers.LinkTypeNull, layers.LinkTypeLoop:
		return true
	}
	return false
}

// ipFromFrame returns the IP datagram (IPv4 or IPv6 header onwards) that a
// captured frame of link type lt carries. It returns errNotIP for frames
// of other network protocols and errLinkTruncated for frames cut inside
// their link-layer header.
func ipFromFrame(lt layers.LinkType, b []byte) ([]byte, error) {
	var proto uint16
	switch lt {
	case layers.LinkTypeRaw, linkTypeRawBSD, linkTypeRawOpenBSD, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		return b, nil
	case layers.LinkTypeEthernet:
		if len(b) < ethHeaderLen {
			return nil, errLinkTruncated
		}
		proto = binary.BigEndian.Uint16(b[12:])
		b = b[ethHeaderLen:]
		for proto == etherTypeVLAN || proto == etherTypeQinQ || proto == etherTypeQinQv1 {
			if len(b) < vlanTagLen {
				return nil, errLinkTruncated
			}
			proto = binary.BigEndian.Uint16(b[2:])
			b = b[vlanTagLen:]
		}
	case layers.LinkTypeLinuxSLL:
		// packet type(2) ARPHRD(2) addr len(2) addr(8) protocol(2)
		if len(b) < sllHeaderLen {
			return nil, errLinkTruncated
		}
		proto = binary.BigEndian.Uint16(b[14:])
		b = b[sllHeaderLen:]
	case layers.LinkTypeLinuxSLL2:
		// protocol(2) reserved(2) ifindex(4) ARPHRD(2) packet type(1) addr len(1) addr(8)
		if len(b) < sll2HeaderLen {
			return nil, errLinkTruncated
		}
		proto = binary.BigEndian.Uint16(b[0:])
		b = b[sll2HeaderLen:]
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		// A 4-byte address family, host order for NULL, network order for
		// LOOP; accept either. AF_INET is 2 everywhere, AF_INET6 varies.
		if len(b) < 4 {
			return nil, errLinkTruncated
		}
		af := binary.LittleEndian.Uint32(b)
		if af > 0xFFFF {
			af = binary.BigEndian.Uint32(b)
		}
		switch af {
		case 2:
			proto = etherTypeIPv4
		case 10, 24, 28, 30: // Linux, NetBSD/OpenBSD, FreeBSD, Darwin
			proto = etherTypeIPv6
		}
		b = b[4:]
	default:
		return nil, fmt.Errorf("unsupported link type %v (%d)", lt, uint32(lt))
	}
	if proto != etherTypeIPv4 && proto != etherTypeIPv6 {
		return nil, errNotIP
	}
	return b, nil
}

// udpDstPort returns the UDP destination port of an unfragmented IPv4 or
// IPv6 datagram whose headers are at least partly captured, or 0 when it
// is not UDP or the port is not there. It lets a reader tell a truncated
// RoCEv2 packet from truncated other traffic.
func udpDstPort(ip []byte) uint16 {
	if len(ip) < 1 {
		return 0
	}
	switch ip[0] >> 4 {
	case 4:
		ihl := int(ip[0]&0x0F) * 4
		if ihl < 20 || len(ip) < ihl+4 || ip[9] != 17 || binary.BigEndian.Uint16(ip[6:])&0x1FFF != 0 {
			return 0
		}
		return binary.BigEndian.Uint16(ip[ihl+2:])
	case 6:
		if len(ip) < 44 || ip[6] != 17 {
			return 0
		}
		return binary.BigEndian.Uint16(ip[42:])
	}
	return 0
}
