package mem

import (
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

func TestRemote(t *testing.T) {
	f := newFixture(t)
	const base = 0x10_0000
	buf := make([]byte, 256)
	for i := range buf {
		buf[i] = byte(i)
	}
	mrAll := f.reg(buf, base, allRemote)
	mrRead := f.reg(buf, base, RR)
	mrWrite := f.reg(buf, base, LW|RW)
	mrAtomic := f.reg(buf, base, LW|RA)
	mrLocal := f.reg(buf, base, LW)
	mrZB := f.reg(buf, base, allRemote|ZB)
	mrTop := f.reg(buf, ^uint64(0)-256, allRemote) // ends at the last address
	mrOther, err := f.tab.RegMR(f.pd2, buf, base, true, allRemote)
	if err != nil {
		t.Fatal(err)
	}
	mrGone := f.reg(buf, base, allRemote)
	if err := f.tab.DeregMR(mrGone); err != nil {
		t.Fatal(err)
	}
	unusedIndex := (mrAll.RKey()>>8 + 1000) << 8

	tests := []struct {
		name    string
		pd      *PD
		rkey    uint32
		va      uint64
		length  uint32
		need    ibv.Access
		want    error
		wantOff int // offset into buf of the result, on success
	}{
		{"read whole region", f.pd, mrAll.RKey(), base, 256, RR, nil, 0},
		{"write inside", f.pd, mrAll.RKey(), base + 10, 20, RW, nil, 10},
		{"last byte", f.pd, mrAll.RKey(), base + 255, 1, RR, nil, 255},
		{"read+write at once", f.pd, mrAll.RKey(), base, 8, RR | RW, nil, 0},
		{"flush global", f.pd, mrAll.RKey(), base, 8, FG, nil, 0},

		{"key index 0", f.pd, 0x00_0000_42, base, 8, RR, ErrInvalidKey, 0},
		{"key index beyond 2^20", f.pd, (MaxMWIndex + 1) << 8, base, 8, RR, ErrInvalidKey, 0},
		{"unused MR index", f.pd, unusedIndex, base, 8, RR, ErrInvalidKey, 0},
		{"key byte mismatch", f.pd, flipKeyByte(mrAll.RKey()), base, 8, RR, ErrInvalidKey, 0},
		{"deregistered key", f.pd, mrGone.RKey(), base, 8, RR, ErrInvalidKey, 0},
		{"wrong PD", f.pd, mrOther.RKey(), base, 8, RR, ErrWrongPD, 0},
		{"wrong PD wins over missing right", f.pd2, mrRead.RKey(), base, 8, RW, ErrWrongPD, 0},

		{"read without REMOTE_READ", f.pd, mrWrite.RKey(), base, 8, RR, ErrAccess, 0},
		{"write without REMOTE_WRITE", f.pd, mrRead.RKey(), base, 8, RW, ErrAccess, 0},
		{"atomic without REMOTE_ATOMIC", f.pd, mrWrite.RKey(), base, 8, RA, ErrAccess, 0},
		{"flush global without FLUSH_GLOBAL", f.pd, mrWrite.RKey(), base, 8, FG, ErrAccess, 0},
		{"flush persistent without FLUSH_PERSISTENT", f.pd, mrAll.RKey(), base, 8, FP, ErrAccess, 0},
		{"read+write with read only", f.pd, mrRead.RKey(), base, 8, RR | RW, ErrAccess, 0},
		{"local-only MR", f.pd, mrLocal.RKey(), base, 8, RR, ErrAccess, 0},
		{"atomic with REMOTE_ATOMIC", f.pd, mrAtomic.RKey(), base + 8, 8, RA, nil, 8},

		{"starts one byte below", f.pd, mrAll.RKey(), base - 1, 8, RR, ErrRange, 0},
		{"ends one byte above", f.pd, mrAll.RKey(), base + 249, 8, RR, ErrRange, 0},
		{"longer than the region", f.pd, mrAll.RKey(), base, 257, RR, ErrRange, 0},
		{"va far above", f.pd, mrAll.RKey(), base + 1<<40, 1, RR, ErrRange, 0},
		{"va+len overflows", f.pd, mrTop.RKey(), ^uint64(0) - 3, 8, RR, ErrRange, 0},
		{"va+len overflows from 0", f.pd, mrAll.RKey(), ^uint64(0), 2, RR, ErrRange, 0},
		{"top region last byte", f.pd, mrTop.RKey(), ^uint64(0) - 1, 1, RR, nil, 255},

		{"zero-based at 0", f.pd, mrZB.RKey(), 0, 8, RR, nil, 0},
		{"zero-based at 248", f.pd, mrZB.RKey(), 248, 8, RW, nil, 248},
		{"zero-based with the iova", f.pd, mrZB.RKey(), base, 8, RR, ErrRange, 0},
		{"zero-based past the end", f.pd, mrZB.RKey(), 250, 8, RR, ErrRange, 0},

		{"zero length skips a garbage key", f.pd, 0xdeadbeef, 1 << 63, 0, RR | RW, nil, 0},
		{"zero length skips a wrong PD", f.pd2, mrAll.RKey(), base, 0, RR, nil, 0},
		{"zero length skips missing rights", f.pd, mrRead.RKey(), base, 0, RW, nil, 0},
	}
	for _, tc := range tests {
		got, err := f.tab.Remote(tc.pd, 1, tc.rkey, tc.va, tc.length, tc.need)
		wantErr(t, tc.name, err, tc.want)
		switch {
		case err != nil:
			if got != nil {
				t.Errorf("%s: got %d bytes with the error, want nil", tc.name, len(got))
			}
		case tc.length == 0:
			if got != nil {
				t.Errorf("%s: got %d bytes, want nil", tc.name, len(got))
			}
		default:
			if !same(got, buf[tc.wantOff:tc.wantOff+int(tc.length)]) {
				t.Errorf("%s: got %d bytes starting %v, want buf[%d:%d]", tc.name, len(got), got[:1], tc.wantOff, tc.wantOff+int(tc.length))
			}
			if cap(got) != len(got) {
				t.Errorf("%s: cap %d > len %d: the caller could append into memory outside the range", tc.name, cap(got), len(got))
			}
		}
	}
}

func TestRemoteWriteReachesMemory(t *testing.T) {
	f := newFixture(t)
	buf := make([]byte, 32)
	mr := f.reg(buf, 0x5000, LW|RW|RR)
	b, err := f.tab.Remote(f.pd, 1, mr.RKey(), 0x5008, 4, RW)
	if err != nil {
		t.Fatal(err)
	}
	copy(b, "abcd")
	if got := string(buf[8:12]); got != "abcd" {
		t.Errorf("registered memory after a remote write: got %q, want %q", got, "abcd")
	}
}

func TestLocal(t *testing.T) {
	f := newFixture(t)
	const base = 0x2000
	buf := make([]byte, 128)
	mrRO := f.reg(buf, base, 0)
	mrRW := f.reg(buf, base, LW)
	mrZB := f.reg(buf, base, LW|ZB)
	mrOther, err := f.tab.RegMR(f.pd2, buf, base, true, LW)
	if err != nil {
		t.Fatal(err)
	}
	mrGone := f.reg(buf, base, LW)
	if err := f.tab.DeregMR(mrGone); err != nil {
		t.Fatal(err)
	}
	fast, err := f.tab.AllocMR(f.pd, 4)
	if err != nil {
		t.Fatal(err)
	}
	mw := f.allocMW(1)

	tests := []struct {
		name    string
		pd      *PD
		sge     ibv.SGE
		write   bool
		want    error
		wantOff int
	}{
		{"read of a read-only MR", f.pd, ibv.SGE{Addr: base, Length: 128, LKey: mrRO.LKey()}, false, nil, 0},
		{"write of a LOCAL_WRITE MR", f.pd, ibv.SGE{Addr: base + 5, Length: 10, LKey: mrRW.LKey()}, true, nil, 5},
		{"write without LOCAL_WRITE", f.pd, ibv.SGE{Addr: base, Length: 8, LKey: mrRO.LKey()}, true, ErrAccess, 0},
		{"key byte mismatch", f.pd, ibv.SGE{Addr: base, Length: 8, LKey: flipKeyByte(mrRW.LKey())}, false, ErrInvalidKey, 0},
		{"key index 0", f.pd, ibv.SGE{Addr: base, Length: 8, LKey: 0x17}, false, ErrInvalidKey, 0},
		{"deregistered key", f.pd, ibv.SGE{Addr: base, Length: 8, LKey: mrGone.LKey()}, false, ErrInvalidKey, 0},
		{"free fast-reg MR", f.pd, ibv.SGE{Addr: 0, Length: 8, LKey: fast.LKey()}, false, ErrInvalidKey, 0},
		{"a window's key", f.pd, ibv.SGE{Addr: base, Length: 8, LKey: mw.RKey()}, false, ErrInvalidKey, 0},
		{"wrong PD", f.pd, ibv.SGE{Addr: base, Length: 8, LKey: mrOther.LKey()}, false, ErrWrongPD, 0},
		{"below", f.pd, ibv.SGE{Addr: base - 1, Length: 8, LKey: mrRW.LKey()}, false, ErrRange, 0},
		{"above", f.pd, ibv.SGE{Addr: base + 121, Length: 8, LKey: mrRW.LKey()}, false, ErrRange, 0},
		{"overflow", f.pd, ibv.SGE{Addr: ^uint64(0) - 1, Length: 8, LKey: mrRW.LKey()}, false, ErrRange, 0},
		{"zero-based", f.pd, ibv.SGE{Addr: 120, Length: 8, LKey: mrZB.LKey()}, true, nil, 120},
		{"zero length skips a garbage key", f.pd, ibv.SGE{Addr: 7, Length: 0, LKey: 0xffffffff}, true, nil, 0},
		{"zero length skips a wrong PD", f.pd2, ibv.SGE{Addr: base, Length: 0, LKey: mrRO.LKey()}, true, nil, 0},
	}
	for _, tc := range tests {
		got, err := f.tab.Local(tc.pd, tc.sge, tc.write)
		wantErr(t, tc.name, err, tc.want)
		if err == nil && tc.sge.Length > 0 && !same(got, buf[tc.wantOff:tc.wantOff+int(tc.sge.Length)]) {
			t.Errorf("%s: got %d bytes, want buf[%d:%d]", tc.name, len(got), tc.wantOff, tc.wantOff+int(tc.sge.Length))
		}
		if err == nil && tc.sge.Length == 0 && len(got) != 0 {
			t.Errorf("%s: got %d bytes, want none", tc.name, len(got))
		}
		gotV, errV := f.tab.LocalV(tc.pd, tc.sge, tc.write, nil)
		wantErr(t, tc.name+" (LocalV)", errV, tc.want)
		if errV == nil && tc.sge.Length > 0 && (len(gotV) != 1 || !same(gotV[0], got)) {
			t.Errorf("%s: LocalV got %d pieces, want the one Local returned", tc.name, len(gotV))
		}
	}
}

func TestFlush(t *testing.T) {
	f := newFixtureLim(t, Limits{KeySeed: testSeed, PersistentMemory: true})
	const base = 0x9000
	buf := make([]byte, 64)
	mrG := f.reg(buf, base, FG)
	mrGP := f.reg(buf, base, FG|FP)
	mrR := f.reg(buf, base, RR)
	tests := []struct {
		name   string
		rkey   uint32
		va     uint64
		length uint32
		need   ibv.Access
		level  uint8
		want   error
	}{
		{"global range", mrG.RKey(), base, 64, FG, FlushRange, nil},
		{"global+persistent", mrGP.RKey(), base, 8, FG | FP, FlushRange, nil},
		{"persistent on a global-only MR", mrG.RKey(), base, 8, FP, FlushRange, ErrAccess},
		{"no flush right", mrR.RKey(), base, 8, FG, FlushRange, ErrAccess},
		{"range outside", mrG.RKey(), base + 60, 8, FG, FlushRange, ErrRange},
		{"zero length still checks the key", flipKeyByte(mrG.RKey()), base, 0, FG, FlushRange, ErrInvalidKey},
		{"zero length at the end", mrG.RKey(), base + 64, 0, FG, FlushRange, nil},
		{"zero length past the end", mrG.RKey(), base + 65, 0, FG, FlushRange, ErrRange},
		{"whole MR ignores va and length", mrG.RKey(), 1, 1 << 31, FG, FlushMR, nil},
		{"whole MR still checks rights", mrR.RKey(), base, 8, FG, FlushMR, ErrAccess},
		{"need with a non-flush right", mrG.RKey(), base, 8, FG | RR, FlushRange, errno.Invalid},
		{"empty need", mrG.RKey(), base, 8, 0, FlushRange, errno.Invalid},
		{"bad level", mrG.RKey(), base, 8, FG, 2, errno.Invalid},
	}
	for _, tc := range tests {
		wantErr(t, tc.name, f.tab.Flush(f.pd, 1, tc.rkey, tc.va, tc.length, tc.need, tc.level), tc.want)
	}
}

func TestCopyInOut(t *testing.T) {
	a, b, c := make([]byte, 3), make([]byte, 0), make([]byte, 4)
	pieces := [][]byte{a, b, c}
	if n := CopyIn(pieces, []byte("abcdefghij")); n != 7 {
		t.Errorf("CopyIn of 10 bytes into 7: got %d, want 7", n)
	}
	if string(a)+string(c) != "abcdefg" {
		t.Errorf("CopyIn: got %q %q, want abc defg", a, c)
	}
	if n := CopyIn(pieces, []byte("XY")); n != 2 || string(a) != "XYc" {
		t.Errorf("CopyIn of 2 bytes: got %d %q, want 2 XYc", n, a)
	}
	out := make([]byte, 5)
	if n := CopyOut(out, pieces); n != 5 || string(out) != "XYcde" {
		t.Errorf("CopyOut into 5: got %d %q, want 5 XYcde", n, out)
	}
	out = make([]byte, 10)
	if n := CopyOut(out, pieces); n != 7 || string(out[:7]) != "XYcdefg" {
		t.Errorf("CopyOut into 10: got %d %q, want 7 XYcdefg", n, out[:n])
	}
}
