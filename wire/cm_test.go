package wire_test

import (
	"bytes"
	"errors"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/softnic/softnic/wire"
)

// cmMADs returns the payloads of the QP1 packets of the rping capture
// (testdata/rping_cm.pcap: rping between two rxe guests, kernel 6.1), in
// capture order, with each packet's source address and UDP source port,
// and the UDP source ports of the other (the RC connection's) packets.
func cmMADs(t testing.TB) (mads [][]byte, srcs []netip.AddrPort, rcPorts map[uint16]int) {
	t.Helper()
	lt, frames, err := readPcap(filepath.Join("testdata", "rping_cm.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if lt != 1 {
		t.Fatalf("link type %d", lt)
	}
	for i, f := range frames {
		ip := etherPayload(f)
		if ip == nil {
			continue
		}
		e, pkt, err := wire.ParseEncap(ip)
		if err != nil || e.DstPort != wire.UDPPort {
			continue
		}
		var p wire.Packet
		if err := wire.Parse(pkt, &p); err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		if p.DestQP() != 1 {
			if rcPorts == nil {
				rcPorts = map[uint16]int{}
			}
			rcPorts[e.SrcPort]++
			continue
		}
		if p.Opcode != wire.UDSendOnly || p.DETH().QKey() != wire.GSIQKey || p.DETH().SrcQP() != 1 {
			t.Fatalf("frame %d: QP1 packet %v qkey %#x srcqp %d", i+1, p.Opcode, p.DETH().QKey(), p.DETH().SrcQP())
		}
		mads = append(mads, bytes.Clone(p.Payload))
		srcs = append(srcs, netip.AddrPortFrom(e.Src, e.SrcPort))
	}
	return mads, srcs, rcPorts
}

// TestParseMADRefusals checks that short buffers, a wrong base version, a
// class other than CM and a CM class version other than 2 are refused with
// errors wrapping ErrBadMAD, and that a message parser wants its attribute.
func TestParseMADRefusals(t *testing.T) {
	good := make([]byte, wire.MADLen+8)
	wire.PutCM(good, wire.CMAttrRTU, 1)
	if m, err := wire.ParseMAD(good); err != nil || len(m) != wire.MADLen {
		t.Fatalf("ParseMAD(good) = %d bytes, %v", len(m), err)
	}
	if _, err := wire.ParseCMRtu(good); err != nil {
		t.Fatalf("ParseCMRtu(good): %v", err)
	}
	mod := func(f func(b []byte)) []byte { b := bytes.Clone(good); f(b); return b }
	// validate_mad lets ClassPortInfo use any method.
	cpi := mod(func(b []byte) { b[3], b[16], b[17] = wire.MADMethodGet, 0, 1 })
	if _, err := wire.ParseCM(cpi); err != nil {
		t.Errorf("CM ClassPortInfo Get: %v", err)
	}
	mad := func(b []byte) error { _, err := wire.ParseMAD(b); return err }
	cm := func(b []byte) error { _, err := wire.ParseCM(b); return err }
	cma := func(b []byte) error { _, err := wire.ParseCMAHeader(b); return err }
	for _, c := range []struct {
		name  string
		b     []byte
		parse func([]byte) error
	}{
		{"nil", nil, mad},
		{"255 bytes", good[:255], mad},
		{"base version 2", mod(func(b []byte) { b[0] = 2 }), mad},
		{"base version 0x80 (OPA)", mod(func(b []byte) { b[0] = 0x80 }), mad},
		{"SMP LID routed", mod(func(b []byte) { b[1] = 0x01 }), mad},
		{"SMP directed route", mod(func(b []byte) { b[1] = 0x81 }), mad},
		{"CM RTU with method GetResp", mod(func(b []byte) { b[3] = wire.MADMethodGetResp }), mad},
		{"CM short", good[:100], cm},
		{"CM base version 0", mod(func(b []byte) { b[0] = 0 }), cm},
		{"class SA", mod(func(b []byte) { b[1] = 0x03 }), cm},
		{"CM class version 1", mod(func(b []byte) { b[2] = 1 }), cm},
		{"RTU as REQ", good, func(b []byte) error { _, err := wire.ParseCMReq(b); return err }},
		{"RTU as SIDR_REP", good, func(b []byte) error { _, err := wire.ParseCMSIDRRep(b); return err }},
		{"CMA header short", make([]byte, 35), cma},
		{"CMA header version 1", []byte{1, 0x40, 35: 0}, cma},
		{"CMA header IP version 5", []byte{0, 0x50, 35: 0}, cma},
	} {
		if err := c.parse(c.b); !errors.Is(err, wire.ErrBadMAD) {
			t.Errorf("%s: err = %v, want ErrBadMAD", c.name, err)
		}
	}
}

// rebuild builds the CM message m again from what its views read: PutCM
// with m's attribute and TID, then every field of its layout set from m.
func rebuild(m wire.MAD) []byte {
	b := make([]byte, wire.MADLen)
	out := wire.PutCM(b, m.AttrID(), m.TID())
	for _, f := range wire.CMLayout(m.AttrID()) {
		if f.IsBytes() {
			f.PutBytes(out, f.Bytes(m))
		} else {
			f.Set(out, f.Get(m))
		}
	}
	return b
}

// TestCMGoldenRping decodes the CM exchange of the rping capture: rping -c
// on 10.77.0.3 connecting to rping -s on 10.77.0.2 port 7174, both rxe
// (kernel 6.1).
func TestCMGoldenRping(t *testing.T) {
	mads, srcs, rcPorts := cmMADs(t)
	client, server := netip.MustParseAddr("10.77.0.3"), netip.MustParseAddr("10.77.0.2")
	wantAttr := []uint16{wire.CMAttrREQ, wire.CMAttrREP, wire.CMAttrRTU, wire.CMAttrDREQ, wire.CMAttrDREP}
	wantSrc := []netip.Addr{client, server, client, client, server}
	if len(mads) != len(wantAttr) {
		t.Fatalf("%d QP1 MADs, want %d", len(mads), len(wantAttr))
	}
	for i, b := range mads {
		if len(b) != wire.MADLen {
			t.Fatalf("MAD %d: %d bytes", i, len(b))
		}
		m, err := wire.ParseCM(b)
		if err != nil {
			t.Fatalf("MAD %d: %v", i, err)
		}
		h := m.Hdr()
		// rxe sends QP1's datagrams from the UD port of QPN 1.
		if h.AttrID != wantAttr[i] || srcs[i].Addr() != wantSrc[i] || srcs[i].Port() != wire.RxeSrcPort(1) {
			t.Errorf("MAD %d: attr %#x from %v, want %#x from %v", i, h.AttrID, srcs[i], wantAttr[i], wantSrc[i])
		}
		// Every message of the connection, the disconnect included, carries
		// the same transaction ID: 2 in the high 32 bits (the client's MAD
		// agent's hi_tid) and, in the low 32, the client's local comm ID
		// 0xf3d27eb0 byte-swapped (cm.c cm_form_tid casts the __be32
		// local_id to u64 on a little-endian host). The server's replies
		// reuse the REQ's TID; the client's DREQ forms the same one again.
		if h.BaseVersion != 1 || h.MgmtClass != 7 || h.ClassVersion != 2 || h.Method != wire.MADMethodSend ||
			h.Status != 0 || h.ClassSpecific != 0 || h.Resv != 0 || h.AttrMod != 0 || h.TID != 0x2_B07ED2F3 {
			t.Errorf("MAD %d: header %+v", i, h)
		}
		// Rebuilding from the fields reproduces rxe's bytes: the kernel
		// leaves every reserved bit zero.
		if got := rebuild(m); !bytes.Equal(got, b) {
			t.Errorf("MAD %d: rebuilt\n% x\nwant\n% x", i, got, b)
		}
	}

	req, err := wire.ParseCMReq(mads[0])
	if err != nil {
		t.Fatal(err)
	}
	gid := func(a string) []byte { s := netip.MustParseAddr(a).As16(); return s[:] }
	type kv struct {
		name      string
		got, want any
	}
	for _, c := range []kv{
		{"LocalCommID", req.LocalCommID(), uint32(0xf3d27eb0)},
		{"VendorID", req.VendorID(), uint32(0)},
		{"ServiceID", req.ServiceID(), wire.RDMAServiceID(wire.RDMAPSTCP, 7174)},
		{"LocalCAGUID", req.LocalCAGUID(), uint64(0x505400fffe4d7703)},
		{"LocalQKey", req.LocalQKey(), uint32(0)},
		{"LocalQPN", req.LocalQPN(), uint32(0x1c)},
		{"ResponderResources", req.ResponderResources(), uint8(1)},
		{"InitiatorDepth", req.InitiatorDepth(), uint8(1)},
		{"LocalEECN", req.LocalEECN(), uint32(0)},
		{"RemoteEECN", req.RemoteEECN(), uint32(0)},
		{"RemoteCMResponseTimeout", req.RemoteCMResponseTimeout(), uint8(20)}, // CMA_CM_RESPONSE_TIMEOUT
		{"LocalCMResponseTimeout", req.LocalCMResponseTimeout(), uint8(20)},
		{"TransportServiceType", req.TransportServiceType(), uint8(wire.CMTransportRC)},
		{"EndToEndFlowControl", req.EndToEndFlowControl(), false},
		{"StartingPSN", req.StartingPSN(), uint32(0x61ebe5)}, // the client's first RC PSN in the capture
		{"RetryCount", req.RetryCount(), uint8(7)},
		{"PartitionKey", req.PartitionKey(), uint16(0xffff)},
		{"PathMTU", req.PathMTU(), uint8(3)}, // IB_MTU_1024
		{"RDCExists", req.RDCExists(), false},
		{"RNRRetryCount", req.RNRRetryCount(), uint8(7)},
		{"MaxCMRetries", req.MaxCMRetries(), uint8(15)}, // CMA_MAX_CM_RETRIES
		{"SRQ", req.SRQ(), false},
		{"ExtendedTransportType", req.ExtendedTransportType(), uint8(0)},
		{"PrimaryLocalPortLID", req.PrimaryLocalPortLID(), uint16(0xffff)},
		{"PrimaryRemotePortLID", req.PrimaryRemotePortLID(), uint16(0xffff)},
		{"PrimaryLocalPortGID", req.PrimaryLocalPortGID(), gid("::ffff:10.77.0.3")},
		{"PrimaryRemotePortGID", req.PrimaryRemotePortGID(), gid("::ffff:10.77.0.2")},
		{"PrimaryFlowLabel", req.PrimaryFlowLabel(), uint32(0x68f03)},
		{"PrimaryPacketRate", req.PrimaryPacketRate(), uint8(0)},
		{"PrimaryTrafficClass", req.PrimaryTrafficClass(), uint8(0)},
		{"PrimaryHopLimit", req.PrimaryHopLimit(), uint8(64)},
		{"PrimarySL", req.PrimarySL(), uint8(0)},
		{"PrimarySubnetLocal", req.PrimarySubnetLocal(), false},
		{"PrimaryLocalACKTimeout", req.PrimaryLocalACKTimeout(), uint8(19)},
		{"AlternateLocalPortLID", req.AlternateLocalPortLID(), uint16(0)},
		{"AlternateLocalPortGID", req.AlternateLocalPortGID(), make([]byte, 16)},
		{"SAPSupported", req.SAPSupported(), false},
	} {
		if b, ok := c.want.([]byte); ok {
			if !bytes.Equal(c.got.([]byte), b) {
				t.Errorf("REQ %s = % x, want % x", c.name, c.got, b)
			}
		} else if c.got != c.want {
			t.Errorf("REQ %s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	// The REQ's flow label is the one the connection uses: both ends send
	// every RC packet from the UDP port it maps to (rdma_flow_label_to_udp_sport).
	if sp := wire.FlowLabelSrcPort(req.PrimaryFlowLabel()); len(rcPorts) != 1 || rcPorts[sp] == 0 || sp != 53017 {
		t.Errorf("flow label %#x maps to port %d; the RC packets' source ports: %v", req.PrimaryFlowLabel(), sp, rcPorts)
	}
	if ps, port, ok := wire.RDMAServiceIDParts(req.ServiceID()); !ok || ps != wire.RDMAPSTCP || port != 7174 {
		t.Errorf("service ID %#x: ps %#x port %d ok %v", req.ServiceID(), ps, port, ok)
	}
	pd := req.PrivateData()
	if len(pd) != wire.CMReqPrivateDataLen {
		t.Fatalf("REQ private data %d bytes", len(pd))
	}
	cma, err := wire.ParseCMAHeader(pd)
	if err != nil {
		t.Fatal(err)
	}
	if want := (wire.CMAHeader{Version: 0, IPVersion: 4, SrcPort: 47459, Src: client, Dst: server}); cma != want {
		t.Errorf("CMA header %+v, want %+v", cma, want)
	}
	hb := make([]byte, wire.CMAHdrLen)
	wire.PutCMAHeader(hb, cma)
	if !bytes.Equal(hb, pd[:wire.CMAHdrLen]) {
		t.Errorf("PutCMAHeader\n% x\nwant\n% x", hb, pd[:wire.CMAHdrLen])
	}
	if !bytes.Equal(pd[wire.CMAHdrLen:], make([]byte, wire.CMReqPrivateDataLen-wire.CMAHdrLen)) {
		t.Errorf("rping's user private data is not empty: % x", pd[wire.CMAHdrLen:])
	}

	rep, err := wire.ParseCMRep(mads[1])
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemoteCommID() != req.LocalCommID() || rep.LocalCommID() != 0x0bfad026 ||
		rep.LocalQPN() != 0x1c || rep.StartingPSN() != 0x6a0f89 || rep.LocalQKey() != 0 ||
		rep.ResponderResources() != 1 || rep.InitiatorDepth() != 1 || rep.TargetACKDelay() != 15 ||
		rep.FailoverAccepted() != 0 || rep.EndToEndFlowControl() || rep.RNRRetryCount() != 7 || rep.SRQ() ||
		rep.LocalCAGUID() != 0x505400fffe4d7702 || len(rep.PrivateData()) != wire.CMRepPrivateDataLen {
		t.Errorf("REP fields: %+v", rep.MAD().Hdr())
	}
	rtu, err := wire.ParseCMRtu(mads[2])
	if err != nil {
		t.Fatal(err)
	}
	if rtu.LocalCommID() != req.LocalCommID() || rtu.RemoteCommID() != rep.LocalCommID() || len(rtu.PrivateData()) != wire.CMRtuPrivateDataLen {
		t.Errorf("RTU comm IDs %#x %#x", rtu.LocalCommID(), rtu.RemoteCommID())
	}
	dreq, err := wire.ParseCMDreq(mads[3])
	if err != nil {
		t.Fatal(err)
	}
	if dreq.LocalCommID() != req.LocalCommID() || dreq.RemoteCommID() != rep.LocalCommID() ||
		dreq.RemoteQPN() != rep.LocalQPN() || len(dreq.PrivateData()) != wire.CMDreqPrivateDataLen {
		t.Errorf("DREQ %#x %#x qpn %#x", dreq.LocalCommID(), dreq.RemoteCommID(), dreq.RemoteQPN())
	}
	drep, err := wire.ParseCMDrep(mads[4])
	if err != nil {
		t.Fatal(err)
	}
	if drep.LocalCommID() != rep.LocalCommID() || drep.RemoteCommID() != req.LocalCommID() || len(drep.PrivateData()) != wire.CMDrepPrivateDataLen {
		t.Errorf("DREP %#x %#x", drep.LocalCommID(), drep.RemoteCommID())
	}
	// A message parser refuses the other messages.
	if _, err := wire.ParseCMRep(mads[0]); !errors.Is(err, wire.ErrBadMAD) {
		t.Errorf("ParseCMRep(REQ) = %v", err)
	}
}

var cmAttrs = []uint16{wire.CMAttrREQ, wire.CMAttrMRA, wire.CMAttrREJ, wire.CMAttrREP, wire.CMAttrRTU,
	wire.CMAttrDREQ, wire.CMAttrDREP, wire.CMAttrSIDRREQ, wire.CMAttrSIDRREP, wire.CMAttrLAP, wire.CMAttrAPR}

// TestCMLayouts checks the field tables: fields in wire order, never
// overlapping, byte fields byte-aligned, and private data as the last
// field, ending at the end of the MAD with the kernel's size.
func TestCMLayouts(t *testing.T) {
	pdLen := map[uint16]int{
		wire.CMAttrREQ: wire.CMReqPrivateDataLen, wire.CMAttrMRA: wire.CMMRAPrivateDataLen,
		wire.CMAttrREJ: wire.CMRejPrivateDataLen, wire.CMAttrREP: wire.CMRepPrivateDataLen,
		wire.CMAttrRTU: wire.CMRtuPrivateDataLen, wire.CMAttrDREQ: wire.CMDreqPrivateDataLen,
		wire.CMAttrDREP: wire.CMDrepPrivateDataLen, wire.CMAttrSIDRREQ: wire.CMSIDRReqPrivateDataLen,
		wire.CMAttrSIDRREP: wire.CMSIDRRepPrivateDataLen, wire.CMAttrLAP: wire.CMLapPrivateDataLen,
		wire.CMAttrAPR: wire.CMAprPrivateDataLen,
	}
	for _, a := range cmAttrs {
		l := wire.CMLayout(a)
		end := 0
		for _, f := range l {
			start := f.Byte*8 + f.Bit
			if start < end || f.Width < 1 || (f.IsBytes() && (f.Bit != 0 || f.Width%8 != 0)) {
				t.Errorf("attr %#x: field %+v overlaps or is misshapen (previous end bit %d)", a, f, end)
			}
			end = start + f.Width
		}
		last := l[len(l)-1]
		if last.Name != "PrivateData" || last.Width/8 != pdLen[a] || end != (wire.MADLen-wire.MADHdrLen)*8 {
			t.Errorf("attr %#x: last field %+v ends at bit %d", a, last, end)
		}
	}
	if wire.CMLayout(0x1234) != nil {
		t.Error("CMLayout of an unknown attribute is not nil")
	}
}

// TestCMFieldWidths sets every field of every message to all ones, alone
// in a zeroed message: it reads back as its maximum, and exactly Width bits
// of the message are set (its neighbours untouched). A value wider than the
// field is masked to its low Width bits, the kernel's IBA_SET behaviour.
// Then every field at once, to its maximum, round-trips.
func TestCMFieldWidths(t *testing.T) {
	ones := func(b []byte) (n int) {
		for _, x := range b {
			for ; x != 0; x &= x - 1 {
				n++
			}
		}
		return n
	}
	for _, a := range cmAttrs {
		all := wire.PutCM(make([]byte, wire.MADLen), a, ^uint64(0))
		for _, f := range wire.CMLayout(a) {
			m := wire.PutCM(make([]byte, wire.MADLen), a, 0)
			base := ones(m)
			if f.IsBytes() {
				v := bytes.Repeat([]byte{0xFF}, f.Width/8+3) // longer than the field: cut
				f.PutBytes(m, v)
				f.PutBytes(all, v)
				if got := f.Bytes(m); len(got) != f.Width/8 || !bytes.Equal(got, v[:f.Width/8]) {
					t.Errorf("attr %#x %s: % x", a, f.Name, got)
				}
			} else {
				max := uint64(1)<<f.Width - 1
				if f.Width == 64 {
					max = ^uint64(0)
				}
				f.Set(m, ^uint64(0))
				f.Set(all, max)
				if got := f.Get(m); got != max {
					t.Errorf("attr %#x %s: Set(all ones) reads %#x, want %#x", a, f.Name, got, max)
				}
				if f.Width < 64 {
					f.Set(m, 1<<f.Width|0x2A&max) // a bit above the field, masked off
					if got := f.Get(m); got != 0x2A&max {
						t.Errorf("attr %#x %s: masked Set reads %#x, want %#x", a, f.Name, got, 0x2A&max)
					}
					f.Set(m, max)
				}
			}
			if got := ones(m) - base; got != f.Width {
				t.Errorf("attr %#x %s: %d bits set, want %d", a, f.Name, got, f.Width)
			}
		}
		for _, f := range wire.CMLayout(a) {
			if f.IsBytes() {
				if !bytes.Equal(f.Bytes(all), bytes.Repeat([]byte{0xFF}, f.Width/8)) {
					t.Errorf("attr %#x %s: all-fields message reads % x", a, f.Name, f.Bytes(all))
				}
			} else if got, want := f.Get(all), ^uint64(0)>>(64-f.Width); got != want {
				t.Errorf("attr %#x %s: all-fields message reads %#x, want %#x", a, f.Name, got, want)
			}
		}
		if m, err := wire.ParseCM(all); err != nil || m.AttrID() != a || m.TID() != ^uint64(0) {
			t.Errorf("attr %#x: ParseCM of the built message: %v", a, err)
		}
	}
}

// TestCMTypedSetters builds a REQ and a REJ through the typed setters and
// reads them back, with values wider than their fields masked.
func TestCMTypedSetters(t *testing.T) {
	req := wire.CMReq(wire.PutCM(make([]byte, wire.MADLen), wire.CMAttrREQ, 7))
	req.SetLocalQPN(0xFFABCDEF) // 24-bit field: 0xABCDEF kept
	req.SetResponderResources(0x11)
	req.SetRemoteCMResponseTimeout(0xFF) // 5 bits
	req.SetTransportServiceType(wire.CMTransportUC)
	req.SetEndToEndFlowControl(true)
	req.SetPrimaryFlowLabel(0xFFF12345) // 20 bits
	req.SetPrimaryPacketRate(0x3F)
	req.SetPrimaryLocalPortGID(netip.MustParseAddr("::ffff:10.0.0.1").AsSlice())
	req.SetPrivateData([]byte{1, 2, 3})
	if req.LocalQPN() != 0xABCDEF || req.ResponderResources() != 0x11 || req.LocalEECN() != 0 ||
		req.RemoteCMResponseTimeout() != 0x1F || req.TransportServiceType() != wire.CMTransportUC ||
		!req.EndToEndFlowControl() || req.PrimaryFlowLabel() != 0x12345 || req.PrimaryPacketRate() != 0x3F ||
		req.PrimaryTrafficClass() != 0 || req.PrimaryLocalPortGID()[15] != 1 ||
		!bytes.Equal(req.PrivateData()[:4], []byte{1, 2, 3, 0}) {
		t.Errorf("REQ read back wrong:\n% x", []byte(req))
	}
	if b := []byte(req); b[24+35] != 0x11 || b[24+43] != 0xF8|1<<1|1 || b[24+91] != 0x3F {
		t.Errorf("REQ bytes: resp res %#x, byte 43 %#x, byte 91 %#x", b[24+35], b[24+43], b[24+91])
	}
	rej := wire.CMRej(wire.PutCM(make([]byte, wire.MADLen), wire.CMAttrREJ, 7))
	rej.SetMessageRejected(1)
	rej.SetRejectedInfoLength(0xFF) // 7 bits
	rej.SetReason(28)
	if rej.MessageRejected() != 1 || rej.RejectedInfoLength() != 0x7F || rej.Reason() != 28 ||
		len(rej.ARI()) != wire.CMRejARILen || len(rej.PrivateData()) != wire.CMRejPrivateDataLen {
		t.Errorf("REJ read back wrong:\n% x", []byte(rej))
	}
	if b := []byte(rej); b[24+8] != 0x40 || b[24+9] != 0xFE || b[24+11] != 28 {
		t.Errorf("REJ bytes % x", b[24:36])
	}
}

// TestCMAHeaderAndServiceID round-trips IPv4 and IPv6 CMA headers and the
// port-space service IDs (cma.c cma_get_service_id).
func TestCMAHeaderAndServiceID(t *testing.T) {
	for _, h := range []wire.CMAHeader{
		{IPVersion: 4, SrcPort: 1, Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("198.51.100.7")},
		{IPVersion: 6, SrcPort: 0xFFFF, Src: netip.MustParseAddr("fe80::1"), Dst: netip.MustParseAddr("2001:db8::2")},
	} {
		b := bytes.Repeat([]byte{0xEE}, wire.CMAHdrLen)
		wire.PutCMAHeader(b, h)
		got, err := wire.ParseCMAHeader(b)
		if err != nil || got != h {
			t.Errorf("%+v: read back %+v, %v", h, got, err)
		}
		if h.IPVersion == 4 && (!bytes.Equal(b[4:16], make([]byte, 12)) || b[1] != 0x40) {
			t.Errorf("IPv4 CMA header % x", b)
		}
	}
	for _, c := range []struct {
		ps   uint16
		port uint16
		id   uint64
	}{
		{wire.RDMAPSTCP, 7174, 0x0000000001061C06},
		{wire.RDMAPSUDP, 0xFFFF, 0x000000000111FFFF},
		{wire.RDMAPSIB, 1, 0x00000000013F0001},
	} {
		if id := wire.RDMAServiceID(c.ps, c.port); id != c.id {
			t.Errorf("RDMAServiceID(%#x, %d) = %#x, want %#x", c.ps, c.port, id, c.id)
		}
		if ps, port, ok := wire.RDMAServiceIDParts(c.id); !ok || ps != c.ps || port != c.port {
			t.Errorf("RDMAServiceIDParts(%#x) = %#x %d %v", c.id, ps, port, ok)
		}
	}
	if _, _, ok := wire.RDMAServiceIDParts(0x1000000001061C06); ok {
		t.Error("a service ID with high bits set splits as an RDMA CM one")
	}
}

// TestCMBuildRpingExchange builds rping's five CM messages from scratch
// with PutCM, the typed setters and PutCMAHeader — the values a sender
// chooses, every other field left zero — and gets rxe's bytes exactly.
func TestCMBuildRpingExchange(t *testing.T) {
	mads, _, _ := cmMADs(t)
	const tid, clientID, serverID, qpn = 0x2_B07ED2F3, 0xf3d27eb0, 0x0bfad026, 0x1c
	client, server := netip.MustParseAddr("10.77.0.3"), netip.MustParseAddr("10.77.0.2")
	newMsg := func(attr uint16) wire.MAD { return wire.PutCM(make([]byte, wire.MADLen), attr, tid) }

	req := wire.CMReq(newMsg(wire.CMAttrREQ))
	req.SetLocalCommID(clientID)
	req.SetServiceID(wire.RDMAServiceID(wire.RDMAPSTCP, 7174))
	req.SetLocalCAGUID(0x505400fffe4d7703)
	req.SetLocalQPN(qpn)
	req.SetResponderResources(1)
	req.SetInitiatorDepth(1)
	req.SetRemoteCMResponseTimeout(20)
	req.SetTransportServiceType(wire.CMTransportRC)
	req.SetStartingPSN(0x61ebe5)
	req.SetLocalCMResponseTimeout(20)
	req.SetRetryCount(7)
	req.SetPartitionKey(0xffff)
	req.SetPathMTU(3)
	req.SetRNRRetryCount(7)
	req.SetMaxCMRetries(15)
	req.SetPrimaryLocalPortLID(0xffff)
	req.SetPrimaryRemotePortLID(0xffff)
	req.SetPrimaryLocalPortGID(netip.AddrFrom16(client.As16()).AsSlice())
	req.SetPrimaryRemotePortGID(netip.AddrFrom16(server.As16()).AsSlice())
	req.SetPrimaryFlowLabel(0x68f03)
	req.SetPrimaryHopLimit(64)
	req.SetPrimaryLocalACKTimeout(19)
	wire.PutCMAHeader(req.PrivateData(), wire.CMAHeader{IPVersion: 4, SrcPort: 47459, Src: client, Dst: server})

	rep := wire.CMRep(newMsg(wire.CMAttrREP))
	rep.SetLocalCommID(serverID)
	rep.SetRemoteCommID(clientID)
	rep.SetLocalQPN(qpn)
	rep.SetStartingPSN(0x6a0f89)
	rep.SetResponderResources(1)
	rep.SetInitiatorDepth(1)
	rep.SetTargetACKDelay(15)
	rep.SetRNRRetryCount(7)
	rep.SetLocalCAGUID(0x505400fffe4d7702)

	rtu := wire.CMRtu(newMsg(wire.CMAttrRTU))
	rtu.SetLocalCommID(clientID)
	rtu.SetRemoteCommID(serverID)

	dreq := wire.CMDreq(newMsg(wire.CMAttrDREQ))
	dreq.SetLocalCommID(clientID)
	dreq.SetRemoteCommID(serverID)
	dreq.SetRemoteQPN(qpn)

	drep := wire.CMDrep(newMsg(wire.CMAttrDREP))
	drep.SetLocalCommID(serverID)
	drep.SetRemoteCommID(clientID)

	for i, got := range [][]byte{req, rep, rtu, dreq, drep} {
		if !bytes.Equal(got, mads[i]) {
			t.Errorf("message %d built\n% x\nrxe sent\n% x", i, got, mads[i])
		}
	}
}

// TestCMAccessorsMatchLayout checks, by reflection, that every field of
// every layout has a getter and setter of that name on its view, and that
// they reach that field: SetF(all ones) sets exactly the field's bits and
// F() reads back what the layout's Get (or Bytes) reads.
func TestCMAccessorsMatchLayout(t *testing.T) {
	views := map[uint16]func(wire.MAD) any{
		wire.CMAttrREQ:     func(m wire.MAD) any { return wire.CMReq(m) },
		wire.CMAttrMRA:     func(m wire.MAD) any { return wire.CMMRA(m) },
		wire.CMAttrREJ:     func(m wire.MAD) any { return wire.CMRej(m) },
		wire.CMAttrREP:     func(m wire.MAD) any { return wire.CMRep(m) },
		wire.CMAttrRTU:     func(m wire.MAD) any { return wire.CMRtu(m) },
		wire.CMAttrDREQ:    func(m wire.MAD) any { return wire.CMDreq(m) },
		wire.CMAttrDREP:    func(m wire.MAD) any { return wire.CMDrep(m) },
		wire.CMAttrSIDRREQ: func(m wire.MAD) any { return wire.CMSIDRReq(m) },
		wire.CMAttrSIDRREP: func(m wire.MAD) any { return wire.CMSIDRRep(m) },
		wire.CMAttrLAP:     func(m wire.MAD) any { return wire.CMLap(m) },
		wire.CMAttrAPR:     func(m wire.MAD) any { return wire.CMApr(m) },
	}
	for _, a := range cmAttrs {
		for _, f := range wire.CMLayout(a) {
			m := wire.PutCM(make([]byte, wire.MADLen), a, 0)
			v := reflect.ValueOf(views[a](m))
			get, set := v.MethodByName(f.Name), v.MethodByName("Set"+f.Name)
			if !get.IsValid() || !set.IsValid() {
				t.Errorf("attr %#x: no %s/Set%s", a, f.Name, f.Name)
				continue
			}
			arg := reflect.New(set.Type().In(0)).Elem()
			switch arg.Kind() {
			case reflect.Bool:
				arg.SetBool(true)
			case reflect.Slice:
				arg.SetBytes(bytes.Repeat([]byte{0xFF}, f.Width/8))
			default:
				arg.SetUint(^uint64(0))
			}
			set.Call([]reflect.Value{arg})
			out := get.Call(nil)[0]
			if f.IsBytes() {
				if !bytes.Equal(out.Bytes(), f.Bytes(m)) || !bytes.Equal(f.Bytes(m), arg.Bytes()) {
					t.Errorf("attr %#x %s: accessor and layout disagree", a, f.Name)
				}
				continue
			}
			want := ^uint64(0) >> (64 - f.Width)
			var got uint64
			if out.Kind() == reflect.Bool {
				got = map[bool]uint64{false: 0, true: 1}[out.Bool()]
			} else {
				got = out.Uint()
			}
			if got != want || f.Get(m) != want {
				t.Errorf("attr %#x %s: accessor reads %#x, layout %#x, want %#x", a, f.Name, got, f.Get(m), want)
			}
		}
	}
}
