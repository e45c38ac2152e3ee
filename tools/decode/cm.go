package decode

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/wire"
)

// MAD is a management datagram: the payload of a UD SEND to or from QP 1
// (the GSI), decoded with package wire. In JSON it is the packet's "mad"
// object. The header fields are always there (zero when the payload is
// shorter than the 24-byte header); when the MAD does not parse
// (wire.ParseMAD or the CM message's checks fail) Error says why and the
// message is left out. For class CM exactly one of the message fields is
// set, after the attribute; ClassPortInfo and attributes the CM has not
// carry none.
//
//	"mad":{"base_version":1,"class":"CM","class_value":7,"class_version":2,
//	 "method":"Send","method_value":3,"status":0,"class_specific":0,
//	 "tid":"0x00000002b83f5ee8","attr":"ConnectRequest","attr_id":16,"attr_mod":0,
//	 "req":{"local_comm_id":3896458168,...,"private_data":"0040..."},
//	 "cma":{"ip_version":4,"src_port":41259,"dst_port":7174,"src":"10.77.0.3",
//	 "dst":"10.77.0.2","port_space":"TCP"}}
type MAD struct {
	// BaseVersion is the MAD base version (1).
	BaseVersion uint8 `json:"base_version"`
	// Class names the management class ("CM", "SubnAdm"; hex when
	// unknown), ClassValue is its number.
	Class      string `json:"class"`
	ClassValue uint8  `json:"class_value"`
	// ClassVersion is the class version (2 for the CM).
	ClassVersion uint8 `json:"class_version"`
	// Method names the method ("Send", "Get", "GetResp"), MethodValue is
	// its number.
	Method      string `json:"method"`
	MethodValue uint8  `json:"method_value"`
	// Status and ClassSpecific are the header's 16-bit fields.
	Status        uint16 `json:"status"`
	ClassSpecific uint16 `json:"class_specific"`
	// TID is the transaction ID, a 0x string.
	TID tooljson.Hex64 `json:"tid"`
	// Attr names the attribute (for the CM "ConnectRequest", "ConnectReply",
	// "ReadyToUse", "DisconnectRequest", "DisconnectReply", "ConnectReject",
	// "MsgRcptAck", "ServiceIDResReq", "ServiceIDResReqResp", ...; hex
	// otherwise), AttrID is its number.
	Attr   string `json:"attr"`
	AttrID uint16 `json:"attr_id"`
	// AttrMod is the attribute modifier.
	AttrMod uint32 `json:"attr_mod"`
	// Error says why the MAD or its CM message did not parse; left out when
	// it did.
	Error string `json:"error,omitempty"`
	// The CM message, by attribute: at most one is set.
	REQ     *CMReq     `json:"req,omitempty"`
	MRA     *CMMRA     `json:"mra,omitempty"`
	REJ     *CMRej     `json:"rej,omitempty"`
	REP     *CMRep     `json:"rep,omitempty"`
	RTU     *CMRtu     `json:"rtu,omitempty"`
	DREQ    *CMDreq    `json:"dreq,omitempty"`
	DREP    *CMDrep    `json:"drep,omitempty"`
	SIDRReq *CMSIDRReq `json:"sidr_req,omitempty"`
	SIDRRep *CMSIDRRep `json:"sidr_rep,omitempty"`
	LAP     *CMLap     `json:"lap,omitempty"`
	APR     *CMApr     `json:"apr,omitempty"`
	// CMA is the RDMA CM's header at the start of a REQ's or SIDR_REQ's
	// private data, decoded when the service ID is in an RDMA CM port
	// space; CMAError says why it did not parse (left out when it did or
	// was not looked for).
	CMA      *CMA   `json:"cma,omitempty"`
	CMAError string `json:"cma_error,omitempty"`
}

// CMA is the RDMA CM's header in a REQ's private data (cma.c struct
// cma_hdr; wire.CMAHeader) with what the REQ's service ID adds.
type CMA struct {
	// IPVersion is 4 or 6.
	IPVersion uint8 `json:"ip_version"`
	// SrcPort is the connecting side's port (the header's port), DstPort
	// the listener's (the service ID's low 16 bits).
	SrcPort uint16 `json:"src_port"`
	DstPort uint16 `json:"dst_port"`
	// Src and Dst are the IP addresses.
	Src netip.Addr `json:"src"`
	Dst netip.Addr `json:"dst"`
	// PortSpace names the service ID's RDMA CM port space: "TCP", "UDP",
	// "IB" or "IPoIB".
	PortSpace string `json:"port_space"`
}

// HexBytes is a CM byte field (private data, additional information) in
// JSON: lower-case hex with no prefix, its trailing zero bytes left out
// (the fields are fixed-size and zero-filled; an all-zero field is "").
type HexBytes []byte

// MarshalText writes b as hex without its trailing zero bytes.
func (b HexBytes) MarshalText() ([]byte, error) {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return []byte(hex.EncodeToString(b[:n])), nil
}

// UnmarshalText reads hex written by MarshalText.
func (b *HexBytes) UnmarshalText(t []byte) error {
	v, err := hex.DecodeString(string(t))
	*b = v
	return err
}

func hexBytes(b []byte) HexBytes { return HexBytes(b) }

// gidAddr returns a 16-byte GID as an IPv6 address (RoCEv2 GIDs are IPv6
// or IPv4-mapped addresses).
func gidAddr(b []byte) netip.Addr { return netip.AddrFrom16([16]byte(b)) }

// isGSI reports whether a packet with these headers carries a MAD: a UD
// SEND with a DETH to or from QP 1. (RoCE has no QP 0.)
func isGSI(destQP uint32, deth wire.DETH, payload []byte) bool {
	return deth != nil && (destQP == 1 || deth.SrcQP() == 1) && len(payload) > 0
}

// newMAD decodes the MAD in payload; every fault is in MAD.Error. A
// payload too short for the MAD header leaves the header fields zero.
func newMAD(payload []byte) *MAD {
	if len(payload) < wire.MADHdrLen {
		return &MAD{Error: fmt.Sprintf("%v: %d bytes, a MAD has %d", wire.ErrBadMAD, len(payload), wire.MADLen)}
	}
	h := wire.MAD(payload[:wire.MADHdrLen])
	d := &MAD{
		BaseVersion: h.BaseVersion(), Class: wire.MgmtClassName(h.MgmtClass()), ClassValue: h.MgmtClass(),
		ClassVersion: h.ClassVersion(), Method: wire.MADMethodName(h.Method()), MethodValue: h.Method(),
		Status: h.Status(), ClassSpecific: h.ClassSpecific(), TID: tooljson.Hex64(h.TID()),
		AttrID: h.AttrID(), AttrMod: h.AttrMod(), Attr: fmt.Sprintf("0x%04x", h.AttrID()),
	}
	if h.MgmtClass() == wire.MgmtClassCM {
		d.Attr = wire.CMAttrName(h.AttrID())
	}
	m, err := wire.ParseMAD(payload)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	if m.MgmtClass() != wire.MgmtClassCM || m.AttrID() == wire.MADAttrClassPortInfo || wire.CMLayout(m.AttrID()) == nil {
		return d
	}
	if _, err := wire.ParseCM(payload); err != nil {
		d.Error = err.Error()
		return d
	}
	switch m.AttrID() {
	case wire.CMAttrREQ:
		r := wire.CMReq(m)
		d.REQ = newCMReq(r)
		d.REQ.Transport = wire.CMTransportName(r.TransportServiceType())
		d.REQ.PathMTUBytes = wire.PathMTUBytes(r.PathMTU())
		d.cma(r.ServiceID(), r.PrivateData())
	case wire.CMAttrMRA:
		d.MRA = newCMMRA(wire.CMMRA(m))
		d.MRA.MessageMRAedName = wire.CMMsgResponseName(d.MRA.MessageMRAed)
	case wire.CMAttrREJ:
		d.REJ = newCMRej(wire.CMRej(m))
		d.REJ.ReasonName = wire.CMRejReasonName(d.REJ.Reason)
		d.REJ.MessageRejectedName = wire.CMMsgResponseName(d.REJ.MessageRejected)
	case wire.CMAttrREP:
		d.REP = newCMRep(wire.CMRep(m))
	case wire.CMAttrRTU:
		d.RTU = newCMRtu(wire.CMRtu(m))
	case wire.CMAttrDREQ:
		d.DREQ = newCMDreq(wire.CMDreq(m))
	case wire.CMAttrDREP:
		d.DREP = newCMDrep(wire.CMDrep(m))
	case wire.CMAttrSIDRREQ:
		r := wire.CMSIDRReq(m)
		d.SIDRReq = newCMSIDRReq(r)
		d.cma(r.ServiceID(), r.PrivateData())
	case wire.CMAttrSIDRREP:
		d.SIDRRep = newCMSIDRRep(wire.CMSIDRRep(m))
		d.SIDRRep.StatusName = wire.CMSIDRStatusName(d.SIDRRep.Status)
	case wire.CMAttrLAP:
		d.LAP = newCMLap(wire.CMLap(m))
	case wire.CMAttrAPR:
		d.APR = newCMApr(wire.CMApr(m))
	}
	return d
}

// portSpaceName names an RDMA CM port space (rdma_cma.h enum
// rdma_port_space), "" for a service ID outside them.
func portSpaceName(ps uint16) string {
	switch ps {
	case wire.RDMAPSTCP:
		return "TCP"
	case wire.RDMAPSUDP:
		return "UDP"
	case wire.RDMAPSIB:
		return "IB"
	case wire.RDMAPSIPoIB:
		return "IPoIB"
	}
	return ""
}

// cma decodes the CMA header of a REQ or SIDR_REQ whose service ID is an
// RDMA CM one (cma.c cma_req_handler / cma_check_req_qp_type read it only
// then).
func (d *MAD) cma(serviceID uint64, priv []byte) {
	ps, port, ok := wire.RDMAServiceIDParts(serviceID)
	name := portSpaceName(ps)
	if !ok || name == "" {
		return
	}
	h, err := wire.ParseCMAHeader(priv)
	if err != nil {
		d.CMAError = err.Error()
		return
	}
	d.CMA = &CMA{IPVersion: h.IPVersion, SrcPort: h.SrcPort, DstPort: port, Src: h.Src, Dst: h.Dst, PortSpace: name}
}

// String is the MAD's text group, one line: "CM[...]" for the CM class,
// "MAD[...]" for others; a MAD that does not parse ends its group with
// "error=..." .
func (d *MAD) String() string {
	var b strings.Builder
	if d.Class == "" { // shorter than the MAD header: nothing but the error
		return fmt.Sprintf("MAD[error=%q]", d.Error)
	}
	if d.Class == "CM" {
		fmt.Fprintf(&b, "CM[%s", d.Attr)
	} else {
		fmt.Fprintf(&b, "MAD[class=%s attr=%s", d.Class, d.Attr)
	}
	fmt.Fprintf(&b, " method=%s", d.Method)
	if d.Status != 0 {
		fmt.Fprintf(&b, " status=%#04x", d.Status)
	}
	fmt.Fprintf(&b, " tid=%#016x", uint64(d.TID))
	if d.BaseVersion != wire.MADBaseVersion || (d.Class == "CM" && d.ClassVersion != wire.CMClassVersion) {
		fmt.Fprintf(&b, " version=%d/%d", d.BaseVersion, d.ClassVersion)
	}
	if d.AttrMod != 0 {
		fmt.Fprintf(&b, " attrmod=%#x", d.AttrMod)
	}
	switch {
	case d.REQ != nil:
		r := d.REQ
		fmt.Fprintf(&b, " lcid=%#08x sid=%#x qpn=%#x psn=%#x %s mtu=%d resp_to=%d/%d ack_to=%d retry=%d rnr_retry=%d max_cm_retries=%d rr=%d id=%d",
			r.LocalCommID, uint64(r.ServiceID), r.LocalQPN, r.StartingPSN, r.Transport, r.PathMTUBytes,
			r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout, r.PrimaryLocalACKTimeout,
			r.RetryCount, r.RNRRetryCount, r.MaxCMRetries, r.ResponderResources, r.InitiatorDepth)
		if r.SRQ {
			b.WriteString(" srq=1")
		}
		fmt.Fprintf(&b, " pkey=%#04x sgid=%s dgid=%s flow=%#x hop=%d tclass=%d sl=%d",
			r.PartitionKey, r.PrimaryLocalPortGID, r.PrimaryRemotePortGID, r.PrimaryFlowLabel,
			r.PrimaryHopLimit, r.PrimaryTrafficClass, r.PrimarySL)
	case d.REP != nil:
		r := d.REP
		fmt.Fprintf(&b, " lcid=%#08x rcid=%#08x qpn=%#x psn=%#x rr=%d id=%d ack_delay=%d failover=%d rnr_retry=%d",
			r.LocalCommID, r.RemoteCommID, r.LocalQPN, r.StartingPSN, r.ResponderResources, r.InitiatorDepth,
			r.TargetACKDelay, r.FailoverAccepted, r.RNRRetryCount)
		if r.SRQ {
			b.WriteString(" srq=1")
		}
	case d.REJ != nil:
		r := d.REJ
		fmt.Fprintf(&b, " lcid=%#08x rcid=%#08x reason=%s(%d) rejected=%s ari_len=%d",
			r.LocalCommID, r.RemoteCommID, r.ReasonName, r.Reason, r.MessageRejectedName, r.RejectedInfoLength)
	case d.MRA != nil:
		r := d.MRA
		fmt.Fprintf(&b, " lcid=%#08x rcid=%#08x mraed=%s service_to=%d",
			r.LocalCommID, r.RemoteCommID, r.MessageMRAedName, r.ServiceTimeout)
	case d.RTU != nil:
		fmt.Fprintf(&b, " lcid=%#08x rcid=%#08x", d.RTU.LocalCommID, d.RTU.RemoteCommID)
	case d.DREQ != nil:
		fmt.Fprintf(&b, " lcid=%#08x rcid=%#08x rqpn=%#x", d.DREQ.LocalCommID, d.DREQ.RemoteCommID, d.DREQ.RemoteQPN)
	case d.DREP != nil:
		fmt.Fprintf(&b, " lcid=%#08x rcid=%#08x", d.DREP.LocalCommID, d.DREP.RemoteCommID)
	case d.SIDRReq != nil:
		r := d.SIDRReq
		fmt.Fprintf(&b, " reqid=%#08x pkey=%#04x sid=%#x", r.RequestID, r.PartitionKey, uint64(r.ServiceID))
	case d.SIDRRep != nil:
		r := d.SIDRRep
		fmt.Fprintf(&b, " reqid=%#08x status=%s(%d) qpn=%#x qkey=%#x sid=%#x",
			r.RequestID, r.StatusName, r.Status, r.QPN, r.QKey, uint64(r.ServiceID))
	case d.LAP != nil:
		r := d.LAP
		fmt.Fprintf(&b, " lcid=%#08x rcid=%#08x rqpn=%#x alt_sgid=%s alt_dgid=%s",
			r.LocalCommID, r.RemoteCommID, r.RemoteQPN, r.AlternateLocalPortGID, r.AlternateRemotePortGID)
	case d.APR != nil:
		r := d.APR
		fmt.Fprintf(&b, " lcid=%#08x rcid=%#08x status=%d", r.LocalCommID, r.RemoteCommID, r.ARStatus)
	}
	if c := d.CMA; c != nil {
		fmt.Fprintf(&b, " cma[%s v%d %s > %s]", c.PortSpace, c.IPVersion,
			netip.AddrPortFrom(c.Src, c.SrcPort), netip.AddrPortFrom(c.Dst, c.DstPort))
	}
	if d.CMAError != "" {
		fmt.Fprintf(&b, " cma_error=%q", d.CMAError)
	}
	if d.Error != "" {
		fmt.Fprintf(&b, " error=%q", d.Error)
	}
	b.WriteString("]")
	return b.String()
}

// The CM messages: one struct per message with every field of its wire
// view (numbers up to 32 bits as numbers, 64-bit ones as 0x strings, GIDs
// as IPv6 text, byte fields as HexBytes), in wire order, plus the names
// decode adds (marked so).

// CMReq is a CM REQ (ConnectRequest): every field of wire.CMReq, named as there.
type CMReq struct {
	LocalCommID             uint32         `json:"local_comm_id"`
	VendorID                uint32         `json:"vendor_id"`
	ServiceID               tooljson.Hex64 `json:"service_id"`
	LocalCAGUID             tooljson.Hex64 `json:"local_ca_guid"`
	LocalQKey               uint32         `json:"local_qkey"`
	LocalQPN                uint32         `json:"local_qpn"`
	ResponderResources      uint8          `json:"responder_resources"`
	LocalEECN               uint32         `json:"local_eecn"`
	InitiatorDepth          uint8          `json:"initiator_depth"`
	RemoteEECN              uint32         `json:"remote_eecn"`
	RemoteCMResponseTimeout uint8          `json:"remote_cm_response_timeout"`
	TransportServiceType    uint8          `json:"transport_service_type"`
	EndToEndFlowControl     bool           `json:"end_to_end_flow_control"`
	StartingPSN             uint32         `json:"starting_psn"`
	LocalCMResponseTimeout  uint8          `json:"local_cm_response_timeout"`
	RetryCount              uint8          `json:"retry_count"`
	PartitionKey            uint16         `json:"partition_key"`
	PathMTU                 uint8          `json:"path_mtu"`
	// Transport names TransportServiceType ("RC", "UC", "RD", "XRC"); added by decode.
	Transport string `json:"transport"`
	// PathMTUBytes is PathMTU in bytes (0 for a value outside 1..5); added by decode.
	PathMTUBytes             int        `json:"path_mtu_bytes"`
	RDCExists                bool       `json:"rdc_exists"`
	RNRRetryCount            uint8      `json:"rnr_retry_count"`
	MaxCMRetries             uint8      `json:"max_cm_retries"`
	SRQ                      bool       `json:"srq"`
	ExtendedTransportType    uint8      `json:"extended_transport_type"`
	PrimaryLocalPortLID      uint16     `json:"primary_local_port_lid"`
	PrimaryRemotePortLID     uint16     `json:"primary_remote_port_lid"`
	PrimaryLocalPortGID      netip.Addr `json:"primary_local_port_gid"`
	PrimaryRemotePortGID     netip.Addr `json:"primary_remote_port_gid"`
	PrimaryFlowLabel         uint32     `json:"primary_flow_label"`
	PrimaryPacketRate        uint8      `json:"primary_packet_rate"`
	PrimaryTrafficClass      uint8      `json:"primary_traffic_class"`
	PrimaryHopLimit          uint8      `json:"primary_hop_limit"`
	PrimarySL                uint8      `json:"primary_sl"`
	PrimarySubnetLocal       bool       `json:"primary_subnet_local"`
	PrimaryLocalACKTimeout   uint8      `json:"primary_local_ack_timeout"`
	AlternateLocalPortLID    uint16     `json:"alternate_local_port_lid"`
	AlternateRemotePortLID   uint16     `json:"alternate_remote_port_lid"`
	AlternateLocalPortGID    netip.Addr `json:"alternate_local_port_gid"`
	AlternateRemotePortGID   netip.Addr `json:"alternate_remote_port_gid"`
	AlternateFlowLabel       uint32     `json:"alternate_flow_label"`
	AlternatePacketRate      uint8      `json:"alternate_packet_rate"`
	AlternateTrafficClass    uint8      `json:"alternate_traffic_class"`
	AlternateHopLimit        uint8      `json:"alternate_hop_limit"`
	AlternateSL              uint8      `json:"alternate_sl"`
	AlternateSubnetLocal     bool       `json:"alternate_subnet_local"`
	AlternateLocalACKTimeout uint8      `json:"alternate_local_ack_timeout"`
	SAPSupported             bool       `json:"sap_supported"`
	PrivateData              HexBytes   `json:"private_data"`
}

// CMMRA is a CM MRA (MsgRcptAck): every field of wire.CMMRA, named as there.
type CMMRA struct {
	LocalCommID  uint32 `json:"local_comm_id"`
	RemoteCommID uint32 `json:"remote_comm_id"`
	MessageMRAed uint8  `json:"message_mraed"`
	// MessageMRAedName names MessageMRAed ("REQ", "REP", "other"); added by decode.
	MessageMRAedName string   `json:"message_mraed_name"`
	ServiceTimeout   uint8    `json:"service_timeout"`
	PrivateData      HexBytes `json:"private_data"`
}

// CMRej is a CM REJ (ConnectReject): every field of wire.CMRej, named as there.
type CMRej struct {
	LocalCommID     uint32 `json:"local_comm_id"`
	RemoteCommID    uint32 `json:"remote_comm_id"`
	MessageRejected uint8  `json:"message_rejected"`
	// MessageRejectedName names MessageRejected ("REQ", "REP", "other"); added by decode.
	MessageRejectedName string `json:"message_rejected_name"`
	RejectedInfoLength  uint8  `json:"rejected_info_length"`
	Reason              uint16 `json:"reason"`
	// ReasonName names Reason as ib_cm.h's enum ib_cm_rej_reason without
	// IB_CM_REJ_ ("INVALID_SERVICE_ID", "CONSUMER_DEFINED"); added by decode.
	ReasonName  string   `json:"reason_name"`
	ARI         HexBytes `json:"ari"`
	PrivateData HexBytes `json:"private_data"`
}

// CMRep is a CM REP (ConnectReply): every field of wire.CMRep, named as there.
type CMRep struct {
	LocalCommID         uint32         `json:"local_comm_id"`
	RemoteCommID        uint32         `json:"remote_comm_id"`
	LocalQKey           uint32         `json:"local_qkey"`
	LocalQPN            uint32         `json:"local_qpn"`
	VendorIDH           uint8          `json:"vendor_id_h"`
	LocalEECN           uint32         `json:"local_eecn"`
	VendorIDM           uint8          `json:"vendor_id_m"`
	StartingPSN         uint32         `json:"starting_psn"`
	VendorIDL           uint8          `json:"vendor_id_l"`
	ResponderResources  uint8          `json:"responder_resources"`
	InitiatorDepth      uint8          `json:"initiator_depth"`
	TargetACKDelay      uint8          `json:"target_ack_delay"`
	FailoverAccepted    uint8          `json:"failover_accepted"`
	EndToEndFlowControl bool           `json:"end_to_end_flow_control"`
	RNRRetryCount       uint8          `json:"rnr_retry_count"`
	SRQ                 bool           `json:"srq"`
	LocalCAGUID         tooljson.Hex64 `json:"local_ca_guid"`
	PrivateData         HexBytes       `json:"private_data"`
}

// CMRtu is a CM RTU (ReadyToUse): every field of wire.CMRtu, named as there.
type CMRtu struct {
	LocalCommID  uint32   `json:"local_comm_id"`
	RemoteCommID uint32   `json:"remote_comm_id"`
	PrivateData  HexBytes `json:"private_data"`
}

// CMDreq is a CM DREQ (DisconnectRequest): every field of wire.CMDreq, named as there.
type CMDreq struct {
	LocalCommID  uint32   `json:"local_comm_id"`
	RemoteCommID uint32   `json:"remote_comm_id"`
	RemoteQPN    uint32   `json:"remote_qpn"`
	PrivateData  HexBytes `json:"private_data"`
}

// CMDrep is a CM DREP (DisconnectReply): every field of wire.CMDrep, named as there.
type CMDrep struct {
	LocalCommID  uint32   `json:"local_comm_id"`
	RemoteCommID uint32   `json:"remote_comm_id"`
	PrivateData  HexBytes `json:"private_data"`
}

// CMSIDRReq is a CM SIDR_REQ (ServiceIDResReq): every field of wire.CMSIDRReq, named as there.
type CMSIDRReq struct {
	RequestID    uint32         `json:"request_id"`
	PartitionKey uint16         `json:"partition_key"`
	ServiceID    tooljson.Hex64 `json:"service_id"`
	PrivateData  HexBytes       `json:"private_data"`
}

// CMSIDRRep is a CM SIDR_REP (ServiceIDResReqResp): every field of wire.CMSIDRRep, named as there.
type CMSIDRRep struct {
	RequestID uint32 `json:"request_id"`
	Status    uint8  `json:"status"`
	// StatusName names Status ("SUCCESS", "NO_QP", "REJECT", ...); added by decode.
	StatusName           string         `json:"status_name"`
	AdditionalInfoLength uint8          `json:"additional_info_length"`
	VendorIDH            uint16         `json:"vendor_id_h"`
	QPN                  uint32         `json:"qpn"`
	VendorIDL            uint8          `json:"vendor_id_l"`
	ServiceID            tooljson.Hex64 `json:"service_id"`
	QKey                 uint32         `json:"qkey"`
	AdditionalInfo       HexBytes       `json:"additional_info"`
	PrivateData          HexBytes       `json:"private_data"`
}

// CMLap is a CM LAP (LoadAlternatePath): every field of wire.CMLap, named as there.
type CMLap struct {
	LocalCommID              uint32     `json:"local_comm_id"`
	RemoteCommID             uint32     `json:"remote_comm_id"`
	RemoteQPN                uint32     `json:"remote_qpn"`
	RemoteCMResponseTimeout  uint8      `json:"remote_cm_response_timeout"`
	AlternateLocalPortLID    uint16     `json:"alternate_local_port_lid"`
	AlternateRemotePortLID   uint16     `json:"alternate_remote_port_lid"`
	AlternateLocalPortGID    netip.Addr `json:"alternate_local_port_gid"`
	AlternateRemotePortGID   netip.Addr `json:"alternate_remote_port_gid"`
	AlternateFlowLabel       uint32     `json:"alternate_flow_label"`
	AlternateTrafficClass    uint8      `json:"alternate_traffic_class"`
	AlternateHopLimit        uint8      `json:"alternate_hop_limit"`
	AlternatePacketRate      uint8      `json:"alternate_packet_rate"`
	AlternateSL              uint8      `json:"alternate_sl"`
	AlternateSubnetLocal     bool       `json:"alternate_subnet_local"`
	AlternateLocalACKTimeout uint8      `json:"alternate_local_ack_timeout"`
	PrivateData              HexBytes   `json:"private_data"`
}

// CMApr is a CM APR (AlternatePathResponse): every field of wire.CMApr, named as there.
type CMApr struct {
	LocalCommID          uint32   `json:"local_comm_id"`
	RemoteCommID         uint32   `json:"remote_comm_id"`
	AdditionalInfoLength uint8    `json:"additional_info_length"`
	ARStatus             uint8    `json:"ar_status"`
	AdditionalInfo       HexBytes `json:"additional_info"`
	PrivateData          HexBytes `json:"private_data"`
}

func newCMReq(m wire.CMReq) *CMReq {
	return &CMReq{
		LocalCommID:              m.LocalCommID(),
		VendorID:                 m.VendorID(),
		ServiceID:                tooljson.Hex64(m.ServiceID()),
		LocalCAGUID:              tooljson.Hex64(m.LocalCAGUID()),
		LocalQKey:                m.LocalQKey(),
		LocalQPN:                 m.LocalQPN(),
		ResponderResources:       m.ResponderResources(),
		LocalEECN:                m.LocalEECN(),
		InitiatorDepth:           m.InitiatorDepth(),
		RemoteEECN:               m.RemoteEECN(),
		RemoteCMResponseTimeout:  m.RemoteCMResponseTimeout(),
		TransportServiceType:     m.TransportServiceType(),
		EndToEndFlowControl:      m.EndToEndFlowControl(),
		StartingPSN:              m.StartingPSN(),
		LocalCMResponseTimeout:   m.LocalCMResponseTimeout(),
		RetryCount:               m.RetryCount(),
		PartitionKey:             m.PartitionKey(),
		PathMTU:                  m.PathMTU(),
		RDCExists:                m.RDCExists(),
		RNRRetryCount:            m.RNRRetryCount(),
		MaxCMRetries:             m.MaxCMRetries(),
		SRQ:                      m.SRQ(),
		ExtendedTransportType:    m.ExtendedTransportType(),
		PrimaryLocalPortLID:      m.PrimaryLocalPortLID(),
		PrimaryRemotePortLID:     m.PrimaryRemotePortLID(),
		PrimaryLocalPortGID:      gidAddr(m.PrimaryLocalPortGID()),
		PrimaryRemotePortGID:     gidAddr(m.PrimaryRemotePortGID()),
		PrimaryFlowLabel:         m.PrimaryFlowLabel(),
		PrimaryPacketRate:        m.PrimaryPacketRate(),
		PrimaryTrafficClass:      m.PrimaryTrafficClass(),
		PrimaryHopLimit:          m.PrimaryHopLimit(),
		PrimarySL:                m.PrimarySL(),
		PrimarySubnetLocal:       m.PrimarySubnetLocal(),
		PrimaryLocalACKTimeout:   m.PrimaryLocalACKTimeout(),
		AlternateLocalPortLID:    m.AlternateLocalPortLID(),
		AlternateRemotePortLID:   m.AlternateRemotePortLID(),
		AlternateLocalPortGID:    gidAddr(m.AlternateLocalPortGID()),
		AlternateRemotePortGID:   gidAddr(m.AlternateRemotePortGID()),
		AlternateFlowLabel:       m.AlternateFlowLabel(),
		AlternatePacketRate:      m.AlternatePacketRate(),
		AlternateTrafficClass:    m.AlternateTrafficClass(),
		AlternateHopLimit:        m.AlternateHopLimit(),
		AlternateSL:              m.AlternateSL(),
		AlternateSubnetLocal:     m.AlternateSubnetLocal(),
		AlternateLocalACKTimeout: m.AlternateLocalACKTimeout(),
		SAPSupported:             m.SAPSupported(),
		PrivateData:              hexBytes(m.PrivateData()),
	}
}

func newCMMRA(m wire.CMMRA) *CMMRA {
	return &CMMRA{
		LocalCommID:    m.LocalCommID(),
		RemoteCommID:   m.RemoteCommID(),
		MessageMRAed:   m.MessageMRAed(),
		ServiceTimeout: m.ServiceTimeout(),
		PrivateData:    hexBytes(m.PrivateData()),
	}
}

func newCMRej(m wire.CMRej) *CMRej {
	return &CMRej{
		LocalCommID:        m.LocalCommID(),
		RemoteCommID:       m.RemoteCommID(),
		MessageRejected:    m.MessageRejected(),
		RejectedInfoLength: m.RejectedInfoLength(),
		Reason:             m.Reason(),
		ARI:                hexBytes(m.ARI()),
		PrivateData:        hexBytes(m.PrivateData()),
	}
}

func newCMRep(m wire.CMRep) *CMRep {
	return &CMRep{
		LocalCommID:         m.LocalCommID(),
		RemoteCommID:        m.RemoteCommID(),
		LocalQKey:           m.LocalQKey(),
		LocalQPN:            m.LocalQPN(),
		VendorIDH:           m.VendorIDH(),
		LocalEECN:           m.LocalEECN(),
		VendorIDM:           m.VendorIDM(),
		StartingPSN:         m.StartingPSN(),
		VendorIDL:           m.VendorIDL(),
		ResponderResources:  m.ResponderResources(),
		InitiatorDepth:      m.InitiatorDepth(),
		TargetACKDelay:      m.TargetACKDelay(),
		FailoverAccepted:    m.FailoverAccepted(),
		EndToEndFlowControl: m.EndToEndFlowControl(),
		RNRRetryCount:       m.RNRRetryCount(),
		SRQ:                 m.SRQ(),
		LocalCAGUID:         tooljson.Hex64(m.LocalCAGUID()),
		PrivateData:         hexBytes(m.PrivateData()),
	}
}

func newCMRtu(m wire.CMRtu) *CMRtu {
	return &CMRtu{
		LocalCommID:  m.LocalCommID(),
		RemoteCommID: m.RemoteCommID(),
		PrivateData:  hexBytes(m.PrivateData()),
	}
}

func newCMDreq(m wire.CMDreq) *CMDreq {
	return &CMDreq{
		LocalCommID:  m.LocalCommID(),
		RemoteCommID: m.RemoteCommID(),
		RemoteQPN:    m.RemoteQPN(),
		PrivateData:  hexBytes(m.PrivateData()),
	}
}

func newCMDrep(m wire.CMDrep) *CMDrep {
	return &CMDrep{
		LocalCommID:  m.LocalCommID(),
		RemoteCommID: m.RemoteCommID(),
		PrivateData:  hexBytes(m.PrivateData()),
	}
}

func newCMSIDRReq(m wire.CMSIDRReq) *CMSIDRReq {
	return &CMSIDRReq{
		RequestID:    m.RequestID(),
		PartitionKey: m.PartitionKey(),
		ServiceID:    tooljson.Hex64(m.ServiceID()),
		PrivateData:  hexBytes(m.PrivateData()),
	}
}

func newCMSIDRRep(m wire.CMSIDRRep) *CMSIDRRep {
	return &CMSIDRRep{
		RequestID:            m.RequestID(),
		Status:               m.Status(),
		AdditionalInfoLength: m.AdditionalInfoLength(),
		VendorIDH:            m.VendorIDH(),
		QPN:                  m.QPN(),
		VendorIDL:            m.VendorIDL(),
		ServiceID:            tooljson.Hex64(m.ServiceID()),
		QKey:                 m.QKey(),
		AdditionalInfo:       hexBytes(m.AdditionalInfo()),
		PrivateData:          hexBytes(m.PrivateData()),
	}
}

func newCMLap(m wire.CMLap) *CMLap {
	return &CMLap{
		LocalCommID:              m.LocalCommID(),
		RemoteCommID:             m.RemoteCommID(),
		RemoteQPN:                m.RemoteQPN(),
		RemoteCMResponseTimeout:  m.RemoteCMResponseTimeout(),
		AlternateLocalPortLID:    m.AlternateLocalPortLID(),
		AlternateRemotePortLID:   m.AlternateRemotePortLID(),
		AlternateLocalPortGID:    gidAddr(m.AlternateLocalPortGID()),
		AlternateRemotePortGID:   gidAddr(m.AlternateRemotePortGID()),
		AlternateFlowLabel:       m.AlternateFlowLabel(),
		AlternateTrafficClass:    m.AlternateTrafficClass(),
		AlternateHopLimit:        m.AlternateHopLimit(),
		AlternatePacketRate:      m.AlternatePacketRate(),
		AlternateSL:              m.AlternateSL(),
		AlternateSubnetLocal:     m.AlternateSubnetLocal(),
		AlternateLocalACKTimeout: m.AlternateLocalACKTimeout(),
		PrivateData:              hexBytes(m.PrivateData()),
	}
}

func newCMApr(m wire.CMApr) *CMApr {
	return &CMApr{
		LocalCommID:          m.LocalCommID(),
		RemoteCommID:         m.RemoteCommID(),
		AdditionalInfoLength: m.AdditionalInfoLength(),
		ARStatus:             m.ARStatus(),
		AdditionalInfo:       hexBytes(m.AdditionalInfo()),
		PrivateData:          hexBytes(m.PrivateData()),
	}
}
