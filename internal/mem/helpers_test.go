package mem

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/softnic/softnic/ibv"
)

// Short names for access flags in test tables.
const (
	LW  = ibv.AccessLocalWrite
	RW  = ibv.AccessRemoteWrite
	RR  = ibv.AccessRemoteRead
	RA  = ibv.AccessRemoteAtomic
	MWB = ibv.AccessMWBind
	ZB  = ibv.AccessZeroBased
	FG  = ibv.AccessFlushGlobal
	FP  = ibv.AccessFlushPersistent

	allRemote = LW | RW | RR | RA | FG
)

const testSeed = 42

type fixture struct {
	t   *testing.T
	tab *Table
	pd  *PD // the QP's PD
	pd2 *PD // another PD
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureLim(t, Limits{KeySeed: testSeed})
}

func newFixtureLim(t *testing.T, lim Limits) *fixture {
	t.Helper()
	tab := NewTable(lim)
	pd, err := tab.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	pd2, err := tab.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	return &fixture{t: t, tab: tab, pd: pd, pd2: pd2}
}

// reg registers buf at iova in f.pd and fails the test on error.
func (f *fixture) reg(buf []byte, iova uint64, access ibv.Access) *MR {
	f.t.Helper()
	mr, err := f.tab.RegMR(f.pd, buf, iova, true, access)
	if err != nil {
		f.t.Fatalf("RegMR(len %d, iova %#x, access %#x): %v", len(buf), iova, access, err)
	}
	return mr
}

func (f *fixture) allocMW(typ int) *MW {
	f.t.Helper()
	mw, err := f.tab.AllocMW(f.pd, typ)
	if err != nil {
		f.t.Fatalf("AllocMW(%d): %v", typ, err)
	}
	return mw
}

// bind binds mw through QP qpn of f.pd and fails the test on error.
func (f *fixture) bind(mw *MW, qpn uint32, mr *MR, addr, length uint64, access ibv.Access, keyByte uint32) uint32 {
	f.t.Helper()
	rkey, err := f.tab.BindMW(mw, qpn, f.pd, mr.LKey(), addr, length, access, keyByte)
	if err != nil {
		f.t.Fatalf("BindMW(addr %#x, len %d, access %#x): %v", addr, length, access, err)
	}
	return rkey
}

// wantErr checks errors.Is(got, want), or got == nil when want is nil.
func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Errorf("%s: got error %v, want nil", what, got)
		}
		return
	}
	if !errors.Is(got, want) {
		t.Errorf("%s: got error %v, want %v", what, got, want)
	}
}

// flipKeyByte returns key with a different key byte.
func flipKeyByte(key uint32) uint32 { return key ^ 0x5a }

// aligned returns n bytes starting at a multiple of align.
func aligned(n, align int) []byte {
	b := make([]byte, n+align)
	off := (align - int(uintptr(unsafe.Pointer(&b[0])))%align) % align
	return b[off : off+n : off+n]
}

// same reports whether a and b are the same memory.
func same(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func isErr(got, want error) bool { return errors.Is(got, want) }

func accessOf(a uint32) ibv.Access { return ibv.Access(a) }

func sge(addr uint64, length uint32, key uint32) ibv.SGE {
	return ibv.SGE{Addr: addr, Length: length, LKey: key}
}
