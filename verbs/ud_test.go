package verbs_test

// UD through the API: address handles and their lifetimes, what a UD QP
// accepts in which state, replies from a completion's GRH. UD's wire rules
// (the datagram, the GRH area, Q_Key, length, MTU, loss, SQE) are tested
// beside the transport, in internal/transport/ud.

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// udEnd is one device with a UD QP in RTS.
type udEnd struct {
	dev *verbs.Device
	pd  *verbs.PD
	cq  *verbs.CQ
	qp  *verbs.QP
	buf []byte
	mr  *verbs.MR
}

type udOpts struct {
	qkey    uint32
	portMTU ibv.MTU
	maxWR   uint32
	srq     *verbs.SRQ // attach the QP to it (created on another device: leave nil)
	sigAll  bool
	ops     verbs.SendOpsFlags
	cc      *ibv.CCParams // the device's Config.CC
}

// openDev opens a device on f at addr, closed at cleanup.
func openDev(t testing.TB, f *fabric.Fabric, addr string, portMTU ibv.MTU) *verbs.Device {
	t.Helper()
	return openDevCC(t, f, addr, portMTU, nil)
}

// openDevCC is openDev with congestion control cc (nil: off).
func openDevCC(t testing.TB, f *fabric.Fabric, addr string, portMTU ibv.MTU, cc *ibv.CCParams) *verbs.Device {
	t.Helper()
	ep, err := f.Attach(netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: ep, PortMTU: portMTU, CC: cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// newUDEnd opens a device at addr and makes a UD QP in RTS with o.qkey.
func newUDEnd(t testing.TB, f *fabric.Fabric, addr string, o udOpts) *udEnd {
	t.Helper()
	dev := openDevCC(t, f, addr, o.portMTU, o.cc)
	e := &udEnd{dev: dev, buf: make([]byte, 1<<20)}
	var err error
	if e.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = dev.CreateCQ(4096, nil); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, ibv.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	e.qp = newUDQP(t, e.pd, e.cq, o)
	return e
}

// newUDQP makes a UD QP of pd in RTS with o.qkey.
func newUDQP(t testing.TB, pd *verbs.PD, cq *verbs.CQ, o udOpts) *verbs.QP {
	t.Helper()
	if o.maxWR == 0 {
		o.maxWR = 512
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, RecvCQ: cq, SRQ: o.srq,
		SigAll: o.sigAll, SendOpsFlags: o.ops,
		Cap: ibv.QPCap{MaxSendWR: o.maxWR, MaxRecvWR: o.maxWR, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	udToRTS(t, qp, o.qkey)
	return qp
}

// udToRTS moves a UD QP RESET→INIT→RTR→RTS the way ibv_ud_pingpong does.
func udToRTS(t testing.TB, qp *verbs.QP, qkey uint32) {
	t.Helper()
	must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1, QKey: qkey},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrQKey))
	must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState))
	must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: 0}, ibv.QPAttrState|ibv.QPAttrSQPSN))
}

// ahTo makes an address handle of e's PD towards dst.
func (e *udEnd) ahTo(t testing.TB, dst *udEnd, tc, hop uint8, flow uint32) *verbs.AH {
	t.Helper()
	ah, err := e.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: ibv.GlobalRoute{DGID: dst.dev.Addr(), TrafficClass: tc, HopLimit: hop, FlowLabel: flow}})
	if err != nil {
		t.Fatal(err)
	}
	return ah
}

// postRecvs posts n receive WRs of size bytes each at consecutive offsets
// from off, WRIDs wrid0, wrid0+1, ...
func (e *udEnd) postRecvs(t testing.TB, n, off, size int, wrid0 uint64) {
	t.Helper()
	for i := range n {
		must2(t)(e.qp.PostRecv(ibv.RecvWR{WRID: wrid0 + uint64(i), SGList: []ibv.SGE{e.mr.SGE(off+i*size, size)}}))
	}
}

// send posts a signaled UD SEND of e.buf[off:off+n] to qpn through ah.
func (e *udEnd) send(t testing.TB, ah *verbs.AH, qpn, qkey uint32, wrid uint64, off, n int) {
	t.Helper()
	must2(t)(e.qp.PostSend(ibv.SendWR{WRID: wrid, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{e.mr.SGE(off, n)}, AH: ah, RemoteQPN: qpn, RemoteQKey: qkey}))
}

// tap records the datagrams f carries.
type tap struct {
	mu   sync.Mutex
	pkts []fabric.Packet
}

func newTap(f *fabric.Fabric) *tap {
	tp := &tap{}
	f.Tap(func(p fabric.Packet) {
		tp.mu.Lock()
		tp.pkts = append(tp.pkts, p.Clone())
		tp.mu.Unlock()
	})
	return tp
}

func (tp *tap) all() []fabric.Packet {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]fabric.Packet(nil), tp.pkts...)
}

// TestUDAddressHandles: CreateAH's checks, the PD the handle holds, and
// what a send WR does with a destroyed handle, one of another PD, and one
// destroyed after the WR was posted (the WR copied it). A failed send
// moves the QP to SQE: later WRs are flushed, receives go on, and a
// modify to RTS resumes sending.
func TestUDAddressHandles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 9})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 5})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 5})
		route := func(dgid string) ibv.AHAttr {
			return ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: netip.MustParseAddr(dgid)}}
		}
		bad := map[string]ibv.AHAttr{
			"not global":    {PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}},
			"no dgid":       {IsGlobal: true, PortNum: 1},
			"unspecified":   route("0.0.0.0"),
			"IPv6 on IPv4":  route("fd00::2"),
			"sgid index 1":  {IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr(), SGIDIndex: 1}},
			"port 2":        {IsGlobal: true, PortNum: 2, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}},
			"mapped, wrong": route("::ffff:0.0.0.0"),
		}
		for name, attr := range bad {
			if ah, err := a.pd.CreateAH(attr); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("CreateAH %s: %v, %v; want EINVAL", name, ah, err)
			}
		}
		mapped, err := a.pd.CreateAH(route("::ffff:10.0.0.2"))
		if err != nil {
			t.Fatalf("CreateAH with an IPv4-mapped GID: %v", err)
		}
		if err := a.pd.Dealloc(); !errors.Is(err, verbs.EBUSY) {
			t.Fatalf("Dealloc of a PD with a QP and AHs: %v, want EBUSY", err)
		}
		must(t, mapped.Destroy())
		if err := mapped.Destroy(); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("second Destroy: %v, want EINVAL", err)
		}

		b.postRecvs(t, 8, 0, 256, 0)
		copy(a.buf, "abcdefgh")
		// A handle destroyed after the post: the WR copied it.
		ah := a.ahTo(t, b, 0, 0, 0)
		a.send(t, ah, b.qp.QPN(), 5, 1, 0, 8)
		must(t, ah.Destroy())
		waitWC(t, a.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || string(b.buf[40:48]) != "abcdefgh" {
			t.Fatalf("recv %+v", w)
		}

		// Posting with the destroyed handle: LOC_QP_OP_ERR, then SQE.
		ah2 := a.ahTo(t, b, 0, 0, 0)
		must2(t)(a.qp.PostSend(
			ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 5},
			ibv.SendWR{WRID: 3, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}, AH: ah2, RemoteQPN: b.qp.QPN(), RemoteQKey: 5}))
		ws := waitWC(t, a.cq, 2)
		if ws[0].WRID != 2 || ws[0].Status != ibv.WCLocQPOpErr || ws[1].WRID != 3 || ws[1].Status != ibv.WCWRFlushErr {
			t.Fatalf("completions %+v, want LOC_QP_OP_ERR then WR_FLUSH_ERR", ws)
		}
		if s := a.qp.State(); s != ibv.QPStateSQE {
			t.Fatalf("state %v after a failed UD send, want SQE", s)
		}
		// In SQE, sends are flushed and receives still complete.
		a.send(t, ah2, b.qp.QPN(), 5, 4, 0, 8)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCWRFlushErr {
			t.Fatalf("send in SQE: %+v", w)
		}
		a.postRecvs(t, 1, 4096, 256, 100)
		bah := b.ahTo(t, a, 0, 0, 0)
		b.send(t, bah, a.qp.QPN(), 5, 1, 0, 4)
		waitWC(t, b.cq, 1)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.WRID != 100 {
			t.Fatalf("receive in SQE: %+v", w)
		}
		// SQE → RTS resumes.
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState))
		a.send(t, ah2, b.qp.QPN(), 5, 5, 0, 8)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send after SQE→RTS: %+v", w)
		}
		waitWC(t, b.cq, 1)

		// A handle of another PD: LOC_QP_OP_ERR.
		pd2, err := a.dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		other, err := pd2.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		a.send(t, other, b.qp.QPN(), 5, 6, 0, 8)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCLocQPOpErr {
			t.Fatalf("send through another PD's AH: %+v", w)
		}
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState))

		// A bare *AHAttr works from any PD and is checked at post time.
		bare := &ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}}
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 7, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 8)}, AH: bare, RemoteQPN: b.qp.QPN(), RemoteQKey: 5}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send through a bare AHAttr: %+v", w)
		}
		waitWC(t, b.cq, 1)
		if n, err := a.qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend, AH: &ibv.AHAttr{PortNum: 1}}); n != 0 || !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("post with a bad bare AHAttr: %d, %v", n, err)
		}
		var nilAH *verbs.AH
		if _, err := a.qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend, AH: nilAH}); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("post with a nil *AH: %v", err)
		}
	})
}

// TestUDPostRules: what a UD QP accepts in which state.
func TestUDPostRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 10})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 5})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 5})
		ah := a.ahTo(t, b, 0, 0, 0)
		wr := ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 5}
		for _, op := range []ibv.WROpcode{ibv.WRRDMAWrite, ibv.WRRDMARead, ibv.WRAtomicFetchAndAdd, ibv.WRSendWithInv} {
			w := wr
			w.Opcode = op
			if _, err := a.qp.PostSend(w); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("%v on a UD QP: %v, want EINVAL", op, err)
			}
		}
		noAH := wr
		noAH.AH = nil
		if _, err := a.qp.PostSend(noAH); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("UD send without AH: %v, want EINVAL", err)
		}
		big := wr
		big.RemoteQPN = 1 << 24
		if _, err := a.qp.PostSend(big); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("remote QPN 2^24: %v, want EINVAL", err)
		}

		// A QP in INIT cannot send; one in RTR receives.
		c, err := b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: b.cq, RecvCQ: b.cq,
			Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, ibv.QPAttrState|ibv.QPAttrPort|ibv.QPAttrPKeyIndex); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("RESET→INIT without a Q_Key: %v, want EINVAL", err)
		}
		must(t, c.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, QKey: 5},
			ibv.QPAttrState|ibv.QPAttrPort|ibv.QPAttrPKeyIndex|ibv.QPAttrQKey))
		if _, err := c.PostSend(wr); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("send in INIT: %v, want EINVAL", err)
		}
		must2(t)(c.PostRecv(ibv.RecvWR{WRID: 9, SGList: []ibv.SGE{b.mr.SGE(0, 100)}}))
		must(t, c.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState))
		a.send(t, ah, c.QPN(), 5, 1, 0, 8)
		waitWC(t, a.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || w.WRID != 9 || w.QPNum != c.QPN() {
			t.Fatalf("receive in RTR: %+v", w)
		}

		// ERR flushes the posted receives; RESET forgets the Q_Key's state.
		must2(t)(c.PostRecv(ibv.RecvWR{WRID: 10, SGList: []ibv.SGE{b.mr.SGE(0, 100)}}))
		must(t, c.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCWRFlushErr || w.WRID != 10 {
			t.Fatalf("flush on ERR: %+v", w)
		}
		must(t, c.Modify(&ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState))

		// SQD stops sending; RTS resumes; the drained event is reported.
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateSQD, EnSQDAsyncNotify: true}, ibv.QPAttrState|ibv.QPAttrEnSQDAsyncNotify))
		b.postRecvs(t, 1, 0, 100, 20)
		a.send(t, ah, b.qp.QPN(), 5, 2, 0, 8)
		time.Sleep(10 * time.Millisecond)
		if n := a.cq.Poll(make([]ibv.WorkCompletion, 2)); n != 0 {
			t.Fatal("a send went out in SQD")
		}
		evs, _ := a.dev.AsyncEvents()
		if !hasEvent(evs, ibv.EventSQDrained, a.qp.QPN()) {
			t.Fatalf("events %+v, want SQ_DRAINED", evs)
		}
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState))
		waitWC(t, a.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.WRID != 20 {
			t.Fatalf("recv %+v", w)
		}
	})
}

func hasEvent(evs []ibv.AsyncEvent, typ ibv.AsyncEventType, qpn uint32) bool {
	for _, ev := range evs {
		if ev.Type == typ && ev.QPN == qpn {
			return true
		}
	}
	return false
}

// TestUDReply: a UD server answers whoever sent a datagram with an AH
// made from the completion and the GRH (ibv_create_ah_from_wc), on IPv4
// and IPv6; the QPEx interface carries UD WRs (ibv_wr_set_ud_addr).
func TestUDReply(t *testing.T) {
	for _, addrs := range [][2]string{{"10.0.0.1", "10.0.0.2"}, {"fd00::1", "fd00::2"}} {
		t.Run(addrs[0], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 11})
				defer f.Close()
				cl := newUDEnd(t, f, addrs[0], udOpts{qkey: 0x42, ops: verbs.SendOpsSend | verbs.SendOpsSendWithImm})
				sv := newUDEnd(t, f, addrs[1], udOpts{qkey: 0x42})
				cl.postRecvs(t, 1, 8192, 256, 50)
				sv.postRecvs(t, 1, 0, 256, 60)
				ah := cl.ahTo(t, sv, 0x10, 0, 0x777)
				copy(cl.buf, "ping")
				x, err := cl.qp.Ex()
				if err != nil {
					t.Fatal(err)
				}
				x.WrStart()
				x.WRID, x.WRFlags = 1, ibv.SendSignaled
				x.WrSendImm(7)
				x.WrSetUDAddr(ah, sv.qp.QPN(), 0x42)
				x.WrSetSGE(cl.mr.LKey(), cl.mr.Addr(), 4)
				must(t, x.WrComplete())
				waitWC(t, cl.cq, 1)
				w := waitWC(t, sv.cq, 1)[0]
				if w.Status != ibv.WCSuccess || w.Imm != 7 || string(sv.buf[40:44]) != "ping" {
					t.Fatalf("server recv %+v %q", w, sv.buf[40:44])
				}
				back, err := sv.pd.CreateAHFromWC(&w, sv.buf[:verbs.GRHLen], 1)
				if err != nil {
					t.Fatal(err)
				}
				at := back.Attr()
				if at.GRH.DGID != cl.dev.Addr() || at.GRH.TrafficClass != 0x10 || at.GRH.HopLimit != 0xFF ||
					(cl.dev.Addr().Is6() && at.GRH.FlowLabel != 0x777) {
					t.Fatalf("AH from WC %+v", at)
				}
				copy(sv.buf[4096:], "pong")
				sv.send(t, back, w.SrcQP, 0x42, 2, 4096, 4)
				waitWC(t, sv.cq, 1)
				if w := waitWC(t, cl.cq, 1)[0]; w.Status != ibv.WCSuccess || w.SrcQP != sv.qp.QPN() || string(cl.buf[8192+40:8192+44]) != "pong" {
					t.Fatalf("client recv %+v", w)
				}
				// No GRH flag: no route back.
				if _, err := sv.pd.CreateAHFromWC(&ibv.WorkCompletion{}, sv.buf[:40], 1); !errors.Is(err, verbs.EINVAL) {
					t.Fatalf("AH from a WC without GRH: %v", err)
				}
			})
		})
	}
}
