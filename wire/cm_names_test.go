package wire

import "testing"

func TestCMNames(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range []uint16{MADAttrClassPortInfo, CMAttrREQ, CMAttrMRA, CMAttrREJ, CMAttrREP, CMAttrRTU,
		CMAttrDREQ, CMAttrDREP, CMAttrSIDRREQ, CMAttrSIDRREP, CMAttrLAP, CMAttrAPR} {
		n, s := CMAttrName(a), CMMsgShortName(a)
		if n[0] == '0' || s[0] == '0' || seen[n] || seen[s] {
			t.Errorf("attribute %#x: names %q %q (hex or repeated)", a, n, s)
		}
		seen[n], seen[s] = true, true
	}
	if got := CMAttrName(0x33); got != "0x0033" {
		t.Errorf("unknown attribute: %q", got)
	}
	for _, c := range []struct {
		r    uint16
		want string
	}{
		{CMRejNoQP, "NO_QP"}, {CMRejInvalidServiceID, "INVALID_SERVICE_ID"}, {CMRejStaleConn, "STALE_CONN"},
		{CMRejConsumerDefined, "CONSUMER_DEFINED"}, {CMRejInvalidClassVersion, "INVALID_CLASS_VERSION"},
		{33, "INVALID_ALT_FLOW_LABEL"}, {35, "VENDOR_OPTION_NOT_SUPPORTED"}, {34, "reason_34"},
		{0, "reason_0"}, {0xffff, "reason_65535"},
	} {
		if got := CMRejReasonName(c.r); got != c.want {
			t.Errorf("CMRejReasonName(%d) = %q, want %q", c.r, got, c.want)
		}
	}
	for mtu, want := range map[uint8]int{0: 0, 1: 256, 3: 1024, 5: 4096, 6: 0} {
		if got := PathMTUBytes(mtu); got != want {
			t.Errorf("PathMTUBytes(%d) = %d, want %d", mtu, got, want)
		}
	}
	if MgmtClassName(MgmtClassCM) != "CM" || MADMethodName(MADMethodSend) != "Send" || MADMethodName(0x42) != "0x42" ||
		CMTransportName(CMTransportUC) != "UC" || CMSIDRStatusName(3) != "NO_QP" || CMMsgResponseName(1) != "REP" {
		t.Error("a name is wrong")
	}
}
