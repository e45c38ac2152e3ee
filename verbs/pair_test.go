package verbs_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
)

// end is one side of a connected test pair.
type end struct {
	dev *verbs.Device
	pd  *verbs.PD
	cq  *verbs.CQ
	ch  *verbs.CompChannel // with pairOpts.channel
	qp  *verbs.QP
	buf []byte
	mr  *verbs.MR
}

type pairOpts struct {
	typ     ibv.QPType
	mtu     ibv.MTU
	bufSize int
	access  ibv.Access
	timeout uint8
	retry   uint8
	rnr     uint8
	sqPSN   uint32
	rqPSN   uint32
	cqe     int
	maxWR   uint32
	// maxRdAtomic is the requesters' max_rd_atomic (initiator depth);
	// 0 means 16.
	maxRdAtomic uint8
	// sigAll creates the QPs with sq_sig_all.
	sigAll bool
	// busyPoll is the devices' Config.BusyPoll.
	busyPoll time.Duration
	// channel gives the CQ a completion channel (end.ch).
	channel bool
	// cc is the devices' Config.CC: congestion control.
	cc *ibv.CCParams
}

func (o *pairOpts) defaults() {
	if o.typ == 0 {
		o.typ = ibv.QPTypeRC
	}
	if o.mtu == 0 {
		o.mtu = ibv.MTU1024
	}
	if o.bufSize == 0 {
		o.bufSize = 1 << 16
	}
	if o.access == 0 {
		o.access = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	}
	if o.cqe == 0 {
		o.cqe = 1024
	}
	if o.maxWR == 0 {
		o.maxWR = 256
	}
}

// newPair makes two devices on f at 10.0.0.1 and 10.0.0.2 with connected
// QPs in RTS; it registers cleanup that closes both devices.
func newPair(t testing.TB, f *fabric.Fabric, o pairOpts) (a, b *end) {
	t.Helper()
	o.defaults()
	a = newEnd(t, f, netip.MustParseAddr("10.0.0.1"), o)
	b = newEnd(t, f, netip.MustParseAddr("10.0.0.2"), o)
	connect(t, a, b, o, o.sqPSN, o.rqPSN)
	connect(t, b, a, o, o.rqPSN, o.sqPSN)
	return a, b
}

func newEnd(t testing.TB, f *fabric.Fabric, addr netip.Addr, o pairOpts) *end {
	t.Helper()
	ep, err := f.Attach(addr)
	if err != nil {
		t.Fatal(err)
	}
	return newEndOn(t, ep, o)
}

// newEndOn is newEnd on a link the caller made: an endpoint it attached,
// or a wrapper of one.
func newEndOn(t testing.TB, ep link.Link, o pairOpts) *end {
	t.Helper()
	dev, err := verbs.Open(verbs.Config{Link: ep, BusyPoll: o.busyPoll, CC: o.cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	e := &end{dev: dev, buf: make([]byte, o.bufSize)}
	if e.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if o.channel {
		e.ch = dev.CreateCompChannel()
	}
	if e.cq, err = dev.CreateCQ(o.cqe, e.ch); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, o.access); err != nil {
		t.Fatal(err)
	}
	e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: o.typ, SendCQ: e.cq, RecvCQ: e.cq,
		Cap:    ibv.QPCap{MaxSendWR: o.maxWR, MaxRecvWR: o.maxWR, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64},
		SigAll: o.sigAll})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// connect moves e's QP to RTS towards peer, the way ibv_rc_pingpong does.
func connect(t testing.TB, e, peer *end, o pairOpts, sqPSN, rqPSN uint32) {
	t.Helper()
	access := ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	if o.typ == ibv.QPTypeUC {
		access = ibv.AccessRemoteWrite
	}
	must(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1, AccessFlags: access},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
	rtr := ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: o.mtu, DestQPN: peer.qp.QPN(), RQPSN: rqPSN,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: peer.dev.Addr(), HopLimit: 1}}}
	mask := ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN
	if o.typ == ibv.QPTypeRC {
		rtr.MaxDestRdAtomic, rtr.MinRNRTimer = 16, 12
		mask |= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
	}
	must(t, e.qp.Modify(&rtr, mask))
	rts := ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: sqPSN}
	mask = ibv.QPAttrState | ibv.QPAttrSQPSN
	if o.typ == ibv.QPTypeRC {
		rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRdAtomic = o.timeout, o.retry, o.rnr, 16
		if o.maxRdAtomic != 0 {
			rts.MaxRdAtomic = o.maxRdAtomic
		}
		mask |= ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic
	}
	must(t, e.qp.Modify(&rts, mask))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitWC polls cq until n completions arrived. Tests run in a
// testing/synctest bubble, so the sleeps are on fake time: the loop
// advances only when every engine goroutine is idle, and the bound of a
// minute of fake time covers every retransmission the tests provoke.
func waitWC(t testing.TB, cq *verbs.CQ, n int) []ibv.WorkCompletion {
	t.Helper()
	var got []ibv.WorkCompletion
	buf := make([]ibv.WorkCompletion, 16)
	deadline := time.Now().Add(time.Minute)
	for len(got) < n {
		k := cq.Poll(buf)
		got = append(got, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("got %d completions, want %d: %+v", len(got), n, got)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return got
}
