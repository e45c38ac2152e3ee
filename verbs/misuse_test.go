package verbs_test

// API misuse found from outside: inline data from SGEs that cannot be
// read, objects of another device, two devices on one link, nil
// arguments, PostSend inside a WrStart batch, error texts and what holds
// a busy object.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestInlineGather: a send posted with IBV_SEND_INLINE and SGEs is copied
// at post time on every QP type: an SGE spanning two chunks of a
// fast-registration MR carries the chunks' bytes; an SGE whose address no
// MR of the QP's PD covers (outside its MR, in an MR of another PD) is
// refused by PostSend (EINVAL, bad_wr at it, nothing posted before it
// undone), with no packet and no completion. (The lkey is not checked:
// TestInlineLKeyNotChecked.)
func TestInlineGather(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := mpair(t, f, mopts{typ: typ})
				e := &opEnv{a: a, b: b, typ: typ}
				if typ == ibv.QPTypeUD {
					var err error
					e.ah, err = a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
					must(t, err)
				}
				// A fast-registration MR over two discontiguous pages,
				// registered through an RC QP of a's PD (UD QPs take no
				// REG_MR).
				qa, _ := mlink(t, a, b, a.pd, b.pd, mopts{})
				fr, err := a.pd.AllocMR(verbs.MRTypeMemReg, 2)
				must(t, err)
				chunks := pages(2, 4096, 0)
				fill(chunks[0], 31)
				fill(chunks[1], 32)
				fastReg(t, &mside{dev: a.dev, pd: a.pd, cq: a.cq, qp: qa}, fr, chunks, fastAccess)

				postRecvMS(t, b, 1, 0, 256)
				span := ibv.SGE{Addr: fr.Addr() + 4096 - 20, Length: 40, LKey: fr.LKey()}
				want := append(append([]byte{}, chunks[0][4096-20:]...), chunks[1][:20]...)
				e.must(t, ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: sig | ibv.SendInline,
					SGList: []ibv.SGE{a.mr.SGE(100, 8), span}})
				want = append(append([]byte{}, a.buf[100:108]...), want...)
				mone(t, a, 1, ibv.WCSuccess, ibv.WCSend)
				wc := mone(t, b, 1, ibv.WCSuccess, ibv.WCRecv)
				if int(wc.ByteLen) != e.recvAt(len(want)) {
					t.Errorf("byte_len %d, want %d", wc.ByteLen, e.recvAt(len(want)))
				}
				checkBytes(t, "inline SGEs across fast-reg chunks", b.buf[e.recvAt(0):e.recvAt(len(want))], want)

				opd, err := a.dev.AllocPD()
				must(t, err)
				omr, err := opd.RegMR(make([]byte, 64), ibv.AccessLocalWrite)
				must(t, err)
				for _, tc := range []struct {
					name string
					sge  ibv.SGE
					text string
				}{
					{"an MR of another PD", omr.SGE(0, 16), "inline data: SGE 1"},
					{"no MR, lkey 0", ibv.SGE{Addr: omr.Addr() + 8, Length: 16}, "inline data: SGE 1"},
					{"out of the MR", a.mr.SGE(len(a.buf)-8, 16), "inline data: SGE 1"},
					{"out of the fast-reg MR", ibv.SGE{Addr: fr.Addr() + 8192 - 8, Length: 16, LKey: fr.LKey()}, "inline data: SGE 1"},
				} {
					sent := a.dev.Counters().SentPkts
					good := e.ud(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: sig | ibv.SendInline, InlineData: []byte("ok")})
					bad := e.ud(ibv.SendWR{WRID: 3, Opcode: ibv.WRSend, Flags: sig | ibv.SendInline,
						SGList: []ibv.SGE{a.mr.SGE(0, 4), tc.sge}})
					postRecvMS(t, b, 2, 0, 256)
					n, err := a.qp.PostSend(good, bad)
					apiWantErr(t, tc.name, err, tc.text, verbs.EINVAL)
					if n != 1 {
						t.Errorf("%s: posted %d, want 1 (bad_wr is the second)", tc.name, n)
					}
					mone(t, a, 2, ibv.WCSuccess, ibv.WCSend)
					mone(t, b, 2, ibv.WCSuccess, ibv.WCRecv)
					noWC(t, a.cq, time.Millisecond)
					if got := a.dev.Counters().SentPkts - sent; got != 1 {
						t.Errorf("%s: %d packets sent, want 1 (the good WR's)", tc.name, got)
					}
				}
			})
		})
	}
}

// TestInlineLKeyNotChecked: a send posted with IBV_SEND_INLINE and SGEs
// reads the bytes at the SGEs' addresses without checking their lkeys
// (ibv_post_send(3): "the L_Key will not be checked"), on every QP type:
// lkey 0, a wrong key byte, the key of another MR of the PD, and an MR
// with no access rights all carry the bytes at the address, found in the
// PD's MRs. (Before, each was EINVAL.)
func TestInlineLKeyNotChecked(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := mpair(t, f, mopts{typ: typ, maxInline: 256})
				e := &opEnv{a: a, b: b, typ: typ}
				if typ == ibv.QPTypeUD {
					var err error
					e.ah, err = a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
					must(t, err)
				}
				second := make([]byte, 64)
				fill(second, 7)
				mr2, err := a.pd.RegMR(second, 0) // no rights: a read needs none
				must(t, err)
				fill(a.buf[:64], 3)
				sges := []ibv.SGE{
					{Addr: a.mr.Addr() + 4, Length: 8},                            // lkey 0
					{Addr: a.mr.Addr() + 20, Length: 8, LKey: a.mr.LKey() ^ 0x01}, // wrong key byte
					{Addr: mr2.Addr() + 10, Length: 8, LKey: a.mr.LKey()},         // another MR's key
					{Addr: mr2.Addr() + 40, Length: 8, LKey: mr2.LKey()},          // an MR without rights
				}
				var want []byte
				want = append(want, a.buf[4:12]...)
				want = append(want, a.buf[20:28]...)
				want = append(want, second[10:18]...)
				want = append(want, second[40:48]...)
				postRecvMS(t, b, 1, 0, 256)
				e.must(t, ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: sig | ibv.SendInline, SGList: sges})
				mone(t, a, 1, ibv.WCSuccess, ibv.WCSend)
				mone(t, b, 1, ibv.WCSuccess, ibv.WCRecv)
				checkBytes(t, "inline SGEs with unchecked lkeys", b.buf[e.recvAt(0):e.recvAt(len(want))], want)
			})
		})
	}
}

// TestForeignObjects: every typed object of another device passed to a
// device's call is refused with EINVAL naming both devices, and nothing
// is created or posted: CQs, SRQ and WQ of CreateQP, the completion
// channel of CreateCQ, the PD and CQ of CreateWQ, an AH or a fast-reg MR
// in a posted WR, a window or MR of BindMW and of the WrBindMW builder.
func TestForeignObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{ops: verbs.SendOpsBindMW | verbs.SendOpsSend})
		const text = "belongs to device softnic0 (10.0.0.2), not softnic0 (10.0.0.1)"
		qpCap := ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
		bsrq, err := b.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
		must(t, err)
		bwq, err := b.dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: 4, MaxSGE: 1, PD: b.pd, CQ: b.cq})
		must(t, err)
		for _, tc := range []struct {
			name string
			attr verbs.QPInitAttr
		}{
			{"SendCQ", verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: b.cq, RecvCQ: a.cq, Cap: qpCap}},
			{"RecvCQ", verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: a.cq, RecvCQ: b.cq, Cap: qpCap}},
			{"SRQ", verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq, Cap: qpCap, SRQ: bsrq}},
			{"WQ", verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: a.cq, Cap: qpCap, WQ: bwq}},
		} {
			qp, err := a.pd.CreateQP(tc.attr)
			apiWantErr(t, "CreateQP with "+tc.name+" of another device", err, "QPInitAttr."+tc.name+" "+text, verbs.EINVAL)
			if qp != nil {
				t.Errorf("CreateQP with %s of another device returned a QP", tc.name)
			}
		}
		ch := b.dev.CreateCompChannel()
		_, err = a.dev.CreateCQ(4, ch)
		apiWantErr(t, "CreateCQ with another device's channel", err, "channel "+text, verbs.EINVAL)
		must(t, ch.Close()) // nothing attached to it
		_, err = a.dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: 4, MaxSGE: 1, PD: b.pd, CQ: a.cq})
		apiWantErr(t, "CreateWQ with another device's PD", err, "WQInitAttr.PD "+text, verbs.EINVAL)
		_, err = a.dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: 4, MaxSGE: 1, PD: a.pd, CQ: b.cq})
		apiWantErr(t, "CreateWQ with another device's CQ", err, "WQInitAttr.CQ "+text, verbs.EINVAL)

		// Binds: a window or an MR of b's device on a's QP.
		bmw, err := b.pd.AllocMW(verbs.MWType1)
		must(t, err)
		amw, err := a.pd.AllocMW(verbs.MWType1)
		must(t, err)
		_, err = a.qp.BindMW(bmw, verbs.MWBind{WRID: 1, BindInfo: verbs.MWBindInfo{MR: a.mr, Addr: a.mr.Addr(), Length: 64, Access: ibv.AccessRemoteRead}})
		apiWantErr(t, "BindMW of another device's window", err, "memory window "+text, verbs.EINVAL)
		_, err = a.qp.BindMW(amw, verbs.MWBind{WRID: 1, BindInfo: verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr(), Length: 64, Access: ibv.AccessRemoteRead}})
		apiWantErr(t, "BindMW over another device's MR", err, "MWBindInfo.MR "+text, verbs.EINVAL)
		x, err := a.qp.Ex()
		must(t, err)
		x.WrStart()
		x.WrBindMW(bmw, verbs.IncKey(bmw.RKey()), verbs.MWBindInfo{MR: a.mr, Addr: a.mr.Addr(), Length: 64, Access: ibv.AccessRemoteRead})
		apiWantErr(t, "WrBindMW of another device's window", x.WrComplete(), "memory window "+text, verbs.EINVAL)

		// A fast-registration MR of b's device in a REG_MR on a's QP.
		fr, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
		must(t, err)
		_, err = fr.MapSG(pages(1, 4096, 0), 4096)
		must(t, err)
		postRecvMS(t, b, 9, 0, 64)
		n, err := a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: sig, SGList: []ibv.SGE{a.mr.SGE(0, 0)}},
			fr.RegWR(3, sig, fastAccess))
		apiWantErr(t, "REG_MR of another device's MR", err, "WR 1: invalid argument: SendWR.Reg.MR belongs to another device", verbs.EINVAL)
		if n != 1 {
			t.Errorf("REG_MR of another device's MR: posted %d, want 1 (bad_wr is the REG_MR)", n)
		}

		// A UD send with an AH of b's device.
		uqp, err := a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: a.cq, RecvCQ: a.cq, Cap: qpCap})
		must(t, err)
		udToRTS(t, uqp, 0x1111)
		bah, err := b.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: a.dev.Addr()}})
		must(t, err)
		n, err = uqp.PostSend(ibv.SendWR{WRID: 4, Opcode: ibv.WRSend, Flags: sig, AH: bah, RemoteQPN: 1, RemoteQKey: 0x1111})
		apiWantErr(t, "UD send with another device's AH", err, "SendWR.AH "+text, verbs.EINVAL)
		if n != 0 {
			t.Errorf("UD send with another device's AH: posted %d", n)
		}
		mone(t, a, 2, ibv.WCSuccess, ibv.WCSend)
		noWC(t, a.cq, time.Millisecond)
	})
}

// TestOpenLinkInUse: a second Open on the link of an open device is EBUSY
// naming the device that holds it (one link carries one NIC's traffic;
// two would hand out the same QPNs); Close closes the link, so Open on it
// afterwards is ENODEV, and a new endpoint at the same address opens.
func TestOpenLinkInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		ep, err := f.Attach(apiAddrA)
		must(t, err)
		d1, err := verbs.Open(verbs.Config{Link: ep, Name: "first"})
		must(t, err)
		d2, err := verbs.Open(verbs.Config{Link: ep, Name: "second"})
		apiWantErr(t, "second Open on one link", err, "link 10.0.0.1 is already in use by device first", verbs.EBUSY)
		if d2 != nil {
			t.Errorf("second Open returned a device")
		}
		must(t, d1.Close())
		_, err = verbs.Open(verbs.Config{Link: ep})
		apiWantErr(t, "Open on a link Close closed", err, "link 10.0.0.1 is closed", verbs.ENODEV)
		ep2, err := f.Attach(apiAddrA)
		must(t, err)
		d3, err := verbs.Open(verbs.Config{Link: ep2})
		must(t, err)
		defer d3.Close()
		pd, err := d3.AllocPD()
		must(t, err)
		cq, err := d3.CreateCQ(4, nil)
		must(t, err)
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: ibv.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(t, err)
		if qp.QPN() != 0x11 {
			t.Errorf("QPN %#x on the new device, want 0x11", qp.QPN())
		}
	})
}

// TestNilArguments: nil contexts, attribute pointers, completions and
// objects given to exported methods are EINVAL, never a panic.
func TestNilArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, _ := mpair(t, f, mopts{})
		a.dev.AsyncEvents() // the port event: GetAsyncEvent would wait now
		srq, err := a.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
		must(t, err)
		wq, err := a.dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: 4, MaxSGE: 1, PD: a.pd, CQ: a.cq})
		must(t, err)
		ch := a.dev.CreateCompChannel()
		var nilCtx context.Context
		for _, tc := range []struct {
			name string
			call func() error
			text string
		}{
			{"GetAsyncEvent(nil)", func() error { _, err := a.dev.GetAsyncEvent(nilCtx); return err }, "nil context"},
			{"CompChannel.GetEvent(nil)", func() error { _, err := ch.GetEvent(nilCtx); return err }, "nil context"},
			{"DrainSQ(nil)", func() error { return a.qp.DrainSQ(nilCtx) }, "nil context"},
			{"DrainRQ(nil)", func() error { return a.qp.DrainRQ(nilCtx) }, "nil context"},
			{"DrainQP(nil)", func() error { return a.qp.DrainQP(nilCtx) }, "nil context"},
			{"QP.Modify(nil)", func() error { return a.qp.Modify(nil, ibv.QPAttrState) }, "no attributes"},
			{"SRQ.Modify(nil)", func() error { return srq.Modify(nil, ibv.SRQAttrLimit) }, ""},
			{"WQ.Modify(nil)", func() error { return wq.Modify(nil, ibv.WQAttrState) }, ""},
			{"InitAHFromWC(nil)", func() error { _, err := a.dev.InitAHFromWC(1, nil, make([]byte, 40)); return err }, ""},
			{"CreateAHFromWC(nil)", func() error { _, err := a.pd.CreateAHFromWC(nil, make([]byte, 40), 1); return err }, ""},
			{"MapMRSG(nil)", func() error { _, err := a.dev.MapMRSG(nil, nil, nil, 4096); return err }, ""},
			{"BindMW(nil)", func() error { _, err := a.qp.BindMW(nil, verbs.MWBind{}); return err }, "MW is nil"},
			{"BIND_MW without Bind", func() error { _, err := a.qp.PostSend(ibv.SendWR{Opcode: ibv.WRBindMW}); return err }, "without bind information"},
			{"REG_MR without Reg", func() error { _, err := a.qp.PostSend(ibv.SendWR{Opcode: ibv.WRRegMR}); return err }, "without registration information"},
		} {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s panics: %v", tc.name, r)
						err = verbs.EINVAL
					}
				}()
				err = tc.call()
			}()
			apiWantErr(t, tc.name, err, tc.text, verbs.EINVAL)
		}
	})
}

// TestPostSendInBatch: from the goroutine that holds a WrStart batch, a
// PostSend or BindMW on the QP is refused at once with EBUSY (it would
// wait on itself), and so is a second WrStart, which fails the batch;
// the batch then completes or aborts as usual. (Another goroutine's post
// waits: TestPostWaitsForBatch.)
func TestPostSendInBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{ops: verbs.SendOpsSend | verbs.SendOpsBindMW})
		x, err := a.qp.Ex()
		must(t, err)
		mw, err := a.pd.AllocMW(verbs.MWType1)
		must(t, err)
		send := func(id uint64) ibv.SendWR {
			return ibv.SendWR{WRID: id, Opcode: ibv.WRSend, Flags: sig, SGList: []ibv.SGE{a.mr.SGE(0, 8)}}
		}
		for i, end := range []string{"WrComplete", "WrAbort"} {
			id := uint64(10 * (i + 1))
			postRecvMS(t, b, id, 0, 64)
			postRecvMS(t, b, id+2, 0, 64)
			x.WrStart()
			x.WRID, x.WRFlags = id, sig
			x.WrSend()
			x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), 8)
			n, err := a.qp.PostSend(send(id + 1))
			if n != 0 {
				t.Errorf("PostSend from the batch's goroutine posted %d", n)
			}
			apiWantErr(t, "PostSend in one's own batch", err, "open ibv_wr_start batch on this goroutine", verbs.EBUSY)
			_, err = a.qp.BindMW(mw, verbs.MWBind{WRID: id + 9})
			apiWantErr(t, "BindMW in one's own batch", err, "open ibv_wr_start batch on this goroutine", verbs.EBUSY)
			if end == "WrComplete" {
				must(t, x.WrComplete())
				mone(t, a, id, ibv.WCSuccess, ibv.WCSend)
			} else {
				x.WrAbort()
			}
			mpost(t, a.qp, send(id+2))
			mone(t, a, id+2, ibv.WCSuccess, ibv.WCSend)
			noWC(t, a.cq, time.Millisecond)
		}
		// A second WrStart on the batch's goroutine fails the batch.
		postRecvMS(t, b, 100, 0, 64)
		x.WrStart()
		x.WRID, x.WRFlags = 99, sig
		x.WrSend()
		x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), 8)
		x.WrStart()
		apiWantErr(t, "WrComplete after a second WrStart", x.WrComplete(), "ibv_wr_start in the batch", verbs.EBUSY)
		mpost(t, a.qp, send(100))
		mone(t, a, 100, ibv.WCSuccess, ibv.WCSend)
		noWC(t, a.cq, time.Millisecond)
	})
}

// TestErrorText: an error names its errno once, first, then the detail
// (the engine's "invalid argument" or "resource busy" used to follow the
// errno's own text), and still matches the errno with errors.Is.
func TestErrorText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, _ := mpair(t, f, mopts{})
		srq, err := a.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
		must(t, err)
		mr, err := a.pd.RegMR(make([]byte, 64), ibv.AccessLocalWrite)
		must(t, err)
		must(t, mr.Dereg())
		second := func(_ any, err error) error { return err }
		for _, tc := range []struct {
			name  string
			err   error
			errno error
			want  string
		}{
			{"QP.Modify(nil)", a.qp.Modify(nil, ibv.QPAttrState), verbs.EINVAL,
				"invalid argument: modify QP 0x11 with mask IBV_QP_STATE but no attributes"},
			{"SRQ.Modify(nil)", srq.Modify(nil, ibv.SRQAttrLimit), verbs.EINVAL,
				"invalid argument: SRQ attribute mask 0x2"},
			{"inline over max", second(a.qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend, Flags: ibv.SendInline, InlineData: make([]byte, 65)})),
				verbs.EINVAL, "invalid argument: 65 inline bytes, QP max_inline_data 64"},
			{"CreateCQ(0)", second(a.dev.CreateCQ(0, nil)), verbs.EINVAL, "invalid argument: cqe 0 not in 1..32767"},
			{"Dereg twice", mr.Dereg(), verbs.EINVAL, "invalid argument: memory region deregistered"},
			{"RegMR REMOTE_WRITE alone", second(a.pd.RegMR(make([]byte, 64), ibv.AccessRemoteWrite)), verbs.EINVAL,
				"invalid argument: REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE"},
			{"illegal transition", a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState), verbs.EINVAL,
				"invalid argument: invalid QP modify: RTS->RTR for RC is not a legal transition"},
			{"full receive queue", second(a.qp.PostRecv(make([]ibv.RecvWR, 65)...)), verbs.ENOMEM,
				"cannot allocate memory: no space left on device: queue full: receive queue holds 64 WRs"},
		} {
			if tc.err == nil || tc.err.Error() != tc.want {
				t.Errorf("%s: got %q, want %q", tc.name, tc.err, tc.want)
			}
			if !errors.Is(tc.err, tc.errno) {
				t.Errorf("%s: %v does not wrap %v", tc.name, tc.err, tc.errno)
			}
		}
	})
}

// TestBusyNamesHolders: EBUSY from destroying an object in use names
// what holds it: the QPs (and WQs) on a CQ, everything in a PD, the QPs
// on an SRQ or a WQ, the windows bound to an MR; once they are gone the
// destroy succeeds.
func TestBusyNamesHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		qpCap := ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
		srq, err := a.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
		must(t, err)
		cq2, err := a.dev.CreateCQ(16, nil)
		must(t, err)
		q2, err := a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq2, RecvCQ: cq2, Cap: qpCap, SRQ: srq})
		must(t, err)
		q3, err := a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUC, SendCQ: a.cq, RecvCQ: cq2, Cap: qpCap, SRQ: srq})
		must(t, err)
		wq, err := a.dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: 4, MaxSGE: 1, PD: a.pd, CQ: cq2})
		must(t, err)
		q4, err := a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: a.cq, Cap: qpCap, WQ: wq})
		must(t, err)
		mw, err := a.pd.AllocMW(verbs.MWType1)
		must(t, err)
		mbind(t, a, mw, a.mr, 0, 64, ibv.AccessRemoteRead)
		ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
		must(t, err)
		qpn := func(qp *verbs.QP) string { return fmt.Sprintf("%#x", qp.QPN()) }
		for _, tc := range []struct {
			name string
			err  error
			want string
		}{
			{"CQ of 3 QPs and a WQ", cq2.Destroy(), "device or resource busy: CQ in use by 3 QPs (QPN " +
				qpn(q2) + ", " + qpn(q3) + ", " + qpn(q4) + "), 1 WQ (WQ " + fmt.Sprintf("%#x", wq.Num()) + ")"},
			{"SRQ of 2 QPs", srq.Destroy(), "device or resource busy: SRQ in use by 2 QPs (QPN " + qpn(q2) + ", " + qpn(q3) + ")"},
			{"WQ of a QP", wq.Destroy(), fmt.Sprintf("device or resource busy: WQ %#x in use by 1 QP (QPN %s)", wq.Num(), qpn(q4))},
			{"MR with a window", a.mr.Dereg(), fmt.Sprintf("device or resource busy: MR %#x in use by 1 MW (rkey %#x)", a.mr.LKey(), mw.RKey())},
			{"PD of everything", a.pd.Dealloc(), fmt.Sprintf("device or resource busy: PD %d in use by 4 QPs (QPN %s, %s, %s, %s), 1 SRQ, 1 WQ (WQ %#x), 1 AH, 1 MR (lkey %#x), 1 MW (rkey %#x)",
				a.pd.Handle(), qpn(a.qp), qpn(q2), qpn(q3), qpn(q4), wq.Num(), a.mr.LKey(), mw.RKey())},
		} {
			if !errors.Is(tc.err, verbs.EBUSY) || tc.err.Error() != tc.want {
				t.Errorf("%s: got %v, want EBUSY %q", tc.name, tc.err, tc.want)
			}
		}
		must(t, mw.Dealloc())
		must(t, a.mr.Dereg())
		must(t, q4.Destroy())
		must(t, wq.Destroy())
		must(t, q3.Destroy())
		if err := srq.Destroy(); !errors.Is(err, verbs.EBUSY) || !strings.HasSuffix(err.Error(), "SRQ in use by 1 QP (QPN "+qpn(q2)+")") {
			t.Errorf("SRQ of 1 QP: got %v", err)
		}
		must(t, q2.Destroy())
		must(t, srq.Destroy())
		must(t, cq2.Destroy())
		must(t, ah.Destroy())
		must(t, a.qp.Destroy())
		must(t, a.pd.Dealloc())
	})
}

// TestCountersSnapshot: Device.Counters is a value read at the call:
// writing into it changes nothing on the device, it does not move with
// later traffic, and a new call sees that traffic.
func TestCountersSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		before := a.dev.Counters()
		scribbled := before
		scribbled.SentPkts = 1 << 40
		postRecvMS(t, b, 1, 0, 64)
		mpost(t, a.qp, ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: sig, SGList: []ibv.SGE{a.mr.SGE(0, 8)}})
		mone(t, a, 1, ibv.WCSuccess, ibv.WCSend)
		after := a.dev.Counters()
		if before.SentPkts != 0 || after.SentPkts != 1 {
			t.Errorf("sent_pkts: %d before the SEND, %d after; want 0 and 1", before.SentPkts, after.SentPkts)
		}
		if after.RcvdPkts != 1 {
			t.Errorf("rcvd_pkts %d after the SEND's ACK, want 1", after.RcvdPkts)
		}
	})
}
