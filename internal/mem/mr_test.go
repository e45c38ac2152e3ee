package mem

import (
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

func TestRegMRAccessRule(t *testing.T) {
	tests := []struct {
		name       string
		access     ibv.Access
		persistent bool
		want       error
	}{
		{"no rights", 0, false, nil},
		{"local write", LW, false, nil},
		{"remote read alone", RR, false, nil},
		{"remote write without local write", RW, false, errno.Invalid},
		{"remote atomic without local write", RA, false, errno.Invalid},
		{"remote write+read without local write", RW | RR, false, errno.Invalid},
		{"remote write with local write", LW | RW, false, nil},
		{"remote atomic with local write", LW | RA, false, nil},
		{"flush global without local write", FG, false, nil},
		{"all remote rights", allRemote, false, nil},
		{"mw bind", MWB, false, nil},
		{"relaxed ordering, on demand, hugetlb hints", ibv.AccessRelaxedOrdering | ibv.AccessOnDemand | ibv.AccessHugeTLB, false, nil},
		{"flush persistent on ordinary memory", FP, false, errno.Invalid},
		{"flush persistent on persistent memory", FP, true, nil},
		{"unknown bit", 1 << 15, false, errno.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureLim(t, Limits{KeySeed: testSeed, PersistentMemory: tc.persistent})
			mr, err := f.tab.RegMR(f.pd, make([]byte, 16), 0x1000, true, tc.access)
			wantErr(t, "RegMR", err, tc.want)
			if err == nil && mr.Access() != tc.access {
				t.Errorf("Access: got %#x, want %#x", mr.Access(), tc.access)
			}
		})
	}
}

func TestRegMRAddresses(t *testing.T) {
	f := newFixture(t)
	buf := make([]byte, 100)
	tests := []struct {
		name     string
		iova     uint64
		useIOVA  bool
		access   ibv.Access
		wantAddr uint64
	}{
		{"caller iova", 0x7000_0000_1234, true, 0, 0x7000_0000_1234},
		{"buffer address", 0xdead, false, 0, addrOf(buf)},
		{"zero-based ignores iova", 0x1000, true, ZB, 0},
		{"zero-based ignores the address", 0, false, ZB, 0},
	}
	for _, tc := range tests {
		mr, err := f.tab.RegMR(f.pd, buf, tc.iova, tc.useIOVA, tc.access)
		if err != nil {
			t.Fatalf("%s: RegMR: %v", tc.name, err)
		}
		if got := mr.Addr(); got != tc.wantAddr {
			t.Errorf("%s: Addr: got %#x, want %#x", tc.name, got, tc.wantAddr)
		}
		if got := mr.Len(); got != uint64(len(buf)) {
			t.Errorf("%s: Len: got %d, want %d", tc.name, got, len(buf))
		}
		if !same(mr.Bytes(), buf) {
			t.Errorf("%s: Bytes is not the registered buffer", tc.name)
		}
		if mr.PD() != f.pd || !mr.Valid() || mr.Fast() {
			t.Errorf("%s: PD %v Valid %v Fast %v, want f.pd true false", tc.name, mr.PD(), mr.Valid(), mr.Fast())
		}
	}

	_, err := f.tab.RegMR(f.pd, nil, 0x1000, true, 0)
	wantErr(t, "RegMR of a nil buffer", err, errno.Invalid)
	_, err = f.tab.RegMR(f.pd, buf[:0], 0x1000, true, 0)
	wantErr(t, "RegMR of a zero-length buffer", err, errno.Invalid)
	_, err = f.tab.RegMR(f.pd, buf, ^uint64(0)-50, true, 0)
	wantErr(t, "RegMR with iova+len overflowing", err, errno.Invalid)
	_, err = f.tab.RegMR(f.pd, buf, ^uint64(0)-99, true, 0)
	wantErr(t, "RegMR whose end wraps to 0 (ib_umem_get)", err, errno.Invalid)
	_, err = f.tab.RegMR(f.pd, buf, ^uint64(0)-100, true, 0)
	wantErr(t, "RegMR ending at the last address", err, nil)
}

func TestKeys(t *testing.T) {
	f := newFixture(t)
	buf := make([]byte, 8)
	mr := f.reg(buf, 0, 0)
	if mr.LKey() != mr.RKey() {
		t.Errorf("LKey %#x != RKey %#x, want equal (rxe_mr_init)", mr.LKey(), mr.RKey())
	}
	if i := mr.LKey() >> 8; i < MinMRIndex || i > MaxMRIndex || IsMWKey(mr.LKey()) {
		t.Errorf("MR key %#x: index %#x outside the MR range", mr.LKey(), i)
	}
	mw := f.allocMW(1)
	if i := mw.RKey() >> 8; i < MinMWIndex || i > MaxMWIndex || !IsMWKey(mw.RKey()) {
		t.Errorf("MW key %#x: index %#x outside the MW range", mw.RKey(), i)
	}

	// The same seed gives the same keys; another seed, other key bytes.
	keys := func(seed uint64) []uint32 {
		tab := NewTable(Limits{KeySeed: seed})
		pd, _ := tab.AllocPD()
		var ks []uint32
		for range 8 {
			mr, err := tab.RegMR(pd, buf, 0, true, 0)
			if err != nil {
				t.Fatal(err)
			}
			ks = append(ks, mr.LKey())
		}
		return ks
	}
	a, b, c := keys(7), keys(7), keys(8)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("key %d with the same seed: got %#x and %#x, want equal", i, a[i], b[i])
		}
	}
	differ := false
	for i := range a {
		differ = differ || a[i] != c[i]
	}
	if !differ {
		t.Errorf("keys with seeds 7 and 8 all equal: %#x", a)
	}
}

func TestIndexCyclic(t *testing.T) {
	f := newFixture(t)
	buf := make([]byte, 8)
	a := f.reg(buf, 0, 0)
	if err := f.tab.DeregMR(a); err != nil {
		t.Fatal(err)
	}
	b := f.reg(buf, 0, 0)
	if a.LKey()>>8 == b.LKey()>>8 {
		t.Errorf("index reused at once: %#x then %#x, want cyclic allocation (xa_alloc_cyclic)", a.LKey()>>8, b.LKey()>>8)
	}
	if _, err := f.tab.MRByKey(a.LKey()); !isErr(err, ErrInvalidKey) {
		t.Errorf("MRByKey of a deregistered key: got %v, want ErrInvalidKey", err)
	}
	if got, err := f.tab.MRByKey(b.LKey()); got != b || err != nil {
		t.Errorf("MRByKey(%#x): got %p, %v; want %p, nil", b.LKey(), got, err, b)
	}
	_, err := f.tab.MRByKey(flipKeyByte(b.LKey()))
	wantErr(t, "MRByKey with a wrong key byte", err, ErrInvalidKey)
}

func TestMRLimit(t *testing.T) {
	f := newFixtureLim(t, Limits{MaxMR: 2, MaxMW: 1})
	buf := make([]byte, 8)
	f.reg(buf, 0, 0)
	m := f.reg(buf, 0, 0)
	_, err := f.tab.RegMR(f.pd, buf, 0, true, 0)
	wantErr(t, "RegMR beyond MaxMR", err, errno.NoMemory)
	_, err = f.tab.AllocMR(f.pd, 1)
	wantErr(t, "AllocMR beyond MaxMR", err, errno.NoMemory)
	if err := f.tab.DeregMR(m); err != nil {
		t.Fatal(err)
	}
	f.reg(buf, 0, 0)
	f.allocMW(2)
	_, err = f.tab.AllocMW(f.pd, 1)
	wantErr(t, "AllocMW beyond MaxMW", err, errno.NoMemory)
}

func TestDeregMR(t *testing.T) {
	f := newFixture(t)
	buf := make([]byte, 64)
	mr := f.reg(buf, 0x1000, LW|RR|MWB)
	mw := f.allocMW(1)
	f.bind(mw, 1, mr, 0x1000, 16, RR, 0)
	wantErr(t, "DeregMR with a bound window", f.tab.DeregMR(mr), errno.Busy)
	// Unbinding (type 1, length 0) releases the MR.
	f.bind(mw, 1, mr, 0, 0, 0, 0)
	wantErr(t, "DeregMR after unbinding", f.tab.DeregMR(mr), nil)
	if mr.Valid() {
		t.Errorf("Valid after DeregMR: got true, want false")
	}
	wantErr(t, "DeregMR twice", f.tab.DeregMR(mr), errno.Invalid)
	wantErr(t, "DeregMR(nil)", f.tab.DeregMR(nil), errno.Invalid)
	_, err := f.tab.Remote(f.pd, 1, mr.RKey(), 0x1000, 8, RR)
	wantErr(t, "Remote with a deregistered key", err, ErrInvalidKey)

	// A type-2 window releases its MR on invalidation, and any window on
	// deallocation.
	mr2 := f.reg(buf, 0x1000, LW|RR|MWB)
	mw2 := f.allocMW(2)
	rkey := f.bind(mw2, 3, mr2, 0x1000, 8, RR, 0x11)
	mw1 := f.allocMW(1)
	f.bind(mw1, 3, mr2, 0x1000, 8, RR, 0)
	wantErr(t, "DeregMR with two windows", f.tab.DeregMR(mr2), errno.Busy)
	wantErr(t, "Invalidate type 2", f.tab.Invalidate(f.pd, 3, rkey), nil)
	wantErr(t, "DeregMR with one window", f.tab.DeregMR(mr2), errno.Busy)
	wantErr(t, "DeallocMW", f.tab.DeallocMW(mw1), nil)
	wantErr(t, "DeregMR with none", f.tab.DeregMR(mr2), nil)
}
