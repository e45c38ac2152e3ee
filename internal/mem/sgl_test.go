package mem

import (
	"bytes"
	"testing"

	"github.com/softnic/softnic/ibv"
)

// Scatter and GatherAt walk an SGE list from an offset, each SGE through
// the MR table and across the chunks of a fast-registration MR.
// twoChunks registers a fast-registration MR of two chunks, the last 10
// bytes of page p[0] and the first 10 of page p[1], with LOCAL_WRITE, and
// returns it and its address.
func twoChunks(t *testing.T, f *fixture) (fast *MR, iova uint64, p [][]byte) {
	t.Helper()
	fast, err := f.tab.AllocMR(f.pd, 4)
	if err != nil {
		t.Fatal(err)
	}
	p = pages(2)
	if n, err := f.tab.MapMRSG(fast, [][]byte{p[0][ps-10:], p[1][:10]}, ps); n != 2 || err != nil {
		t.Fatalf("MapMRSG: %d, %v", n, err)
	}
	iova, length := fast.Mapped()
	if err := f.tab.RegFast(f.pd, fast, fast.LKey(), iova, length, LW); err != nil {
		t.Fatal(err)
	}
	return fast, iova, p
}

func TestScatterGatherAt(t *testing.T) {
	f := newFixture(t)
	fast, iova, p := twoChunks(t, f)
	plain := make([]byte, 8)
	mr := f.reg(plain, 0x1000, LW)
	ro := f.reg(make([]byte, 8), 0x2000, 0)

	// 4 bytes of the plain MR, an empty SGE with a garbage key, then 16
	// bytes of the fast MR across its chunk boundary: 20 bytes in all.
	sgl := []ibv.SGE{
		sge(0x1002, 4, mr.LKey()),
		sge(0, 0, 0xdead),
		sge(iova+2, 16, fast.LKey()),
	}
	msg := []byte("abcdefghijklmnopqrst")
	if err := f.tab.Scatter(f.pd, sgl, 0, msg[:6]); err != nil {
		t.Fatalf("Scatter at 0: %v", err)
	}
	if err := f.tab.Scatter(f.pd, sgl, 6, msg[6:]); err != nil {
		t.Fatalf("Scatter at 6: %v", err)
	}
	if got := string(plain[2:6]); got != "abcd" {
		t.Errorf("plain MR: got %q, want abcd", got)
	}
	if got := string(p[0][ps-8:]) + string(p[1][:8]); got != "efghijklmnopqrst" {
		t.Errorf("fast MR across the chunks: got %q, want efghijklmnopqrst", got)
	}
	for _, off := range []uint64{0, 3, 4, 9, 19} {
		dst := make([]byte, 20-off)
		if err := f.tab.GatherAt(f.pd, sgl, off, dst); err != nil || !bytes.Equal(dst, msg[off:]) {
			t.Errorf("GatherAt(%d): got %q, %v; want %q", off, dst, err, msg[off:])
		}
	}
	dst := []byte("......")
	if err := f.tab.GatherAt(f.pd, sgl, 18, dst); err != nil || string(dst) != "st...." {
		t.Errorf("GatherAt past the end: got %q, %v; want st.... and no error", dst, err)
	}

	wantErr(t, "Scatter past the list", f.tab.Scatter(f.pd, sgl, 15, msg[:6]), ErrRange)
	wantErr(t, "Scatter into memory without LOCAL_WRITE",
		f.tab.Scatter(f.pd, []ibv.SGE{sge(0x2000, 8, ro.LKey())}, 0, msg[:1]), ErrAccess)
	wantErr(t, "GatherAt with a bad key",
		f.tab.GatherAt(f.pd, []ibv.SGE{sge(0x1000, 8, flipKeyByte(mr.LKey()))}, 0, dst), ErrInvalidKey)
	// SGEs before the offset are not looked up.
	bad := []ibv.SGE{sge(0, 4, 0xdead), sge(0x1000, 4, mr.LKey())}
	if err := f.tab.GatherAt(f.pd, bad, 4, dst[:4]); err != nil {
		t.Errorf("GatherAt past a bad SGE: %v", err)
	}

	allocs := testing.AllocsPerRun(100, func() {
		_ = f.tab.Scatter(f.pd, sgl, 1, msg[:19])
		_ = f.tab.GatherAt(f.pd, sgl, 1, dst)
	})
	if allocs != 0 {
		t.Errorf("Scatter and GatherAt: %v allocations per run, want 0", allocs)
	}
}

// ViewAt returns a message's bytes where they lie when they lie in one
// piece (one SGE, one chunk of a fast-registration MR) and says no
// otherwise; it checks the SGE it returns from as GatherAt does.
func TestViewAt(t *testing.T) {
	f := newFixture(t)
	fast, iova, p := twoChunks(t, f)
	plain := []byte("ABCDEFGH")
	mr := f.reg(plain, 0x1000, 0) // no right needed to read locally
	copy(p[0][ps-10:], "0123456789")
	copy(p[1], "abcdefghij")
	// 4 bytes of the plain MR, an empty SGE with a garbage key, 16 bytes
	// of the fast MR across its chunk boundary: "CDEF" "23456789abcdefgh".
	sgl := []ibv.SGE{sge(0x1002, 4, mr.LKey()), sge(0, 0, 0xdead), sge(iova+2, 16, fast.LKey())}
	for _, c := range []struct {
		off  uint64
		n    int
		want string // "" for not in one piece
	}{
		{0, 4, "CDEF"}, {1, 2, "DE"}, {4, 8, "23456789"}, {12, 8, "abcdefgh"}, {13, 3, "bcd"},
		{2, 4, ""},  // across two SGEs
		{10, 4, ""}, // across the fast MR's chunks
		{18, 4, ""}, // past the list's end
		{0, 0, ""},  // nothing to view
	} {
		b, ok, err := f.tab.ViewAt(f.pd, sgl, c.off, c.n)
		if err != nil || ok != (c.want != "") || string(b) != c.want {
			t.Errorf("ViewAt(%d, %d) = %q, %v, %v; want %q", c.off, c.n, b, ok, err, c.want)
		}
	}
	// Where they lie: the MR's own memory, not a copy, and no more of it.
	b, _, _ := f.tab.ViewAt(f.pd, sgl, 0, 4)
	plain[2] = 'c'
	if string(b) != "cDEF" || cap(b) != 4 {
		t.Errorf("the view reads %q (cap %d) after the MR changed, want cDEF (cap 4)", b, cap(b))
	}

	_, ok, err := f.tab.ViewAt(f.pd, []ibv.SGE{sge(0x1000, 8, flipKeyByte(mr.LKey()))}, 0, 4)
	if ok {
		t.Error("ViewAt with a bad key gave a view")
	}
	wantErr(t, "ViewAt with a bad key", err, ErrInvalidKey)
	_, _, err = f.tab.ViewAt(f.pd, []ibv.SGE{sge(0x1004, 8, mr.LKey())}, 0, 4)
	wantErr(t, "ViewAt of an SGE past its MR", err, ErrRange)
	// SGEs before the offset are not looked up.
	if b, ok, err := f.tab.ViewAt(f.pd, []ibv.SGE{sge(0, 4, 0xdead), sge(0x1000, 4, mr.LKey())}, 4, 4); !ok || err != nil || string(b) != "ABcD" {
		t.Errorf("ViewAt past a bad SGE = %q, %v, %v; want ABcD", b, ok, err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = f.tab.ViewAt(f.pd, sgl, 12, 8) }); allocs != 0 {
		t.Errorf("ViewAt: %v allocations per run, want 0", allocs)
	}
}

func TestCopyAt(t *testing.T) {
	a, b, c := []byte("..."), []byte{}, []byte("....")
	pieces := [][]byte{a, b, c}
	if n := CopyInAt(pieces, 2, []byte("XYZ")); n != 3 || string(a)+string(c) != "..XYZ.." {
		t.Errorf("CopyInAt(2): %d, %q %q; want 3, ..X YZ..", n, a, c)
	}
	if n := CopyInAt(pieces, 6, []byte("12")); n != 1 || string(c) != "YZ.1" {
		t.Errorf("CopyInAt(6) of 2 bytes: %d %q; want 1 YZ.1", n, c)
	}
	out := make([]byte, 10)
	if n := CopyOutAt(out, pieces, 1); n != 6 || string(out[:n]) != ".XYZ.1" {
		t.Errorf("CopyOutAt(1): %d %q; want 6 .XYZ.1", n, out[:n])
	}
	if n := CopyOutAt(out, pieces, 7); n != 0 {
		t.Errorf("CopyOutAt past the end: %d, want 0", n)
	}
}
