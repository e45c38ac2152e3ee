package wire

import "fmt"

// Names for printing MADs and CM messages ("softnic decode"). Each returns
// a hex form for a value it has no name for, never an empty string.

// MgmtClassName names a MAD management class (ib_mad.h IB_MGMT_CLASS_*;
// IBTA Vol 1 table 123), e.g. "CM" for 0x07.
func MgmtClassName(c uint8) string {
	switch c {
	case MgmtClassSubnLIDRouted:
		return "SubnLIDRouted"
	case 0x03:
		return "SubnAdm"
	case 0x04:
		return "Perf"
	case 0x05:
		return "BM"
	case 0x06:
		return "DevMgt"
	case MgmtClassCM:
		return "CM"
	case 0x08:
		return "SNMP"
	case 0x10:
		return "DevAdm"
	case 0x21:
		return "BIS"
	case MgmtClassSubnDirectedRoute:
		return "SubnDirectedRoute"
	}
	return fmt.Sprintf("0x%02x", c)
}

// MADMethodName names a MAD method (ib_mad.h IB_MGMT_METHOD_* and the SA's
// IB_SA_METHOD_*), e.g. "Send" for 0x03.
func MADMethodName(m uint8) string {
	switch m {
	case MADMethodGet:
		return "Get"
	case MADMethodSet:
		return "Set"
	case MADMethodSend:
		return "Send"
	case MADMethodTrap:
		return "Trap"
	case MADMethodReport:
		return "Report"
	case 0x07:
		return "TrapRepress"
	case 0x12:
		return "GetTable"
	case 0x13:
		return "GetTraceTable"
	case 0x14:
		return "GetMulti"
	case 0x15:
		return "Delete"
	case MADMethodGetResp:
		return "GetResp"
	case 0x86:
		return "ReportResp"
	case 0x92:
		return "GetTableResp"
	case 0x94:
		return "GetMultiResp"
	case 0x95:
		return "DeleteResp"
	}
	return fmt.Sprintf("0x%02x", m)
}

// CMAttrName names a CM attribute as IBTA Vol 1 table 104 (and Wireshark)
// does: "ConnectRequest" for REQ, "ConnectReply" for REP, "ReadyToUse",
// "DisconnectRequest", "DisconnectReply", "ConnectReject", "MsgRcptAck"
// (MRA), "ServiceIDResReq" and "ServiceIDResReqResp" (SIDR),
// "LoadAlternatePath", "AlternatePathResponse", "ClassPortInfo".
func CMAttrName(attr uint16) string {
	switch attr {
	case MADAttrClassPortInfo:
		return "ClassPortInfo"
	case CMAttrREQ:
		return "ConnectRequest"
	case CMAttrMRA:
		return "MsgRcptAck"
	case CMAttrREJ:
		return "ConnectReject"
	case CMAttrREP:
		return "ConnectReply"
	case CMAttrRTU:
		return "ReadyToUse"
	case CMAttrDREQ:
		return "DisconnectRequest"
	case CMAttrDREP:
		return "DisconnectReply"
	case CMAttrSIDRREQ:
		return "ServiceIDResReq"
	case CMAttrSIDRREP:
		return "ServiceIDResReqResp"
	case CMAttrLAP:
		return "LoadAlternatePath"
	case CMAttrAPR:
		return "AlternatePathResponse"
	}
	return fmt.Sprintf("0x%04x", attr)
}

// CMMsgShortName is the short name of a CM attribute ("REQ", "SIDR_REP"),
// as cm.c and ibta_vol1_c12.h call the messages.
func CMMsgShortName(attr uint16) string {
	switch attr {
	case MADAttrClassPortInfo:
		return "ClassPortInfo"
	case CMAttrREQ:
		return "REQ"
	case CMAttrMRA:
		return "MRA"
	case CMAttrREJ:
		return "REJ"
	case CMAttrREP:
		return "REP"
	case CMAttrRTU:
		return "RTU"
	case CMAttrDREQ:
		return "DREQ"
	case CMAttrDREP:
		return "DREP"
	case CMAttrSIDRREQ:
		return "SIDR_REQ"
	case CMAttrSIDRREP:
		return "SIDR_REP"
	case CMAttrLAP:
		return "LAP"
	case CMAttrAPR:
		return "APR"
	}
	return fmt.Sprintf("0x%04x", attr)
}

// cmRejReasons are ib_cm.h's enum ib_cm_rej_reason names without the
// IB_CM_REJ_ prefix (IBTA Vol 1 table 109). 34 is not assigned.
var cmRejReasons = [...]string{
	1:  "NO_QP",
	2:  "NO_EEC",
	3:  "NO_RESOURCES",
	4:  "TIMEOUT",
	5:  "UNSUPPORTED",
	6:  "INVALID_COMM_ID",
	7:  "INVALID_COMM_INSTANCE",
	8:  "INVALID_SERVICE_ID",
	9:  "INVALID_TRANSPORT_TYPE",
	10: "STALE_CONN",
	11: "RDC_NOT_EXIST",
	12: "INVALID_GID",
	13: "INVALID_LID",
	14: "INVALID_SL",
	15: "INVALID_TRAFFIC_CLASS",
	16: "INVALID_HOP_LIMIT",
	17: "INVALID_PACKET_RATE",
	18: "INVALID_ALT_GID",
	19: "INVALID_ALT_LID",
	20: "INVALID_ALT_SL",
	21: "INVALID_ALT_TRAFFIC_CLASS",
	22: "INVALID_ALT_HOP_LIMIT",
	23: "INVALID_ALT_PACKET_RATE",
	24: "PORT_CM_REDIRECT",
	25: "PORT_REDIRECT",
	26: "INVALID_MTU",
	27: "INSUFFICIENT_RESP_RESOURCES",
	28: "CONSUMER_DEFINED",
	29: "INVALID_RNR_RETRY",
	30: "DUPLICATE_LOCAL_COMM_ID",
	31: "INVALID_CLASS_VERSION",
	32: "INVALID_FLOW_LABEL",
	33: "INVALID_ALT_FLOW_LABEL",
	35: "VENDOR_OPTION_NOT_SUPPORTED",
}

// CMRejReasonName names a REJ reason as ib_cm.h's enum ib_cm_rej_reason
// does, without its IB_CM_REJ_ prefix ("INVALID_SERVICE_ID" for 8,
// "CONSUMER_DEFINED" for 28); an unassigned code gives "reason_N".
func CMRejReasonName(r uint16) string {
	if int(r) < len(cmRejReasons) && cmRejReasons[r] != "" {
		return cmRejReasons[r]
	}
	return fmt.Sprintf("reason_%d", r)
}

// CMTransportName names a REQ's transport service type (IBTA table 106):
// "RC", "UC", "RD", or "XRC" (3, with extended transport type 1).
func CMTransportName(t uint8) string {
	switch t {
	case CMTransportRC:
		return "RC"
	case CMTransportUC:
		return "UC"
	case CMTransportRD:
		return "RD"
	case CMTransportXRC:
		return "XRC"
	}
	return fmt.Sprintf("%d", t)
}

// CMSIDRStatusName names a SIDR_REP status (ib_cm.h enum
// ib_cm_sidr_status without the IB_SIDR_ prefix; IBTA table 120).
func CMSIDRStatusName(s uint8) string {
	switch s {
	case 0:
		return "SUCCESS"
	case 1:
		return "UNSUPPORTED"
	case 2:
		return "REJECT"
	case 3:
		return "NO_QP"
	case 4:
		return "REDIRECT"
	case 5:
		return "UNSUPPORTED_VERSION"
	}
	return fmt.Sprintf("status_%d", s)
}

// CMMsgResponseName names the message an MRA acknowledges or a REJ
// rejects (cm_msgs.h enum cm_msg_response): "REQ", "REP", or "other"
// (a LAP for MRA, none for REJ).
func CMMsgResponseName(v uint8) string {
	switch v {
	case CMMsgResponseREQ:
		return "REQ"
	case CMMsgResponseREP:
		return "REP"
	case CMMsgResponseOther:
		return "other"
	}
	return fmt.Sprintf("%d", v)
}

// PathMTUBytes returns the bytes of an IB MTU enum (IBTA 9.6.4.3: 1 = 256
// ... 5 = 4096), or 0 for a value outside it.
func PathMTUBytes(mtu uint8) int {
	if mtu >= 1 && mtu <= 5 {
		return 128 << mtu
	}
	return 0
}
