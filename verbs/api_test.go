package verbs_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The verbs API itself: device, port and GID queries, object lifetimes,
// argument checks of the post calls, completion queues and channels, and
// misuse (nil and zero objects, use after Close).

var (
	apiAddrA = netip.MustParseAddr("10.0.0.1")
	apiAddrB = netip.MustParseAddr("10.0.0.2")
)

// apiCfg describes one side of a test connection.
type apiCfg struct {
	typ     ibv.QPType // default RC
	cqe     int        // receive CQ size, and send CQ size unless sendCQE; default 256
	sendCQE int        // a separate send CQ of this size when not 0
	ch      bool       // attach the CQs to a completion channel
	cap     ibv.QPCap  // default 16 WRs, 4 SGEs, 64 inline bytes
	ops     verbs.SendOpsFlags
	sigAll  bool
}

// aEnd is one side of a test connection: a device with a PD, a 64 KiB MR,
// CQs and an RC or UC QP.
type aEnd struct {
	dev      *verbs.Device
	pd       *verbs.PD
	scq, rcq *verbs.CQ
	ch       *verbs.CompChannel
	qp       *verbs.QP
	buf      []byte
	mr       *verbs.MR
	cfg      apiCfg
}

func apiOpen(t testing.TB, f *fabric.Fabric, addr netip.Addr) *verbs.Device {
	t.Helper()
	ep, err := f.Attach(addr)
	must(t, err)
	dev, err := verbs.Open(verbs.Config{Link: ep})
	must(t, err)
	t.Cleanup(func() { dev.Close() })
	return dev
}

func apiNewEnd(t testing.TB, f *fabric.Fabric, addr netip.Addr, c apiCfg) *aEnd {
	t.Helper()
	if c.typ == 0 {
		c.typ = ibv.QPTypeRC
	}
	if c.cqe == 0 {
		c.cqe = 256
	}
	if c.cap == (ibv.QPCap{}) {
		c.cap = ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}
	}
	e := &aEnd{dev: apiOpen(t, f, addr), buf: make([]byte, 1<<16), cfg: c}
	var err error
	e.pd, err = e.dev.AllocPD()
	must(t, err)
	e.mr, err = e.pd.RegMR(e.buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead|ibv.AccessRemoteAtomic)
	must(t, err)
	if c.ch {
		e.ch = e.dev.CreateCompChannel()
	}
	e.rcq, err = e.dev.CreateCQ(c.cqe, e.ch)
	must(t, err)
	e.scq = e.rcq
	if c.sendCQE != 0 {
		e.scq, err = e.dev.CreateCQ(c.sendCQE, e.ch)
		must(t, err)
	}
	e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: c.typ, SendCQ: e.scq, RecvCQ: e.rcq, Cap: c.cap,
		SendOpsFlags: c.ops, SigAll: c.sigAll})
	must(t, err)
	return e
}

// apiToRTS brings e's QP to RTS towards peer with PSNs 0.
func apiToRTS(t testing.TB, e, peer *aEnd) {
	t.Helper()
	access := ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	must(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, AccessFlags: access},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
	apiToRTSFromInit(t, e, peer)
}

func apiToRTSFromInit(t testing.TB, e, peer *aEnd) {
	t.Helper()
	rc := e.cfg.typ == ibv.QPTypeRC
	rtr := ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: peer.qp.QPN(),
		MaxDestRdAtomic: 16, MinRNRTimer: 1,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: peer.dev.Addr(), HopLimit: 64}}}
	mask := ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN
	if rc {
		mask |= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
	}
	must(t, e.qp.Modify(&rtr, mask))
	rts := ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16}
	mask = ibv.QPAttrState | ibv.QPAttrSQPSN
	if rc {
		mask |= ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic
	}
	must(t, e.qp.Modify(&rts, mask))
}

// apiPair makes two ends at 10.0.0.1 and 10.0.0.2 with connected QPs in RTS.
func apiPair(t testing.TB, f *fabric.Fabric, ca, cb apiCfg) (a, b *aEnd) {
	t.Helper()
	a = apiNewEnd(t, f, apiAddrA, ca)
	b = apiNewEnd(t, f, apiAddrB, cb)
	apiToRTS(t, a, b)
	apiToRTS(t, b, a)
	return a, b
}

// apiWantErr checks that err wraps every one of want and mentions text.
func apiWantErr(t testing.TB, what string, err error, text string, want ...error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want %v", what, want)
		return
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("%s: got %v, want it to wrap %v", what, err, w)
		}
	}
	if text != "" && !strings.Contains(err.Error(), text) {
		t.Errorf("%s: got %q, want it to mention %q", what, err, text)
	}
}

// apiQuiet lets the engine settle and checks that nothing was sent since
// sent and that no CQ holds a completion.
func apiQuiet(t testing.TB, what string, e *aEnd, sent uint64, cqs ...*verbs.CQ) {
	t.Helper()
	synctest.Wait()
	if got := e.dev.Counters().SentPkts; got != sent {
		t.Errorf("%s: %d packets sent, want none", what, got-sent)
	}
	var wc [4]ibv.WorkCompletion
	for _, c := range cqs {
		if n := c.Poll(wc[:]); n != 0 {
			t.Errorf("%s: got completions %+v, want none", what, wc[:n])
		}
	}
}

func TestQueryDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := apiOpen(t, f, apiAddrA)
		a := dev.QueryDevice()
		for _, c := range []struct {
			name      string
			got, want any
		}{
			{"vendor_id", a.VendorID, uint32(0xFFFFFF)},
			{"max_qp_wr", a.MaxQPWR, 1 << 14},
			{"max_sge", a.MaxSGE, 32},
			{"max_sge_rd", a.MaxSGERd, 32},
			{"max_inline_data", a.MaxInlineData, 512},
			{"max_cqe", a.MaxCQE, 32767},
			{"max_qp_rd_atom", a.MaxQPRdAtom, 128},
			{"max_qp_init_rd_atom", a.MaxQPInitRdAtom, 128},
			{"phys_port_cnt", a.PhysPortCnt, uint8(1)},
			{"atomic_cap (IBV_ATOMIC_HCA)", a.AtomicCap, 1},
			{"max_msg_sz", a.MaxMsgSize, uint64(1 << 31)},
			{"node_guid set", a.NodeGUID != 0, true},
		} {
			if c.got != c.want {
				t.Errorf("QueryDevice %s = %v, want %v", c.name, c.got, c.want)
			}
		}
		if got := dev.Name(); got != "softnic0" {
			t.Errorf("Name = %q, want softnic0", got)
		}
		if got := dev.Addr(); got != apiAddrA {
			t.Errorf("Addr = %v, want %v", got, apiAddrA)
		}

		p, err := dev.QueryPort(1)
		must(t, err)
		for _, c := range []struct {
			name      string
			got, want any
		}{
			{"state", p.State, uint8(verbs.PortActive)},
			{"max_mtu", p.MaxMTU, ibv.MTU4096},
			{"active_mtu", p.ActiveMTU, ibv.MTU4096},
			{"link_layer", p.LinkLayer, uint8(verbs.LinkLayerEthernet)},
			{"gid_tbl_len", p.GIDTblLen, 1},
			{"pkey_tbl_len", p.PKeyTblLen, uint16(1)},
			{"max_msg_sz", p.MaxMsgSz, uint64(1 << 31)},
			{"port_cap_flags has CM_SUP", p.PortCapFlags&verbs.PortCapCMSup != 0, true},
		} {
			if c.got != c.want {
				t.Errorf("QueryPort(1) %s = %v, want %v", c.name, c.got, c.want)
			}
		}
		for _, port := range []uint8{0, 2} {
			_, err := dev.QueryPort(port)
			apiWantErr(t, fmt.Sprintf("QueryPort(%d)", port), err, "port", verbs.EINVAL)
		}

		g, err := dev.QueryGID(1, 0)
		must(t, err)
		want := verbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 0, 15: 1}
		if g != want {
			t.Errorf("QueryGID(1, 0) = % x, want the IPv4-mapped address % x", g, want)
		}
		if got := g.String(); got != "::ffff:10.0.0.1" {
			t.Errorf("GID.String = %q, want ::ffff:10.0.0.1", got)
		}
		if got := g.Addr(); got != apiAddrA {
			t.Errorf("GID.Addr = %v, want %v", got, apiAddrA)
		}
		if got := verbs.GIDFromAddr(apiAddrA); got != g {
			t.Errorf("GIDFromAddr = %v, want %v", got, g)
		}
		for _, pi := range [][2]int{{1, 1}, {2, 0}, {0, 0}} {
			_, err := dev.QueryGID(uint8(pi[0]), pi[1])
			apiWantErr(t, fmt.Sprintf("QueryGID(%d, %d)", pi[0], pi[1]), err, "GID", verbs.EINVAL)
		}

		evs, _ := dev.AsyncEvents()
		if !slices.ContainsFunc(evs, func(e ibv.AsyncEvent) bool { return e.Type == ibv.EventPortActive }) {
			t.Errorf("async events after Open = %+v, want PORT_ACTIVE", evs)
		}
	})
}

// TestQueryGIDIPv6: an IPv6 device's GID is its address.
func TestQueryGIDIPv6(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		addr := netip.MustParseAddr("fd00::1")
		dev := apiOpen(t, f, addr)
		g, err := dev.QueryGID(1, 0)
		must(t, err)
		if g != verbs.GID(addr.As16()) || g.Addr() != addr {
			t.Errorf("QueryGID = %v, want %v", g, addr)
		}
	})
}

// TestLifetimes: a PD with MRs or QPs and a CQ with QPs cannot be freed
// (EBUSY); once their users are gone they can, once.
func TestLifetimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := apiOpen(t, f, apiAddrA)
		pd, err := dev.AllocPD()
		must(t, err)
		mr, err := pd.RegMR(make([]byte, 4096), ibv.AccessLocalWrite)
		must(t, err)
		apiWantErr(t, "Dealloc of a PD with an MR", pd.Dealloc(), "", verbs.EBUSY)
		must(t, mr.Dereg())
		apiWantErr(t, "second Dereg", mr.Dereg(), "", verbs.EINVAL)

		ch := dev.CreateCompChannel()
		cq, err := dev.CreateCQ(16, ch)
		must(t, err)
		cq2, err := dev.CreateCQ(16, nil)
		must(t, err)
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq2})
		must(t, err)
		apiWantErr(t, "Dealloc of a PD with a QP", pd.Dealloc(), "", verbs.EBUSY)
		apiWantErr(t, "Destroy of a send CQ with a QP", cq.Destroy(), "", verbs.EBUSY)
		apiWantErr(t, "Destroy of a receive CQ with a QP", cq2.Destroy(), "", verbs.EBUSY)
		apiWantErr(t, "Close of a channel with a CQ", ch.Close(), "", verbs.EBUSY)

		must(t, qp.Destroy())
		must(t, cq.Destroy())
		must(t, cq2.Destroy())
		must(t, pd.Dealloc())
		must(t, ch.Close())
		apiWantErr(t, "second CQ Destroy", cq.Destroy(), "destroyed", verbs.EINVAL)
		apiWantErr(t, "second Dealloc", pd.Dealloc(), "", verbs.EINVAL)
		apiWantErr(t, "second channel Close", ch.Close(), "closed", verbs.EINVAL)

		// A QP on a destroyed CQ or a freed PD is refused.
		pd2, err := dev.AllocPD()
		must(t, err)
		_, err = pd2.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq})
		apiWantErr(t, "CreateQP on a destroyed CQ", err, "destroyed", verbs.EINVAL)
		cq3, err := dev.CreateCQ(16, nil)
		must(t, err)
		_, err = pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq3, RecvCQ: cq3})
		apiWantErr(t, "CreateQP on a freed PD", err, "deallocated", verbs.EINVAL)
		_, err = pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: apiAddrB}})
		apiWantErr(t, "CreateAH on a freed PD", err, "deallocated", verbs.EINVAL)
		_, err = pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
		apiWantErr(t, "CreateSRQ on a freed PD", err, "deallocated", verbs.EINVAL)
		_, err = pd.RegMR(make([]byte, 64), ibv.AccessLocalWrite)
		apiWantErr(t, "RegMR on a freed PD", err, "", verbs.EINVAL)
		must(t, pd2.Dealloc())
		must(t, cq3.Destroy())
	})
}

func TestRegMRAccess(t *testing.T) {
	LW, RW, RR, RA := ibv.AccessLocalWrite, ibv.AccessRemoteWrite, ibv.AccessRemoteRead, ibv.AccessRemoteAtomic
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := apiOpen(t, f, apiAddrA)
		pd, err := dev.AllocPD()
		must(t, err)
		for _, c := range []struct {
			access ibv.Access
			ok     bool
		}{
			{0, true}, {LW, true}, {RR, true}, {LW | RW, true}, {LW | RA, true}, {LW | RW | RR | RA, true},
			{RW, false}, {RA, false}, {RW | RR, false}, {RR | RA, false},
		} {
			mr, err := pd.RegMR(make([]byte, 64), c.access)
			if c.ok {
				if err != nil {
					t.Errorf("RegMR(access %#x) = %v, want success", c.access, err)
					continue
				}
				must(t, mr.Dereg())
				continue
			}
			apiWantErr(t, fmt.Sprintf("RegMR(access %#x)", c.access), err, "LOCAL_WRITE", verbs.EINVAL)
		}
		_, err = pd.RegMR(nil, ibv.AccessLocalWrite)
		apiWantErr(t, "RegMR of no memory", err, "", verbs.EINVAL)
		buf := make([]byte, 100)
		mr, err := pd.RegMRIOVA(buf, 0x1000, ibv.AccessLocalWrite)
		must(t, err)
		if mr.Addr() != 0x1000 || mr.Len() != 100 || &mr.Buf()[0] != &buf[0] {
			t.Errorf("RegMRIOVA: addr %#x len %d, want 0x1000 100 over the caller's buffer", mr.Addr(), mr.Len())
		}
		if s := mr.SGE(10, 20); s.Addr != 0x100a || s.Length != 20 || s.LKey != mr.LKey() {
			t.Errorf("SGE(10, 20) = %+v", s)
		}
	})
}

func TestCreateQPCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := apiOpen(t, f, apiAddrA)
		pd, err := dev.AllocPD()
		must(t, err)
		cq, err := dev.CreateCQ(16, nil)
		must(t, err)
		for _, c := range []struct {
			name string
			cap  ibv.QPCap
			want ibv.QPCap // zero: refused
		}{
			{"zero", ibv.QPCap{}, ibv.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}},
			{"limits", ibv.QPCap{MaxSendWR: 1 << 14, MaxRecvWR: 1 << 14, MaxSendSGE: 32, MaxRecvSGE: 32, MaxInlineData: 512},
				ibv.QPCap{MaxSendWR: 1 << 14, MaxRecvWR: 1 << 14, MaxSendSGE: 32, MaxRecvSGE: 32, MaxInlineData: 512}},
			{"typical", ibv.QPCap{MaxSendWR: 100, MaxRecvWR: 50, MaxSendSGE: 3, MaxRecvSGE: 2, MaxInlineData: 100},
				ibv.QPCap{MaxSendWR: 100, MaxRecvWR: 50, MaxSendSGE: 3, MaxRecvSGE: 2, MaxInlineData: 100}},
			{"max_send_wr", ibv.QPCap{MaxSendWR: 1<<14 + 1}, ibv.QPCap{}},
			{"max_recv_wr", ibv.QPCap{MaxRecvWR: 1<<14 + 1}, ibv.QPCap{}},
			{"max_send_sge", ibv.QPCap{MaxSendSGE: 33}, ibv.QPCap{}},
			{"max_recv_sge", ibv.QPCap{MaxRecvSGE: 33}, ibv.QPCap{}},
			{"max_inline_data", ibv.QPCap{MaxInlineData: 513}, ibv.QPCap{}},
		} {
			for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC} {
				qp, err := pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: c.cap})
				if c.want == (ibv.QPCap{}) {
					apiWantErr(t, fmt.Sprintf("%v CreateQP with %s over the limit", typ, c.name), err, "exceeds", verbs.EINVAL)
					continue
				}
				if err != nil {
					t.Errorf("%v CreateQP with %s caps %+v: %v", typ, c.name, c.cap, err)
					continue
				}
				attr, init := qp.Query()
				if attr.Cap != c.want || init.Cap != c.want {
					t.Errorf("%v CreateQP(%+v): Query caps %+v and %+v, want %+v", typ, c.cap, attr.Cap, init.Cap, c.want)
				}
				if attr.State != ibv.QPStateReset {
					t.Errorf("%v new QP in %v, want RESET", typ, attr.State)
				}
				must(t, qp.Destroy())
			}
		}
		for _, c := range []struct {
			name string
			attr verbs.QPInitAttr
			text string
			want error
		}{
			{"no send CQ", verbs.QPInitAttr{Type: ibv.QPTypeRC, RecvCQ: cq}, "SendCQ", verbs.EINVAL},
			{"no receive CQ", verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq}, "RecvCQ", verbs.EINVAL},
			{"zero CQ", verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: &verbs.CQ{}, RecvCQ: cq}, "SendCQ", verbs.EINVAL},
			{"no type", verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq}, "type", verbs.EINVAL},
			{"RAW_PACKET", verbs.QPInitAttr{Type: 8, SendCQ: cq, RecvCQ: cq}, "type", verbs.EINVAL},
			{"READ builder on UC", verbs.QPInitAttr{Type: ibv.QPTypeUC, SendCQ: cq, RecvCQ: cq,
				SendOpsFlags: verbs.SendOpsSend | verbs.SendOpsRDMARead}, "send_ops_flags", verbs.EOPNOTSUPP},
			{"atomic builder on UC", verbs.QPInitAttr{Type: ibv.QPTypeUC, SendCQ: cq, RecvCQ: cq,
				SendOpsFlags: verbs.SendOpsAtomicFetchAdd}, "send_ops_flags", verbs.EOPNOTSUPP},
			{"TSO on RC", verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq,
				SendOpsFlags: verbs.SendOpsTSO}, "send_ops_flags", verbs.EOPNOTSUPP},
			{"unknown send op", verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq,
				SendOpsFlags: 1 << 40}, "send_ops_flags", verbs.EOPNOTSUPP},
		} {
			_, err := pd.CreateQP(c.attr)
			apiWantErr(t, "CreateQP with "+c.name, err, c.text, c.want)
		}
	})
}

// TestPostSendErrors: WRs the QP cannot carry are refused with EINVAL at
// index 0, and nothing is sent or completed.
func TestPostSendErrors(t *testing.T) {
	sge := func(e *aEnd, n int) []ibv.SGE {
		s := make([]ibv.SGE, n)
		for i := range s {
			s[i] = e.mr.SGE(i*16, 16)
		}
		return s
	}
	type tc struct {
		name string
		typ  ibv.QPType
		wr   func(a, b *aEnd) ibv.SendWR
		text string
	}
	remote := func(op ibv.WROpcode, n int, off int) func(a, b *aEnd) ibv.SendWR {
		return func(a, b *aEnd) ibv.SendWR {
			return ibv.SendWR{Opcode: op, SGList: []ibv.SGE{a.mr.SGE(0, n)},
				RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey(), Flags: ibv.SendSignaled}
		}
	}
	rc, uc := ibv.QPTypeRC, ibv.QPTypeUC
	tcs := []tc{
		{"UC READ", uc, remote(ibv.WRRDMARead, 8, 0), "not supported on UC"},
		{"UC CMP_SWP", uc, remote(ibv.WRAtomicCmpAndSwp, 8, 0), "not supported on UC"},
		{"UC FETCH_ADD", uc, remote(ibv.WRAtomicFetchAndAdd, 8, 0), "not supported on UC"},
		{"too many SGEs", rc, func(a, b *aEnd) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.WRSend, SGList: sge(a, 5)}
		}, "max_send_sge"},
		{"too many SGEs on UC WRITE", uc, func(a, b *aEnd) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.WRRDMAWrite, SGList: sge(a, 5), RKey: b.mr.RKey(), RemoteAddr: b.mr.Addr()}
		}, "max_send_sge"},
		{"inline over max_inline", rc, func(a, b *aEnd) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.WRSend, Flags: ibv.SendInline, InlineData: make([]byte, 65)}
		}, "max_inline_data"},
		{"inline SGEs over max_inline", uc, func(a, b *aEnd) ibv.SendWR {
			return ibv.SendWR{Opcode: ibv.WRSend, Flags: ibv.SendInline, SGList: sge(a, 4)[:1:1]}
		}, ""}, // 16 bytes fit: replaced below
		{"inline READ", rc, func(a, b *aEnd) ibv.SendWR {
			w := remote(ibv.WRRDMARead, 8, 0)(a, b)
			w.Flags |= ibv.SendInline
			return w
		}, "INLINE"},
		{"atomic of 4 bytes", rc, remote(ibv.WRAtomicFetchAndAdd, 4, 0), "8-byte"},
		{"atomic unaligned", rc, remote(ibv.WRAtomicCmpAndSwp, 8, 4), "aligned"},
		{"BIND_MW without bind information", rc, remote(ibv.WRBindMW, 0, 0), "bind information"},
		{"REG_MR without registration information", rc, remote(ibv.WRRegMR, 0, 0), "registration information"},
		{"UC SEND_WITH_INV", uc, remote(ibv.WRSendWithInv, 8, 0), "not supported on UC"},
		{"FLUSH of placement type 0", rc, remote(ibv.WRFlush, 0, 0), "placement type"},
		{"ATOMIC_WRITE of 4 bytes", rc, remote(ibv.WRAtomicWrite, 4, 0), "exactly 8"},
		{"ATOMIC_WRITE unaligned", rc, remote(ibv.WRAtomicWrite, 8, 4), "aligned"},
		{"opcode 99", rc, remote(99, 8, 0), "not supported"},
	}
	// The inline-SGE case: 80 bytes gathered through SGEs exceed 64.
	tcs[6].wr = func(a, b *aEnd) ibv.SendWR {
		return ibv.SendWR{Opcode: ibv.WRSend, Flags: ibv.SendInline, SGList: []ibv.SGE{a.mr.SGE(0, 40), a.mr.SGE(40, 40)}}
	}
	tcs[6].text = "max_inline_data"
	for _, typ := range []ibv.QPType{rc, uc} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := apiPair(t, f, apiCfg{typ: typ}, apiCfg{typ: typ})
				for _, c := range tcs {
					if c.typ != typ {
						continue
					}
					sent := a.dev.Counters().SentPkts
					n, err := a.qp.PostSend(c.wr(a, b))
					if n != 0 {
						t.Errorf("%s: PostSend posted %d, want 0", c.name, n)
					}
					apiWantErr(t, c.name, err, c.text, verbs.EINVAL)
					apiQuiet(t, c.name, a, sent, a.scq, b.rcq)
				}
			})
		})
	}
}

// TestPostSendState: posting in RESET, INIT and RTR is EINVAL; RTS and SQD
// take WRs.
func TestPostSendState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a := apiNewEnd(t, f, apiAddrA, apiCfg{})
		b := apiNewEnd(t, f, apiAddrB, apiCfg{})
		wr := ibv.SendWR{WRID: 1, Opcode: ibv.WRRDMAWrite, SGList: []ibv.SGE{a.mr.SGE(0, 8)}}
		try := func(state string) {
			t.Helper()
			sent := a.dev.Counters().SentPkts
			n, err := a.qp.PostSend(wr)
			if n != 0 {
				t.Errorf("PostSend in %s posted %d", state, n)
			}
			apiWantErr(t, "PostSend in "+state, err, state, verbs.EINVAL)
			apiQuiet(t, state, a, sent, a.scq)
		}
		try("RESET")
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1},
			ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
		try("INIT")
		// RTR: the RTS step of apiToRTSFromInit is not taken yet.
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: b.qp.QPN(),
			AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: apiAddrB}}},
			ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|
				ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer))
		try("RTR")
	})
}

// TestPostSendBadWR: a chain whose third WR is bad posts the first two
// (which complete), returns 2 and posts nothing after the bad one.
func TestPostSendBadWR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{}, apiCfg{})
		for i := range 4 {
			must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: uint64(100 + i), SGList: []ibv.SGE{b.mr.SGE(i*1024, 1024)}}))
		}
		send := func(id uint64) ibv.SendWR {
			return ibv.SendWR{WRID: id, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{a.mr.SGE(0, 100)}}
		}
		bad := send(3)
		bad.SGList = []ibv.SGE{a.mr.SGE(0, 1), a.mr.SGE(1, 1), a.mr.SGE(2, 1), a.mr.SGE(3, 1), a.mr.SGE(4, 1)}
		n, err := a.qp.PostSend(send(1), send(2), bad, send(4))
		if n != 2 {
			t.Errorf("PostSend returned %d, want 2 (the index of the bad WR)", n)
		}
		apiWantErr(t, "PostSend with a bad third WR", err, "max_send_sge", verbs.EINVAL)
		wa := waitWC(t, a.scq, 2)
		wb := waitWC(t, b.rcq, 2)
		synctest.Wait()
		var more [4]ibv.WorkCompletion
		if k := a.scq.Poll(more[:]) + b.rcq.Poll(more[:]); k != 0 {
			t.Errorf("%d completions beyond the first two WRs", k)
		}
		for i, w := range wa {
			if w.WRID != uint64(i+1) || w.Status != ibv.WCSuccess {
				t.Errorf("send completion %d: %+v, want WRID %d success", i, w, i+1)
			}
		}
		for i, w := range wb {
			if w.WRID != uint64(100+i) || w.Status != ibv.WCSuccess || w.ByteLen != 100 {
				t.Errorf("receive completion %d: %+v, want WRID %d success 100 bytes", i, w, 100+i)
			}
		}
	})
}

// TestPostSendFull: a full send queue refuses the WR that does not fit
// with an error wrapping ENOMEM and ENOSPC and reports how many it took.
func TestPostSendFull(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				c := apiCfg{typ: typ, cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
				a, b := apiPair(t, f, c, c)
				// Nothing reaches b, so nothing is acknowledged (RC); the test
				// does not block, so no time passes and no WQE completes.
				f.AddFilter(fabric.DropIf(fabric.From(apiAddrA)))
				wr := ibv.SendWR{Opcode: ibv.WRRDMAWrite, SGList: []ibv.SGE{a.mr.SGE(0, 8)},
					RKey: b.mr.RKey(), RemoteAddr: b.mr.Addr()}
				if typ == ibv.QPTypeUC {
					// UC WQEs complete once sent: hold the QP in SQD so
					// nothing starts.
					must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateSQD}, ibv.QPAttrState))
				}
				must2(t)(a.qp.PostSend(wr, wr, wr))
				n, err := a.qp.PostSend(wr, wr, wr)
				if n != 1 {
					t.Errorf("PostSend of 3 WRs with room for 1 returned %d, want 1", n)
				}
				apiWantErr(t, "PostSend to a full queue", err, "", verbs.ENOMEM, verbs.ENOSPC)
				n, err = a.qp.PostSend(wr)
				if n != 0 {
					t.Errorf("PostSend to a full queue returned %d, want 0", n)
				}
				apiWantErr(t, "PostSend to a full queue", err, "", verbs.ENOMEM, verbs.ENOSPC)
			})
		})
	}
}

// TestPostRecvErrors: too many SGEs is EINVAL, a full receive queue ENOMEM
// (and ENOSPC), with bad-WR reporting; RESET refuses receives, INIT takes
// them.
func TestPostRecvErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a := apiNewEnd(t, f, apiAddrA, apiCfg{cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 2}})
		r := func(id uint64, n int) ibv.RecvWR {
			w := ibv.RecvWR{WRID: id}
			for i := range n {
				w.SGList = append(w.SGList, a.mr.SGE(i*64, 64))
			}
			return w
		}
		n, err := a.qp.PostRecv(r(1, 1))
		if n != 0 {
			t.Errorf("PostRecv in RESET posted %d", n)
		}
		apiWantErr(t, "PostRecv in RESET", err, "RESET", verbs.EINVAL)
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1},
			ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
		n, err = a.qp.PostRecv(r(1, 2), r(2, 3), r(3, 1))
		if n != 1 {
			t.Errorf("PostRecv with a bad second WR returned %d, want 1", n)
		}
		apiWantErr(t, "PostRecv with 3 SGEs", err, "SGE", verbs.EINVAL)
		n, err = a.qp.PostRecv(r(2, 0), r(3, 1), r(4, 1), r(5, 1))
		if n != 3 {
			t.Errorf("PostRecv of 4 WRs with room for 3 returned %d, want 3", n)
		}
		apiWantErr(t, "PostRecv to a full queue", err, "", verbs.ENOMEM, verbs.ENOSPC)

		// The four posted receives are flushed in order when the QP errs.
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		got := waitWC(t, a.rcq, 4)
		for i, w := range got {
			if w.WRID != uint64(i+1) || w.Status != ibv.WCWRFlushErr || w.Opcode != ibv.WCRecv {
				t.Errorf("flushed receive %d: %+v, want WRID %d WR_FLUSH_ERR RECV", i, w, i+1)
			}
		}
	})
}

// TestPostInErrFlushes: WRs posted to a QP in ERR complete at once with
// WR_FLUSH_ERR, signaled or not, sends and receives alike.
func TestPostInErrFlushes(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, _ := apiPair(t, f, apiCfg{typ: typ}, apiCfg{typ: typ})
				must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
				sent := a.dev.Counters().SentPkts
				n, err := a.qp.PostSend(
					ibv.SendWR{WRID: 7, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}},
					ibv.SendWR{WRID: 8, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGList: []ibv.SGE{a.mr.SGE(0, 8)}})
				if n != 2 || err != nil {
					t.Fatalf("PostSend in ERR = %d, %v; want 2, nil", n, err)
				}
				must2(t)(a.qp.PostRecv(ibv.RecvWR{WRID: 9, SGList: []ibv.SGE{a.mr.SGE(0, 8)}}))
				got := waitWC(t, a.rcq, 3)
				want := []ibv.WorkCompletion{
					{WRID: 7, Status: ibv.WCWRFlushErr, Opcode: ibv.WCSend},
					{WRID: 8, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRDMAWrite},
					{WRID: 9, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv},
				}
				for i, w := range got {
					if w.WRID != want[i].WRID || w.Status != want[i].Status || w.Opcode != want[i].Opcode || w.QPNum != a.qp.QPN() {
						t.Errorf("completion %d: %+v, want %+v on QP %#x", i, w, want[i], a.qp.QPN())
					}
				}
				if s := a.dev.Counters().SentPkts; s != sent {
					t.Errorf("a QP in ERR sent %d packets", s-sent)
				}
			})
		})
	}
}

// TestCQPollNoAlloc: Poll into the caller's slice allocates nothing, with
// and without completions queued.
func TestCQPollNoAlloc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{sigAll: true, cap: ibv.QPCap{MaxSendWR: 256, MaxSendSGE: 1, MaxRecvSGE: 1}}, apiCfg{})
		const runs = 100
		wr := ibv.SendWR{Opcode: ibv.WRRDMAWrite, SGList: []ibv.SGE{a.mr.SGE(0, 8)}, RKey: b.mr.RKey(), RemoteAddr: b.mr.Addr()}
		wrs := make([]ibv.SendWR, runs+1)
		for i := range wrs {
			wrs[i] = wr
			wrs[i].WRID = uint64(i)
		}
		must2(t)(a.qp.PostSend(wrs...))
		// A second of fake time passes only once the engine is idle: every
		// WRITE has been acknowledged and completed by then.
		time.Sleep(time.Second)
		buf := make([]ibv.WorkCompletion, 1)
		next := uint64(0)
		allocs := testing.AllocsPerRun(runs, func() {
			if a.scq.Poll(buf) != 1 || buf[0].WRID != next {
				t.Errorf("Poll: got %+v, want WRID %d", buf[0], next)
			}
			next++
		})
		if allocs != 0 {
			t.Errorf("Poll with completions queued: %v allocations, want 0", allocs)
		}
		if allocs := testing.AllocsPerRun(runs, func() { a.scq.Poll(buf) }); allocs != 0 {
			t.Errorf("Poll of an empty CQ: %v allocations, want 0", allocs)
		}
	})
}

// TestReqNotify: a CQ armed for solicited completions notifies its channel
// only for a receive of a message with the Solicited Event bit or for a
// failed completion; armed for any, on the next completion. Events are
// acknowledged before the CQ can be destroyed.
func TestReqNotify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{}, apiCfg{ch: true})
		for i := range 8 {
			must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: uint64(100 + i), SGList: []ibv.SGE{b.mr.SGE(i*256, 256)}}))
		}
		send := func(id uint64, flags ibv.SendFlags) {
			t.Helper()
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: id, Opcode: ibv.WRSend, Flags: flags, SGList: []ibv.SGE{a.mr.SGE(0, 16)}}))
			waitWC(t, b.rcq, 1)
		}
		// noEvent waits a second of fake time for an event that must not
		// come, bounded by the context (GetEvent) or by the timeout
		// (GetEventTimeout), by turns.
		waits := 0
		noEvent := func(what string) {
			t.Helper()
			if waits++; waits%2 == 0 {
				c, err := b.ch.GetEventTimeout(context.Background(), time.Second)
				if !errors.Is(err, verbs.ETIMEDOUT) {
					t.Errorf("%s: GetEventTimeout = %p, %v; want no event (ETIMEDOUT)", what, c, err)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			c, err := b.ch.GetEvent(ctx)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: GetEvent = %p, %v; want no event (context.DeadlineExceeded)", what, c, err)
			}
		}
		event := func(what string) {
			t.Helper()
			var c *verbs.CQ
			var err error
			if waits++; waits%2 == 0 {
				c, err = b.ch.GetEventTimeout(context.Background(), time.Second)
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				c, err = b.ch.GetEvent(ctx)
				cancel()
			}
			if err != nil || c != b.rcq {
				t.Errorf("%s: GetEvent = %p, %v; want the receive CQ %p", what, c, err, b.rcq)
				return
			}
			must(t, c.AckEvents(1))
		}

		must(t, b.rcq.ReqNotify(true))
		send(1, ibv.SendSignaled)
		noEvent("solicited-only, unsolicited SEND")
		send(2, ibv.SendSolicited)
		event("solicited-only, solicited SEND")
		send(3, ibv.SendSolicited)
		noEvent("not re-armed")

		must(t, b.rcq.ReqNotify(false))
		send(4, 0)
		event("armed for any completion")

		// A completion already queued does not notify: poll after arming.
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 5, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 16)}}))
		time.Sleep(time.Second)
		must(t, b.rcq.ReqNotify(true))
		noEvent("completion queued before arming")
		waitWC(t, b.rcq, 1)

		// An error completion satisfies a solicited-only request: the
		// receives still posted are flushed when b's QP errs.
		must(t, b.rcq.ReqNotify(true))
		must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		event("solicited-only, flushed receive")
		for _, w := range waitWC(t, b.rcq, 3) {
			if w.Status != ibv.WCWRFlushErr {
				t.Errorf("completion after ERR: %+v, want WR_FLUSH_ERR", w)
			}
		}

		// An unacknowledged event keeps the CQ alive.
		must(t, b.rcq.ReqNotify(false))
		must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 200}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := b.ch.GetEvent(ctx)
		cancel()
		must(t, err)
		must(t, b.qp.Destroy())
		apiWantErr(t, "Destroy with an event not acknowledged", c.Destroy(), "acknowledged", verbs.EBUSY)
		apiWantErr(t, "AckEvents(2) of one event", c.AckEvents(2), "", verbs.EINVAL)
		must(t, c.AckEvents(1))
		must(t, c.Destroy())
		must(t, b.ch.Close())

		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		ch := a.dev.CreateCompChannel()
		if _, err := ch.GetEvent(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("GetEvent with a canceled context = %v, want context.Canceled", err)
		}
		if _, err := ch.GetEventTimeout(ctx, time.Second); !errors.Is(err, context.Canceled) {
			t.Errorf("GetEventTimeout with a canceled context = %v, want context.Canceled", err)
		}
		must(t, ch.Close())
		if _, err := ch.GetEvent(context.Background()); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("GetEvent on a closed channel = %v, want EINVAL", err)
		}
		if _, err := ch.GetEventTimeout(context.Background(), time.Second); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("GetEventTimeout on a closed channel = %v, want EINVAL", err)
		}
		apiWantErr(t, "AckEvents on a CQ without a channel", a.rcq.AckEvents(1), "channel", verbs.EINVAL)
	})
}

// TestCQOverflow: a completion that does not fit overruns the CQ: the
// device reports IBV_EVENT_CQ_ERR for it, the QP moves to ERR, and the CQ
// keeps what it holds but can no longer be armed or resized.
func TestCQOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{sendCQE: 1}, apiCfg{})
		if c := a.scq.Cap(); c != 1 {
			t.Fatalf("CreateCQ(1) has capacity %d, want 1", c)
		}
		a.dev.AsyncEvents()
		wr := ibv.SendWR{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 8)}, RKey: b.mr.RKey(), RemoteAddr: b.mr.Addr()}
		wr2 := wr
		wr.WRID, wr2.WRID = 1, 2
		must2(t)(a.qp.PostSend(wr, wr2))
		time.Sleep(time.Second)

		evs, _ := a.dev.AsyncEvents()
		var cqErr, qpFatal bool
		for _, ev := range evs {
			cqErr = cqErr || ev.Type == ibv.EventCQErr && ev.Other == a.scq
			qpFatal = qpFatal || ev.Type == ibv.EventQPFatal && ev.QPN == a.qp.QPN()
		}
		if !cqErr || !qpFatal {
			t.Errorf("async events %+v: want CQ_ERR for the send CQ and QP_FATAL for QP %#x", evs, a.qp.QPN())
		}
		if s := a.qp.State(); s != ibv.QPStateErr {
			t.Errorf("QP state after its CQ overran: %v, want ERR", s)
		}
		var wc [4]ibv.WorkCompletion
		if n := a.scq.Poll(wc[:]); n != 1 || wc[0].WRID != 1 || wc[0].Status != ibv.WCSuccess {
			t.Errorf("overrun CQ gave %+v, want the first completion", wc[:n])
		}
		apiWantErr(t, "ReqNotify on an overrun CQ", a.scq.ReqNotify(false), "overrun", verbs.EINVAL)
		apiWantErr(t, "Resize of an overrun CQ", a.scq.Resize(16), "overrun", verbs.EINVAL)
		// The receive CQ is unaffected.
		must(t, a.rcq.ReqNotify(false))
	})
}

// TestCQResize: capacities round up as rxe's do; a resize keeps the
// completions queued, in order, and refuses to drop any.
func TestCQResize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{sendCQE: 4}, apiCfg{})
		for _, c := range []struct{ cqe, cap int }{{1, 1}, {2, 3}, {4, 7}, {100, 127}, {32767, 32767}} {
			cq, err := a.dev.CreateCQ(c.cqe, nil)
			must(t, err)
			if got := cq.Cap(); got != c.cap {
				t.Errorf("CreateCQ(%d).Cap() = %d, want %d", c.cqe, got, c.cap)
			}
			must(t, cq.Destroy())
		}
		for _, cqe := range []int{0, -1, 32768} {
			_, err := a.dev.CreateCQ(cqe, nil)
			apiWantErr(t, fmt.Sprintf("CreateCQ(%d)", cqe), err, "cqe", verbs.EINVAL)
		}

		for i := range 5 {
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: uint64(i + 1), Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, 8)}, RKey: b.mr.RKey(), RemoteAddr: b.mr.Addr()}))
		}
		time.Sleep(time.Second)
		apiWantErr(t, "Resize below the completions queued", a.scq.Resize(4), "queued", verbs.EINVAL)
		for _, cqe := range []int{0, 32768} {
			apiWantErr(t, fmt.Sprintf("Resize(%d)", cqe), a.scq.Resize(cqe), "cqe", verbs.EINVAL)
		}
		must(t, a.scq.Resize(100))
		if got := a.scq.Cap(); got != 127 {
			t.Errorf("Resize(100): Cap = %d, want 127", got)
		}
		must(t, a.scq.Resize(5))
		if got := a.scq.Cap(); got != 7 {
			t.Errorf("Resize(5): Cap = %d, want 7", got)
		}
		got := waitWC(t, a.scq, 5)
		for i, w := range got {
			if w.WRID != uint64(i+1) || w.Status != ibv.WCSuccess {
				t.Errorf("completion %d after resizes: %+v, want WRID %d success", i, w, i+1)
			}
		}
	})
}

// TestNilAndZeroObjects: methods of nil and zero-value objects fail with
// EINVAL (or return zero values) instead of panicking.
func TestNilAndZeroObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wc := make([]ibv.WorkCompletion, 1)
		for _, o := range []struct {
			name string
			dev  *verbs.Device
			pd   *verbs.PD
			mr   *verbs.MR
			cq   *verbs.CQ
			ch   *verbs.CompChannel
			qp   *verbs.QP
			x    *verbs.QPEx
		}{
			{name: "nil"},
			{name: "zero", dev: &verbs.Device{}, pd: &verbs.PD{}, mr: &verbs.MR{}, cq: &verbs.CQ{},
				ch: &verbs.CompChannel{}, qp: &verbs.QP{}, x: &verbs.QPEx{}},
		} {
			errs := map[string]error{
				"Device.Close":             o.dev.Close(),
				"Device.QueryPort":         second2(o.dev.QueryPort(1)),
				"Device.QueryGID":          second2(o.dev.QueryGID(1, 0)),
				"Device.AllocPD":           second2(o.dev.AllocPD()),
				"Device.CreateCQ":          second2(o.dev.CreateCQ(1, nil)),
				"PD.Dealloc":               o.pd.Dealloc(),
				"PD.RegMR":                 second2(o.pd.RegMR(make([]byte, 8), 0)),
				"PD.RegMRIOVA":             second2(o.pd.RegMRIOVA(make([]byte, 8), 0, 0)),
				"PD.CreateQP":              second2(o.pd.CreateQP(verbs.QPInitAttr{})),
				"MR.Dereg":                 o.mr.Dereg(),
				"CQ.ReqNotify":             o.cq.ReqNotify(false),
				"CQ.AckEvents":             o.cq.AckEvents(1),
				"CQ.Resize":                o.cq.Resize(4),
				"CQ.Destroy":               o.cq.Destroy(),
				"CompChannel.Get":          second2(o.ch.GetEvent(context.Background())),
				"CompChannel.Close":        o.ch.Close(),
				"QP.Modify":                o.qp.Modify(&ibv.QPAttr{}, ibv.QPAttrState),
				"QP.PostSend":              second(o.qp.PostSend(ibv.SendWR{})),
				"QP.PostRecv":              second(o.qp.PostRecv(ibv.RecvWR{})),
				"QP.Destroy":               o.qp.Destroy(),
				"QP.Ex":                    second2(o.qp.Ex()),
				"QPEx.WrComplete":          o.x.WrComplete(),
				"Device.AllocTD":           second2(o.dev.AllocTD()),
				"Device.AllocParentDomain": second2(o.dev.AllocParentDomain(verbs.ParentDomainInitAttr{PD: o.pd})),
				"Device.CreateCQEx":        second2(o.dev.CreateCQEx(verbs.CQInitAttrEx{CQE: 1})),
				"Device.QueryRTValuesEx":   o.dev.QueryRTValuesEx(&ibv.ValuesEx{}),
				"Device.QueryGIDEx":        second2(o.dev.QueryGIDEx(1, 0, 0)),
				"Device.QueryGIDTable":     second2(o.dev.QueryGIDTable(make([]verbs.GIDEntry, 1), 0)),
				"Device.QueryPKey":         second2(o.dev.QueryPKey(1, 0)),
				"PD.AdviseMR":              o.pd.AdviseMR(0, 0, []ibv.SGE{{}}),
				"PD.AllocNullMR":           second2(o.pd.AllocNullMR()),
				"MR.Rereg":                 o.mr.Rereg(ibv.ReregMRChangeAccess, nil, nil, 0),
				"MR.MapSGOffset":           second2(o.mr.MapSGOffset(nil, nil, 4096)),
				"CQ.Modify":                o.cq.Modify(&ibv.ModifyCQAttr{}),
				"CQEx.StartPoll":           (*verbs.CQEx)(nil).StartPoll(),
				"TD.Dealloc":               (*verbs.TD)(nil).Dealloc(),
			}
			for name, err := range errs {
				apiWantErr(t, o.name+" "+name, err, "", verbs.EINVAL)
			}
			// Value methods return zero values; builders and setters of a
			// QPEx outside a batch do nothing.
			o.x.WrStart()
			o.x.WrSend()
			o.x.WrSetSGE(1, 2, 3)
			o.x.WrSetInlineData([]byte("x"))
			o.x.WrAbort()
			zeros := map[string]any{
				"Device.Name": o.dev.Name() == "", "Device.Addr": !o.dev.Addr().IsValid(),
				"Device.QueryDevice": o.dev.QueryDevice() == ibv.DeviceAttr{},
				"Device.Counters":    o.dev.Counters() == ibv.Counters{},
				"PD.Handle":          o.pd.Handle() == 0, "MR.LKey": o.mr.LKey() == 0, "MR.RKey": o.mr.RKey() == 0,
				"MR.Addr": o.mr.Addr() == 0, "MR.Len": o.mr.Len() == 0, "MR.Buf": o.mr.Buf() == nil,
				"CQ.Poll": o.cq.Poll(wc) == 0, "CQ.Cap": o.cq.Cap() == 0,
				"QP.QPN": o.qp.QPN() == 0, "QP.State": o.qp.State() == ibv.QPStateUnknown,
			}
			for name, ok := range zeros {
				if ok != true {
					t.Errorf("%s %s: not the zero value", o.name, name)
				}
			}
			if evs, c := o.dev.AsyncEvents(); evs != nil || c != nil {
				t.Errorf("%s Device.AsyncEvents = %v, %v; want nil, nil", o.name, evs, c)
			}
		}
	})
}

func second2[T any](_ T, err error) error { return err }

// TestAfterDeviceClose: once the device is closed, creating objects,
// posting and modifying fail with ENODEV; destroying still works; Close
// again is harmless.
func TestAfterDeviceClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{ops: verbs.SendOpsSend}, apiCfg{})
		x, err := a.qp.Ex()
		must(t, err)
		must(t, a.dev.Close())
		for name, err := range map[string]error{
			"AllocPD":  second2(a.dev.AllocPD()),
			"CreateCQ": second2(a.dev.CreateCQ(4, nil)),
			"RegMR":    second2(a.pd.RegMR(make([]byte, 8), 0)),
			"CreateQP": second2(a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: a.scq, RecvCQ: a.rcq})),
			"Modify":   a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState),
			"PostSend": second(a.qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend})),
			"PostRecv": second(a.qp.PostRecv(ibv.RecvWR{})),
			"WrComplete": func() error {
				x.WrStart()
				x.WrSend()
				return x.WrComplete()
			}(),
		} {
			apiWantErr(t, name+" after Close", err, "closed", verbs.ENODEV)
		}
		if s := a.qp.State(); s != ibv.QPStateUnknown {
			t.Errorf("QP state after Close: %v, want UNKNOWN (the device no longer runs it)", s)
		}
		must(t, a.dev.Close())
		must(t, a.qp.Destroy())
		must(t, a.scq.Destroy())
		must(t, a.mr.Dereg())
		must(t, a.pd.Dealloc())
		_ = b
	})
}

// TestDocComments: every exported name of package verbs has a doc comment
// (its own, or its group's for grouped constants, variables and types).
func TestDocComments(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	must(t, err)
	for _, name := range paths {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		must(t, err)
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Recv != nil && !apiRecvExported(d.Recv) {
					continue
				}
				if d.Doc == nil {
					t.Errorf("%s: %s has no doc comment", fset.Position(d.Pos()), d.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					var names []*ast.Ident
					var doc, line *ast.CommentGroup
					switch s := s.(type) {
					case *ast.TypeSpec:
						names, doc, line = []*ast.Ident{s.Name}, s.Doc, s.Comment
					case *ast.ValueSpec:
						names, doc, line = s.Names, s.Doc, s.Comment
					default:
						continue
					}
					for _, n := range names {
						if n.IsExported() && doc == nil && line == nil && d.Doc == nil {
							t.Errorf("%s: %s has no doc comment", fset.Position(n.Pos()), n.Name)
						}
					}
				}
			}
		}
		_ = name
	}
}

func apiRecvExported(fl *ast.FieldList) bool {
	if len(fl.List) == 0 {
		return false
	}
	typ := fl.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
		case *ast.IndexExpr:
			typ = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}
