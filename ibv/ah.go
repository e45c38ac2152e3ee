package ibv

import "net/netip"

// GlobalRoute is the global route of an address vector (struct
// ibv_global_route). In RoCEv2 it becomes the IP header.
type GlobalRoute struct {
	// DGID is dgid, the destination GID: the peer's IP address
	// (IPv4-mapped for IPv4).
	DGID      netip.Addr
	FlowLabel uint32 // flow_label: the IPv6 flow label (20 bits)
	SGIDIndex uint8  // sgid_index: the source GID; softnic's GID table has one entry per address
	// HopLimit is hop_limit. It is not sent: packets carry the route's
	// hop limit (64), as Linux's RoCE packets do (rxe takes the TTL from
	// the route, not from the address vector).
	HopLimit     uint8
	TrafficClass uint8 // traffic_class: the IP TOS / traffic class byte
}

// AHAttr is an address vector (struct ibv_ah_attr): where a UD datagram
// goes, or the path of an RC or UC QP.
type AHAttr struct {
	GRH         GlobalRoute // grh, used when IsGlobal (always, for RoCE)
	DLID        uint16      // dlid: unused on RoCE
	SL          uint8       // sl: service level
	SrcPathBits uint8       // src_path_bits: unused on RoCE
	StaticRate  uint8       // static_rate: accepted, not enforced
	IsGlobal    bool        // is_global: RoCE needs the GRH, so true
	PortNum     uint8       // port_num: 1
}

// AddressHandle is the destination of a UD send (the ibv_ah of
// wr.ud.ah): an address handle made by verbs PD.CreateAH, or a bare
// *AHAttr for a one-off destination.
type AddressHandle interface {
	// AddressVector returns the handle's address vector and the handle of
	// the protection domain it belongs to (0 for a bare *AHAttr, which a
	// QP of any PD may use); ok is false once the handle is destroyed.
	AddressVector() (av *AHAttr, pd uint32, ok bool)
}

// AddressVector makes a bare address vector a UD destination.
func (a *AHAttr) AddressVector() (*AHAttr, uint32, bool) { return a, 0, a != nil }
