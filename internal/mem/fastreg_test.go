package mem

import (
	"errors"
	"testing"

	"github.com/softnic/softnic/internal/errno"
)

const ps = MinPageSize

// pages returns n page-aligned pages, each a separate slice of one arena,
// with a one-page gap after each so that no two are contiguous in memory.
func pages(n int) [][]byte {
	arena := aligned(2*n*ps, ps)
	out := make([][]byte, n)
	for i := range out {
		out[i] = arena[2*i*ps : (2*i+1)*ps : (2*i+1)*ps]
	}
	return out
}

func TestAllocMR(t *testing.T) {
	f := newFixture(t)
	for _, n := range []int{0, -1, DefaultMaxFastRegPages + 1} {
		_, err := f.tab.AllocMR(f.pd, n)
		wantErr(t, "AllocMR with a bad page count", err, errno.Invalid)
	}
	mr, err := f.tab.AllocMR(f.pd, DefaultMaxFastRegPages)
	if err != nil {
		t.Fatal(err)
	}
	if !mr.Fast() || mr.Valid() || mr.Bytes() != nil || mr.Len() != 0 {
		t.Errorf("fresh fast-reg MR: Fast %v Valid %v Bytes %v Len %d; want true false nil 0", mr.Fast(), mr.Valid(), mr.Bytes(), mr.Len())
	}
	_, err = f.tab.Remote(f.pd, 1, mr.RKey(), 0, 8, RR)
	wantErr(t, "Remote on a FREE fast-reg MR", err, ErrInvalidKey)

	// The fast-reg operations refuse an ordinary MR.
	plain := f.reg(make([]byte, 8), 0, LW)
	_, err = f.tab.MapMRSG(plain, pages(1), ps)
	wantErr(t, "MapMRSG of an ordinary MR", err, errno.Invalid)
	wantErr(t, "RegFast of an ordinary MR", f.tab.RegFast(f.pd, plain, plain.LKey(), 0, 8, LW), errno.Invalid)
}

func TestMapMRSG(t *testing.T) {
	p := pages(6)
	contig := aligned(3*ps, ps) // three contiguous pages
	big := aligned(8*ps, 2*ps)  // 8 KiB-aligned
	tests := []struct {
		name     string
		maxPages int
		pageSize int
		sg       [][]byte
		wantN    int
		wantLen  int
		wantErr  error
	}{
		{"one full page", 4, ps, [][]byte{p[0]}, 1, ps, nil},
		{"first element at an offset in its page", 4, ps, [][]byte{p[0][100:], p[1], p[2][:10]}, 3, ps - 100 + ps + 10, nil},
		{"first element at an offset, short", 4, ps, [][]byte{p[0][100:200]}, 1, 100, nil},
		{"short last element", 4, ps, [][]byte{p[0], p[1], p[2][:1]}, 3, 2*ps + 1, nil},
		{"unaligned middle element stops the mapping", 4, ps, [][]byte{p[0], p[1][8:], p[2]}, 1, ps, nil},
		{"element after a short one stops the mapping", 4, ps, [][]byte{p[0], p[1][:100], p[2]}, 2, ps + 100, nil},
		{"first element ending mid-page stops the next", 4, ps, [][]byte{p[0][:100], p[1]}, 1, 100, nil},
		{"contiguous continuation mid-page is coalesced", 4, ps, [][]byte{contig[:100], contig[100:ps], p[1]}, 3, 2 * ps, nil},
		{"contiguous continuation across pages", 3, ps, [][]byte{contig[:100], contig[100 : 3*ps]}, 2, 3 * ps, nil},
		{"multi-page element", 3, ps, [][]byte{contig, p[0]}, 1, 3 * ps, nil},
		{"page budget stops the mapping", 2, ps, [][]byte{p[0], p[1], p[2]}, 2, 2 * ps, nil},
		{"first element over the budget", 2, ps, [][]byte{contig}, 0, 0, errno.NoMemory},
		{"8 KiB pages: 8 KiB-aligned elements", 4, 2 * ps, [][]byte{big[:2*ps], big[4*ps : 6*ps]}, 2, 4 * ps, nil},
		{"8 KiB pages: 4 KiB-aligned element stops", 4, 2 * ps, [][]byte{big[:2*ps], big[5*ps : 6*ps]}, 1, 2 * ps, nil},
		{"zero-length later element stops", 4, ps, [][]byte{p[0], p[1][:0], p[2]}, 1, ps, nil},
		{"zero-length first element", 4, ps, [][]byte{p[0][:0]}, 0, 0, errno.Invalid},
		{"empty list", 4, ps, nil, 0, 0, nil},
		{"page size not a power of two", 4, 3 * ps, [][]byte{p[0]}, 0, 0, errno.Invalid},
		{"page size below 4 KiB", 4, 2048, [][]byte{p[0]}, 0, 0, errno.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			mr, err := f.tab.AllocMR(f.pd, tc.maxPages)
			if err != nil {
				t.Fatal(err)
			}
			n, err := f.tab.MapMRSG(mr, tc.sg, tc.pageSize)
			wantErr(t, "MapMRSG", err, tc.wantErr)
			if n != tc.wantN {
				t.Errorf("mapped elements: got %d, want %d", n, tc.wantN)
			}
			iova, length := mr.Mapped()
			if length != uint64(tc.wantLen) {
				t.Errorf("mapped length: got %d, want %d", length, tc.wantLen)
			}
			if n > 0 && iova != addrOf(tc.sg[0]) {
				t.Errorf("mapped iova: got %#x, want the first element's address %#x", iova, addrOf(tc.sg[0]))
			}
		})
	}
}

func TestRegFast(t *testing.T) {
	f := newFixture(t)
	mr, err := f.tab.AllocMR(f.pd, 4)
	if err != nil {
		t.Fatal(err)
	}
	key0 := mr.LKey()
	wantErr(t, "RegFast with nothing mapped", f.tab.RegFast(f.pd, mr, key0, 0x1000, 8, LW), errno.Invalid)
	p := pages(2)
	if n, err := f.tab.MapMRSG(mr, p, ps); n != 2 || err != nil {
		t.Fatalf("MapMRSG: %d, %v", n, err)
	}
	rotate := func(k uint32) uint32 { return k&^0xff | (k+1)&0xff }

	refusals := []struct {
		name   string
		pd     *PD
		key    uint32
		iova   uint64
		length uint64
		access uint32
		want   error
	}{
		{"key index changed", f.pd, key0 + 0x100, 0x1000, ps, uint32(LW), errno.Invalid},
		{"key index of another MR", f.pd, (key0>>8+5)<<8 | key0&0xff, 0x1000, ps, uint32(LW), errno.Invalid},
		{"QP of another PD", f.pd2, rotate(key0), 0x1000, ps, uint32(LW), ErrWrongPD},
		{"remote write without local write", f.pd, rotate(key0), 0x1000, ps, uint32(RW), errno.Invalid},
		{"zero-based", f.pd, rotate(key0), 0, ps, uint32(LW | ZB), errno.Invalid},
		{"length 0", f.pd, rotate(key0), 0x1000, 0, uint32(LW), errno.Invalid},
		{"longer than mapped", f.pd, rotate(key0), 0x1000, 2*ps + 1, uint32(LW), ErrRange},
		{"iova+length overflows", f.pd, rotate(key0), ^uint64(0) - 10, ps, uint32(LW), errno.Invalid},
	}
	for _, tc := range refusals {
		wantErr(t, tc.name, f.tab.RegFast(tc.pd, mr, tc.key, tc.iova, tc.length, accessOf(tc.access)), tc.want)
		if mr.Valid() || mr.LKey() != key0 {
			t.Fatalf("%s: refused RegFast changed the MR: Valid %v key %#x", tc.name, mr.Valid(), mr.LKey())
		}
	}

	// Only the key byte may change; the old key dies.
	key1 := rotate(key0)
	if err := f.tab.RegFast(f.pd, mr, key1, 0x1000, 2*ps, LW|RR|RW); err != nil {
		t.Fatalf("RegFast: %v", err)
	}
	if mr.LKey() != key1 || mr.RKey() != key1 || !mr.Valid() || mr.Addr() != 0x1000 || mr.Len() != 2*ps {
		t.Errorf("after RegFast: keys %#x/%#x Valid %v Addr %#x Len %d", mr.LKey(), mr.RKey(), mr.Valid(), mr.Addr(), mr.Len())
	}
	_, err = f.tab.Remote(f.pd, 1, key0, 0x1000, 8, RR)
	wantErr(t, "Remote with the key before rotation", err, ErrInvalidKey)
	if b, err := f.tab.Remote(f.pd, 1, key1, 0x1000, 8, RR); err != nil || !same(b, p[0][:8]) {
		t.Errorf("Remote with the rotated key: %d bytes, %v", len(b), err)
	}
	if got, err := f.tab.MRByKey(key1); got != mr || err != nil {
		t.Errorf("MRByKey(rotated key): %p, %v", got, err)
	}

	// A VALID MR can be neither registered nor remapped.
	wantErr(t, "RegFast of a VALID MR", f.tab.RegFast(f.pd, mr, rotate(key1), 0x1000, 8, LW), errno.Busy)
	_, err = f.tab.MapMRSG(mr, p, ps)
	wantErr(t, "MapMRSG of a VALID MR", err, errno.Busy)

	// LOCAL_INV frees it; then it can be remapped and registered again.
	if err := f.tab.Invalidate(f.pd, 1, key1); err != nil {
		t.Fatalf("Invalidate: %v", err)
	}
	_, err = f.tab.Remote(f.pd, 1, key1, 0x1000, 8, RR)
	wantErr(t, "Remote after LOCAL_INV", err, ErrInvalidKey)
	_, err = f.tab.Local(f.pd, sge(0x1000, 8, key1), false)
	wantErr(t, "Local after LOCAL_INV", err, ErrInvalidKey)
	if n, err := f.tab.MapMRSG(mr, p[1:], ps); n != 1 || err != nil {
		t.Fatalf("MapMRSG after invalidation: %d, %v", n, err)
	}
	key2 := rotate(key1)
	if err := f.tab.RegFast(f.pd, mr, key2, 0x8000, 16, LW|RR); err != nil {
		t.Fatalf("RegFast after invalidation: %v", err)
	}
	if b, err := f.tab.Remote(f.pd, 1, key2, 0x8008, 8, RR); err != nil || !same(b, p[1][8:16]) {
		t.Errorf("Remote after re-registration: %d bytes, %v", len(b), err)
	}
	_, err = f.tab.Remote(f.pd, 1, key2, 0x8010, 1, RR)
	wantErr(t, "Remote past RegFast's length", err, ErrRange)
	// Deregistering a fast-reg MR works in any state.
	wantErr(t, "DeregMR of a VALID fast-reg MR", f.tab.DeregMR(mr), nil)
	wantErr(t, "RegFast after DeregMR", f.tab.RegFast(f.pd, mr, key2, 0, 8, LW), errno.Invalid)
}

func TestFastRegMultiChunk(t *testing.T) {
	f := newFixture(t)
	mr, err := f.tab.AllocMR(f.pd, 8)
	if err != nil {
		t.Fatal(err)
	}
	p := pages(3)
	for i, pg := range p {
		for j := range pg {
			pg[j] = byte(i)
		}
	}
	// 100 bytes at the end of page 0, page 1, 50 bytes of page 2.
	sg := [][]byte{p[0][ps-100:], p[1], p[2][:50]}
	if n, err := f.tab.MapMRSG(mr, sg, ps); n != 3 || err != nil {
		t.Fatalf("MapMRSG: %d, %v", n, err)
	}
	iova, length := mr.Mapped()
	if err := f.tab.RegFast(f.pd, mr, mr.LKey(), iova, length, LW|RR|RW); err != nil {
		t.Fatalf("RegFast at the mapped iova: %v", err)
	}
	if mr.Bytes() != nil {
		t.Errorf("Bytes of a three-chunk MR: got %d bytes, want nil", len(mr.Bytes()))
	}
	if ch := mr.Chunks(); len(ch) != 3 || !same(ch[0], sg[0]) || !same(ch[1], sg[1]) || !same(ch[2], sg[2]) {
		t.Errorf("Chunks: got %d pieces, want the three elements", len(ch))
	}
	key := mr.RKey()

	tests := []struct {
		name   string
		off    uint64 // from iova
		length uint32
		want   [][]byte
		err    error
	}{
		{"inside the first chunk", 10, 20, [][]byte{sg[0][10:30]}, nil},
		{"whole second chunk", 100, ps, [][]byte{sg[1]}, nil},
		{"across the first two chunks", 90, 20, [][]byte{sg[0][90:], sg[1][:10]}, nil},
		{"across all three", 0, uint32(length), [][]byte{sg[0], sg[1], sg[2]}, nil},
		{"last byte", length - 1, 1, [][]byte{sg[2][49:]}, nil},
		{"one past the end", length - 1, 2, nil, ErrRange},
	}
	for _, tc := range tests {
		got, err := f.tab.RemoteV(f.pd, 1, key, iova+tc.off, tc.length, RR, nil)
		wantErr(t, tc.name+" (RemoteV)", err, tc.err)
		if err == nil {
			if len(got) != len(tc.want) {
				t.Errorf("%s: RemoteV got %d pieces, want %d", tc.name, len(got), len(tc.want))
			} else {
				for i := range got {
					if !same(got[i], tc.want[i]) {
						t.Errorf("%s: piece %d: got %d bytes, want %d", tc.name, i, len(got[i]), len(tc.want[i]))
					}
				}
			}
		}
		one, err := f.tab.Remote(f.pd, 1, key, iova+tc.off, tc.length, RR)
		switch {
		case tc.err != nil:
			wantErr(t, tc.name+" (Remote)", err, tc.err)
		case len(tc.want) > 1:
			wantErr(t, tc.name+" (Remote)", err, ErrDiscontiguous)
			if !errors.Is(err, ErrRange) {
				t.Errorf("%s: ErrDiscontiguous %v does not wrap ErrRange", tc.name, err)
			}
		default:
			if err != nil || !same(one, tc.want[0]) {
				t.Errorf("%s: Remote got %d bytes, %v; want the one piece", tc.name, len(one), err)
			}
		}
		lv, err := f.tab.LocalV(f.pd, sge(iova+tc.off, tc.length, key), true, nil)
		wantErr(t, tc.name+" (LocalV)", err, tc.err)
		if err == nil && len(lv) != len(tc.want) {
			t.Errorf("%s: LocalV got %d pieces, want %d", tc.name, len(lv), len(tc.want))
		}
	}

	// A write spanning chunks lands in the right places.
	pieces, err := f.tab.RemoteV(f.pd, 1, key, iova+98, 4, RW, make([][]byte, 0, 4))
	if err != nil {
		t.Fatal(err)
	}
	if n := CopyIn(pieces, []byte("WXYZ")); n != 4 {
		t.Fatalf("CopyIn: %d", n)
	}
	if got := string(p[0][ps-2:]) + string(p[1][:2]); got != "WXYZ" {
		t.Errorf("bytes across the chunk boundary: got %q, want WXYZ", got)
	}
	out := make([]byte, 4)
	CopyOut(out, pieces)
	if string(out) != "WXYZ" {
		t.Errorf("CopyOut: got %q, want WXYZ", out)
	}
}

// Elements that continue each other mid-page are separate chunks, so even
// an aligned atomic can straddle them.
func TestFastRegAtomicAcrossChunks(t *testing.T) {
	f := newFixture(t)
	mr, err := f.tab.AllocMR(f.pd, 2)
	if err != nil {
		t.Fatal(err)
	}
	contig := aligned(ps, ps)
	if n, err := f.tab.MapMRSG(mr, [][]byte{contig[:100], contig[100:]}, ps); n != 2 || err != nil {
		t.Fatalf("MapMRSG: %d, %v", n, err)
	}
	if err := f.tab.RegFast(f.pd, mr, mr.LKey(), 0, ps, LW|RA); err != nil {
		t.Fatal(err)
	}
	_, err = f.tab.RemoteAtomic(f.pd, 1, mr.RKey(), 96, RA)
	wantErr(t, "aligned 8 bytes across a chunk boundary", err, ErrDiscontiguous)
	if b, err := f.tab.RemoteAtomic(f.pd, 1, mr.RKey(), 104, RA); err != nil || !same(b, contig[104:112]) {
		t.Errorf("RemoteAtomic inside the second chunk: %d bytes, %v", len(b), err)
	}
}

func TestRegFastShorterThanMapped(t *testing.T) {
	f := newFixture(t)
	mr, err := f.tab.AllocMR(f.pd, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := pages(3)
	if n, err := f.tab.MapMRSG(mr, p, ps); n != 3 || err != nil {
		t.Fatalf("MapMRSG: %d, %v", n, err)
	}
	if err := f.tab.RegFast(f.pd, mr, mr.LKey(), 0, ps+10, LW|RR); err != nil {
		t.Fatal(err)
	}
	if ch := mr.Chunks(); len(ch) != 2 || len(ch[1]) != 10 {
		t.Errorf("chunks of a registration shorter than the mapping: got %d, want 2 with the last of 10 bytes", len(ch))
	}
	_, err = f.tab.Remote(f.pd, 1, mr.RKey(), ps+10, 1, RR)
	wantErr(t, "Remote past the registered length", err, ErrRange)
	if b, err := f.tab.Remote(f.pd, 1, mr.RKey(), ps+9, 1, RR); err != nil || !same(b, p[1][9:10]) {
		t.Errorf("Remote at the last registered byte: %d bytes, %v", len(b), err)
	}
}
