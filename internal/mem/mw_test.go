package mem

import (
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// mwFixture has an MR at base..base+256 that allows binding.
type mwFixture struct {
	*fixture
	buf []byte
	mr  *MR
}

const mwBase = 0x40_0000

func newMWFixture(t *testing.T, access ibv.Access) *mwFixture {
	f := newFixture(t)
	buf := make([]byte, 256)
	return &mwFixture{fixture: f, buf: buf, mr: f.reg(buf, mwBase, access)}
}

func TestAllocMW(t *testing.T) {
	f := newFixture(t)
	for _, typ := range []int{0, 3, -1} {
		_, err := f.tab.AllocMW(f.pd, typ)
		wantErr(t, "AllocMW of a bad type", err, errno.Invalid)
	}
	mw1, mw2 := f.allocMW(1), f.allocMW(2)
	if mw1.Type() != 1 || mw2.Type() != 2 || mw1.PD() != f.pd {
		t.Errorf("Type/PD: got %d %d %v, want 1 2 f.pd", mw1.Type(), mw2.Type(), mw1.PD())
	}
	if mw1.Bound() || mw2.Bound() {
		t.Errorf("fresh windows bound: got %v %v, want false false", mw1.Bound(), mw2.Bound())
	}
	if got, err := f.tab.MWByKey(mw2.RKey()); got != mw2 || err != nil {
		t.Errorf("MWByKey: got %p, %v; want %p, nil", got, err, mw2)
	}
	_, err := f.tab.MWByKey(flipKeyByte(mw2.RKey()))
	wantErr(t, "MWByKey with a wrong key byte", err, ErrInvalidKey)
	_, err = f.tab.MWByKey(0x100)
	wantErr(t, "MWByKey of an MR index", err, ErrInvalidKey)
	// An unbound window's rkey grants nothing.
	for _, mw := range []*MW{mw1, mw2} {
		_, err := f.tab.Remote(f.pd, 1, mw.RKey(), 0, 8, 0)
		wantErr(t, "Remote through an unbound window", err, ErrInvalidKey)
	}
	wantErr(t, "DeallocMW", f.tab.DeallocMW(mw1), nil)
	wantErr(t, "DeallocMW twice", f.tab.DeallocMW(mw1), errno.Invalid)
	wantErr(t, "DeallocMW(nil)", f.tab.DeallocMW(nil), errno.Invalid)
	_, err = f.tab.MWByKey(mw1.RKey())
	wantErr(t, "MWByKey after DeallocMW", err, ErrInvalidKey)
}

// Each bind rule of rxe_check_bind_mw, one case each.
func TestBindMWRules(t *testing.T) {
	tests := []struct {
		name     string
		mrAccess ibv.Access
		typ      int
		qpPD2    bool // bind through a QP of the other PD
		mrPD2    bool // the MR is in the other PD
		zbMR     bool
		fastMR   bool // the MR is a FREE fast-reg MR
		badKey   bool // mrKey with a wrong key byte
		addr     uint64
		length   uint64
		access   ibv.Access
		want     error
	}{
		{"type 1 read window", LW | MWB, 1, false, false, false, false, false, mwBase, 64, RR, nil},
		{"type 2 read window", LW | MWB, 2, false, false, false, false, false, mwBase, 64, RR, nil},
		{"whole MR", LW | MWB, 2, false, false, false, false, false, mwBase, 256, RR | RW | RA, nil},

		{"C10-72: type 2 through a QP of another PD", LW | MWB, 2, true, false, false, false, false, mwBase, 64, RR, ErrWrongPD},
		{"C10-72: type 1 through a QP of another PD", LW | MWB, 1, true, false, false, false, false, mwBase, 64, RR, ErrWrongPD},
		{"MR of another PD", LW | MWB, 2, false, true, false, false, false, mwBase, 64, RR, ErrWrongPD},

		{"C10-73: MR without MW_BIND", LW | RR | RW, 2, false, false, false, false, false, mwBase, 64, RR, ErrAccess},
		{"C10-74: write window on an MR without LOCAL_WRITE", MWB | RR, 2, false, false, false, false, false, mwBase, 64, RW, ErrAccess},
		{"C10-74: atomic window on an MR without LOCAL_WRITE", MWB | RR, 1, false, false, false, false, false, mwBase, 64, RA, ErrAccess},
		{"C10-74: read window on an MR without LOCAL_WRITE", MWB, 2, false, false, false, false, false, mwBase, 64, RR | FG, nil},

		{"C10-75: starts below the MR", LW | MWB, 2, false, false, false, false, false, mwBase - 1, 64, RR, ErrRange},
		{"C10-75: ends above the MR", LW | MWB, 2, false, false, false, false, false, mwBase + 200, 57, RR, ErrRange},
		{"C10-75: zero-based window ends above the MR", LW | MWB, 2, false, false, false, false, false, mwBase + 200, 57, RR | ZB, ErrRange},
		{"C10-75: addr+length overflows", LW | MWB, 2, false, false, false, false, false, mwBase + 8, ^uint64(0), RR, ErrRange},

		{"o10-36.2.2: zero-based type 1", LW | MWB, 1, false, false, false, false, false, mwBase, 64, RR | ZB, errno.Invalid},
		{"zero-based type 2", LW | MWB, 2, false, false, false, false, false, mwBase, 64, RR | ZB, nil},
		{"o10-37.2.40: type 2 of length 0", LW | MWB, 2, false, false, false, false, false, mwBase, 0, RR, errno.Invalid},
		{"type 1 of length 0 unbinds", LW | MWB, 1, false, false, false, false, false, 0, 0, 0, nil},

		{"zero-based MR", LW | MWB | ZB, 2, false, false, true, false, false, 0, 64, RR, errno.Invalid},
		{"MR key byte mismatch", LW | MWB, 2, false, false, false, false, true, mwBase, 64, RR, ErrInvalidKey},
		{"FREE fast-reg MR", LW | MWB, 2, false, false, false, true, false, mwBase, 64, RR, ErrInvalidKey},
		{"unsupported access bit", LW | MWB, 2, false, false, false, false, false, mwBase, 64, RR | 1<<15, errno.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			buf := make([]byte, 256)
			mrPD, iova := f.pd, uint64(mwBase)
			if tc.mrPD2 {
				mrPD = f.pd2
			}
			access := tc.mrAccess
			if tc.zbMR {
				iova = 0
			}
			mr, err := f.tab.RegMR(mrPD, buf, iova, true, access)
			if err != nil {
				t.Fatal(err)
			}
			if tc.fastMR {
				if mr, err = f.tab.AllocMR(mrPD, 1); err != nil {
					t.Fatal(err)
				}
			}
			mrKey := mr.LKey()
			if tc.badKey {
				mrKey = flipKeyByte(mrKey)
			}
			qpPD := f.pd
			if tc.qpPD2 {
				qpPD = f.pd2
			}
			mw := f.allocMW(tc.typ)
			oldKey := mw.RKey()
			rkey, err := f.tab.BindMW(mw, 9, qpPD, mrKey, tc.addr, tc.length, tc.access, 0x77)
			wantErr(t, "BindMW", err, tc.want)
			if err != nil {
				if mw.RKey() != oldKey || mw.Bound() {
					t.Errorf("refused bind changed the window: rkey %#x→%#x, bound %v", oldKey, mw.RKey(), mw.Bound())
				}
				if mr.nMW != 0 {
					t.Errorf("refused bind counted a window on the MR: nMW %d", mr.nMW)
				}
				return
			}
			if rkey != mw.RKey() || rkey>>8 != oldKey>>8 {
				t.Errorf("rkey: got %#x, window says %#x, old %#x: want the same index", rkey, mw.RKey(), oldKey)
			}
			if tc.typ == 2 && rkey&KeyByteMask != 0x77 {
				t.Errorf("type 2 key byte: got %#x, want the caller's 0x77", rkey&KeyByteMask)
			}
			if tc.typ == 1 && rkey == oldKey {
				t.Errorf("type 1 bind kept rkey %#x, want a new key byte", rkey)
			}
			if got, want := mw.Bound(), tc.length > 0; got != want {
				t.Errorf("Bound: got %v, want %v", got, want)
			}
		})
	}
}

func TestBindMWState(t *testing.T) {
	f := newMWFixture(t, LW|MWB)

	// o10-37.2.30: a bound type-2 window cannot be bound again until
	// invalidated.
	mw2 := f.allocMW(2)
	rkey := f.bind(mw2, 4, f.mr, mwBase, 64, RR, 0x01)
	_, err := f.tab.BindMW(mw2, 4, f.pd, f.mr.LKey(), mwBase, 32, RR, 0x02)
	wantErr(t, "rebinding a bound type-2 window", err, errno.Busy)
	if err := f.tab.Invalidate(f.pd, 4, rkey); err != nil {
		t.Fatalf("Invalidate: %v", err)
	}
	rkey2 := f.bind(mw2, 5, f.mr, mwBase, 32, RR, 0x02)
	if rkey2 != rkey&^0xff|0x02 {
		t.Errorf("rebind after invalidation: rkey %#x, want %#x", rkey2, rkey&^0xff|0x02)
	}
	if mw2.QPN() != 5 {
		t.Errorf("QPN after rebinding through QP 5: got %d", mw2.QPN())
	}

	// A type-1 window may be rebound while bound; each bind rotates its key
	// and kills the old one.
	mw1 := f.allocMW(1)
	k1 := f.bind(mw1, 4, f.mr, mwBase, 64, RR, 0)
	k2 := f.bind(mw1, 4, f.mr, mwBase+64, 64, RR, 0)
	if k1 == k2 || k1>>8 != k2>>8 {
		t.Errorf("type-1 rebind: rkeys %#x then %#x, want same index, new key byte", k1, k2)
	}
	_, err = f.tab.Remote(f.pd, 4, k1, mwBase, 8, RR)
	wantErr(t, "Remote with the rkey of the previous binding", err, ErrInvalidKey)
	if b, err := f.tab.Remote(f.pd, 4, k2, mwBase+64, 8, RR); err != nil || !same(b, f.buf[64:72]) {
		t.Errorf("Remote through the new binding: got %d bytes, %v", len(b), err)
	}
	if f.mr.nMW != 2 {
		t.Errorf("windows counted on the MR: got %d, want 2", f.mr.nMW)
	}
	// Unbind with length 0.
	k3 := f.bind(mw1, 4, f.mr, 0, 0, 0, 0)
	if mw1.Bound() || k3 == k2 {
		t.Errorf("after a zero-length type-1 bind: Bound %v rkey %#x (was %#x), want unbound with a new key", mw1.Bound(), k3, k2)
	}
	_, err = f.tab.Remote(f.pd, 4, k3, mwBase, 8, RR)
	wantErr(t, "Remote through an unbound type-1 window", err, ErrInvalidKey)
	if f.mr.nMW != 1 {
		t.Errorf("windows counted on the MR after unbind: got %d, want 1", f.mr.nMW)
	}

	// A freed window cannot be bound.
	if err := f.tab.DeallocMW(mw1); err != nil {
		t.Fatal(err)
	}
	_, err = f.tab.BindMW(mw1, 4, f.pd, f.mr.LKey(), mwBase, 8, RR, 0)
	wantErr(t, "BindMW of a freed window", err, errno.Invalid)
}

func TestRemoteThroughWindow(t *testing.T) {
	// The MR grants no remote right itself: the windows do.
	f := newMWFixture(t, LW|MWB)
	for i := range f.buf {
		f.buf[i] = byte(i)
	}
	mw1 := f.allocMW(1)
	rkey1 := f.bind(mw1, 0, f.mr, mwBase+64, 64, RR, 0)
	mw2 := f.allocMW(2)
	rkey2 := f.bind(mw2, 7, f.mr, mwBase+128, 32, RW|RR|ZB, 0x33)

	tests := []struct {
		name    string
		pd      *PD
		qpn     uint32
		rkey    uint32
		va      uint64
		length  uint32
		need    ibv.Access
		want    error
		wantOff int
	}{
		{"type 1 inside", f.pd, 99, rkey1, mwBase + 64, 64, RR, nil, 64},
		{"type 1 from any QP", f.pd, 1234, rkey1, mwBase + 100, 8, RR, nil, 100},
		{"type 1 below the window, inside the MR", f.pd, 1, rkey1, mwBase + 63, 8, RR, ErrRange, 0},
		{"type 1 above the window, inside the MR", f.pd, 1, rkey1, mwBase + 121, 8, RR, ErrRange, 0},
		{"type 1 va+len overflows", f.pd, 1, rkey1, ^uint64(0) - 2, 8, RR, ErrRange, 0},
		{"window narrower than the MR: no write", f.pd, 1, rkey1, mwBase + 64, 8, RW, ErrAccess, 0},
		{"the MR's own rkey grants nothing remote", f.pd, 1, f.mr.RKey(), mwBase + 64, 8, RR, ErrAccess, 0},
		{"wrong key byte", f.pd, 1, flipKeyByte(rkey1), mwBase + 64, 8, RR, ErrInvalidKey, 0},
		{"wrong PD", f.pd2, 1, rkey1, mwBase + 64, 8, RR, ErrWrongPD, 0},

		{"type 2 zero-based at 0", f.pd, 7, rkey2, 0, 8, RW, nil, 128},
		{"type 2 zero-based at the end", f.pd, 7, rkey2, 24, 8, RR, nil, 152},
		{"type 2 zero-based past the end", f.pd, 7, rkey2, 25, 8, RR, ErrRange, 0},
		{"type 2 zero-based with an absolute va", f.pd, 7, rkey2, mwBase + 128, 8, RR, ErrRange, 0},
		{"type 2 zero-based offset overflows", f.pd, 7, rkey2, ^uint64(0), 8, RR, ErrRange, 0},
		{"type 2 through another QP", f.pd, 8, rkey2, 0, 8, RR, ErrWrongQP, 0},
		{"type 2 through another QP is an invalid key", f.pd, 8, rkey2, 0, 8, RR, ErrInvalidKey, 0},
		{"type 2 without the atomic right", f.pd, 7, rkey2, 0, 8, RA, ErrAccess, 0},
		{"zero length through a window skips checks", f.pd, 8, rkey2, 1 << 40, 0, RA, nil, 0},
	}
	for _, tc := range tests {
		got, err := f.tab.Remote(tc.pd, tc.qpn, tc.rkey, tc.va, tc.length, tc.need)
		wantErr(t, tc.name, err, tc.want)
		if err == nil && tc.length > 0 && !same(got, f.buf[tc.wantOff:tc.wantOff+int(tc.length)]) {
			t.Errorf("%s: got %d bytes (first %v), want buf[%d:%d]", tc.name, len(got), got[0], tc.wantOff, tc.wantOff+int(tc.length))
		}
	}
	if mw2.Addr() != mwBase+128 || mw2.Len() != 32 || mw2.Access() != RW|RR|ZB {
		t.Errorf("window 2: Addr %#x Len %d Access %#x", mw2.Addr(), mw2.Len(), mw2.Access())
	}
}

func TestInvalidate(t *testing.T) {
	type setup struct {
		f     *mwFixture
		fast  *MR
		mw1   *MW
		mw2   *MW
		rkey1 uint32
		rkey2 uint32
	}
	mk := func(t *testing.T) *setup {
		f := newMWFixture(t, LW|RR|MWB)
		fast, err := f.tab.AllocMR(f.pd, 1)
		if err != nil {
			t.Fatal(err)
		}
		page := aligned(MinPageSize, MinPageSize)
		if _, err := f.tab.MapMRSG(fast, [][]byte{page}, MinPageSize); err != nil {
			t.Fatal(err)
		}
		if err := f.tab.RegFast(f.pd, fast, fast.LKey(), 0x1000, 64, LW|RR|MWB); err != nil {
			t.Fatal(err)
		}
		s := &setup{f: f, fast: fast, mw1: f.allocMW(1), mw2: f.allocMW(2)}
		s.rkey1 = f.bind(s.mw1, 3, f.mr, mwBase, 8, RR, 0)
		s.rkey2 = f.bind(s.mw2, 3, f.mr, mwBase, 8, RR, 0x44)
		return s
	}
	tests := []struct {
		name string
		run  func(s *setup) error
		want error
	}{
		{"fast-reg MR", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd, 3, s.fast.RKey()) }, nil},
		{"fast-reg MR twice", func(s *setup) error {
			_ = s.f.tab.Invalidate(s.f.pd, 3, s.fast.RKey())
			return s.f.tab.Invalidate(s.f.pd, 3, s.fast.RKey())
		}, nil},
		{"fast-reg MR with a wrong key byte", func(s *setup) error {
			return s.f.tab.Invalidate(s.f.pd, 3, flipKeyByte(s.fast.RKey()))
		}, ErrInvalidKey},
		{"fast-reg MR of another PD", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd2, 3, s.fast.RKey()) }, ErrWrongPD},
		{"fast-reg MR with a bound window", func(s *setup) error {
			mw := s.f.allocMW(2)
			s.f.bind(mw, 3, s.fast, 0x1000, 8, RR, 0)
			return s.f.tab.Invalidate(s.f.pd, 3, s.fast.RKey())
		}, errno.Busy},
		{"ordinary MR (rxe_invalidate_mr: type must be MEM_REG)", func(s *setup) error {
			s.f.tab.DeallocMW(s.mw1)
			s.f.tab.DeallocMW(s.mw2)
			return s.f.tab.Invalidate(s.f.pd, 3, s.f.mr.RKey())
		}, errno.Invalid},
		{"o10-37.2.26: type-1 window", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd, 3, s.rkey1) }, errno.Invalid},
		{"type-2 window", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd, 3, s.rkey2) }, nil},
		{"type-2 window through another QP", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd, 4, s.rkey2) }, ErrWrongQP},
		{"type-2 window of another PD", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd2, 3, s.rkey2) }, ErrWrongPD},
		{"type-2 window with a wrong key byte", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd, 3, flipKeyByte(s.rkey2)) }, ErrInvalidKey},
		{"type-2 window twice", func(s *setup) error {
			_ = s.f.tab.Invalidate(s.f.pd, 3, s.rkey2)
			return s.f.tab.Invalidate(s.f.pd, 3, s.rkey2)
		}, ErrInvalidKey},
		{"unused key", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd, 3, 0x7_0000_00) }, ErrInvalidKey},
		{"key index 0", func(s *setup) error { return s.f.tab.Invalidate(s.f.pd, 3, 0x12) }, ErrInvalidKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "Invalidate", tc.run(mk(t)), tc.want)
		})
	}
}

func TestAccessAfterInvalidation(t *testing.T) {
	f := newMWFixture(t, LW|MWB)
	mw := f.allocMW(2)
	rkey := f.bind(mw, 3, f.mr, mwBase, 16, RW, 0x10)
	if _, err := f.tab.Remote(f.pd, 3, rkey, mwBase, 8, RW); err != nil {
		t.Fatalf("Remote before invalidation: %v", err)
	}
	if err := f.tab.Invalidate(f.pd, 3, rkey); err != nil {
		t.Fatal(err)
	}
	_, err := f.tab.Remote(f.pd, 3, rkey, mwBase, 8, RW)
	wantErr(t, "Remote after invalidating the window", err, ErrInvalidKey)
	if mw.RKey() != rkey || mw.Bound() || f.mr.nMW != 0 {
		t.Errorf("after invalidation: rkey %#x (was %#x) bound %v nMW %d; want same rkey, unbound, 0", mw.RKey(), rkey, mw.Bound(), f.mr.nMW)
	}
	// Rebinding with a new key byte: the old rkey stays dead.
	rkeyNew := f.bind(mw, 3, f.mr, mwBase, 16, RW, 0x11)
	_, err = f.tab.Remote(f.pd, 3, rkey, mwBase, 8, RW)
	wantErr(t, "Remote with the old rkey after a rebind", err, ErrInvalidKey)
	if _, err := f.tab.Remote(f.pd, 3, rkeyNew, mwBase, 8, RW); err != nil {
		t.Errorf("Remote with the new rkey: %v", err)
	}
	// Deallocating a bound window kills its rkey and frees the MR.
	if err := f.tab.DeallocMW(mw); err != nil {
		t.Fatal(err)
	}
	_, err = f.tab.Remote(f.pd, 3, rkeyNew, mwBase, 8, RW)
	wantErr(t, "Remote through a deallocated window", err, ErrInvalidKey)
	wantErr(t, "DeregMR after the window is gone", f.tab.DeregMR(f.mr), nil)
}

// TestBindType1CallerKey: a type-1 bind given a whole new rkey of the
// window installs its key byte (ibv_bind_mw hands out ibv_inc_rkey(rkey)
// before the bind runs); a bare byte, or the current rkey, does not.
func TestBindType1CallerKey(t *testing.T) {
	f := newMWFixture(t, LW|MWB)
	mw := f.allocMW(1)
	old := mw.RKey()
	want := old&^0xff | (old+1)&0xff
	if got := f.bind(mw, 4, f.mr, mwBase, 64, RR, want); got != want {
		t.Errorf("type-1 bind with rkey %#x: got %#x", want, got)
	}
	if got := f.bind(mw, 4, f.mr, mwBase, 64, RR, want); got == want || got>>8 != want>>8 {
		t.Errorf("type-1 bind with the current rkey %#x: got %#x, want a fresh key byte", want, got)
	}
	cur := mw.RKey()
	other := (mw.RKey()>>8+1)<<8 | 0x42 // another index: not this window's rkey
	if got := f.bind(mw, 4, f.mr, mwBase, 64, RR, other); got == cur || got>>8 != cur>>8 {
		t.Errorf("type-1 bind with a foreign rkey: got %#x (was %#x)", got, cur)
	}
}
