package mem

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/softnic/softnic/ibv"
)

func TestAtomicAlignment(t *testing.T) {
	f := newFixture(t)
	buf := aligned(64, 8)
	mr := f.reg(buf, 0x1000, LW|RA|RW)
	mrOdd := f.reg(buf, 0x1003, LW|RA|RW) // aligned memory, misaligned IOVA
	tests := []struct {
		name string
		rkey uint32
		va   uint64
		need ibv.Access
		want error
	}{
		{"aligned atomic", mr.RKey(), 0x1008, RA, nil},
		{"misaligned atomic", mr.RKey(), 0x1004, RA, ErrAlign},
		{"misaligned by one", mr.RKey(), 0x1001, RA, ErrAlign},
		{"IOVA alignment counts, not memory's", mrOdd.RKey(), 0x1003, RA, ErrAlign},
		{"aligned IOVA over misaligned memory", mrOdd.RKey(), 0x1008, RA, nil},
		{"range checked before alignment", mr.RKey(), 0x1041, RA, ErrRange},
		{"key checked before alignment", flipKeyByte(mr.RKey()), 0x1001, RA, ErrInvalidKey},
		{"aligned atomic write", mr.RKey(), 0x1010, RW, nil},
		{"misaligned atomic write", mr.RKey(), 0x1012, RW, ErrAlign},
		{"last 8 bytes", mr.RKey(), 0x1038, RA, nil},
		{"past the end", mr.RKey(), 0x1040, RA, ErrRange},
	}
	for _, tc := range tests {
		b, err := f.tab.RemoteAtomic(f.pd, 1, tc.rkey, tc.va, tc.need)
		wantErr(t, tc.name+" (RemoteAtomic)", err, tc.want)
		if err == nil && len(b) != 8 {
			t.Errorf("%s: RemoteAtomic got %d bytes, want 8", tc.name, len(b))
		}
		if tc.need == RA {
			_, err := f.tab.Remote(f.pd, 1, tc.rkey, tc.va, 8, tc.need)
			wantErr(t, tc.name+" (Remote)", err, tc.want)
		}
	}
	// Plain Remote with REMOTE_WRITE has no alignment rule: it cannot tell
	// an ATOMIC WRITE from an RDMA WRITE.
	if _, err := f.tab.Remote(f.pd, 1, mr.RKey(), 0x1003, 8, RW); err != nil {
		t.Errorf("Remote write at an odd address: got %v, want nil", err)
	}
}

func TestAtomics(t *testing.T) {
	f := newFixture(t)
	buf := aligned(16, 8)
	mr := f.reg(buf, 0x2000, LW|RA|RW)
	word, err := f.tab.RemoteAtomic(f.pd, 1, mr.RKey(), 0x2008, RA)
	if err != nil {
		t.Fatal(err)
	}
	set := func(v uint64) { binary.NativeEndian.PutUint64(buf[8:], v) }
	get := func() uint64 { return binary.NativeEndian.Uint64(buf[8:]) }

	tests := []struct {
		name     string
		initial  uint64
		op       func() uint64
		wantOrig uint64
		wantMem  uint64
	}{
		{"CAS hit", 5, func() uint64 { return f.tab.CompareSwap(word, 5, 9) }, 5, 9},
		{"CAS miss", 5, func() uint64 { return f.tab.CompareSwap(word, 6, 9) }, 5, 5},
		{"CAS hit with equal swap", 7, func() uint64 { return f.tab.CompareSwap(word, 7, 7) }, 7, 7},
		{"FAA", 40, func() uint64 { return f.tab.FetchAdd(word, 2) }, 40, 42},
		{"FAA wraps", ^uint64(0) - 1, func() uint64 { return f.tab.FetchAdd(word, 5) }, ^uint64(0) - 1, 3},
		{"FAA of -1", 10, func() uint64 { return f.tab.FetchAdd(word, ^uint64(0)) }, 10, 9},
		{"atomic write", 1, func() uint64 { f.tab.AtomicWrite(word, 0x0102030405060708); return 1 }, 1, 0x0102030405060708},
	}
	for _, tc := range tests {
		set(tc.initial)
		if got := tc.op(); got != tc.wantOrig {
			t.Errorf("%s: returned %#x, want the original %#x", tc.name, got, tc.wantOrig)
		}
		if got := get(); got != tc.wantMem {
			t.Errorf("%s: memory holds %#x, want %#x", tc.name, got, tc.wantMem)
		}
	}
	if got := binary.NativeEndian.Uint64(buf[:8]); got != 0 {
		t.Errorf("neighbouring word changed to %#x, want 0", got)
	}

	// Native endian: an ATOMIC WRITE of the payload's native load stores the
	// payload bytes unchanged (rxe_mr_do_atomic_write).
	payload := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	f.tab.AtomicWrite(word, binary.NativeEndian.Uint64(payload))
	if string(buf[8:]) != string(payload) {
		t.Errorf("ATOMIC WRITE of payload % x: memory % x, want the payload", payload, buf[8:])
	}
}

func TestAtomicsConcurrent(t *testing.T) {
	f := newFixture(t)
	buf := aligned(8, 8)
	mr := f.reg(buf, 0, LW|RA)
	word, err := f.tab.RemoteAtomic(f.pd, 1, mr.RKey(), 0, RA)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				if w%2 == 0 {
					f.tab.FetchAdd(word, 1)
					continue
				}
				for {
					old := f.tab.FetchAdd(word, 0)
					if f.tab.CompareSwap(word, old, old+1) == old {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if got := binary.NativeEndian.Uint64(buf); got != workers*each {
		t.Errorf("after %d increments by FetchAdd and CompareSwap: got %d", workers*each, got)
	}
}
