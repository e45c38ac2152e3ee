package verbs_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestCQModify: ibv_modify_cq's moderation holds an armed CQ's event
// until cq_count completions have arrived, or cq_period microseconds
// after the first, whichever comes first; polling is not held back.
// Values above cq_mod_caps, unknown attr_mask bits and a nil attribute
// are EINVAL. (Before, there was no CQ.Modify.)
func TestCQModify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := newPair(t, f, pairOpts{channel: true})
		caps := a.dev.QueryDeviceEx().CQModCaps
		if caps.MaxCQCount == 0 || caps.MaxCQPeriod == 0 {
			t.Fatalf("cq_mod_caps %+v", caps)
		}
		must(t, b.cq.Modify(&ibv.ModifyCQAttr{AttrMask: ibv.CQAttrModerate, Moderate: ibv.ModerateCQ{CQCount: 3, CQPeriod: 100}}))
		event := func() bool {
			t.Helper()
			settle(0)
			cq, err := b.ch.GetEventTimeout(context.Background(), 0)
			if errors.Is(err, verbs.ETIMEDOUT) {
				return false
			}
			must(t, err)
			must(t, cq.AckEvents(1))
			return true
		}
		sendOne := func(id uint64) {
			t.Helper()
			postRecv(t, b, recvWR(b, id, 0, 64))
			post(t, a, sendWR(a, id, ibv.WRSend, 0, 8))
			settle(0)
		}
		// By count: the third receive completion makes the event.
		must(t, b.cq.ReqNotify(false))
		for id := uint64(1); id <= 3; id++ {
			sendOne(id)
			if got, want := event(), id == 3; got != want {
				t.Fatalf("after %d completions: event %v, want %v", id, got, want)
			}
		}
		if got := len(pollAll(b.cq)); got != 3 {
			t.Fatalf("polled %d completions, want 3 (moderation does not hold polls)", got)
		}
		// By time: one completion, the event 100 µs later.
		must(t, b.cq.ReqNotify(false))
		sendOne(4)
		if event() {
			t.Fatal("event before the period ended")
		}
		time.Sleep(100 * time.Microsecond)
		if !event() {
			t.Fatal("no event once the period ended")
		}
		pollAll(b.cq)
		// Moderation off again: the first completion makes the event.
		must(t, b.cq.Modify(&ibv.ModifyCQAttr{AttrMask: ibv.CQAttrModerate}))
		must(t, b.cq.ReqNotify(false))
		sendOne(5)
		if !event() {
			t.Fatal("no event without moderation")
		}
		pollAll(a.cq)
		for _, tc := range []struct {
			name string
			attr *ibv.ModifyCQAttr
		}{
			{"nil", nil},
			{"unknown mask", &ibv.ModifyCQAttr{AttrMask: 2}},
			{"period above max", &ibv.ModifyCQAttr{AttrMask: ibv.CQAttrModerate, Moderate: ibv.ModerateCQ{CQPeriod: caps.MaxCQPeriod + 1}}},
		} {
			if err := b.cq.Modify(tc.attr); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("Modify %s: %v, want EINVAL", tc.name, err)
			}
		}
	})
}

// TestCQEx: an extended CQ's completions are read one by one between
// StartPoll and EndPoll, with the accessors of the wc_flags asked for,
// completion timestamps included (the device's clock, in ns, as
// QueryRTValuesEx reads it); ENOENT ends a poll; misuse and wc_flags or
// flags softnic lacks are refused. (Before, there was no CreateCQEx.)
func TestCQEx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		pb := pairOpts{}
		pb.defaults()
		a, b := newEnd(t, f, netip.MustParseAddr("10.0.0.1"), pb), newEnd(t, f, netip.MustParseAddr("10.0.0.2"), pb)
		flags := ibv.WCStandardFlags | ibv.WCExWithCompletionTimestamp | ibv.WCExWithCompletionTimestampWallclock
		x, err := b.dev.CreateCQEx(verbs.CQInitAttrEx{CQE: 16, WCFlags: flags, Flags: verbs.CreateCQAttrSingleThreaded})
		must(t, err)
		qp, err := b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: b.cq, RecvCQ: x.CQ,
			Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(t, err)
		b.qp = qp
		connect(t, a, b, pb, 0, 0)
		connect(t, b, a, pb, 0, 0)
		if err := x.StartPoll(); !errors.Is(err, verbs.ENOENT) {
			t.Fatalf("StartPoll on an empty CQ: %v, want ENOENT", err)
		}
		if err := x.NextPoll(); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("NextPoll without StartPoll: %v, want EINVAL", err)
		}
		var rt ibv.ValuesEx
		rt.CompMask = ibv.ValuesMaskRawClock
		must(t, b.dev.QueryRTValuesEx(&rt))
		before := uint64(rt.RawClock.Nsec)
		if rt.CompMask != ibv.ValuesMaskRawClock || before != uint64(time.Now().UnixNano()) {
			t.Fatalf("QueryRTValuesEx: %+v, want the raw clock at %d", rt, time.Now().UnixNano())
		}
		postRecv(t, b, recvWR(b, 1, 0, 64), recvWR(b, 2, 64, 64))
		w := sendWR(a, 7, ibv.WRSendWithImm, 0, 8)
		w.Imm = 0x1234
		post(t, a, w)
		time.Sleep(time.Millisecond)
		post(t, a, sendWR(a, 8, ibv.WRSend, 0, 5))
		settle(0)
		var stamps []uint64
		for err := x.StartPoll(); err == nil; err = x.NextPoll() {
			if x.Status != ibv.WCSuccess || x.ReadOpcode() != ibv.WCRecv || x.ReadQPNum() != qp.QPN() {
				t.Errorf("completion %d: %v %v qp %#x", x.WRID, x.Status, x.ReadOpcode(), x.ReadQPNum())
			}
			switch x.WRID {
			case 1:
				if x.ReadByteLen() != 8 || x.ReadImmData() != 0x1234 || x.ReadWCFlags()&ibv.WCWithImm == 0 {
					t.Errorf("WR 1: byte_len %d imm %#x flags %v", x.ReadByteLen(), x.ReadImmData(), x.ReadWCFlags())
				}
			case 2:
				if x.ReadByteLen() != 5 {
					t.Errorf("WR 2: byte_len %d", x.ReadByteLen())
				}
			default:
				t.Errorf("unexpected WR %d", x.WRID)
			}
			if x.ReadCompletionTS() != x.ReadCompletionWallclockNS() {
				t.Errorf("WR %d: timestamp %d, wallclock %d", x.WRID, x.ReadCompletionTS(), x.ReadCompletionWallclockNS())
			}
			stamps = append(stamps, x.ReadCompletionTS())
		}
		x.EndPoll()
		if len(stamps) != 2 || stamps[0] < before || stamps[1]-stamps[0] < uint64(time.Millisecond) {
			t.Errorf("completion timestamps %v, want 2 from %d, a millisecond apart", stamps, before)
		}
		// Refusals.
		for _, tc := range []struct {
			name string
			attr verbs.CQInitAttrEx
			want error
		}{
			{"CVLAN", verbs.CQInitAttrEx{CQE: 4, WCFlags: ibv.WCExWithCVLAN}, verbs.EOPNOTSUPP},
			{"FLOW_TAG", verbs.CQInitAttrEx{CQE: 4, WCFlags: ibv.WCExWithFlowTag}, verbs.EOPNOTSUPP},
			{"IGNORE_OVERRUN", verbs.CQInitAttrEx{CQE: 4, Flags: verbs.CreateCQAttrIgnoreOverrun}, verbs.EOPNOTSUPP},
			{"comp_vector 1", verbs.CQInitAttrEx{CQE: 4, CompVector: 1}, verbs.EINVAL},
			{"a plain PD as parent domain", verbs.CQInitAttrEx{CQE: 4, ParentDomain: b.pd}, verbs.EINVAL},
		} {
			if _, err := b.dev.CreateCQEx(tc.attr); !errors.Is(err, tc.want) {
				t.Errorf("CreateCQEx %s: %v, want %v", tc.name, err, tc.want)
			}
		}
		if err := b.dev.QueryRTValuesEx(&ibv.ValuesEx{CompMask: 2}); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("QueryRTValuesEx with an unknown bit: %v, want EINVAL", err)
		}
	})
}

// TestParentDomain: a parent domain (over a PD and a thread domain) is a
// PD wherever one is taken: a QP, an MR and a CQ created through it work
// with the PD's objects, keys crossing both ways; deallocation goes in
// order (the objects, the parent domain, then the PD and the TD: EBUSY
// before). (Before, there was no AllocTD or AllocParentDomain.)
func TestParentDomain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		pb := pairOpts{}
		pb.defaults()
		a, b := newEnd(t, f, netip.MustParseAddr("10.0.0.1"), pb), newEnd(t, f, netip.MustParseAddr("10.0.0.2"), pb)
		td, err := b.dev.AllocTD()
		must(t, err)
		type ctxKey struct{}
		par, err := b.dev.AllocParentDomain(verbs.ParentDomainInitAttr{PD: b.pd, TD: td, PDContext: ctxKey{}})
		must(t, err)
		if par.Context() != (ctxKey{}) || par.TD() != td || par.ProtectionDomain() != b.pd || par.Handle() != b.pd.Handle() {
			t.Errorf("parent domain: context %v td %p pd %p handle %d", par.Context(), par.TD(), par.ProtectionDomain(), par.Handle())
		}
		cq, err := b.dev.CreateCQEx(verbs.CQInitAttrEx{CQE: 8, ParentDomain: par})
		must(t, err)
		buf := make([]byte, 64)
		mr, err := par.RegMR(buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
		must(t, err)
		qp, err := par.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq.CQ, RecvCQ: cq.CQ,
			Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(t, err)
		b.qp, b.cq = qp, cq.CQ
		connect(t, a, b, pb, 0, 0)
		connect(t, b, a, pb, 0, 0)
		// a writes into the parent domain's MR, then b sends from the
		// PD's MR on the parent domain's QP.
		w := rdmaWR(a, &end{mr: mr}, 1, ibv.WRRDMAWrite, 0, 0, 16)
		copy(a.buf, "parent domain ok")
		post(t, a, w)
		postRecv(t, a, recvWR(a, 2, 100, 64))
		post(t, b, sendWR(b, 3, ibv.WRSend, 0, 8))
		got := waitWC(t, cq.CQ, 1)
		waitWC(t, a.cq, 2)
		if got[0].WRID != 3 || got[0].Status != ibv.WCSuccess || string(buf[:16]) != "parent domain ok" {
			t.Errorf("through the parent domain: %+v, buffer %q", got[0], buf[:16])
		}
		for name, err := range map[string]error{"PD": b.pd.Dealloc(), "TD": td.Dealloc(), "parent domain": par.Dealloc()} {
			if !errors.Is(err, verbs.EBUSY) {
				t.Errorf("Dealloc of the %s in use: %v, want EBUSY", name, err)
			}
		}
		must(t, qp.Destroy())
		must(t, mr.Dereg())
		if err := par.Dealloc(); !errors.Is(err, verbs.EBUSY) || !strings.Contains(err.Error(), "1 CQs") {
			t.Errorf("Dealloc of the parent domain of a live CQ: %v, want EBUSY", err)
		}
		must(t, cq.Destroy())
		must(t, par.Dealloc())
		must(t, td.Dealloc())
		if _, err := b.dev.AllocParentDomain(verbs.ParentDomainInitAttr{PD: par}); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("AllocParentDomain over a parent domain: %v, want EINVAL", err)
		}
		if err := td.Dealloc(); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("TD Dealloc twice: %v, want EINVAL", err)
		}
	})
}

// TestCreateWQCap: WQ.Cap reports the sizes CreateWQ granted, at least
// those asked for (ibv_create_wq writes them back). (Before, nothing
// reported them.)
func TestCreateWQCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, _ := newPair(t, f, pairOpts{})
		wq, err := a.dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: 5, MaxSGE: 3, PD: a.pd, CQ: a.cq})
		must(t, err)
		must(t, wq.Modify(&ibv.WQAttr{State: ibv.WQStateRdy}, ibv.WQAttrState))
		wr, sge := wq.Cap()
		if wr < 5 || sge < 3 {
			t.Errorf("WQ.Cap = %d, %d; want at least 5, 3", wr, sge)
		}
		for i := range wr {
			if _, err := wq.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: make([]ibv.SGE, sge)}); err != nil {
				t.Fatalf("WR %d of the %d granted: %v", i, wr, err)
			}
		}
	})
}
