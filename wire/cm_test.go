package wire_test

import (
	"bytes"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/softnic/softnic/wire"
)

// cmMADs returns the payloads of the QP1 packets of the rping capture
// (testdata/rping_cm.pcap: rping between two rxe guests, kernel 6.1), in
// capture order, with each packet's source address.
func cmMADs(t testing.TB) (mads [][]byte, srcs []netip.Addr) {
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
			continue
		}
		if p.Opcode != wire.UDSendOnly || p.DETH().QKey() != wire.GSIQKey || p.DETH().SrcQP() != 1 {
			t.Fatalf("frame %d: QP1 packet %v qkey %#x srcqp %d", i+1, p.Opcode, p.DETH().QKey(), p.DETH().SrcQP())
		}
		mads = append(mads, bytes.Clone(p.Payload))
		srcs = append(srcs, e.Src)
	}
	return mads, srcs
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
	mads, srcs := cmMADs(t)
	client, server := netip.MustParseAddr("10.77.0.3"), netip.MustParseAddr("10.77.0.2")
	wantAttr := []uint16{wire.CMAttrREQ, wire.CMAttrREP, wire.CMAttrRTU, wire.CMAttrDREQ, wire.CMAttrDREP}
	wantSrc := []netip.Addr{client, server, client, client, server}
	if len(mads) != len(wantAttr) {
		t.Fatalf("%d QP1 MADs, want %d", len(mads), len(wantAttr))
	}
	var ms []wire.MAD
	for i, b := range mads {
		if len(b) != wire.MADLen {
			t.Fatalf("MAD %d: %d bytes", i, len(b))
		}
		m, err := wire.ParseCM(b)
		if err != nil {
			t.Fatalf("MAD %d: %v", i, err)
		}
		h := m.Hdr()
		if h.AttrID != wantAttr[i] || srcs[i] != wantSrc[i] {
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
		ms = append(ms, m)
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
