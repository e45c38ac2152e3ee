package verbs_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The QP state machine through the public API: QP.Modify against the
// kernel's qp_state_table (drivers/infiniband/core/verbs.c), transcribed
// here independently of the engine's table (internal/transport) so that a
// change to either is caught. SQE is never entered by softnic (nor by rxe):
// its row is covered by internal/transport's own tests.

// Short names for the masks of the table.
const (
	mPKey    = ibv.QPAttrPKeyIndex
	mPort    = ibv.QPAttrPort
	mQKey    = ibv.QPAttrQKey
	mAccess  = ibv.QPAttrAccessFlags
	mAV      = ibv.QPAttrAV
	mMTU     = ibv.QPAttrPathMTU
	mDestQPN = ibv.QPAttrDestQPN
	mRQPSN   = ibv.QPAttrRQPSN
	mSQPSN   = ibv.QPAttrSQPSN
	mDestRd  = ibv.QPAttrMaxDestRdAtomic
	mRd      = ibv.QPAttrMaxQPRdAtomic
	mRNRTmr  = ibv.QPAttrMinRNRTimer
	mTimeout = ibv.QPAttrTimeout
	mRetry   = ibv.QPAttrRetryCnt
	mRNRRtr  = ibv.QPAttrRNRRetry
	mAlt     = ibv.QPAttrAltPath
	mMig     = ibv.QPAttrPathMigState
	mCur     = ibv.QPAttrCurState
	mSQDNtfy = ibv.QPAttrEnSQDAsyncNotify
	mCap     = ibv.QPAttrCap
	mRate    = ibv.QPAttrRateLimit
)

// stAllAttrs is every attribute of enum ibv_qp_attr_mask besides
// IBV_QP_STATE.
var stAllAttrs = []ibv.AttrMask{
	mCur, mSQDNtfy, mAccess, mPKey, mPort, mQKey, mAV, mMTU, mTimeout, mRetry, mRNRRtr,
	mRQPSN, mRd, mAlt, mRNRTmr, mSQPSN, mDestRd, mMig, mCap, mDestQPN, mRate,
}

// stRule is one legal transition: its required and optional attributes
// besides IBV_QP_STATE.
type stRule struct {
	cur, next ibv.QPState
	req, opt  ibv.AttrMask
}

// stRules returns the legal transitions of an RC or UC QP from the states
// softnic can reach (qp_state_table, RC and UC columns).
func stRules(typ ibv.QPType) []stRule {
	R, I, RTR, RTS, SQD, E := ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR,
		ibv.QPStateRTS, ibv.QPStateSQD, ibv.QPStateErr
	rules := []stRule{
		{cur: R, next: R},
		{cur: R, next: I, req: mPKey | mPort | mAccess},
		{cur: I, next: I, opt: mPKey | mPort | mAccess},
		{cur: RTS, next: SQD, opt: mSQDNtfy},
	}
	if typ == ibv.QPTypeRC {
		rules = append(rules,
			stRule{cur: I, next: RTR, req: mAV | mMTU | mDestQPN | mRQPSN | mDestRd | mRNRTmr, opt: mAlt | mAccess | mPKey},
			stRule{cur: RTR, next: RTS, req: mTimeout | mRetry | mRNRRtr | mSQPSN | mRd, opt: mCur | mAlt | mAccess | mRNRTmr | mMig},
			stRule{cur: RTS, next: RTS, opt: mCur | mAccess | mAlt | mMig | mRNRTmr},
			stRule{cur: SQD, next: RTS, opt: mCur | mAlt | mAccess | mRNRTmr | mMig},
			stRule{cur: SQD, next: SQD, opt: mPort | mAV | mTimeout | mRetry | mRNRRtr | mRd | mDestRd | mAlt | mAccess | mPKey | mRNRTmr | mMig},
		)
	} else {
		rules = append(rules,
			stRule{cur: I, next: RTR, req: mAV | mMTU | mDestQPN | mRQPSN, opt: mAlt | mAccess | mPKey},
			stRule{cur: RTR, next: RTS, req: mSQPSN, opt: mCur | mAlt | mAccess | mMig},
			stRule{cur: RTS, next: RTS, opt: mCur | mAccess | mAlt | mMig},
			stRule{cur: SQD, next: RTS, opt: mCur | mAlt | mAccess | mMig},
			stRule{cur: SQD, next: SQD, opt: mAV | mAlt | mAccess | mPKey | mMig},
		)
	}
	// Any state but RESET may go to RESET or ERR (RESET->ERR is not in the
	// current kernel's table); RESET->RESET is above.
	for _, s := range []ibv.QPState{I, RTR, RTS, SQD, E} {
		rules = append(rules, stRule{cur: s, next: R}, stRule{cur: s, next: E})
	}
	return rules
}

func stRuleFor(typ ibv.QPType, cur, next ibv.QPState) (stRule, bool) {
	for _, r := range stRules(typ) {
		if r.cur == cur && r.next == next {
			return r, true
		}
	}
	return stRule{}, false
}

// stReachable are the states a QP can be driven to through the API.
var stReachable = []ibv.QPState{
	ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR, ibv.QPStateRTS, ibv.QPStateSQD, ibv.QPStateErr,
}

var stTypes = []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC}

// stPeer is the address the QPs' paths point at; nothing needs to answer.
var stPeer = netip.MustParseAddr("10.0.0.2")

// stAttr returns attributes with a valid value for every field, for a
// modify from cur to next.
func stAttr(cur, next ibv.QPState) ibv.QPAttr {
	return ibv.QPAttr{
		State: next, CurState: cur, EnSQDAsyncNotify: true,
		AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead,
		PKeyIndex:   0, PortNum: 1, QKey: 0x11111111,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1,
			GRH: ibv.GlobalRoute{DGID: stPeer, HopLimit: 64, TrafficClass: 0x10}},
		PathMTU: ibv.MTU1024, Timeout: 14, RetryCnt: 6, RNRRetry: 5,
		RQPSN: 0x123456, SQPSN: 0x654321, MaxRdAtomic: 3, MaxDestRdAtomic: 5,
		MinRNRTimer: 12, DestQPN: 0xabcde, PathMigState: 0,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2},
	}
}

// stEnv is one device with a PD and a CQ, in a synctest bubble.
type stEnv struct {
	t   *testing.T
	dev *verbs.Device
	pd  *verbs.PD
	cq  *verbs.CQ
}

func newStEnv(t *testing.T) *stEnv {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	ep, err := f.Attach(netip.MustParseAddr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: ep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	e := &stEnv{t: t, dev: dev}
	if e.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = dev.CreateCQ(64, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

// qp creates a QP of type typ in RESET; it is destroyed at cleanup.
func (e *stEnv) qp(typ ibv.QPType) *verbs.QP {
	e.t.Helper()
	qp, err := e.pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { qp.Destroy() })
	return qp
}

// drive moves qp from RESET to state along RESET->INIT->RTR->RTS->SQD
// (ERR from INIT), each step with exactly its required attributes.
func (e *stEnv) drive(qp *verbs.QP, typ ibv.QPType, state ibv.QPState) {
	e.t.Helper()
	step := func(cur, next ibv.QPState) {
		e.t.Helper()
		r, ok := stRuleFor(typ, cur, next)
		if !ok {
			e.t.Fatalf("no rule %v->%v", cur, next)
		}
		a := stAttr(cur, next)
		if err := qp.Modify(&a, ibv.QPAttrState|r.req); err != nil {
			e.t.Fatalf("driving %v QP %v->%v: %v", typ, cur, next, err)
		}
	}
	path := map[ibv.QPState][]ibv.QPState{
		ibv.QPStateReset: {ibv.QPStateReset},
		ibv.QPStateInit:  {ibv.QPStateReset, ibv.QPStateInit},
		ibv.QPStateRTR:   {ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR},
		ibv.QPStateRTS:   {ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR, ibv.QPStateRTS},
		ibv.QPStateSQD:   {ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR, ibv.QPStateRTS, ibv.QPStateSQD},
		ibv.QPStateErr:   {ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateErr},
	}[state]
	for i := 1; i < len(path); i++ {
		step(path[i-1], path[i])
	}
	if got := qp.State(); got != state {
		e.t.Fatalf("after driving: state %v, want %v", got, state)
	}
	synctest.Wait() // let the engine settle (SQD drains)
}

// qpIn returns a new QP of type typ driven to state.
func (e *stEnv) qpIn(typ ibv.QPType, state ibv.QPState) *verbs.QP {
	e.t.Helper()
	qp := e.qp(typ)
	e.drive(qp, typ, state)
	return qp
}

// stRefused checks that err, the result of the modify described by what,
// is a refusal wrapping EINVAL whose message contains every one of names,
// and that the QP is unchanged.
func stRefused(t *testing.T, what string, qp *verbs.QP, before ibv.QPAttr, err error, names ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want one wrapping EINVAL naming %q", what, names)
		return
	}
	if !errors.Is(err, verbs.EINVAL) {
		t.Errorf("%s: got error %v, want it to wrap EINVAL", what, err)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s: got error %q, want it to name %s", what, err, n)
		}
	}
	if after, _ := qp.Query(); after != before {
		t.Errorf("%s: refused modify changed the QP:\n got %+v\nwant %+v", what, after, before)
	}
}

func stBits(m ibv.AttrMask) []ibv.AttrMask {
	var bits []ibv.AttrMask
	for _, b := range stAllAttrs {
		if m&b != 0 {
			bits = append(bits, b)
		}
	}
	return bits
}

// TestModifyLegalTransitions runs every legal transition with exactly its
// required attributes, then with each optional attribute added.
func TestModifyLegalTransitions(t *testing.T) {
	for _, typ := range stTypes {
		for _, r := range stRules(typ) {
			name := fmt.Sprintf("%v/%v->%v", typ, r.cur, r.next)
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newStEnv(t)
					masks := []ibv.AttrMask{0}
					for _, b := range stBits(r.opt) {
						if b != mAlt { // RoCE has no alternate path: see TestModifyAltPathRefused
							masks = append(masks, b)
						}
					}
					for _, opt := range masks {
						qp := e.qpIn(typ, r.cur)
						a := stAttr(r.cur, r.next)
						mask := ibv.QPAttrState | r.req | opt
						if err := qp.Modify(&a, mask); err != nil {
							t.Errorf("Modify(%v) = %v, want nil", mask, err)
							continue
						}
						if got := qp.State(); got != r.next {
							t.Errorf("Modify(%v): state %v, want %v", mask, got, r.next)
						}
					}
				})
			})
		}
	}
}

// TestModifyMissingRequired drops each required attribute in turn: the
// modify is refused, names the attribute, and changes nothing.
func TestModifyMissingRequired(t *testing.T) {
	for _, typ := range stTypes {
		for _, r := range stRules(typ) {
			if r.req == 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/%v->%v", typ, r.cur, r.next), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newStEnv(t)
					qp := e.qpIn(typ, r.cur)
					for _, b := range stBits(r.req) {
						before, _ := qp.Query()
						a := stAttr(r.cur, r.next)
						mask := ibv.QPAttrState | r.req&^b
						err := qp.Modify(&a, mask)
						stRefused(t, fmt.Sprintf("Modify(%v)", mask), qp, before, err, b.String())
					}
				})
			})
		}
	}
}

// TestModifyDisallowedAttr adds each attribute the transition does not
// allow to its required mask: refused, named, nothing changed.
func TestModifyDisallowedAttr(t *testing.T) {
	for _, typ := range stTypes {
		for _, r := range stRules(typ) {
			t.Run(fmt.Sprintf("%v/%v->%v", typ, r.cur, r.next), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e := newStEnv(t)
					qp := e.qpIn(typ, r.cur)
					for _, b := range stAllAttrs {
						if (r.req|r.opt)&b != 0 {
							continue
						}
						before, _ := qp.Query()
						a := stAttr(r.cur, r.next)
						mask := ibv.QPAttrState | r.req | b
						err := qp.Modify(&a, mask)
						stRefused(t, fmt.Sprintf("Modify(%v)", mask), qp, before, err, b.String())
					}
				})
			})
		}
	}
}

// TestModifyAltPathRefused: IBV_QP_ALT_PATH is optional in the table but
// RoCE has no alternate path, and the kernel refuses it (_ib_modify_qp).
func TestModifyAltPathRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStEnv(t)
		for _, typ := range stTypes {
			for _, r := range stRules(typ) {
				if r.opt&mAlt == 0 {
					continue
				}
				qp := e.qpIn(typ, r.cur)
				before, _ := qp.Query()
				a := stAttr(r.cur, r.next)
				err := qp.Modify(&a, ibv.QPAttrState|r.req|mAlt)
				stRefused(t, fmt.Sprintf("%v %v->%v", typ, r.cur, r.next), qp, before, err, "IBV_QP_ALT_PATH")
			}
		}
	})
}

// TestModifyIllegalTransitions tries every (current, next) pair that is not
// in the table, with IBV_QP_STATE alone and with the attributes the next
// state normally needs: refused, state unchanged.
func TestModifyIllegalTransitions(t *testing.T) {
	all := append(append([]ibv.QPState{}, stReachable...), ibv.QPStateSQE)
	for _, typ := range stTypes {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newStEnv(t)
				n := 0
				for _, cur := range stReachable {
					for _, next := range all {
						if _, ok := stRuleFor(typ, cur, next); ok {
							continue
						}
						n++
						// The mask of the usual way into next, if there is one.
						var usual ibv.AttrMask
						for _, r := range stRules(typ) {
							if r.next == next && r.cur != next {
								usual |= r.req
							}
						}
						for _, mask := range []ibv.AttrMask{ibv.QPAttrState, ibv.QPAttrState | usual} {
							qp := e.qpIn(typ, cur)
							before, _ := qp.Query()
							a := stAttr(cur, next)
							err := qp.Modify(&a, mask)
							stRefused(t, fmt.Sprintf("%v->%v with %v", cur, next, mask), qp, before, err,
								fmt.Sprintf("%v->%v", cur, next))
						}
					}
				}
				// The examples of ibv_modify_qp(3) misuse must be among them.
				for _, p := range [][2]ibv.QPState{
					{ibv.QPStateReset, ibv.QPStateRTR}, {ibv.QPStateReset, ibv.QPStateRTS},
					{ibv.QPStateInit, ibv.QPStateRTS}, {ibv.QPStateRTR, ibv.QPStateInit},
					{ibv.QPStateErr, ibv.QPStateRTS}, {ibv.QPStateReset, ibv.QPStateErr},
					{ibv.QPStateRTS, ibv.QPStateRTR}, {ibv.QPStateSQD, ibv.QPStateInit},
				} {
					if _, ok := stRuleFor(typ, p[0], p[1]); ok {
						t.Errorf("%v->%v is in the legal table", p[0], p[1])
					}
				}
				if n < 20 {
					t.Errorf("tried %d illegal transitions, want at least 20", n)
				}
			})
		})
	}
}

// TestModifyWithoutState: a modify without IBV_QP_STATE keeps the state and
// follows the cur->cur cell: RTS takes its optional attributes, RTR none.
func TestModifyWithoutState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStEnv(t)
		for _, tc := range []struct {
			state ibv.QPState
			mask  ibv.AttrMask
			ok    bool
		}{
			{ibv.QPStateReset, 0, true},
			{ibv.QPStateInit, mAccess | mPKey, true},
			{ibv.QPStateRTS, mAccess | mRNRTmr, true},
			{ibv.QPStateRTR, mAccess, false},
			{ibv.QPStateRTS, mTimeout, false},
			{ibv.QPStateErr, mAccess, false},
		} {
			qp := e.qpIn(ibv.QPTypeRC, tc.state)
			before, _ := qp.Query()
			a := stAttr(tc.state, tc.state)
			a.State = ibv.QPStateInit // ignored without IBV_QP_STATE
			a.AccessFlags = ibv.AccessRemoteRead
			a.MinRNRTimer = 20
			err := qp.Modify(&a, tc.mask)
			if !tc.ok {
				stRefused(t, fmt.Sprintf("%v: Modify(%v)", tc.state, tc.mask), qp, before, err, tc.state.String())
				continue
			}
			if err != nil {
				t.Errorf("%v: Modify(%v) = %v, want nil", tc.state, tc.mask, err)
				continue
			}
			got, _ := qp.Query()
			if got.State != tc.state {
				t.Errorf("%v: Modify(%v) without IBV_QP_STATE moved the QP to %v", tc.state, tc.mask, got.State)
			}
			if tc.mask&mAccess != 0 && got.AccessFlags != ibv.AccessRemoteRead {
				t.Errorf("%v: access flags %#x, want %#x", tc.state, got.AccessFlags, ibv.AccessRemoteRead)
			}
			if tc.mask&mRNRTmr != 0 && got.MinRNRTimer != 20 {
				t.Errorf("%v: min_rnr_timer %d, want 20", tc.state, got.MinRNRTimer)
			}
		}
	})
}

// TestModifyCurState: IBV_QP_CUR_STATE must name the QP's state.
func TestModifyCurState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStEnv(t)
		qp := e.qpIn(ibv.QPTypeRC, ibv.QPStateRTR)
		r, _ := stRuleFor(ibv.QPTypeRC, ibv.QPStateRTR, ibv.QPStateRTS)
		before, _ := qp.Query()
		a := stAttr(ibv.QPStateInit, ibv.QPStateRTS) // wrong current state
		err := qp.Modify(&a, ibv.QPAttrState|r.req|mCur)
		stRefused(t, "RTR->RTS with cur_qp_state INIT", qp, before, err, "IBV_QP_CUR_STATE")
		a.CurState = ibv.QPStateRTR
		must(t, qp.Modify(&a, ibv.QPAttrState|r.req|mCur))
	})
}

// TestModifyValues refuses out-of-range values, naming the attribute, and
// accepts the extreme legal ones.
func TestModifyValues(t *testing.T) {
	type tc struct {
		name string
		typ  ibv.QPType
		cur  ibv.QPState // the QP is driven here; the modify goes to the rule's next
		next ibv.QPState
		set  func(a *ibv.QPAttr)
		attr string // "" = accepted
	}
	R, I, RTR, RTS := ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR, ibv.QPStateRTS
	rc, uc := ibv.QPTypeRC, ibv.QPTypeUC
	tcs := []tc{
		{"path MTU 0", rc, I, RTR, func(a *ibv.QPAttr) { a.PathMTU = 0 }, "IBV_QP_PATH_MTU"},
		{"path MTU 6", rc, I, RTR, func(a *ibv.QPAttr) { a.PathMTU = 6 }, "IBV_QP_PATH_MTU"},
		{"path MTU 4096", rc, I, RTR, func(a *ibv.QPAttr) { a.PathMTU = ibv.MTU4096 }, ""},
		{"path MTU 256", uc, I, RTR, func(a *ibv.QPAttr) { a.PathMTU = ibv.MTU256 }, ""},
		{"dest QPN 25 bits", rc, I, RTR, func(a *ibv.QPAttr) { a.DestQPN = 1 << 24 }, "IBV_QP_DEST_QPN"},
		{"dest QPN 24 bits", rc, I, RTR, func(a *ibv.QPAttr) { a.DestQPN = 1<<24 - 1 }, ""},
		{"RQ PSN 25 bits", uc, I, RTR, func(a *ibv.QPAttr) { a.RQPSN = 1 << 24 }, "IBV_QP_RQ_PSN"},
		{"max_dest_rd_atomic 129", rc, I, RTR, func(a *ibv.QPAttr) { a.MaxDestRdAtomic = 129 }, "IBV_QP_MAX_DEST_RD_ATOMIC"},
		{"max_dest_rd_atomic 128", rc, I, RTR, func(a *ibv.QPAttr) { a.MaxDestRdAtomic = 128 }, ""},
		{"min_rnr_timer 32", rc, I, RTR, func(a *ibv.QPAttr) { a.MinRNRTimer = 32 }, "IBV_QP_MIN_RNR_TIMER"},
		{"min_rnr_timer 31", rc, I, RTR, func(a *ibv.QPAttr) { a.MinRNRTimer = 31 }, ""},
		{"AV without GRH", rc, I, RTR, func(a *ibv.QPAttr) { a.AHAttr.IsGlobal = false }, "IBV_QP_AV"},
		{"AV without DGID", uc, I, RTR, func(a *ibv.QPAttr) { a.AHAttr.GRH.DGID = netip.Addr{} }, "IBV_QP_AV"},
		{"AV unspecified DGID", rc, I, RTR, func(a *ibv.QPAttr) { a.AHAttr.GRH.DGID = netip.IPv4Unspecified() }, "IBV_QP_AV"},
		{"AV multicast DGID", rc, I, RTR, func(a *ibv.QPAttr) { a.AHAttr.GRH.DGID = netip.MustParseAddr("224.0.0.1") }, "IBV_QP_AV"},
		{"AV IPv6 DGID on an IPv4 device", rc, I, RTR, func(a *ibv.QPAttr) { a.AHAttr.GRH.DGID = netip.MustParseAddr("fd00::2") }, "IBV_QP_AV"},
		{"AV IPv4-mapped DGID", rc, I, RTR, func(a *ibv.QPAttr) {
			a.AHAttr.GRH.DGID = netip.AddrFrom16(stPeer.As16())
		}, ""},
		{"AV port 2", rc, I, RTR, func(a *ibv.QPAttr) { a.AHAttr.PortNum = 2 }, "IBV_QP_AV"},
		{"timeout 32", rc, RTR, RTS, func(a *ibv.QPAttr) { a.Timeout = 32 }, "IBV_QP_TIMEOUT"},
		{"timeout 31", rc, RTR, RTS, func(a *ibv.QPAttr) { a.Timeout = 31 }, ""},
		{"timeout 0 (infinite)", rc, RTR, RTS, func(a *ibv.QPAttr) { a.Timeout = 0 }, ""},
		{"retry_cnt 8", rc, RTR, RTS, func(a *ibv.QPAttr) { a.RetryCnt = 8 }, "IBV_QP_RETRY_CNT"},
		{"retry_cnt 7", rc, RTR, RTS, func(a *ibv.QPAttr) { a.RetryCnt = 7 }, ""},
		{"rnr_retry 8", rc, RTR, RTS, func(a *ibv.QPAttr) { a.RNRRetry = 8 }, "IBV_QP_RNR_RETRY"},
		{"max_rd_atomic 129", rc, RTR, RTS, func(a *ibv.QPAttr) { a.MaxRdAtomic = 129 }, "IBV_QP_MAX_QP_RD_ATOMIC"},
		{"max_rd_atomic 255", rc, RTR, RTS, func(a *ibv.QPAttr) { a.MaxRdAtomic = 255 }, "IBV_QP_MAX_QP_RD_ATOMIC"},
		{"max_rd_atomic 128", rc, RTR, RTS, func(a *ibv.QPAttr) { a.MaxRdAtomic = 128 }, ""},
		{"SQ PSN 25 bits", uc, RTR, RTS, func(a *ibv.QPAttr) { a.SQPSN = 1 << 24 }, "IBV_QP_SQ_PSN"},
		{"port 2", rc, R, I, func(a *ibv.QPAttr) { a.PortNum = 2 }, "IBV_QP_PORT"},
		{"port 0", uc, R, I, func(a *ibv.QPAttr) { a.PortNum = 0 }, "IBV_QP_PORT"},
		{"pkey index 1", rc, R, I, func(a *ibv.QPAttr) { a.PKeyIndex = 1 }, "IBV_QP_PKEY_INDEX"},
		{"state 7", rc, R, 7, func(a *ibv.QPAttr) {}, "out of range"},
		{"state 200", rc, RTS, 200, func(a *ibv.QPAttr) {}, "out of range"},
	}
	synctest.Test(t, func(t *testing.T) {
		e := newStEnv(t)
		for _, c := range tcs {
			qp := e.qpIn(c.typ, c.cur)
			r, ok := stRuleFor(c.typ, c.cur, c.next)
			mask := ibv.QPAttrState | r.req
			if !ok {
				mask = ibv.QPAttrState
			}
			a := stAttr(c.cur, c.next)
			c.set(&a)
			before, _ := qp.Query()
			err := qp.Modify(&a, mask)
			if c.attr == "" {
				if err != nil {
					t.Errorf("%s: Modify = %v, want nil", c.name, err)
				}
				continue
			}
			stRefused(t, c.name, qp, before, err, c.attr)
		}
	})
}

// TestModifyNilAttr: a nil attribute struct is refused, not a panic; with
// an empty mask there is nothing to read and the modify is a no-op.
func TestModifyNilAttr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStEnv(t)
		qp := e.qp(ibv.QPTypeRC)
		before, _ := qp.Query()
		stRefused(t, "Modify(nil, IBV_QP_STATE)", qp, before, qp.Modify(nil, ibv.QPAttrState), "no attributes")
		if err := qp.Modify(nil, 0); err != nil {
			t.Errorf("Modify(nil, 0) in RESET = %v, want nil", err)
		}
	})
}

// TestModifyQuery: Query returns what the modifies set, with max_rd_atomic
// and max_dest_rd_atomic rounded up to powers of two (rxe_qp_from_attr).
func TestModifyQuery(t *testing.T) {
	for _, typ := range stTypes {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newStEnv(t)
				qp := e.qpIn(typ, ibv.QPStateRTS)
				got, init := qp.Query()
				want := stAttr(ibv.QPStateRTS, ibv.QPStateRTS)
				check := func(name string, got, want any) {
					t.Helper()
					if got != want {
						t.Errorf("%v: Query %s = %v, want %v", typ, name, got, want)
					}
				}
				check("state", got.State, ibv.QPStateRTS)
				check("cur_state", got.CurState, ibv.QPStateRTS)
				check("path_mtu", got.PathMTU, want.PathMTU)
				check("dest_qp_num", got.DestQPN, want.DestQPN)
				check("rq_psn", got.RQPSN, want.RQPSN)
				check("sq_psn", got.SQPSN, want.SQPSN)
				check("port_num", got.PortNum, want.PortNum)
				check("pkey_index", got.PKeyIndex, want.PKeyIndex)
				check("qp_access_flags", got.AccessFlags, want.AccessFlags)
				check("ah_attr", got.AHAttr, want.AHAttr)
				if typ == ibv.QPTypeRC {
					check("timeout", got.Timeout, want.Timeout)
					check("retry_cnt", got.RetryCnt, want.RetryCnt)
					check("rnr_retry", got.RNRRetry, want.RNRRetry)
					check("min_rnr_timer", got.MinRNRTimer, want.MinRNRTimer)
					check("max_rd_atomic (3 rounded up)", got.MaxRdAtomic, uint8(4))
					check("max_dest_rd_atomic (5 rounded up)", got.MaxDestRdAtomic, uint8(8))
				}
				check("init type", init.Type, typ)
				check("cap.max_send_wr", got.Cap.MaxSendWR, uint32(16))
				check("init cap", init.Cap, got.Cap)

				// RTS->RTS changes what it allows and keeps the rest.
				a := ibv.QPAttr{AccessFlags: ibv.AccessRemoteWrite}
				must(t, qp.Modify(&a, ibv.QPAttrAccessFlags))
				got2, _ := qp.Query()
				check("access after RTS->RTS", got2.AccessFlags, ibv.AccessRemoteWrite)
				check("sq_psn after RTS->RTS", got2.SQPSN, want.SQPSN)

				// Rounding: 1 stays 1, 128 stays 128, 65 becomes 128.
				if typ == ibv.QPTypeRC {
					for _, v := range []struct{ in, out uint8 }{{0, 0}, {1, 1}, {2, 2}, {65, 128}, {128, 128}} {
						q := e.qpIn(typ, ibv.QPStateRTR)
						r, _ := stRuleFor(typ, ibv.QPStateRTR, ibv.QPStateRTS)
						a := stAttr(ibv.QPStateRTR, ibv.QPStateRTS)
						a.MaxRdAtomic = v.in
						must(t, q.Modify(&a, ibv.QPAttrState|r.req))
						if g, _ := q.Query(); g.MaxRdAtomic != v.out {
							t.Errorf("max_rd_atomic %d: Query = %d, want %d", v.in, g.MaxRdAtomic, v.out)
						}
					}
				}
			})
		})
	}
}

// TestModifyResetAndBack: RESET->RESET is fine, every state returns to
// RESET, and the QP can be brought up again.
func TestModifyResetAndBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStEnv(t)
		for _, typ := range stTypes {
			qp := e.qp(typ)
			reset := ibv.QPAttr{State: ibv.QPStateReset}
			must(t, qp.Modify(&reset, ibv.QPAttrState))
			must(t, qp.Modify(&reset, ibv.QPAttrState))
			for _, s := range stReachable {
				e.drive(qp, typ, s)
				must(t, qp.Modify(&reset, ibv.QPAttrState))
				if got := qp.State(); got != ibv.QPStateReset {
					t.Errorf("%v from %v to RESET: state %v", typ, s, got)
				}
			}
		}
	})
}

// TestResetCleansCQ: a QP entering RESET takes its completions out of its
// CQs, as libmlx5 does (pyverbs' test_mr_rereg_addr takes a failed QP
// through RESET back to RTS and must not poll the old flushed receive);
// another QP's completions in the same CQ stay, in order.
func TestResetCleansCQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStEnv(t)
		a := e.qpIn(ibv.QPTypeRC, ibv.QPStateRTR)
		b := e.qpIn(ibv.QPTypeRC, ibv.QPStateRTR)
		for i, q := range []*verbs.QP{a, b, a, b} {
			must(t, second(q.PostRecv(ibv.RecvWR{WRID: uint64(i)})))
		}
		toErr := ibv.QPAttr{State: ibv.QPStateErr}
		must(t, a.Modify(&toErr, ibv.QPAttrState))
		must(t, b.Modify(&toErr, ibv.QPAttrState))
		must(t, second(a.PostSend(ibv.SendWR{WRID: 9, Opcode: ibv.WRSend, Flags: ibv.SendSignaled})))
		synctest.Wait()
		reset := ibv.QPAttr{State: ibv.QPStateReset}
		must(t, a.Modify(&reset, ibv.QPAttrState))
		wc := make([]ibv.WorkCompletion, 8)
		n := e.cq.Poll(wc)
		var got []uint64
		for _, c := range wc[:n] {
			if c.QPNum != b.QPN() || c.Status != ibv.WCWRFlushErr {
				t.Errorf("after RESET of QP %#x: completion %+v, want only QP %#x's flushes", a.QPN(), c, b.QPN())
			}
			got = append(got, c.WRID)
		}
		if len(got) != 2 || got[0] != 1 || got[1] != 3 {
			t.Errorf("after RESET: WR IDs %v, want QP b's 1 and 3 in order", got)
		}
		// Up again, the QP's new completions are its own and only them.
		e.drive(a, ibv.QPTypeRC, ibv.QPStateRTR)
		must(t, second(a.PostRecv(ibv.RecvWR{WRID: 20})))
		must(t, a.Modify(&toErr, ibv.QPAttrState))
		synctest.Wait()
		if n := e.cq.Poll(wc); n != 1 || wc[0].WRID != 20 || wc[0].Status != ibv.WCWRFlushErr {
			t.Errorf("second stay: %d completions %+v, want the flush of WR 20", n, wc[:n])
		}
	})
}

// TestModifySQD: RTS->SQD with IBV_QP_EN_SQD_ASYNC_NOTIFY drains (nothing
// is outstanding) and reports IBV_EVENT_SQ_DRAINED; SQD->RTS resumes.
func TestModifySQD(t *testing.T) {
	for _, typ := range stTypes {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newStEnv(t)
				qp := e.qpIn(typ, ibv.QPStateRTS)
				e.dev.AsyncEvents() // drop PORT_ACTIVE
				a := ibv.QPAttr{State: ibv.QPStateSQD, EnSQDAsyncNotify: true}
				must(t, qp.Modify(&a, ibv.QPAttrState|ibv.QPAttrEnSQDAsyncNotify))
				synctest.Wait()
				got, _ := qp.Query()
				if got.State != ibv.QPStateSQD || got.SQDraining {
					t.Errorf("after RTS->SQD: state %v sq_draining %v, want SQD false", got.State, got.SQDraining)
				}
				evs, _ := e.dev.AsyncEvents()
				found := false
				for _, ev := range evs {
					found = found || ev.Type == ibv.EventSQDrained && ev.QPN == qp.QPN()
				}
				if !found {
					t.Errorf("async events %+v, want SQ_DRAINED for QP %#x", evs, qp.QPN())
				}
				a = ibv.QPAttr{State: ibv.QPStateRTS}
				must(t, qp.Modify(&a, ibv.QPAttrState))
				if s := qp.State(); s != ibv.QPStateRTS {
					t.Errorf("after SQD->RTS: state %v", s)
				}
			})
		})
	}
}

// TestQPDestroyTwice: the second Destroy is refused, and so is every use
// of the destroyed QP.
func TestQPDestroyTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStEnv(t)
		qp, err := e.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq})
		must(t, err)
		e.drive(qp, ibv.QPTypeRC, ibv.QPStateRTS)
		must(t, qp.Destroy())
		for name, err := range map[string]error{
			"Destroy":  qp.Destroy(),
			"Modify":   qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState),
			"PostSend": second(qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend})),
			"PostRecv": second(qp.PostRecv(ibv.RecvWR{})),
		} {
			if !errors.Is(err, verbs.EINVAL) || !strings.Contains(err.Error(), "destroyed") {
				t.Errorf("%s after Destroy = %v, want EINVAL saying destroyed", name, err)
			}
		}
		// The CQ and PD are free again.
		must(t, e.cq.Destroy())
		must(t, e.pd.Dealloc())
	})
}

func second(_ int, err error) error { return err }
