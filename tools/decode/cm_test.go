package decode_test

import (
	"bytes"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/softnic/softnic/tools/decode"
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/wire"
)

// TestGoldenRpingCM pins the text and JSON forms of a real rxe↔rxe rping:
// the five CM MADs (REQ, REP, RTU, DREQ, DREP) with their fields, between
// the RC traffic.
func TestGoldenRpingCM(t *testing.T) {
	for _, tt := range []struct {
		golden string
		opts   decode.Options
	}{
		{"rping_cm.golden", decode.Options{}},
		{"rping_cm.json.golden", decode.Options{JSON: true}},
	} {
		var out bytes.Buffer
		sum, err := decode.Run(&out, []string{rxeFile("rping_cm.pcap")}, tt.opts)
		if err != nil || !sum.OK() {
			t.Fatalf("%s: %+v, %v", tt.golden, sum, err)
		}
		golden(t, tt.golden, out.Bytes())
	}
}

// TestRpingCMFields checks the decoded CM fields of the rping capture
// against what the kernel's CM and the RDMA CM put there, and against the
// RC traffic they set up.
func TestRpingCMFields(t *testing.T) {
	var out bytes.Buffer
	if _, err := decode.Run(&out, []string{rxeFile("rping_cm.pcap")}, decode.Options{JSON: true}); err != nil {
		t.Fatal(err)
	}
	recs, _ := parseJSON(t, out.Bytes())
	var mads []*decode.MAD
	var firstReq = map[netip.Addr]uint32{} // the first RC request PSN each side sent
	for _, r := range recs {
		if r.MAD != nil {
			if r.DestQP != 1 || r.DETH.SrcQP != 1 || r.DETH.QKey != wire.GSIQKey {
				t.Errorf("#%d: MAD on qpn %#x srcqp %#x qkey %#x", r.Index, r.DestQP, r.DETH.SrcQP, r.DETH.QKey)
			}
			mads = append(mads, r.MAD)
			continue
		}
		if _, seen := firstReq[r.Src]; !seen && r.AETH == nil {
			firstReq[r.Src] = r.PSN
		}
	}
	attrs := []string{"ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"}
	if len(mads) != len(attrs) {
		t.Fatalf("got %d MADs, want %d", len(mads), len(attrs))
	}
	for i, m := range mads {
		if m.Attr != attrs[i] || m.Class != "CM" || m.ClassVersion != 2 || m.Method != "Send" || m.Status != 0 || m.Error != "" {
			t.Errorf("MAD %d: got %+v, want a good CM %s", i, m, attrs[i])
		}
		if m.TID != mads[0].TID {
			t.Errorf("MAD %d: tid %v, want the REQ's %v", i, m.TID, mads[0].TID)
		}
	}
	req, rep, rtu, dreq, drep := mads[0].REQ, mads[1].REP, mads[2].RTU, mads[3].DREQ, mads[4].DREP
	if req == nil || rep == nil || rtu == nil || dreq == nil || drep == nil {
		t.Fatalf("messages missing: %+v", mads)
	}
	client, server := netip.MustParseAddr("::ffff:10.77.0.3"), netip.MustParseAddr("::ffff:10.77.0.2")
	if req.ServiceID != 0x1061C06 || req.LocalQPN != 0x1c || req.Transport != "RC" || req.PathMTUBytes != 1024 ||
		req.RemoteCMResponseTimeout != 20 || req.LocalCMResponseTimeout != 20 || req.MaxCMRetries != 15 ||
		req.RetryCount != 7 || req.RNRRetryCount != 7 || req.PrimaryLocalACKTimeout != 19 ||
		req.PrimaryHopLimit != 64 || req.PrimaryTrafficClass != 0 || req.PartitionKey != 0xffff ||
		req.PrimaryLocalPortGID != client || req.PrimaryRemotePortGID != server {
		t.Errorf("REQ: got %+v", req)
	}
	// The flow label is the one cma.c derives for the RC QP's UDP source
	// port (rdma_flow_label_to_udp_sport); wire's golden test ties the two.
	if req.PrimaryFlowLabel == 0 {
		t.Errorf("REQ flow label 0")
	}
	c := mads[0].CMA
	if c == nil || c.IPVersion != 4 || c.PortSpace != "TCP" || c.DstPort != 7174 ||
		c.Src != netip.MustParseAddr("10.77.0.3") || c.Dst != netip.MustParseAddr("10.77.0.2") || c.SrcPort == 0 {
		t.Errorf("CMA header: got %+v", c)
	}
	// The PSNs: each side's first RC request carries the starting PSN the
	// other side announced in its REQ or REP.
	if got := firstReq[netip.MustParseAddr("10.77.0.2")]; got != req.StartingPSN {
		t.Errorf("server's first request PSN %#x, REQ starting PSN %#x", got, req.StartingPSN)
	}
	if got := firstReq[netip.MustParseAddr("10.77.0.3")]; got != rep.StartingPSN {
		t.Errorf("client's first request PSN %#x, REP starting PSN %#x", got, rep.StartingPSN)
	}
	if rep.RemoteCommID != req.LocalCommID || rep.LocalQPN != 0x1c ||
		rtu.LocalCommID != req.LocalCommID || rtu.RemoteCommID != rep.LocalCommID ||
		dreq.LocalCommID != req.LocalCommID || dreq.RemoteCommID != rep.LocalCommID || dreq.RemoteQPN != rep.LocalQPN ||
		drep.LocalCommID != rep.LocalCommID || drep.RemoteCommID != req.LocalCommID {
		t.Errorf("comm IDs / QPNs do not pair: REQ %#x REP %+v RTU %+v DREQ %+v DREP %+v",
			req.LocalCommID, rep, rtu, dreq, drep)
	}
}

// TestCMStructsCoverLayouts ties each CM struct to wire's field table: a
// field of every layout name, in order, so a field added to wire cannot be
// missed here.
func TestCMStructsCoverLayouts(t *testing.T) {
	for attr, v := range map[uint16]any{
		wire.CMAttrREQ: decode.CMReq{}, wire.CMAttrMRA: decode.CMMRA{}, wire.CMAttrREJ: decode.CMRej{},
		wire.CMAttrREP: decode.CMRep{}, wire.CMAttrRTU: decode.CMRtu{}, wire.CMAttrDREQ: decode.CMDreq{},
		wire.CMAttrDREP: decode.CMDrep{}, wire.CMAttrSIDRREQ: decode.CMSIDRReq{}, wire.CMAttrSIDRREP: decode.CMSIDRRep{},
		wire.CMAttrLAP: decode.CMLap{}, wire.CMAttrAPR: decode.CMApr{},
	} {
		typ := reflect.TypeOf(v)
		last := -1
		for _, f := range wire.CMLayout(attr) {
			sf, ok := typ.FieldByName(f.Name)
			if !ok {
				t.Errorf("%s has no field %s", typ.Name(), f.Name)
				continue
			}
			if sf.Index[0] <= last {
				t.Errorf("%s.%s out of wire order", typ.Name(), f.Name)
			}
			last = sf.Index[0]
		}
	}
}

// madSample returns a UD SEND to QP 1 carrying payload.
func madSample(e wire.Encap, psn wire.PSN, payload []byte) sample {
	return sample{encap: e, payload: payload, h: wire.Headers{
		BTH:  wire.BTHFields{Opcode: wire.UDSendOnly, PKey: wire.DefaultPKey, DestQP: 1, PSN: psn, AckReq: true},
		DETH: wire.DETHFields{QKey: wire.GSIQKey, SrcQP: 1},
	}}
}

// cmSamples builds the CM messages the rping capture has not (REJ, MRA,
// SIDR, LAP, APR, an IPv6 REQ, a non-CM class) and broken MADs.
func cmSamples() []sample {
	var ss []sample
	add := func(e wire.Encap, b []byte) { ss = append(ss, madSample(e, wire.PSN(len(ss)), b)) }
	mad := func(attr uint16) []byte { b := make([]byte, wire.MADLen); wire.PutCM(b, attr, 0x2_0000_1234); return b }

	b := mad(wire.CMAttrREQ)
	req := wire.CMReq(b)
	req.SetLocalCommID(0x11223344)
	req.SetServiceID(wire.RDMAServiceID(wire.RDMAPSTCP, 7174))
	req.SetLocalQPN(0x12)
	req.SetStartingPSN(0xabcdef)
	req.SetPathMTU(5)
	req.SetTransportServiceType(wire.CMTransportRC)
	req.SetPrimaryLocalPortGID(netip.MustParseAddr("fd00:77::3").AsSlice())
	req.SetPrimaryRemotePortGID(netip.MustParseAddr("fd00:77::2").AsSlice())
	req.SetPrimaryFlowLabel(0x12345)
	req.SetPrimaryHopLimit(64)
	req.SetPrimaryTrafficClass(106)
	req.SetSRQ(true)
	var cma [wire.CMAHdrLen]byte
	wire.PutCMAHeader(cma[:], wire.CMAHeader{IPVersion: 6, SrcPort: 40000,
		Src: netip.MustParseAddr("fd00:77::3"), Dst: netip.MustParseAddr("fd00:77::2")})
	req.SetPrivateData(cma[:])
	add(encap6, b)

	b = mad(wire.CMAttrREJ)
	rej := wire.CMRej(b)
	rej.SetLocalCommID(0x55)
	rej.SetRemoteCommID(0x11223344)
	rej.SetReason(wire.CMRejInvalidServiceID)
	rej.SetMessageRejected(wire.CMMsgResponseREQ)
	add(encap4, b)

	b = mad(wire.CMAttrREJ)
	rej = wire.CMRej(b)
	rej.SetReason(wire.CMRejConsumerDefined)
	rej.SetMessageRejected(wire.CMMsgResponseREP)
	rej.SetPrivateData([]byte("no"))
	add(encap4, b)

	b = mad(wire.CMAttrMRA)
	mra := wire.CMMRA(b)
	mra.SetLocalCommID(0x66)
	mra.SetRemoteCommID(0x11223344)
	mra.SetServiceTimeout(23)
	add(encap4, b)

	b = mad(wire.CMAttrSIDRREQ)
	sreq := wire.CMSIDRReq(b)
	sreq.SetRequestID(0x77)
	sreq.SetPartitionKey(0xffff)
	sreq.SetServiceID(wire.RDMAServiceID(wire.RDMAPSUDP, 7174))
	wire.PutCMAHeader(cma[:], wire.CMAHeader{IPVersion: 4, SrcPort: 50000,
		Src: netip.MustParseAddr("10.77.0.3"), Dst: netip.MustParseAddr("10.77.0.2")})
	sreq.SetPrivateData(cma[:])
	add(encap4, b)

	b = mad(wire.CMAttrSIDRREP)
	srep := wire.CMSIDRRep(b)
	srep.SetRequestID(0x77)
	srep.SetQPN(0x13)
	srep.SetQKey(0x1234567)
	srep.SetServiceID(wire.RDMAServiceID(wire.RDMAPSUDP, 7174))
	add(encap4, b)

	b = mad(wire.CMAttrSIDRREP)
	wire.CMSIDRRep(b).SetStatus(3)
	add(encap4, b)

	add(encap4, mad(wire.CMAttrLAP))
	add(encap4, mad(wire.CMAttrAPR))

	// A REQ for an RDMA CM service whose private data is not a CMA header.
	b = mad(wire.CMAttrREQ)
	wire.CMReq(b).SetServiceID(wire.RDMAServiceID(wire.RDMAPSTCP, 1))
	wire.CMReq(b).SetPrivateData([]byte{9, 0x40})
	add(encap4, b)

	// A subnet administration Get (not the CM): header only.
	b = make([]byte, wire.MADLen)
	wire.PutMADHdr(b, wire.MADHdr{BaseVersion: 1, MgmtClass: 0x03, ClassVersion: 2, Method: wire.MADMethodGet, TID: 9, AttrID: 0x35})
	add(encap4, b)

	// Broken: short; base version 2; CM class version 1; CM REQ with
	// method Get; an SMP class on QP 1; an unknown CM attribute.
	add(encap4, mad(wire.CMAttrRTU)[:100])
	b = mad(wire.CMAttrRTU)
	b[0] = 2
	add(encap4, b)
	b = mad(wire.CMAttrRTU)
	b[2] = 1
	add(encap4, b)
	b = mad(wire.CMAttrREQ)
	b[3] = wire.MADMethodGet
	add(encap4, b)
	b = mad(wire.CMAttrREQ)
	b[1] = wire.MgmtClassSubnLIDRouted
	add(encap4, b)
	add(encap4, mad(0x0033))
	add(encap4, []byte{1, 7})
	return ss
}

// TestGoldenCMSamples pins the forms of every CM message and of broken
// MADs: each prints its group (errors as error="..."), and none makes the
// packet malformed (its RoCE headers and ICRC are fine).
func TestGoldenCMSamples(t *testing.T) {
	ss := cmSamples()
	path := writeSamples(t, 101, ss) // LINKTYPE_RAW
	for _, tt := range []struct {
		golden string
		opts   decode.Options
	}{
		{"cm_samples.golden", decode.Options{}},
		{"cm_samples.json.golden", decode.Options{JSON: true}},
	} {
		var out bytes.Buffer
		sum, err := decode.Run(&out, []string{path}, tt.opts)
		if err != nil || !sum.OK() || sum.Packets != len(ss) {
			t.Fatalf("%s: %+v, %v", tt.golden, sum, err)
		}
		got := bytes.ReplaceAll(out.Bytes(), []byte(path), []byte("cm_samples.pcap"))
		golden(t, tt.golden, got)
		if tt.opts.JSON {
			recs, _ := parseJSON(t, got)
			checkCMSamples(t, recs)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(got)), "\n")
		for i, want := range []string{
			"CM[ConnectRequest", "CM[ConnectReject", "CM[ConnectReject", "CM[MsgRcptAck", "CM[ServiceIDResReq ",
			"CM[ServiceIDResReqResp", "CM[ServiceIDResReqResp", "CM[LoadAlternatePath", "CM[AlternatePathResponse",
			"cma_error=", "MAD[class=SubnAdm attr=0x0035 method=Get", "error=", "error=", "error=", "error=", "error=",
			"CM[0x0033", "error=",
		} {
			if !strings.Contains(lines[1+i], want) {
				t.Errorf("line %d: %q lacks %q", i+2, lines[1+i], want)
			}
		}
	}
}

func checkCMSamples(t *testing.T, recs []decode.Record) {
	t.Helper()
	m := func(i int) *decode.MAD {
		if recs[i].MAD == nil {
			t.Fatalf("record %d has no MAD", i+1)
		}
		return recs[i].MAD
	}
	if r := m(0); r.REQ == nil || r.REQ.PathMTUBytes != 4096 || !r.REQ.SRQ || r.REQ.PrimaryTrafficClass != 106 ||
		r.CMA == nil || r.CMA.IPVersion != 6 || r.CMA.Dst != netip.MustParseAddr("fd00:77::2") || r.CMA.DstPort != 7174 {
		t.Errorf("IPv6 REQ: got %+v", r)
	}
	if r := m(1).REJ; r == nil || r.ReasonName != "INVALID_SERVICE_ID" || r.Reason != 8 || r.MessageRejectedName != "REQ" {
		t.Errorf("REJ: got %+v", r)
	}
	if r := m(2).REJ; r == nil || r.ReasonName != "CONSUMER_DEFINED" || string(r.PrivateData[:2]) != "no" {
		t.Errorf("REJ consumer defined: got %+v", r)
	}
	if r := m(3).MRA; r == nil || r.ServiceTimeout != 23 || r.MessageMRAedName != "REQ" {
		t.Errorf("MRA: got %+v", r)
	}
	if r := m(4); r.SIDRReq == nil || r.CMA == nil || r.CMA.PortSpace != "UDP" || r.CMA.SrcPort != 50000 {
		t.Errorf("SIDR_REQ: got %+v", r)
	}
	if r := m(5).SIDRRep; r == nil || r.StatusName != "SUCCESS" || r.QPN != 0x13 || r.QKey != 0x1234567 {
		t.Errorf("SIDR_REP: got %+v", r)
	}
	if r := m(6).SIDRRep; r == nil || r.StatusName != "NO_QP" {
		t.Errorf("SIDR_REP NO_QP: got %+v", r)
	}
	if m(9).CMAError == "" || m(9).CMA != nil || m(9).REQ == nil {
		t.Errorf("bad CMA header: got %+v", m(9))
	}
	if r := m(10); r.Class != "SubnAdm" || r.Method != "Get" || r.Error != "" || r.AttrID != 0x35 {
		t.Errorf("SA MAD: got %+v", r)
	}
	for i := 11; i <= 15; i++ {
		if r := m(i); r.Error == "" || r.REQ != nil || r.RTU != nil {
			t.Errorf("record %d: got %+v, want an error and no message", i+1, r)
		}
	}
	if r := m(16); r.Error != "" || r.Attr != "0x0033" {
		t.Errorf("unknown CM attribute: got %+v", r)
	}
	if r := m(17); r.Error == "" {
		t.Errorf("2-byte MAD: got %+v", r)
	}
}

// TestRxeUdaddySIDR decodes a real SIDR exchange between two rxe guests
// (udaddy -c 2 against a server accepting one: the first request gets its
// SIDR_REP, the second is retried until the server rejects it), checking
// the fields against udaddy's and cm.c's behaviour.
func TestRxeUdaddySIDR(t *testing.T) {
	const file = "testdata/rxe_udaddy_sidr.pcap"
	var text bytes.Buffer
	if sum, err := decode.Run(&text, []string{file}, decode.Options{}); err != nil || !sum.OK() || sum.Packets != 17 {
		t.Fatalf("%+v, %v", sum, err)
	}
	golden(t, "rxe_udaddy_sidr.golden", text.Bytes())
	var out bytes.Buffer
	if _, err := decode.Run(&out, []string{file}, decode.Options{JSON: true}); err != nil {
		t.Fatal(err)
	}
	recs, _ := parseJSON(t, out.Bytes())
	reqs := map[uint32][]*decode.MAD{} // by request ID
	var reps []*decode.MAD
	for _, r := range recs {
		m := r.MAD
		switch {
		case m == nil || m.Error != "":
			t.Fatalf("#%d: not a good MAD: %+v", r.Index, m)
		case m.SIDRReq != nil:
			q := m.SIDRReq
			if q.ServiceID != tooljson.Hex64(wire.RDMAServiceID(wire.RDMAPSUDP, 7174)) || q.PartitionKey != 0xffff ||
				m.CMA == nil || m.CMA.PortSpace != "UDP" || m.CMA.DstPort != 7174 || m.CMA.Dst != netip.MustParseAddr("10.77.0.2") {
				t.Errorf("#%d SIDR_REQ: %+v %+v", r.Index, q, m.CMA)
			}
			reqs[q.RequestID] = append(reqs[q.RequestID], m)
		case m.SIDRRep != nil:
			reps = append(reps, m)
		default:
			t.Errorf("#%d: %s, want SIDR", r.Index, m.Attr)
		}
	}
	if len(reqs) != 2 || len(reps) != 2 {
		t.Fatalf("%d request IDs, %d SIDR_REPs; want 2 and 2", len(reqs), len(reps))
	}
	// cm.c: a retransmitted MAD keeps its TID; the REP carries the request's
	for id, ms := range reqs {
		for _, m := range ms {
			if m.TID != ms[0].TID {
				t.Errorf("request %#x: TIDs %v and %v", id, m.TID, ms[0].TID)
			}
		}
	}
	ok, rej := reps[0].SIDRRep, reps[1].SIDRRep
	if ok.StatusName != "SUCCESS" || ok.QPN == 0 || ok.QKey != 0x01234567 || len(reqs[ok.RequestID]) != 1 ||
		reps[0].TID != reqs[ok.RequestID][0].TID {
		t.Errorf("first SIDR_REP: %+v", ok)
	}
	// udaddy's QKey is RDMA_UDP_QKEY 0x01234567; the rejected request was
	// sent 14 times (13 retries, one TID) until the server answered REJECT
	if rej.StatusName != "REJECT" || rej.QPN != 0 || len(reqs[rej.RequestID]) != 14 {
		t.Errorf("second SIDR_REP: %+v after %d requests", rej, len(reqs[rej.RequestID]))
	}
}

// softnicCaptures are captures softnic made against rxe on the interop
// bed (the bridge): softnic's rping client over IPv6 (its REQ, RTU, DREQ;
// rxe's REP, DREP), softnic's udaddy server (rxe's SIDR_REQ, softnic's
// SIDR_REP), and a REQ each way to a port nobody listens on (softnic's
// rping client rejected by rxe, rxe's by softnic: REJ reason 8).
var softnicCaptures = []struct {
	file  string
	attrs []string
}{
	{"testdata/softnic_rxe_rping_v6.pcap", []string{"ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"}},
	{"testdata/softnic_rxe_udaddy.pcap", []string{"ServiceIDResReq", "ServiceIDResReqResp"}},
	{"testdata/softnic_rxe_rej.pcap", []string{"ConnectRequest", "ConnectReject", "ConnectRequest", "ConnectReject"}},
}

// TestGoldenSoftnicCM pins the decoded form of softnic's own CM MADs
// against rxe's, and checks what each message must say.
func TestGoldenSoftnicCM(t *testing.T) {
	var files []string
	for _, c := range softnicCaptures {
		files = append(files, c.file)
	}
	var text bytes.Buffer
	if sum, err := decode.Run(&text, files, decode.Options{}); err != nil || !sum.OK() {
		t.Fatalf("%+v, %v", sum, err)
	}
	golden(t, "softnic_rxe_cm.golden", text.Bytes())
	var out bytes.Buffer
	if _, err := decode.Run(&out, files, decode.Options{JSON: true}); err != nil {
		t.Fatal(err)
	}
	recs, _ := parseJSON(t, out.Bytes())
	byFile := map[string][]decode.Record{}
	for _, r := range recs {
		if r.MAD != nil {
			if r.MAD.Error != "" {
				t.Errorf("%s #%d: %s", r.File, r.Index, r.MAD.Error)
			}
			byFile[r.File] = append(byFile[r.File], r)
		}
	}
	sn6, rxe6 := netip.MustParseAddr("fd77::1"), netip.MustParseAddr("fd77::2")
	for _, c := range softnicCaptures {
		rs := byFile[c.file]
		if len(rs) != len(c.attrs) {
			t.Fatalf("%s: %d MADs, want %d", c.file, len(rs), len(c.attrs))
		}
		for i, r := range rs {
			if r.MAD.Attr != c.attrs[i] {
				t.Errorf("%s #%d: %s, want %s", c.file, r.Index, r.MAD.Attr, c.attrs[i])
			}
		}
	}
	rp := byFile[softnicCaptures[0].file]
	req, rep := rp[0].MAD.REQ, rp[1].MAD.REP
	if rp[0].Src != sn6 || req.PrimaryLocalPortGID != sn6 || req.PrimaryRemotePortGID != rxe6 || req.Transport != "RC" ||
		req.PathMTUBytes != 1024 || rp[0].MAD.CMA == nil || rp[0].MAD.CMA.IPVersion != 6 || rp[0].MAD.CMA.Dst != rxe6 ||
		rep.RemoteCommID != req.LocalCommID || rp[2].MAD.RTU.LocalCommID != req.LocalCommID || rp[3].MAD.DREQ.RemoteQPN != rep.LocalQPN {
		t.Errorf("softnic's rping over IPv6: REQ %+v CMA %+v REP %+v", req, rp[0].MAD.CMA, rep)
	}
	ud := byFile[softnicCaptures[1].file]
	if q, p := ud[0].MAD.SIDRReq, ud[1].MAD.SIDRRep; p.RequestID != q.RequestID || p.StatusName != "SUCCESS" ||
		p.QKey != 0x01234567 || p.ServiceID != q.ServiceID || ud[1].MAD.TID != ud[0].MAD.TID {
		t.Errorf("softnic's SIDR_REP %+v answers %+v", p, q)
	}
	rj := byFile[softnicCaptures[2].file]
	for _, i := range []int{1, 3} {
		j := rj[i].MAD.REJ
		if j.Reason != wire.CMRejInvalidServiceID || j.ReasonName != "INVALID_SERVICE_ID" || j.MessageRejectedName != "REQ" ||
			j.RemoteCommID != rj[i-1].MAD.REQ.LocalCommID || rj[i].MAD.TID != rj[i-1].MAD.TID || rj[i].Src != rj[i-1].Dst {
			t.Errorf("REJ #%d: %+v after REQ %+v", rj[i].Index, j, rj[i-1].MAD.REQ)
		}
	}
}
