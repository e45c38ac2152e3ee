package verbs_test

// Work queues: the RESET/RDY/ERR state machine, posting rules, flushes,
// and QPs that take their receives from a WQ.

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

func wqTo(t testing.TB, wq *verbs.WQ, s ibv.WQState) {
	t.Helper()
	must(t, wq.Modify(&ibv.WQAttr{State: s}, ibv.WQAttrState))
	if got := wq.State(); got != s {
		t.Fatalf("WQ state %v after a modify to %v", got, s)
	}
}

func wqRecv(mr *verbs.MR, id uint64, off, n int) ibv.RecvWR {
	return ibv.RecvWR{WRID: id, SGList: []ibv.SGE{mr.SGE(off, n)}}
}

// TestWQStates walks a WQ through its states: posting is refused in
// RESET, queued in RDY, flushed in ERR; entering ERR flushes what is
// posted (on the WQ's CQ, with the WQ number as QPNum, in order);
// entering RESET discards it; ERR is left only through RESET; a wrong
// IBV_WQ_ATTR_CURR_STATE or any flag is refused.
func TestWQStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := openDev(t, f, "10.0.0.1", 0)
		pd, err := dev.AllocPD()
		must(t, err)
		mr, err := pd.RegMR(make([]byte, 1<<16), ibv.AccessLocalWrite)
		must(t, err)
		cq, err := dev.CreateCQ(64, nil)
		must(t, err)
		wq, err := dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: 8, MaxSGE: 2, PD: pd, CQ: cq})
		must(t, err)
		if s := wq.State(); s != ibv.WQStateReset {
			t.Fatalf("new WQ in %v, want RESET", s)
		}
		if _, err := wq.PostRecv(wqRecv(mr, 1, 0, 64)); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("post in RESET: %v, want EINVAL", err)
		}
		if err := wq.Modify(&ibv.WQAttr{State: ibv.WQStateRdy, CurrState: ibv.WQStateErr},
			ibv.WQAttrState|ibv.WQAttrCurrState); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("modify with a wrong current state: %v, want EINVAL", err)
		}
		if err := wq.Modify(&ibv.WQAttr{Flags: 1, FlagsMask: 1}, ibv.WQAttrFlags); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("modify with a flag: %v, want EINVAL", err)
		}
		must(t, wq.Modify(&ibv.WQAttr{State: ibv.WQStateRdy, CurrState: ibv.WQStateReset},
			ibv.WQAttrState|ibv.WQAttrCurrState))
		wqTo(t, wq, ibv.WQStateRdy)
		for i := range 8 {
			must2(t)(wq.PostRecv(wqRecv(mr, uint64(i), i*64, 64)))
		}
		if n, err := wq.PostRecv(wqRecv(mr, 8, 0, 64)); n != 0 || !errors.Is(err, verbs.ENOMEM) {
			t.Errorf("post to a full WQ: %d, %v; want 0, ENOMEM", n, err)
		}
		wr := wqRecv(mr, 9, 0, 8)
		wr.SGList = append(wr.SGList, wr.SGList[0], wr.SGList[0])
		if _, err := wq.PostRecv(wr); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("post with 3 SGEs to a WQ of 2: %v, want EINVAL", err)
		}
		if n := wq.Len(); n != 8 {
			t.Fatalf("WQ holds %d WRs, want 8", n)
		}
		noWC(t, cq, time.Second)

		wqTo(t, wq, ibv.WQStateErr)
		wcs := pollAll(cq)
		if len(wcs) != 8 {
			t.Fatalf("%d completions on entering ERR, want 8: %+v", len(wcs), wcs)
		}
		for i, wc := range wcs {
			wantWC(t, wc, uint64(i), ibv.WCWRFlushErr, ibv.WCRecv)
			if wc.QPNum != wq.Num() {
				t.Errorf("flush completion's QPNum %#x, want the WQ number %#x", wc.QPNum, wq.Num())
			}
		}
		must2(t)(wq.PostRecv(wqRecv(mr, 20, 0, 64), wqRecv(mr, 21, 0, 64)))
		wcs = pollAll(cq)
		if len(wcs) != 2 {
			t.Fatalf("posts in ERR: %d completions, want 2", len(wcs))
		}
		wantWC(t, wcs[0], 20, ibv.WCWRFlushErr, ibv.WCRecv)
		wantWC(t, wcs[1], 21, ibv.WCWRFlushErr, ibv.WCRecv)
		wqTo(t, wq, ibv.WQStateErr) // ERR→ERR: nothing more
		noWC(t, cq, 0)
		if err := wq.Modify(&ibv.WQAttr{State: ibv.WQStateRdy}, ibv.WQAttrState); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("ERR→RDY: %v, want EINVAL", err)
		}

		// RESET discards without completions; back to RDY it takes WRs.
		wqTo(t, wq, ibv.WQStateReset)
		wqTo(t, wq, ibv.WQStateRdy)
		must2(t)(wq.PostRecv(wqRecv(mr, 30, 0, 64), wqRecv(mr, 31, 0, 64)))
		wqTo(t, wq, ibv.WQStateReset)
		if n := wq.Len(); n != 0 {
			t.Errorf("%d WRs left after RESET", n)
		}
		noWC(t, cq, 0)
		wqTo(t, wq, ibv.WQStateErr) // RESET→ERR, as for QPs in IBTA 10.3.1
		noWC(t, cq, 0)

		// Lifetime: the WQ holds its CQ and PD.
		if err := cq.Destroy(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("destroy the WQ's CQ: %v, want EBUSY", err)
		}
		if err := pd.Dealloc(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("deallocate the WQ's PD: %v, want EBUSY", err)
		}
		must(t, wq.Destroy())
		if err := wq.Destroy(); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("second Destroy: %v, want EINVAL", err)
		}
		if s := wq.State(); s != ibv.WQStateUnknown {
			t.Errorf("destroyed WQ in %v, want UNKNOWN", s)
		}
		if _, err := wq.PostRecv(wqRecv(mr, 1, 0, 8)); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("post to a destroyed WQ: %v, want EINVAL", err)
		}
		must(t, cq.Destroy())
		must(t, mr.Dereg())
		must(t, pd.Dealloc())
	})
}

// TestWQCreateRules: bad creation attributes are EINVAL, and so is a QP
// on another device's WQ.
func TestWQCreateRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := openDev(t, f, "10.0.0.1", 0)
		pd, err := dev.AllocPD()
		must(t, err)
		cq, err := dev.CreateCQ(8, nil)
		must(t, err)
		max := dev.QueryDevice()
		for name, a := range map[string]verbs.WQInitAttr{
			"type 1":       {Type: 1, MaxWR: 8, PD: pd, CQ: cq},
			"max_wr 0":     {MaxWR: 0, PD: pd, CQ: cq},
			"max_wr big":   {MaxWR: uint32(max.MaxQPWR) + 1, PD: pd, CQ: cq},
			"max_sge big":  {MaxWR: 8, MaxSGE: uint32(max.MaxSGE) + 1, PD: pd, CQ: cq},
			"create flags": {MaxWR: 8, PD: pd, CQ: cq, CreateFlags: 1},
			"no PD":        {MaxWR: 8, CQ: cq},
			"no CQ":        {MaxWR: 8, PD: pd},
		} {
			if wq, err := dev.CreateWQ(a); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("%s: CreateWQ = %v, %v; want EINVAL", name, wq, err)
			}
		}
		var zero verbs.WQ
		if err := zero.Modify(&ibv.WQAttr{}, ibv.WQAttrState); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("Modify on a zero WQ: %v", err)
		}
		// A QP cannot take its receives from another device's WQ.
		wq, err := dev.CreateWQ(verbs.WQInitAttr{MaxWR: 8, PD: pd, CQ: cq})
		must(t, err)
		other := openDev(t, f, "10.0.0.2", 0)
		opd, err := other.AllocPD()
		must(t, err)
		ocq, err := other.CreateCQ(8, nil)
		must(t, err)
		if _, err := opd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: ocq, WQ: wq}); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("QP on another device's WQ: %v, want EINVAL", err)
		}
	})
}

// TestWQQP: an RC QP on a WQ completes its receives on the WQ's CQ. With
// the WQ in ERR, its receives are flushed, the peer's SEND meets RNR NAKs
// and waits, and the QP's own sends go on; RESET, RDY and a post let the
// SEND land. The QP refuses PostRecv; the WQ cannot be destroyed while
// the QP uses it; DrainRQ moves the QP to ERR and leaves the WQ's WQEs.
func TestWQQP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 9})
		defer f.Close()
		o := pairOpts{timeout: 14, retry: 7, rnr: 7}
		o.defaults()
		a := newEnd(t, f, apiAddrA, o)
		b := newEnd(t, f, apiAddrB, o)
		wcq, err := b.dev.CreateCQ(64, nil)
		must(t, err)
		wq, err := b.dev.CreateWQ(verbs.WQInitAttr{MaxWR: 16, MaxSGE: 1, PD: b.pd, CQ: wcq})
		must(t, err)
		if _, err := b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: b.cq, RecvCQ: b.cq, WQ: wq}); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("QP on a WQ with another receive CQ: %v, want EINVAL", err)
		}
		must(t, b.qp.Destroy())
		b.qp, err = b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: b.cq, WQ: wq,
			Cap: ibv.QPCap{MaxSendWR: 16, MaxSendSGE: 1}})
		must(t, err)
		if _, init := b.qp.Query(); init.RecvCQ != wcq || init.WQ != wq {
			t.Errorf("Query: RecvCQ %p WQ %p, want the WQ's CQ %p and the WQ %p", init.RecvCQ, init.WQ, wcq, wq)
		}
		connect(t, a, b, o, 0, 0)
		connect(t, b, a, o, 0, 0)
		if _, err := b.qp.PostRecv(recvWR(b, 1, 0, 64)); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("PostRecv on a QP on a WQ: %v, want EINVAL", err)
		}

		wqTo(t, wq, ibv.WQStateRdy)
		must2(t)(wq.PostRecv(wqRecv(b.mr, 1, 0, 256), wqRecv(b.mr, 2, 256, 256), wqRecv(b.mr, 3, 512, 256)))
		fill(a.buf[:100], 1)
		post(t, a, sendWR(a, 10, ibv.WRSend, 0, 100))
		wantWC(t, waitWC(t, wcq, 1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "received", b.buf[:100], a.buf[:100])
		waitWC(t, a.cq, 1)

		// WQ to ERR: 2 and 3 flushed; the QP is untouched.
		wqTo(t, wq, ibv.WQStateErr)
		wcs := pollAll(wcq)
		if len(wcs) != 2 {
			t.Fatalf("WQ to ERR: %+v, want receives 2 and 3 flushed", wcs)
		}
		wantWC(t, wcs[0], 2, ibv.WCWRFlushErr, ibv.WCRecv)
		wantWC(t, wcs[1], 3, ibv.WCWRFlushErr, ibv.WCRecv)
		wantState(t, "QP on the WQ", b, ibv.QPStateRTS)
		rnrs := b.dev.Counters().SendRNRErr
		post(t, a, sendWR(a, 11, ibv.WRSend, 0, 100))
		post(t, b, rdmaWR(b, a, 20, ibv.WRRDMAWrite, 0, 4096, 64))
		wantWC(t, waitWC(t, b.cq, 1)[0], 20, ibv.WCSuccess, ibv.WCRDMAWrite)
		settle(10 * time.Millisecond)
		if b.dev.Counters().SendRNRErr == rnrs {
			t.Error("no RNR NAK for a SEND to a QP whose WQ is in ERR")
		}
		noWC(t, a.cq, 0)

		// RESET, RDY, a receive: the SEND lands at its next retry.
		wqTo(t, wq, ibv.WQStateReset)
		wqTo(t, wq, ibv.WQStateRdy)
		must2(t)(wq.PostRecv(wqRecv(b.mr, 4, 0, 256), wqRecv(b.mr, 5, 256, 256)))
		wantWC(t, waitWC(t, wcq, 1)[0], 4, ibv.WCSuccess, ibv.WCRecv)
		wantWC(t, waitWC(t, a.cq, 1)[0], 11, ibv.WCSuccess, ibv.WCSend)

		if err := wq.Destroy(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("destroy a WQ a QP uses: %v, want EBUSY", err)
		}
		must(t, b.qp.DrainRQ(t.Context()))
		wantState(t, "drained", b, ibv.QPStateErr)
		if n := wq.Len(); n != 1 {
			t.Errorf("%d WRs left in the WQ after the QP's drain, want 1", n)
		}
		noWC(t, wcq, 0)
		must(t, b.qp.Destroy())
		must(t, wq.Destroy())
	})
}

// TestWQUD: a UD QP on a WQ receives only while the WQ is RDY and has
// WQEs; datagrams that find none are dropped and counted.
func TestWQUD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 3})
		dev := openDev(t, f, "10.0.0.2", 0)
		pd, err := dev.AllocPD()
		must(t, err)
		mr, err := pd.RegMR(make([]byte, 1<<16), ibv.AccessLocalWrite)
		must(t, err)
		cq, err := dev.CreateCQ(64, nil)
		must(t, err)
		wq, err := dev.CreateWQ(verbs.WQInitAttr{MaxWR: 8, MaxSGE: 1, PD: pd, CQ: cq})
		must(t, err)
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, WQ: wq,
			Cap: ibv.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
		must(t, err)
		udToRTS(t, qp, 3)
		ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: dev.Addr()}})
		must(t, err)
		send := func(id uint64) {
			t.Helper()
			a.send(t, ah, qp.QPN(), 3, id, 0, 100)
			waitWC(t, a.cq, 1)
			settle(time.Millisecond)
		}
		send(1) // WQ in RESET: no WQE
		if n := dev.Counters().DropNoRecvWQE; n != 1 {
			t.Errorf("%d datagrams dropped for want of a WQE, want 1", n)
		}
		wqTo(t, wq, ibv.WQStateRdy)
		must2(t)(wq.PostRecv(wqRecv(mr, 7, 0, 1024)))
		send(2)
		wc := waitWC(t, cq, 1)[0]
		if wc.WRID != 7 || wc.Status != ibv.WCSuccess || wc.ByteLen != 100+verbs.GRHLen || wc.QPNum != qp.QPN() {
			t.Errorf("receive on the WQ: %+v", wc)
		}
		wqTo(t, wq, ibv.WQStateErr)
		send(3)
		if n := dev.Counters().DropNoRecvWQE; n != 2 {
			t.Errorf("%d datagrams dropped for want of a WQE, want 2", n)
		}
		noWC(t, cq, 0)
	})
}
