package verbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// xrcInit is the initiator side of an XRC test: an XRC_SEND QP.
type xrcInit struct {
	dev *verbs.Device
	pd  *verbs.PD
	cq  *verbs.CQ
	qp  *verbs.QP
	buf []byte
	mr  *verbs.MR
}

// xrcTgt is the target side: an XRC domain with an XRC_RECV QP and an
// XRC SRQ (its PD, CQ and an MR in its PD).
type xrcTgt struct {
	dev  *verbs.Device
	xrcd *verbs.XRCD
	pd   *verbs.PD
	cq   *verbs.CQ
	srq  *verbs.SRQ
	num  uint32
	qp   *verbs.QP
	buf  []byte
	mr   *verbs.MR
}

const xrcAccess = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic

// newXRC makes an initiator at 10.0.0.1 and a target at 10.0.0.2 on f,
// connected, with rnr as the initiator's rnr_retry.
func newXRC(t testing.TB, f *fabric.Fabric, rnr uint8) (*xrcInit, *xrcTgt) {
	t.Helper()
	open := func(addr string) *verbs.Device {
		ep, err := f.Attach(netip.MustParseAddr(addr))
		if err != nil {
			t.Fatal(err)
		}
		dev, err := verbs.Open(verbs.Config{Link: ep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		return dev
	}
	var err error
	a := &xrcInit{dev: open("10.0.0.1"), buf: make([]byte, 1<<16)}
	a.pd, err = a.dev.AllocPD()
	must(t, err)
	a.cq, err = a.dev.CreateCQ(256, nil)
	must(t, err)
	a.mr, err = a.pd.RegMR(a.buf, xrcAccess)
	must(t, err)
	a.qp, err = a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCSend, SendCQ: a.cq,
		Cap: ibv.QPCap{MaxSendWR: 128, MaxSendSGE: 2, MaxInlineData: 64}, SendOpsFlags: verbs.SendOpsSend | verbs.SendOpsRDMAWrite})
	must(t, err)

	b := &xrcTgt{dev: open("10.0.0.2")}
	b.xrcd, err = b.dev.OpenXRCD("")
	must(t, err)
	b.pd, b.cq, b.srq, b.num, b.buf, b.mr = b.newSRQ(t)
	b.qp, err = b.xrcd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCRecv})
	must(t, err)

	// The modify sequence of xsrq_pingpong.c (connect_qps): the kernel's
	// XRC_INI and XRC_TGT columns.
	init := ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic}
	initMask := ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrAccessFlags
	must(t, a.qp.Modify(&init, initMask))
	must(t, b.qp.Modify(&init, initMask))
	av := func(d *verbs.Device) ibv.AHAttr {
		return ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: d.Addr(), HopLimit: 1}}
	}
	must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: b.qp.QPN(), AHAttr: av(b.dev)},
		ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN))
	must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: rnr, MaxRdAtomic: 16},
		ibv.QPAttrState|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|ibv.QPAttrRNRRetry|ibv.QPAttrSQPSN|ibv.QPAttrMaxQPRdAtomic))
	must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: a.qp.QPN(), AHAttr: av(a.dev),
		MaxDestRdAtomic: 16, MinRNRTimer: 1},
		ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer))
	must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 14}, ibv.QPAttrState|ibv.QPAttrTimeout|ibv.QPAttrSQPSN))
	return a, b
}

// newSRQ makes an XRC SRQ of b's domain with a PD, CQ and MR of its own.
func (b *xrcTgt) newSRQ(t testing.TB) (*verbs.PD, *verbs.CQ, *verbs.SRQ, uint32, []byte, *verbs.MR) {
	return b.newSRQIn(t, b.xrcd)
}

func (b *xrcTgt) newSRQIn(t testing.TB, x *verbs.XRCD) (*verbs.PD, *verbs.CQ, *verbs.SRQ, uint32, []byte, *verbs.MR) {
	t.Helper()
	pd, err := b.dev.AllocPD()
	must(t, err)
	cq, err := b.dev.CreateCQ(256, nil)
	must(t, err)
	srq, err := pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: verbs.SRQInitAttr{MaxWR: 64, MaxSGE: 1},
		Type: ibv.SRQTypeXRC, XRCD: x, CQ: cq})
	must(t, err)
	num, err := srq.Num()
	must(t, err)
	buf := make([]byte, 1<<18)
	mr, err := pd.RegMR(buf, xrcAccess)
	must(t, err)
	return pd, cq, srq, num, buf, mr
}

func xfill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
}

// TestXRCOps runs every operation through an XRC connection: a SEND of
// five packets into the named SRQ (its CQ, its buffer), a WRITE, a READ
// and both atomics checked in the SRQ's PD, and SENDs to a second SRQ of
// the domain over the same QP, which complete on that SRQ's CQ.
func TestXRCOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newXRC(t, f, 7)

		xfill(a.buf[:5000], 1)
		must2(t)(b.srq.PostRecv(ibv.RecvWR{WRID: 100, SGList: []ibv.SGE{b.mr.SGE(0, 8192)}}))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSendWithImm, Imm: 0x1234, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 5000)}, RemoteSRQN: b.num}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.Opcode != ibv.WCSend || w.WRID != 1 {
			t.Fatalf("send completion %+v", w)
		}
		w := waitWC(t, b.cq, 1)[0]
		if w.Status != ibv.WCSuccess || w.WRID != 100 || w.ByteLen != 5000 || w.Opcode != ibv.WCRecv ||
			w.Flags&ibv.WCWithImm == 0 || w.Imm != 0x1234 || w.QPNum != b.qp.QPN() || w.SrcQP != a.qp.QPN() {
			t.Fatalf("recv completion %+v", w)
		}
		if !bytes.Equal(b.buf[:5000], a.buf[:5000]) {
			t.Fatal("received bytes differ")
		}

		// WRITE, READ back, atomics: rkeys of the SRQ's PD.
		xfill(a.buf[10000:13000], 2)
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
			SGList: []ibv.SGE{a.mr.SGE(10000, 3000)}, RemoteAddr: b.mr.Addr() + 20000, RKey: b.mr.RKey()}))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 3, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
			SGList: []ibv.SGE{a.mr.SGE(30000, 3000)}, RemoteAddr: b.mr.Addr() + 20000, RKey: b.mr.RKey()}))
		binary.NativeEndian.PutUint64(b.buf[40000:], 100)
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 4, Opcode: ibv.WRAtomicFetchAndAdd, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
			SGList: []ibv.SGE{a.mr.SGE(40000, 8)}, RemoteAddr: b.mr.Addr() + 40000, RKey: b.mr.RKey(), CompareAdd: 5}))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 5, Opcode: ibv.WRAtomicCmpAndSwp, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
			SGList: []ibv.SGE{a.mr.SGE(40008, 8)}, RemoteAddr: b.mr.Addr() + 40000, RKey: b.mr.RKey(), CompareAdd: 105, Swap: 7}))
		for i, w := range waitWC(t, a.cq, 4) {
			if w.Status != ibv.WCSuccess || w.WRID != uint64(i+2) {
				t.Fatalf("completion %d: %+v", i, w)
			}
		}
		if !bytes.Equal(b.buf[20000:23000], a.buf[10000:13000]) || !bytes.Equal(a.buf[30000:33000], a.buf[10000:13000]) {
			t.Fatal("written or read bytes differ")
		}
		if got, old, rem := binary.NativeEndian.Uint64(a.buf[40000:]), binary.NativeEndian.Uint64(a.buf[40008:]),
			binary.NativeEndian.Uint64(b.buf[40000:]); got != 100 || old != 105 || rem != 7 {
			t.Fatalf("atomics returned %d, %d and left %d; want 100, 105, 7", got, old, rem)
		}

		// A second SRQ of the domain, over the same connection: its own
		// CQ, nothing on the first's.
		_, cq2, srq2, num2, buf2, mr2 := b.newSRQ(t)
		if num2 == b.num {
			t.Fatalf("two SRQs numbered %#x", num2)
		}
		must2(t)(srq2.PostRecv(ibv.RecvWR{WRID: 200, SGList: []ibv.SGE{mr2.SGE(0, 100)}}))
		x, err := a.qp.Ex()
		must(t, err)
		x.WrStart()
		x.WRID = 6
		x.WRFlags = ibv.SendSignaled
		x.WrSend()
		x.WrSetXRCSRQN(num2)
		x.WrSetInlineData([]byte("to the second SRQ"))
		must(t, x.WrComplete())
		waitWC(t, a.cq, 1)
		if w := waitWC(t, cq2, 1)[0]; w.Status != ibv.WCSuccess || w.WRID != 200 || string(buf2[:w.ByteLen]) != "to the second SRQ" {
			t.Fatalf("second SRQ's completion %+v", w)
		}
		if n := b.cq.Poll(make([]ibv.WorkCompletion, 4)); n != 0 {
			t.Fatalf("%d completions on the first SRQ's CQ", n)
		}
	})
}

// TestXRCWire checks XRC on the wire byte by byte: every request packet,
// FIRST, MIDDLE and LAST included, has an XRC opcode and the XRCETH (a
// zero byte, then the 24-bit SRQ number) right after the BTH; every
// response has an XRC opcode and no XRCETH, its AETH right after the BTH.
func TestXRCWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 2})
		defer f.Close()
		a, b := newXRC(t, f, 7)
		var mu sync.Mutex
		var reqs, resps [][]byte
		f.Tap(func(p fabric.Packet) {
			c := bytes.Clone(p.Data)
			mu.Lock()
			defer mu.Unlock()
			if p.Src == a.dev.Addr() {
				reqs = append(reqs, c)
			} else {
				resps = append(resps, c)
			}
		})
		must2(t)(b.srq.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.mr.SGE(0, 4096)}}))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
			SGList: []ibv.SGE{a.mr.SGE(0, 3000)}}))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
			SGList: []ibv.SGE{a.mr.SGE(8192, 2500)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
		waitWC(t, a.cq, 2)
		waitWC(t, b.cq, 1)
		mu.Lock()
		defer mu.Unlock()

		wantReq := []wire.Opcode{0xA0, 0xA1, 0xA2, 0xAC} // SEND FIRST, MIDDLE, LAST; READ REQUEST
		if len(reqs) != len(wantReq) {
			t.Fatalf("%d request packets, want %d", len(reqs), len(wantReq))
		}
		for i, d := range reqs {
			if wire.Opcode(d[0]) != wantReq[i] {
				t.Errorf("request %d: opcode %#x, want %#x", i, d[0], wantReq[i])
			}
			xrceth := d[wire.BTHLen : wire.BTHLen+4]
			want := []byte{0, byte(b.num >> 16), byte(b.num >> 8), byte(b.num)}
			if !bytes.Equal(xrceth, want) {
				t.Errorf("request %d: XRCETH % x, want % x", i, xrceth, want)
			}
		}
		// The READ request's RETH follows the XRCETH: VA, rkey, length.
		reth := reqs[3][wire.BTHLen+4:]
		if binary.BigEndian.Uint64(reth) != b.mr.Addr() || binary.BigEndian.Uint32(reth[8:]) != b.mr.RKey() ||
			binary.BigEndian.Uint32(reth[12:]) != 2500 {
			t.Errorf("READ's RETH % x", reth[:16])
		}
		// Responses: the ACK of the SEND, then READ FIRST, MIDDLE, LAST
		// (2500 bytes at 1024), in the XRC class (0xB1, 0xAD..0xAF).
		var sawAck, sawRead int
		for i, d := range resps {
			op := wire.Opcode(d[0])
			if op.Class() != wire.ClassXRC || op.Is(wire.MaskRequest) {
				t.Errorf("response %d: opcode %#x", i, d[0])
			}
			// AETH right after the BTH: syndrome 0x1f (ACK, unlimited
			// credits); a READ MIDDLE has none (IBTA 9.3.7: its payload
			// follows the BTH).
			if op == 0xAE {
				if !bytes.Equal(d[wire.BTHLen:wire.BTHLen+16], b.buf[1024:1024+16]) {
					t.Errorf("READ MIDDLE's payload does not follow the BTH")
				}
			} else if d[wire.BTHLen] != 0x1f {
				t.Errorf("response %d (%#x): byte after the BTH %#x, want the AETH's syndrome 0x1f", i, d[0], d[wire.BTHLen])
			}
			switch op {
			case 0xB1:
				sawAck++
			case 0xAD, 0xAE, 0xAF:
				sawRead++
			}
		}
		if sawAck == 0 || sawRead != 3 {
			t.Errorf("responses: %d ACKs, %d READ responses (want ≥1 and 3)", sawAck, sawRead)
		}
		if !bytes.Equal(a.buf[8192:8192+2500], b.buf[:2500]) {
			t.Error("read bytes differ")
		}
	})
}

// TestXRCRefusals checks the target's refusals: a SEND naming an SRQ of
// another XRC domain, or a number that is no SRQ, is NAKed invalid
// request (the initiator's WR completes REM_INV_REQ_ERR, the target QP
// goes to ERR, nothing lands in the SRQ); a WRITE with an rkey of another
// PD than the named SRQ's is a remote access error, the same rkey
// accepted once it is the SRQ's PD's.
func TestXRCRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		num  func(b *xrcTgt, t testing.TB) uint32
	}{
		{"other domain", func(b *xrcTgt, t testing.TB) uint32 {
			x2, err := b.dev.OpenXRCD("")
			must(t, err)
			_, _, srq, num, _, mr := b.newSRQIn(t, x2)
			must2(t)(srq.PostRecv(ibv.RecvWR{WRID: 9, SGList: []ibv.SGE{mr.SGE(0, 100)}}))
			return num
		}},
		{"no such SRQ", func(b *xrcTgt, t testing.TB) uint32 { return b.num + 100 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 3})
				defer f.Close()
				a, b := newXRC(t, f, 7)
				num := tc.num(b, t)
				before := b.dev.Counters().InvalidRequestErr
				must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, RemoteSRQN: num,
					SGList: []ibv.SGE{a.mr.SGE(0, 10)}}))
				if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCRemInvReqErr {
					t.Fatalf("send completion %+v, want REM_INV_REQ_ERR", w)
				}
				if s := b.qp.State(); s != ibv.QPStateErr {
					t.Fatalf("target QP in %v, want ERR", s)
				}
				if got := b.dev.Counters().InvalidRequestErr - before; got != 1 {
					t.Fatalf("%d invalid-request NAKs counted, want 1", got)
				}
			})
		})
	}

	t.Run("PD of the SRQ", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{Seed: 4})
			defer f.Close()
			a, b := newXRC(t, f, 7)
			// A second SRQ in another PD: its MR is refused through the
			// first SRQ's number, taken through its own.
			_, _, _, num2, buf2, mr2 := b.newSRQ(t)
			xfill(a.buf[:64], 3)
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, RemoteSRQN: num2,
				SGList: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: mr2.Addr(), RKey: mr2.RKey()}))
			if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
				t.Fatalf("WRITE in the SRQ's PD: %+v", w)
			}
			if !bytes.Equal(buf2[:64], a.buf[:64]) {
				t.Fatal("written bytes differ")
			}
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
				SGList: []ibv.SGE{a.mr.SGE(64, 64)}, RemoteAddr: mr2.Addr() + 64, RKey: mr2.RKey()}))
			if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCRemAccessErr {
				t.Fatalf("WRITE with another PD's rkey: %+v, want REM_ACCESS_ERR", w)
			}
			if !bytes.Equal(buf2[64:128], make([]byte, 64)) {
				t.Fatal("a refused WRITE wrote")
			}
		})
	})
}

// TestXRCRNR: a SEND to an empty XRC SRQ is RNR NAKed; with rnr_retry 0
// it fails RNR_RETRY_EXC_ERR, with retries it lands once a receive is
// posted.
func TestXRCRNR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 5})
		defer f.Close()
		a, b := newXRC(t, f, 0)
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
			SGList: []ibv.SGE{a.mr.SGE(0, 10)}}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCRNRRetryExcErr {
			t.Fatalf("send to an empty SRQ, rnr_retry 0: %+v, want RNR_RETRY_EXC_ERR", w)
		}
		if n := b.dev.Counters().SendRNRErr; n == 0 {
			t.Fatal("no RNR NAK counted at the target")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 6})
		defer f.Close()
		a, b := newXRC(t, f, 7)
		xfill(a.buf[:10], 4)
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, RemoteSRQN: b.num,
			SGList: []ibv.SGE{a.mr.SGE(0, 10)}}))
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if b.dev.Counters().SendRNRErr == 0 {
			t.Fatal("no RNR NAK before the receive was posted")
		}
		must2(t)(b.srq.PostRecv(ibv.RecvWR{WRID: 7, SGList: []ibv.SGE{b.mr.SGE(0, 100)}}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send after the receive: %+v", w)
		}
		if w := waitWC(t, b.cq, 1)[0]; w.WRID != 7 || w.ByteLen != 10 || !bytes.Equal(b.buf[:10], a.buf[:10]) {
			t.Fatalf("receive %+v", w)
		}
	})
}

// TestXRCWrongClass: packets of a class the QP does not take are dropped
// and counted as DropNoQP: RC requests sent to an XRC_RECV QP.
func TestXRCWrongClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 7})
		defer f.Close()
		a, b := newXRC(t, f, 7)
		rc := &end{dev: a.dev, pd: a.pd, cq: a.cq, buf: a.buf, mr: a.mr}
		var err error
		rc.qp, err = a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq,
			Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(t, err)
		peer := &end{dev: b.dev, qp: b.qp}
		connect(t, rc, peer, pairOpts{typ: ibv.QPTypeRC, mtu: ibv.MTU1024, timeout: 1, retry: 0}, 0, 0)
		before := b.dev.Counters().DropNoQP
		must2(t)(rc.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{a.mr.SGE(0, 10)}}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCRetryExcErr {
			t.Fatalf("RC send to an XRC_RECV QP: %+v, want RETRY_EXC_ERR", w)
		}
		if got := b.dev.Counters().DropNoQP - before; got == 0 {
			t.Fatal("no DropNoQP counted")
		}
		if s := b.qp.State(); s != ibv.QPStateRTS {
			t.Fatalf("target QP in %v after dropped packets", s)
		}
	})
}

// TestXRCMisuse checks the API's refusals, each an errno.
func TestXRCMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 8})
		defer f.Close()
		a, b := newXRC(t, f, 7)
		check := func(what string, err, want error) {
			t.Helper()
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", what, err, want)
			}
		}
		_, err := a.qp.PostRecv(ibv.RecvWR{SGList: []ibv.SGE{a.mr.SGE(0, 8)}})
		check("PostRecv on XRC_SEND", err, verbs.EINVAL)
		_, err = b.qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend})
		check("PostSend on XRC_RECV", err, verbs.EINVAL)
		_, err = b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCRecv, SendCQ: b.cq, RecvCQ: b.cq})
		check("XRC_RECV from a PD", err, verbs.EINVAL)
		_, err = b.xrcd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC})
		check("RC from an XRCD", err, verbs.EINVAL)
		_, err = b.xrcd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCRecv, SendCQ: b.cq})
		check("XRC_RECV with a CQ", err, verbs.EINVAL)
		_, err = a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCSend, SendCQ: a.cq, SRQ: nil, RecvCQ: a.cq,
			Cap: ibv.QPCap{MaxSendWR: 1}})
		if err != nil {
			t.Errorf("XRC_SEND with RecvCQ = SendCQ: %v", err)
		}
		_, err = b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: b.cq, RecvCQ: b.cq, SRQ: b.srq})
		check("RC QP on an XRC SRQ", err, verbs.EINVAL)
		_, err = b.pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: verbs.SRQInitAttr{MaxWR: 4}, Type: ibv.SRQTypeXRC, XRCD: b.xrcd})
		check("XRC SRQ without a CQ", err, verbs.EINVAL)
		_, err = b.pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: verbs.SRQInitAttr{MaxWR: 4}, Type: ibv.SRQTypeXRC, CQ: b.cq})
		check("XRC SRQ without a domain", err, verbs.EINVAL)
		_, err = b.pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: verbs.SRQInitAttr{MaxWR: 4}, XRCD: b.xrcd})
		check("basic SRQ with a domain", err, verbs.EINVAL)
		basic, err := b.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 4})
		must(t, err)
		_, err = basic.Num()
		check("Num of a basic SRQ", err, verbs.EINVAL)
		x, err := a.qp.Ex()
		must(t, err)
		x.WrStart()
		x.WrSend()
		x.WrSetXRCSRQN(1 << 24)
		check("SRQ number of 25 bits", x.WrComplete(), verbs.EINVAL)

		// OpenQP: the same QP in the same domain; another domain's is refused.
		x2, err := b.dev.OpenXRCD("other")
		must(t, err)
		_, err = x2.OpenQP(b.qp.QPN())
		check("OpenQP from another domain", err, verbs.EINVAL)
		rcqp, err := b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: b.cq, RecvCQ: b.cq})
		must(t, err)
		_, err = b.xrcd.OpenQP(rcqp.QPN())
		check("OpenQP of an RC QP", err, verbs.EINVAL)
		opened, err := b.xrcd.OpenQP(b.qp.QPN())
		must(t, err)
		if opened.QPN() != b.qp.QPN() || opened.State() != ibv.QPStateRTS {
			t.Errorf("opened QP %#x in %v", opened.QPN(), opened.State())
		}
		// The domain is busy while its SRQs and QPs live.
		check("closing a used domain", b.xrcd.Close(), verbs.EBUSY)
		must(t, b.qp.Destroy())
		if opened.State() != ibv.QPStateRTS {
			t.Error("the QP went with its first handle")
		}
		must(t, opened.Destroy())
		must(t, b.srq.Destroy())
		must(t, b.xrcd.Close())
		check("closing twice", b.xrcd.Close(), verbs.EINVAL)
		must(t, x2.Close())
	})
}

// TestXRCOpenXRCDKey: two OpenXRCD of one key open one domain: a QP made
// through one handle is opened through the other, and the domain outlives
// the first handle's Close.
func TestXRCOpenXRCDKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 9})
		defer f.Close()
		ep, err := f.Attach(netip.MustParseAddr("10.0.0.9"))
		must(t, err)
		dev, err := verbs.Open(verbs.Config{Link: ep})
		must(t, err)
		defer dev.Close()
		h1, err := dev.OpenXRCD("shared")
		must(t, err)
		h2, err := dev.OpenXRCD("shared")
		must(t, err)
		qp, err := h1.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCRecv})
		must(t, err)
		opened, err := h2.OpenQP(qp.QPN())
		must(t, err)
		if opened.QPN() != qp.QPN() {
			t.Fatal("opened another QP")
		}
		must(t, h1.Close()) // h2 still holds the domain
		must(t, opened.Destroy())
		must(t, qp.Destroy())
		must(t, h2.Close())
	})
}

// TestXRCLossy runs XRC SENDs and WRITEs to three SRQs over a fabric that
// loses, duplicates and reorders packets, and checks every byte and
// every completion. The seed is printed.
func TestXRCLossy(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: seed})
		defer f.Close()
		a, b := newXRC(t, f, 7)
		type srqEnd struct {
			cq  *verbs.CQ
			srq *verbs.SRQ
			num uint32
			buf []byte
			mr  *verbs.MR
		}
		ends := []srqEnd{{b.cq, b.srq, b.num, b.buf, b.mr}}
		for range 2 {
			_, cq, srq, num, buf, mr := b.newSRQ(t)
			ends = append(ends, srqEnd{cq, srq, num, buf, mr})
		}
		f.SetImpairment(fabric.Impairment{Loss: 0.05, Duplicate: 0.05, Reorder: 0.05})
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		xfill(a.buf, byte(seed))
		const msgs = 60
		const slot = 4096
		type sent struct {
			e      int
			off    int
			n      int
			write  bool
			remote int
		}
		var log []sent
		recvs := make([]int, len(ends))
		for i := range msgs {
			e := rng.IntN(len(ends))
			n := 1 + rng.IntN(3*1024)
			off := rng.IntN(len(a.buf) - n)
			// Each message has a region of its own at every SRQ.
			s := sent{e: e, off: off, n: n, write: rng.IntN(3) == 0, remote: i * slot}
			wr := ibv.SendWR{WRID: uint64(i), Flags: ibv.SendSignaled, RemoteSRQN: ends[e].num,
				SGList: []ibv.SGE{a.mr.SGE(off, n)}}
			if s.write {
				wr.Opcode, wr.RemoteAddr, wr.RKey = ibv.WRRDMAWrite, ends[e].mr.Addr()+uint64(s.remote), ends[e].mr.RKey()
			} else {
				must2(t)(ends[e].srq.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{ends[e].mr.SGE(s.remote, slot)}}))
				recvs[e]++
				wr.Opcode = ibv.WRSend
			}
			log = append(log, s)
			must2(t)(a.qp.PostSend(wr))
		}
		for i, w := range waitWC(t, a.cq, len(log)) {
			if w.Status != ibv.WCSuccess {
				t.Fatalf("completion %d: %+v", i, w)
			}
		}
		for e := range ends {
			for _, w := range waitWC(t, ends[e].cq, recvs[e]) {
				if w.Status != ibv.WCSuccess {
					t.Fatalf("SRQ %d: %+v", e, w)
				}
			}
		}
		st := f.Stats()
		t.Logf("fabric: %+v", st)
		if st.DropImpairment.Packets == 0 || st.Duplicated.Packets == 0 {
			t.Fatalf("the fabric neither lost nor duplicated: %+v", st)
		}
		for i, s := range log {
			got := ends[s.e].buf[s.remote : s.remote+s.n]
			if !bytes.Equal(got, a.buf[s.off:s.off+s.n]) {
				t.Fatalf("message %d (%+v): bytes differ", i, s)
			}
		}
	})
}

// FuzzNICReceiveXRC is FuzzNICReceive against XRC: hostile packets with
// valid ICRCs from a raw peer reach an XRC_RECV QP in RTS (with an XRC
// SRQ of its domain, number 1, holding receives) and an XRC_SEND QP in
// RTS with a SEND in flight. Nothing may crash the NIC.
func FuzzNICReceiveXRC(f *testing.F) {
	seed := func(hs ...wire.Headers) []byte {
		var in []byte
		for _, h := range hs {
			h.BTH.PKey = wire.DefaultPKey
			b := make([]byte, 1<<16)
			e := wire.Encap{Src: netip.MustParseAddr("10.0.0.3"), Dst: netip.MustParseAddr("10.0.0.2"), DstPort: wire.UDPPort}
			n, err := wire.Build(b, &e, &h, make([]byte, payloadFor(h.BTH.Opcode)))
			if err != nil {
				f.Fatal(err)
			}
			in = binary.BigEndian.AppendUint16(in, uint16(n))
			in = append(in, b[:n]...)
		}
		return in
	}
	x := func(op wire.Opcode, psn uint32, srqn uint32) wire.Headers {
		return wire.Headers{BTH: wire.BTHFields{Opcode: wire.ClassXRC | op.Op(), PSN: wire.PSN(psn), AckReq: true},
			XRCETH: wire.XRCETHFields{XRCSRQ: srqn}, RETH: wire.RETHFields{RKey: 0x100, DMALen: 64},
			AtomicETH: wire.AtomicETHFields{RKey: 0x100, SwapAdd: 1}}
	}
	f.Add(seed(x(wire.RCSendOnly, 0, 1)))
	f.Add(seed(x(wire.RCSendFirst, 0, 1), x(wire.RCSendLast, 1, 2)))
	f.Add(seed(x(wire.RCWriteOnly, 0, 1), x(wire.RCReadRequest, 1, 1), x(wire.RCFetchAdd, 2, 9)))
	f.Add(seed(wire.Headers{BTH: wire.BTHFields{Opcode: wire.ClassXRC | wire.RCAck.Op()},
		AETH: wire.AETHFields{Syndrome: wire.NakPSNSequence}}, x(wire.RCSendOnly, 0, 0)))
	f.Add([]byte{0, 3, 1, 2, 3})

	f.Fuzz(func(t *testing.T, in []byte) {
		synctest.Test(t, func(t *testing.T) {
			fab := fabric.New(fabric.Config{Seed: 1})
			defer fab.Close()
			_, b := newXRC(t, fab, 2)
			raw, err := fab.Attach(netip.MustParseAddr("10.0.0.3"))
			must(t, err)
			// Both of b's QPs talk to the raw peer (QPN 0x99).
			av := ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: raw.LocalAddr(), HopLimit: 1}}
			must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState))
			must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, AccessFlags: xrcAccess &^ ibv.AccessLocalWrite},
				ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
			must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: 0x99, AHAttr: av,
				MaxDestRdAtomic: 4, MinRNRTimer: 1},
				ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer))
			must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 10}, ibv.QPAttrState|ibv.QPAttrTimeout|ibv.QPAttrSQPSN))
			must2(t)(b.srq.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.mr.SGE(0, 4096)}}))
			send, err := b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCSend, SendCQ: b.cq, Cap: ibv.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
			must(t, err)
			must(t, send.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
			must(t, send.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: 0x99, AHAttr: av},
				ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN))
			must(t, send.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 10, RetryCnt: 2, RNRRetry: 2, MaxRdAtomic: 4},
				ibv.QPAttrState|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|ibv.QPAttrRNRRetry|ibv.QPAttrSQPSN|ibv.QPAttrMaxQPRdAtomic))
			must2(t)(send.PostSend(ibv.SendWR{WRID: 9, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled, RemoteSRQN: 1,
				SGList: []ibv.SGE{b.mr.SGE(8192, 3000)}, RemoteAddr: 0x1000, RKey: 0x100}))

			for _, dst := range []uint32{b.qp.QPN(), send.QPN()} {
				e := wire.Encap{Src: raw.LocalAddr(), Dst: b.dev.Addr(), SrcPort: wire.ConnectedSrcPort(0x99, dst),
					DstPort: wire.UDPPort, HopLimit: 64, FragOff: wire.IPv4DF}
				if _, err := raw.WriteBatch(hostile(in, dst, &e)); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(5 * time.Second) // fake time: every timer the packets started fires
			synctest.Wait()
			_ = b.qp.State()
			_ = send.State()
			b.cq.Poll(make([]ibv.WorkCompletion, 64))
		})
	})
}
