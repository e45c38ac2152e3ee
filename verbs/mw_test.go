package verbs_test

// Memory windows through the verbs API: type-1 binds with QP.BindMW,
// type-2 binds with BIND_MW work requests, every bind rule of IBA
// chapter 10.6.7 (C10-72..75, o10-36.2.2, o10-37.2.26/30/40), remote
// access through a window, and remote access after the window was
// invalidated, unbound or freed, refused with nothing written. The
// helpers at the top serve the fast-registration, FLUSH/ATOMIC WRITE and
// opcode tests too.

import (
	"bytes"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// mside is one side of a memory-operation test: a device whose link
// endpoint the test keeps (to inject datagrams as that device), a PD, one
// CQ for both queues, a QP and a 64 KiB MR.
type mside struct {
	dev *verbs.Device
	ep  *fabric.Endpoint
	pd  *verbs.PD
	cq  *verbs.CQ
	qp  *verbs.QP
	buf []byte
	mr  *verbs.MR
}

// mopts configures mpair; zero fields take the defaults in brackets.
type mopts struct {
	typ         ibv.QPType         // [RC]
	qpAccess    ibv.Access         // QP access flags [REMOTE_WRITE|READ|ATOMIC; UC: REMOTE_WRITE]
	mrAccess    ibv.Access         // the MRs' access [LOCAL_WRITE|REMOTE_*|MW_BIND]
	ops         verbs.SendOpsFlags // send_ops_flags of the QPs
	timeout     uint8              // [14]
	maxRdAtomic uint8              // requester's max_rd_atomic [16]
	maxInline   uint32             // [64]
}

var (
	mAddrA = netip.MustParseAddr("10.0.0.1")
	mAddrB = netip.MustParseAddr("10.0.0.2")
)

const mAllMR = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead |
	ibv.AccessRemoteAtomic | ibv.AccessMWBind

// mpair makes two sides on f, a at 10.0.0.1 and b at 10.0.0.2, with their
// QPs connected (RC or UC) or in RTS (UD).
func mpair(t testing.TB, f *fabric.Fabric, o mopts) (a, b *mside) {
	t.Helper()
	if o.typ == 0 {
		o.typ = ibv.QPTypeRC
	}
	if o.mrAccess == 0 {
		o.mrAccess = mAllMR
	}
	a, b = mnewSide(t, f, mAddrA, o), mnewSide(t, f, mAddrB, o)
	if o.typ == ibv.QPTypeUD {
		udToRTS(t, a.qp, 0x1111)
		udToRTS(t, b.qp, 0x1111)
		return a, b
	}
	mconnect(t, a.qp, b.qp, b.dev.Addr(), o)
	mconnect(t, b.qp, a.qp, a.dev.Addr(), o)
	return a, b
}

func mnewSide(t testing.TB, f *fabric.Fabric, addr netip.Addr, o mopts) *mside {
	t.Helper()
	ep, err := f.Attach(addr)
	must(t, err)
	dev, err := verbs.Open(verbs.Config{Link: ep})
	must(t, err)
	t.Cleanup(func() { dev.Close() })
	s := &mside{dev: dev, ep: ep, buf: make([]byte, 1<<16)}
	s.pd, err = dev.AllocPD()
	must(t, err)
	s.cq, err = dev.CreateCQ(1024, nil)
	must(t, err)
	s.mr, err = s.pd.RegMR(s.buf, o.mrAccess)
	must(t, err)
	s.qp = mnewQP(t, s, s.pd, o)
	return s
}

// mnewQP makes a QP of pd on s's device, using s's CQ, in RESET.
func mnewQP(t testing.TB, s *mside, pd *verbs.PD, o mopts) *verbs.QP {
	t.Helper()
	if o.typ == 0 {
		o.typ = ibv.QPTypeRC
	}
	if o.maxInline == 0 {
		o.maxInline = 64
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: o.typ, SendCQ: s.cq, RecvCQ: s.cq, SendOpsFlags: o.ops,
		Cap: ibv.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: o.maxInline}})
	must(t, err)
	return qp
}

// mconnect moves qp to RTS towards peer (a QP of the device at dst).
func mconnect(t testing.TB, qp, peer *verbs.QP, dst netip.Addr, o mopts) {
	t.Helper()
	rc := o.typ != ibv.QPTypeUC
	access := o.qpAccess
	if access == 0 {
		access = ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
		if !rc {
			access = ibv.AccessRemoteWrite
		}
	}
	must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, AccessFlags: access},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
	rtr := ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: peer.QPN(),
		MaxDestRdAtomic: 16, MinRNRTimer: 12,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: dst, HopLimit: 64}}}
	mask := ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN
	if rc {
		mask |= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
	}
	must(t, qp.Modify(&rtr, mask))
	rts := ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16}
	if o.timeout != 0 {
		rts.Timeout = o.timeout
	}
	if o.maxRdAtomic != 0 {
		rts.MaxRdAtomic = o.maxRdAtomic
	}
	mask = ibv.QPAttrState | ibv.QPAttrSQPSN
	if rc {
		mask |= ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic
	}
	must(t, qp.Modify(&rts, mask))
}

// mlink makes a second connected QP pair between a and b, a's in PD pa
// and b's in PD pb.
func mlink(t testing.TB, a, b *mside, pa, pb *verbs.PD, o mopts) (qa, qb *verbs.QP) {
	t.Helper()
	qa, qb = mnewQP(t, a, pa, o), mnewQP(t, b, pb, o)
	mconnect(t, qa, qb, b.dev.Addr(), o)
	mconnect(t, qb, qa, a.dev.Addr(), o)
	return qa, qb
}

// mpost posts wrs on qp, failing the test on error.
func mpost(t testing.TB, qp *verbs.QP, wrs ...ibv.SendWR) {
	t.Helper()
	if _, err := qp.PostSend(wrs...); err != nil {
		t.Fatalf("post send: %v", err)
	}
}

// mwrite is a signaled RDMA WRITE of a.buf[off:off+n] to addr under rkey.
func mwrite(a *mside, wrid uint64, off, n int, rkey uint32, addr uint64) ibv.SendWR {
	return ibv.SendWR{WRID: wrid, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(off, n)}, RKey: rkey, RemoteAddr: addr}
}

// mread is a signaled RDMA READ of n bytes at addr under rkey into
// a.buf[off:].
func mread(a *mside, wrid uint64, off, n int, rkey uint32, addr uint64) ibv.SendWR {
	w := mwrite(a, wrid, off, n, rkey, addr)
	w.Opcode = ibv.WRRDMARead
	return w
}

// mone waits for one completion on s's CQ and checks it.
func mone(t testing.TB, s *mside, wrid uint64, st ibv.WCStatus, op ibv.WCOpcode) ibv.WorkCompletion {
	t.Helper()
	wc := waitWC(t, s.cq, 1)[0]
	wantWC(t, wc, wrid, st, op)
	return wc
}

// mrefusedWrite posts a WRITE of 64 bytes of pattern from a to addr under
// rkey and checks that it fails with want and that b's whole buffer is as
// before.
func mrefusedWrite(t testing.TB, a, b *mside, rkey uint32, addr uint64, want ibv.WCStatus) {
	t.Helper()
	before := bytes.Clone(b.buf)
	fill(a.buf[:64], 0x5a)
	mpost(t, a.qp, mwrite(a, 901, 0, 64, rkey, addr))
	mone(t, a, 901, want, ibv.WCRDMAWrite)
	settle(time.Millisecond)
	if !bytes.Equal(b.buf, before) {
		t.Errorf("refused WRITE changed the target buffer: %s", firstDiff(b.buf, before))
	}
}

// mbind binds the type-1 window mw on s's QP and waits for the completion.
func mbind(t testing.TB, s *mside, mw *verbs.MW, mr *verbs.MR, off, n int, access ibv.Access) uint32 {
	t.Helper()
	rkey, err := s.qp.BindMW(mw, verbs.MWBind{WRID: 77, SendFlags: ibv.SendSignaled,
		BindInfo: verbs.MWBindInfo{MR: mr, Addr: mr.Addr() + uint64(off), Length: uint64(n), Access: access}})
	must(t, err)
	mone(t, s, 77, ibv.WCSuccess, ibv.WCBindMW)
	return rkey
}

// mbind2 binds the type-2 window mw with a BIND_MW work request on qp of
// s and waits for the completion.
func mbind2(t testing.TB, s *mside, qp *verbs.QP, mw *verbs.MW, mr *verbs.MR, off, n int, access ibv.Access) uint32 {
	t.Helper()
	rkey := verbs.IncKey(mw.RKey())
	mpost(t, qp, verbs.BindMWWR(78, ibv.SendSignaled, mw, rkey,
		verbs.MWBindInfo{MR: mr, Addr: mr.Addr() + uint64(off), Length: uint64(n), Access: access}))
	mone(t, s, 78, ibv.WCSuccess, ibv.WCBindMW)
	if mw.RKey() != rkey {
		t.Errorf("MW.RKey after the bind: %#x, want %#x", mw.RKey(), rkey)
	}
	return rkey
}

func mallocMW(t testing.TB, s *mside, typ verbs.MWType) *verbs.MW {
	t.Helper()
	mw, err := s.pd.AllocMW(typ)
	must(t, err)
	return mw
}

const mwOff, mwLen = 4096, 256 // the window's place in b's MR

// TestMWAccess: remote READ and WRITE through a bound window of either
// type work inside it; outside it, with a right it lacks (though its MR
// has it), or through a type-2 window bound to another QP they fail with
// a remote access error and write nothing.
func TestMWAccess(t *testing.T) {
	rw := ibv.AccessRemoteWrite | ibv.AccessRemoteRead
	type tc struct {
		name   string
		typ    verbs.MWType
		access ibv.Access
		off, n int // of the WRITE, relative to the window's start
		ok     bool
	}
	tcs := []tc{
		{"type 1 inside", verbs.MWType1, rw, 0, mwLen, true},
		{"type 2 inside", verbs.MWType2, rw, 16, 64, true},
		{"type 1 before the window", verbs.MWType1, rw, -8, 16, false},
		{"type 2 across the end", verbs.MWType2, rw, mwLen - 8, 16, false},
		{"type 1 read-only window", verbs.MWType1, ibv.AccessRemoteRead, 0, 8, false},
		{"type 2 read-only window", verbs.MWType2, ibv.AccessRemoteRead, 0, 8, false},
	}
	for _, c := range tcs {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := mpair(t, f, mopts{})
				fill(b.buf, 3)
				mw := mallocMW(t, b, c.typ)
				var rkey uint32
				if c.typ == verbs.MWType1 {
					rkey = mbind(t, b, mw, b.mr, mwOff, mwLen, c.access)
				} else {
					rkey = mbind2(t, b, b.qp, mw, b.mr, mwOff, mwLen, c.access)
				}
				if rkey>>8 == b.mr.RKey()>>8 || rkey == 0 {
					t.Fatalf("window rkey %#x", rkey)
				}
				addr := b.mr.Addr() + uint64(mwOff+c.off)
				if !c.ok {
					mrefusedWrite(t, a, b, rkey, addr, ibv.WCRemAccessErr)
					return
				}
				fill(a.buf[:c.n], 99)
				mpost(t, a.qp, mwrite(a, 1, 0, c.n, rkey, addr))
				mone(t, a, 1, ibv.WCSuccess, ibv.WCRDMAWrite)
				checkBytes(t, "written through the window", b.buf[mwOff+c.off:mwOff+c.off+c.n], a.buf[:c.n])
				mpost(t, a.qp, mread(a, 2, 8192, mwLen, rkey, b.mr.Addr()+mwOff))
				mone(t, a, 2, ibv.WCSuccess, ibv.WCRDMARead)
				checkBytes(t, "read through the window", a.buf[8192:8192+mwLen], b.buf[mwOff:mwOff+mwLen])
			})
		})
	}
}

// TestMWType2BoundToQP: a type-2 window is usable only on the QP that
// bound it (IBA 10.6.7.2.2 type 2B; rxe_lookup_mw "mw->qp != qp"); a
// type-1 window on any QP of its PD.
func TestMWType2BoundToQP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		qa2, qb2 := mlink(t, a, b, a.pd, b.pd, mopts{})
		rw := ibv.AccessRemoteWrite | ibv.AccessRemoteRead
		mw1 := mallocMW(t, b, verbs.MWType1)
		k1 := mbind(t, b, mw1, b.mr, 0, 1024, rw)
		mw2 := mallocMW(t, b, verbs.MWType2)
		k2 := mbind2(t, b, qb2, mw2, b.mr, mwOff, mwLen, rw)

		// Through the second pair, both work.
		mpost(t, qa2, mwrite(a, 1, 0, 8, k1, b.mr.Addr()), mwrite(a, 2, 0, 8, k2, b.mr.Addr()+mwOff))
		got := waitWC(t, a.cq, 2)
		wantWC(t, got[0], 1, ibv.WCSuccess, ibv.WCRDMAWrite)
		wantWC(t, got[1], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		// Through the first pair, the type-1 window works, the type-2 one
		// (bound through qb2) is refused.
		mpost(t, a.qp, mwrite(a, 3, 0, 8, k1, b.mr.Addr()+8))
		mone(t, a, 3, ibv.WCSuccess, ibv.WCRDMAWrite)
		mrefusedWrite(t, a, b, k2, b.mr.Addr()+mwOff, ibv.WCRemAccessErr)
	})
}

// TestMWBindRules: every bind rule, each refused with a MW_BIND_ERR
// completion that moves the QP to ERR (rxe_req.c rxe_do_local_ops), or
// at the call for what ibv_bind_mw checks itself; the window keeps
// granting nothing new.
func TestMWBindRules(t *testing.T) {
	rw := ibv.AccessRemoteWrite | ibv.AccessRemoteRead
	type env struct {
		a, b *mside
		f    *fabric.Fabric
	}
	type tc struct {
		name string
		// bind posts the refused bind on a QP of b and returns that QP
		// (nil if the call itself must fail).
		bind func(t *testing.T, e env) *verbs.QP
	}
	otherPD := func(t *testing.T, e env) (*verbs.PD, *verbs.QP) {
		pd2, err := e.b.dev.AllocPD()
		must(t, err)
		_, q := mlink(t, e.a, e.b, e.a.pd, pd2, mopts{})
		return pd2, q
	}
	regMR := func(t *testing.T, e env, pd *verbs.PD, access ibv.Access) *verbs.MR {
		mr, err := pd.RegMR(make([]byte, 4096), access)
		must(t, err)
		return mr
	}
	bind2 := func(t *testing.T, qp *verbs.QP, mw *verbs.MW, mr *verbs.MR, off, n uint64, access ibv.Access) *verbs.QP {
		mpost(t, qp, verbs.BindMWWR(5, ibv.SendSignaled, mw, verbs.IncKey(mw.RKey()),
			verbs.MWBindInfo{MR: mr, Addr: mr.Addr() + off, Length: n, Access: access}))
		return qp
	}
	bind1 := func(t *testing.T, qp *verbs.QP, mw *verbs.MW, mr *verbs.MR, off, n uint64, access ibv.Access) *verbs.QP {
		_, err := qp.BindMW(mw, verbs.MWBind{WRID: 5, SendFlags: ibv.SendSignaled,
			BindInfo: verbs.MWBindInfo{MR: mr, Addr: mr.Addr() + off, Length: n, Access: access}})
		must(t, err)
		return qp
	}
	tcs := []tc{
		{"C10-72 type 2 from a QP of another PD", func(t *testing.T, e env) *verbs.QP {
			_, q := otherPD(t, e)
			return bind2(t, q, mallocMW(t, e.b, verbs.MWType2), e.b.mr, 0, 64, rw)
		}},
		{"C10-72 type 1 from a QP of another PD", func(t *testing.T, e env) *verbs.QP {
			_, q := otherPD(t, e)
			return bind1(t, q, mallocMW(t, e.b, verbs.MWType1), e.b.mr, 0, 64, rw)
		}},
		{"C10-72 MR of another PD", func(t *testing.T, e env) *verbs.QP {
			pd2, _ := otherPD(t, e)
			return bind2(t, e.b.qp, mallocMW(t, e.b, verbs.MWType2), regMR(t, e, pd2, mAllMR), 0, 64, rw)
		}},
		{"C10-73 MR without MW_BIND", func(t *testing.T, e env) *verbs.QP {
			mr := regMR(t, e, e.b.pd, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead)
			return bind1(t, e.b.qp, mallocMW(t, e.b, verbs.MWType1), mr, 0, 64, ibv.AccessRemoteRead)
		}},
		{"C10-74 writable window on an MR without LOCAL_WRITE", func(t *testing.T, e env) *verbs.QP {
			mr := regMR(t, e, e.b.pd, ibv.AccessRemoteRead|ibv.AccessMWBind)
			return bind2(t, e.b.qp, mallocMW(t, e.b, verbs.MWType2), mr, 0, 64, ibv.AccessRemoteWrite)
		}},
		{"C10-74 atomic window on an MR without LOCAL_WRITE", func(t *testing.T, e env) *verbs.QP {
			mr := regMR(t, e, e.b.pd, ibv.AccessRemoteRead|ibv.AccessMWBind)
			return bind1(t, e.b.qp, mallocMW(t, e.b, verbs.MWType1), mr, 0, 64, ibv.AccessRemoteAtomic)
		}},
		{"C10-75 range past the MR", func(t *testing.T, e env) *verbs.QP {
			return bind1(t, e.b.qp, mallocMW(t, e.b, verbs.MWType1), e.b.mr, uint64(len(e.b.buf))-32, 64, rw)
		}},
		{"C10-75 range before the MR", func(t *testing.T, e env) *verbs.QP {
			mr := e.b.mr
			mpost(t, e.b.qp, verbs.BindMWWR(5, ibv.SendSignaled, mallocMW(t, e.b, verbs.MWType2), 0x77,
				verbs.MWBindInfo{MR: mr, Addr: mr.Addr() - 8, Length: 64, Access: rw}))
			return e.b.qp
		}},
		{"o10-36.2.2 type 1 zero-based by work request", func(t *testing.T, e env) *verbs.QP {
			mw := mallocMW(t, e.b, verbs.MWType1)
			mpost(t, e.b.qp, verbs.BindMWWR(5, ibv.SendSignaled, mw, verbs.IncKey(mw.RKey()),
				verbs.MWBindInfo{MR: e.b.mr, Addr: e.b.mr.Addr(), Length: 64, Access: rw | ibv.AccessZeroBased}))
			return e.b.qp
		}},
		{"o10-36.2.2 type 1 zero-based by ibv_bind_mw", func(t *testing.T, e env) *verbs.QP {
			_, err := e.b.qp.BindMW(mallocMW(t, e.b, verbs.MWType1), verbs.MWBind{
				BindInfo: verbs.MWBindInfo{MR: e.b.mr, Addr: e.b.mr.Addr(), Length: 64, Access: rw | ibv.AccessZeroBased}})
			apiWantErr(t, "BindMW zero-based", err, "o10-36.2.2", verbs.EINVAL)
			return nil
		}},
		{"type 2 by ibv_bind_mw", func(t *testing.T, e env) *verbs.QP {
			_, err := e.b.qp.BindMW(mallocMW(t, e.b, verbs.MWType2), verbs.MWBind{
				BindInfo: verbs.MWBindInfo{MR: e.b.mr, Addr: e.b.mr.Addr(), Length: 64, Access: rw}})
			apiWantErr(t, "BindMW of a type-2 window", err, "type-1", verbs.EINVAL)
			return nil
		}},
		{"o10-37.2.40 type 2 of length 0", func(t *testing.T, e env) *verbs.QP {
			return bind2(t, e.b.qp, mallocMW(t, e.b, verbs.MWType2), e.b.mr, 0, 0, rw)
		}},
		{"o10-37.2.30 type 2 bound already", func(t *testing.T, e env) *verbs.QP {
			mw := mallocMW(t, e.b, verbs.MWType2)
			mbind2(t, e.b, e.b.qp, mw, e.b.mr, 0, 64, rw)
			return bind2(t, e.b.qp, mw, e.b.mr, 64, 64, rw)
		}},
		{"zero-based MR", func(t *testing.T, e env) *verbs.QP {
			mr := regMR(t, e, e.b.pd, mAllMR|ibv.AccessZeroBased)
			return bind1(t, e.b.qp, mallocMW(t, e.b, verbs.MWType1), mr, 0, 64, rw)
		}},
		{"deregistered MR", func(t *testing.T, e env) *verbs.QP {
			mr := regMR(t, e, e.b.pd, mAllMR)
			must(t, mr.Dereg())
			return bind2(t, e.b.qp, mallocMW(t, e.b, verbs.MWType2), mr, 0, 64, rw)
		}},
		{"deallocated window", func(t *testing.T, e env) *verbs.QP {
			mw := mallocMW(t, e.b, verbs.MWType2)
			must(t, mw.Dealloc())
			return bind2(t, e.b.qp, mw, e.b.mr, 0, 64, rw)
		}},
		{"window of another device", func(t *testing.T, e env) *verbs.QP {
			return bind2(t, e.b.qp, mallocMW(t, e.a, verbs.MWType2), e.b.mr, 0, 64, rw)
		}},
		{"unsupported access flag", func(t *testing.T, e env) *verbs.QP {
			return bind2(t, e.b.qp, mallocMW(t, e.b, verbs.MWType2), e.b.mr, 0, 64, 1<<15)
		}},
	}
	for _, c := range tcs {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := mpair(t, f, mopts{})
				fill(b.buf, 1)
				before := bytes.Clone(b.buf)
				qp := c.bind(t, env{a, b, f})
				if qp == nil {
					noWC(t, b.cq, time.Millisecond)
					wantState(t, "b", &end{qp: b.qp}, ibv.QPStateRTS)
					return
				}
				mone(t, b, 5, ibv.WCMWBindErr, ibv.WCBindMW)
				if s := qp.State(); s != ibv.QPStateErr {
					t.Errorf("QP state after MW_BIND_ERR: %v, want ERR", s)
				}
				if !bytes.Equal(b.buf, before) {
					t.Errorf("refused bind changed memory")
				}
			})
		})
	}
}

// TestMWInvalidated: after LOCAL_INV of a type-2 window, a SEND with
// Invalidate of it, deallocation, a type-1 unbind or rebind, the old rkey
// grants nothing and a WRITE through it writes nothing.
func TestMWInvalidated(t *testing.T) {
	rw := ibv.AccessRemoteWrite | ibv.AccessRemoteRead
	type tc struct {
		name string
		typ  verbs.MWType
		// kill ends the window's binding; a is the peer, b the owner.
		kill func(t *testing.T, a, b *mside, mw *verbs.MW, rkey uint32)
	}
	tcs := []tc{
		{"LOCAL_INV", verbs.MWType2, func(t *testing.T, a, b *mside, mw *verbs.MW, rkey uint32) {
			mpost(t, b.qp, ibv.SendWR{WRID: 6, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: rkey})
			mone(t, b, 6, ibv.WCSuccess, ibv.WCLocalInv)
			if mw.RKey() != rkey {
				t.Errorf("invalidation changed the rkey: %#x, want %#x kept", mw.RKey(), rkey)
			}
		}},
		{"SEND_WITH_INV", verbs.MWType2, func(t *testing.T, a, b *mside, mw *verbs.MW, rkey uint32) {
			postRecvMS(t, b, 40, 32768, 64)
			copy(a.buf[1024:], "invalidate it")
			mpost(t, a.qp, ibv.SendWR{WRID: 6, Opcode: ibv.WRSendWithInv, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(1024, 13)}, InvRKey: rkey})
			mone(t, a, 6, ibv.WCSuccess, ibv.WCSend)
			wc := mone(t, b, 40, ibv.WCSuccess, ibv.WCRecv)
			if wc.Flags&ibv.WCWithInv == 0 || wc.Imm != rkey || wc.ByteLen != 13 {
				t.Errorf("receive of SEND_WITH_INV: %+v, want IBV_WC_WITH_INV, invalidated rkey %#x, 13 bytes", wc, rkey)
			}
			if string(b.buf[32768:32768+13]) != "invalidate it" {
				t.Errorf("SEND_WITH_INV data: %q", b.buf[32768:32768+13])
			}
		}},
		{"dealloc type 2", verbs.MWType2, func(t *testing.T, a, b *mside, mw *verbs.MW, rkey uint32) {
			must(t, mw.Dealloc())
			apiWantErr(t, "second Dealloc", mw.Dealloc(), "", verbs.EINVAL)
		}},
		{"dealloc type 1", verbs.MWType1, func(t *testing.T, a, b *mside, mw *verbs.MW, rkey uint32) {
			must(t, mw.Dealloc())
		}},
		{"type 1 unbound", verbs.MWType1, func(t *testing.T, a, b *mside, mw *verbs.MW, rkey uint32) {
			k, err := b.qp.BindMW(mw, verbs.MWBind{WRID: 6, SendFlags: ibv.SendSignaled})
			must(t, err)
			mone(t, b, 6, ibv.WCSuccess, ibv.WCBindMW)
			if k == rkey || mw.RKey() != k {
				t.Errorf("unbind: rkey %#x (was %#x), MW.RKey %#x", k, rkey, mw.RKey())
			}
		}},
		{"type 1 rebound", verbs.MWType1, func(t *testing.T, a, b *mside, mw *verbs.MW, rkey uint32) {
			k := mbind(t, b, mw, b.mr, mwOff+mwLen, mwLen, rw)
			if k == rkey {
				t.Fatalf("rebind kept rkey %#x", k)
			}
			mpost(t, a.qp, mwrite(a, 7, 0, 8, k, b.mr.Addr()+mwOff+mwLen))
			mone(t, a, 7, ibv.WCSuccess, ibv.WCRDMAWrite)
		}},
	}
	for _, c := range tcs {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := mpair(t, f, mopts{})
				mw := mallocMW(t, b, c.typ)
				var rkey uint32
				if c.typ == verbs.MWType1 {
					rkey = mbind(t, b, mw, b.mr, mwOff, mwLen, rw)
				} else {
					rkey = mbind2(t, b, b.qp, mw, b.mr, mwOff, mwLen, rw)
				}
				mpost(t, a.qp, mwrite(a, 1, 0, 8, rkey, b.mr.Addr()+mwOff))
				mone(t, a, 1, ibv.WCSuccess, ibv.WCRDMAWrite)
				c.kill(t, a, b, mw, rkey)
				mrefusedWrite(t, a, b, rkey, b.mr.Addr()+mwOff, ibv.WCRemAccessErr)
			})
		})
	}
}

// postRecvMS posts one receive of n bytes at off of s's MR.
func postRecvMS(t testing.TB, s *mside, wrid uint64, off, n int) {
	t.Helper()
	must2(t)(s.qp.PostRecv(ibv.RecvWR{WRID: wrid, SGList: []ibv.SGE{s.mr.SGE(off, n)}}))
}

// TestMWType1NotInvalidated: a type-1 window cannot be invalidated
// (o10-37.2.26): LOCAL_INV fails with LOC_QP_OP_ERR, a SEND with
// Invalidate is a class J error at the responder (the message is
// delivered and acknowledged, its receive completes with REM_INV_REQ_ERR
// and the QP goes to ERR), and the window keeps working.
func TestMWType1NotInvalidated(t *testing.T) {
	rw := ibv.AccessRemoteWrite | ibv.AccessRemoteRead
	t.Run("LOCAL_INV", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{})
			defer f.Close()
			a, b := mpair(t, f, mopts{})
			qa2, _ := mlink(t, a, b, a.pd, b.pd, mopts{})
			mw := mallocMW(t, b, verbs.MWType1)
			rkey := mbind(t, b, mw, b.mr, mwOff, mwLen, rw)
			mpost(t, b.qp, ibv.SendWR{WRID: 6, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: rkey})
			mone(t, b, 6, ibv.WCLocQPOpErr, ibv.WCLocalInv)
			wantState(t, "b", &end{qp: b.qp}, ibv.QPStateErr)
			mpost(t, qa2, mwrite(a, 1, 0, 8, rkey, b.mr.Addr()+mwOff))
			mone(t, a, 1, ibv.WCSuccess, ibv.WCRDMAWrite)
		})
	})
	t.Run("SEND_WITH_INV", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{})
			defer f.Close()
			a, b := mpair(t, f, mopts{})
			qa2, _ := mlink(t, a, b, a.pd, b.pd, mopts{})
			mw := mallocMW(t, b, verbs.MWType1)
			rkey := mbind(t, b, mw, b.mr, mwOff, mwLen, rw)
			postRecvMS(t, b, 40, 32768, 64)
			copy(a.buf, "hello")
			mpost(t, a.qp, ibv.SendWR{WRID: 6, Opcode: ibv.WRSendWithInv, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, 5)}, InvRKey: rkey})
			mone(t, a, 6, ibv.WCSuccess, ibv.WCSend) // class J: the requester sees an ACK
			mone(t, b, 40, ibv.WCRemInvReqErr, ibv.WCRecv)
			wantState(t, "b", &end{qp: b.qp}, ibv.QPStateErr)
			if string(b.buf[32768:32773]) != "hello" {
				t.Errorf("class J: the message must stay delivered, got %q", b.buf[32768:32773])
			}
			mpost(t, qa2, mwrite(a, 1, 0, 8, rkey, b.mr.Addr()+mwOff))
			mone(t, a, 1, ibv.WCSuccess, ibv.WCRDMAWrite)
		})
	})
}

// TestMWBusyMR: an MR with a bound window cannot be deregistered (EBUSY);
// once the window is unbound or freed it can.
func TestMWBusyMR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		_, b := mpair(t, f, mopts{})
		mr, err := b.pd.RegMR(make([]byte, 4096), mAllMR)
		must(t, err)
		mw1, mw2 := mallocMW(t, b, verbs.MWType1), mallocMW(t, b, verbs.MWType2)
		mbind(t, b, mw1, mr, 0, 64, ibv.AccessRemoteRead)
		k2 := mbind2(t, b, b.qp, mw2, mr, 64, 64, ibv.AccessRemoteRead)
		apiWantErr(t, "Dereg with two windows", mr.Dereg(), "", verbs.EBUSY)
		_, err = b.qp.BindMW(mw1, verbs.MWBind{WRID: 1, SendFlags: ibv.SendSignaled}) // unbind
		must(t, err)
		mone(t, b, 1, ibv.WCSuccess, ibv.WCBindMW)
		apiWantErr(t, "Dereg with one window", mr.Dereg(), "", verbs.EBUSY)
		mpost(t, b.qp, ibv.SendWR{WRID: 2, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: k2})
		mone(t, b, 2, ibv.WCSuccess, ibv.WCLocalInv)
		must(t, mr.Dereg())
		apiWantErr(t, "PD Dealloc with windows", b.pd.Dealloc(), "", verbs.EBUSY)
		_, err = b.pd.AllocMW(3)
		apiWantErr(t, "AllocMW type 3", err, "type", verbs.EINVAL)
		var nilMW *verbs.MW
		apiWantErr(t, "nil MW Dealloc", nilMW.Dealloc(), "", verbs.EINVAL)
		if nilMW.RKey() != 0 || nilMW.Type() != 0 {
			t.Errorf("nil MW: rkey %#x type %d", nilMW.RKey(), nilMW.Type())
		}
	})
}

// TestMWBindOrder: a BIND_MW runs as soon as the requester reaches it,
// without waiting for earlier WRs (only LOCAL_INV is fenced), but its
// completion comes after theirs: send completions are in order.
func TestMWBindOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		// Hold a's ACKs of b's SEND back for 10 ms.
		f.AddFilter(fabric.OnMatch(fabric.And(fabric.From(a.dev.Addr()), fabric.OpcodeIs(wire.RCAck)), fabric.Delay(10*time.Millisecond)))
		postRecvMS(t, a, 1, 0, 64)
		mw := mallocMW(t, b, verbs.MWType2)
		rkey := verbs.IncKey(mw.RKey())
		mpost(t, b.qp, ibv.SendWR{WRID: 10, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{b.mr.SGE(0, 8)}},
			verbs.BindMWWR(11, ibv.SendSignaled, mw, rkey, verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr() + mwOff,
				Length: mwLen, Access: ibv.AccessRemoteWrite}))
		mone(t, a, 1, ibv.WCSuccess, ibv.WCRecv)
		// The bind ran: a WRITE through the window works while b's SEND is
		// still unacknowledged and b has no completion.
		fill(a.buf[100:108], 8)
		mpost(t, a.qp, mwrite(a, 2, 100, 8, rkey, b.mr.Addr()+mwOff))
		mone(t, a, 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		checkBytes(t, "WRITE through the window", b.buf[mwOff:mwOff+8], a.buf[100:108])
		if got := pollAll(b.cq); len(got) != 0 {
			t.Fatalf("completions before the SEND was acknowledged: %+v", got)
		}
		got := waitWC(t, b.cq, 2)
		wantWC(t, got[0], 10, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, got[1], 11, ibv.WCSuccess, ibv.WCBindMW)
	})
}

// TestLocalInvFenced: LOCAL_INV waits until every earlier WR completed
// (IBA 10.6.5.1; rxe treats it as always fenced): while an earlier SEND
// is unacknowledged, the region it invalidates still takes WRITEs.
func TestLocalInvFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		f.AddFilter(fabric.OnMatch(fabric.And(fabric.From(a.dev.Addr()), fabric.OpcodeIs(wire.RCAck)), fabric.Delay(10*time.Millisecond)))
		postRecvMS(t, a, 1, 0, 64)
		mw := mallocMW(t, b, verbs.MWType2)
		rkey := mbind2(t, b, b.qp, mw, b.mr, mwOff, mwLen, ibv.AccessRemoteWrite)
		start := time.Now()
		mpost(t, b.qp, ibv.SendWR{WRID: 10, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{b.mr.SGE(0, 8)}},
			ibv.SendWR{WRID: 11, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: rkey})
		mone(t, a, 1, ibv.WCSuccess, ibv.WCRecv)
		mpost(t, a.qp, mwrite(a, 2, 100, 8, rkey, b.mr.Addr()+mwOff))
		mone(t, a, 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		got := waitWC(t, b.cq, 2)
		wantWC(t, got[0], 10, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, got[1], 11, ibv.WCSuccess, ibv.WCLocalInv)
		if d := time.Since(start); d < 10*time.Millisecond {
			t.Errorf("LOCAL_INV completed after %v, before the SEND's delayed ACK", d)
		}
		mrefusedWrite(t, a, b, rkey, b.mr.Addr()+mwOff, ibv.WCRemAccessErr)
	})
}

// TestMWUC: binds, invalidations and remote WRITEs through windows work
// on UC QPs too (the ibv_post_send(3) table allows BIND_MW and LOCAL_INV
// on UC); a refused UC WRITE is dropped silently and writes nothing.
func TestMWUC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{typ: ibv.QPTypeUC})
		mw1 := mallocMW(t, b, verbs.MWType1)
		k1 := mbind(t, b, mw1, b.mr, 0, 1024, ibv.AccessRemoteWrite)
		mw2 := mallocMW(t, b, verbs.MWType2)
		k2 := mbind2(t, b, b.qp, mw2, b.mr, mwOff, mwLen, ibv.AccessRemoteWrite)
		fill(a.buf[:16], 4)
		mpost(t, a.qp, mwrite(a, 1, 0, 8, k1, b.mr.Addr()), mwrite(a, 2, 8, 8, k2, b.mr.Addr()+mwOff))
		waitWC(t, a.cq, 2)
		settle(time.Millisecond)
		checkBytes(t, "UC WRITE through type 1", b.buf[:8], a.buf[:8])
		checkBytes(t, "UC WRITE through type 2", b.buf[mwOff:mwOff+8], a.buf[8:16])
		mpost(t, b.qp, ibv.SendWR{WRID: 3, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: k2})
		mone(t, b, 3, ibv.WCSuccess, ibv.WCLocalInv)
		before := bytes.Clone(b.buf)
		fill(a.buf[:8], 9)
		mpost(t, a.qp, mwrite(a, 4, 0, 8, k2, b.mr.Addr()+mwOff))
		mone(t, a, 4, ibv.WCSuccess, ibv.WCRDMAWrite) // UC: no response, the requester cannot know
		settle(time.Millisecond)
		if !bytes.Equal(b.buf, before) {
			t.Errorf("UC WRITE through an invalidated window wrote: %s", firstDiff(b.buf, before))
		}
	})
}

// TestLocalOpsNotRepeatedOnRetry: a go-back-N retry resends the WRs
// around an executed BIND_MW and REG_MR but never executes those again
// (a second type-2 bind or registration would fail: the window is bound,
// the region no longer free).
func TestLocalOpsNotRepeatedOnRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		rec := record(t, f)
		// Lose a's first WRITE: the second one draws a sequence NAK and a
		// retry from the first.
		f.AddFilter(fabric.DropNth(1, ops(&end{dev: a.dev}, wire.RCWriteOnly)))
		mw := mallocMW(t, a, verbs.MWType2)
		mr, err := a.pd.AllocMR(verbs.MRTypeMemReg, 1)
		must(t, err)
		chunk := pages(1, 4096, 0)
		_, err = mr.MapSG(chunk, 4096)
		must(t, err)
		must(t, mr.UpdateFastRegKey(verbs.IncKey(mr.RKey())))
		fill(a.buf[:64], 12)
		wk := verbs.IncKey(mw.RKey())
		mpost(t, a.qp, mwrite(a, 1, 0, 32, b.mr.RKey(), b.mr.Addr()),
			verbs.BindMWWR(2, sig, mw, wk, verbs.MWBindInfo{MR: a.mr, Addr: a.mr.Addr() + 8192, Length: 64, Access: ibv.AccessRemoteWrite}),
			mr.RegWR(3, sig, fastAccess),
			mwrite(a, 4, 32, 32, b.mr.RKey(), b.mr.Addr()+32))
		got := waitWC(t, a.cq, 4)
		for i, op := range []ibv.WCOpcode{ibv.WCRDMAWrite, ibv.WCBindMW, ibv.WCRegMR, ibv.WCRDMAWrite} {
			wantWC(t, got[i], uint64(i+1), ibv.WCSuccess, op)
		}
		if n := rec.count(ops(&end{dev: a.dev}, wire.RCWriteOnly)); n < 3 {
			t.Errorf("%d WRITE_ONLY packets, want a retry", n)
		}
		checkBytes(t, "WRITEs after the retry", b.buf[:64], a.buf[:64])
		fill(b.buf[:16], 13)
		mpost(t, b.qp, mwrite(b, 5, 0, 8, wk, a.mr.Addr()+8192), mwrite(b, 6, 8, 8, mr.RKey(), mr.Addr()))
		got = waitWC(t, b.cq, 2)
		wantWC(t, got[0], 5, ibv.WCSuccess, ibv.WCRDMAWrite)
		wantWC(t, got[1], 6, ibv.WCSuccess, ibv.WCRDMAWrite)
		checkBytes(t, "through the window", a.buf[8192:8200], b.buf[:8])
		checkBytes(t, "into the fast-reg MR", chunk[0][:8], b.buf[8:16])
	})
}
