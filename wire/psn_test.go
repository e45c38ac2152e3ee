package wire_test

import (
	"testing"

	"github.com/softnic/softnic/wire"
)

func TestPSNAddSub(t *testing.T) {
	tests := []struct {
		p    wire.PSN
		n    uint32
		add  wire.PSN
		sub  wire.PSN
		next wire.PSN
	}{
		{0, 0, 0, 0, 1},
		{0, 1, 1, 0xFFFFFF, 1},
		{0xFFFFFF, 1, 0, 0xFFFFFE, 0},
		{0xFFFFFE, 3, 1, 0xFFFFFB, 0xFFFFFF},
		{5, 1 << 24, 5, 5, 6},
		{5, 1<<24 + 2, 7, 3, 6},
		{0x800000, 0x800000, 0, 0, 0x800001},
		{0x123456, 0xFFFFFFFF, 0x123455, 0x123457, 0x123457},
	}
	for _, tt := range tests {
		if got := tt.p.Add(tt.n); got != tt.add {
			t.Errorf("PSN(%#x).Add(%#x) = %#x, want %#x", uint32(tt.p), tt.n, uint32(got), uint32(tt.add))
		}
		if got := tt.p.Sub(tt.n); got != tt.sub {
			t.Errorf("PSN(%#x).Sub(%#x) = %#x, want %#x", uint32(tt.p), tt.n, uint32(got), uint32(tt.sub))
		}
		if got := tt.p.Next(); got != tt.next {
			t.Errorf("PSN(%#x).Next() = %#x, want %#x", uint32(tt.p), uint32(got), uint32(tt.next))
		}
	}
}

func TestPSNCompare(t *testing.T) {
	const half = 1 << 23
	tests := []struct {
		p, q   wire.PSN
		cmp    int // sign of Compare
		diff   int32
		before bool
		after  bool
	}{
		{0, 0, 0, 0, false, false},
		{1, 0, 1, 1, false, true},
		{0, 1, -1, -1, true, false},
		{0xFFFFFF, 0, -1, -1, true, false}, // 0xFFFFFF is just before 0
		{0, 0xFFFFFF, 1, 1, false, true},
		{0xFFFFF0, 0x10, -1, -0x20, true, false},
		{0x10, 0xFFFFF0, 1, 0x20, false, true},
		{half - 1, 0, 1, half - 1, false, true}, // 2^23-1 ahead is after
		{half, 0, -1, -half, true, false},       // 2^23 ahead is before
		{0, half, -1, -half, true, false},       // symmetric at exactly half
		{half + 1, 0, -1, -(half - 1), true, false},
		{0x123456 + half - 1, 0x123456, 1, half - 1, false, true},
		{(0xFFFFFF + half - 1) & 0xFFFFFF, 0xFFFFFF, 1, half - 1, false, true},
		{(0xFFFFFF + half) & 0xFFFFFF, 0xFFFFFF, -1, -half, true, false},
	}
	for _, tt := range tests {
		c := tt.p.Compare(tt.q)
		if got := sign(c); got != tt.cmp {
			t.Errorf("PSN(%#x).Compare(%#x) = %d, want sign %d", uint32(tt.p), uint32(tt.q), c, tt.cmp)
		}
		if got := tt.p.Diff(tt.q); got != tt.diff {
			t.Errorf("PSN(%#x).Diff(%#x) = %d, want %d", uint32(tt.p), uint32(tt.q), got, tt.diff)
		}
		if got := tt.p.Before(tt.q); got != tt.before {
			t.Errorf("PSN(%#x).Before(%#x) = %v, want %v", uint32(tt.p), uint32(tt.q), got, tt.before)
		}
		if got := tt.p.After(tt.q); got != tt.after {
			t.Errorf("PSN(%#x).After(%#x) = %v, want %v", uint32(tt.p), uint32(tt.q), got, tt.after)
		}
	}
}

func sign(v int32) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// TestPSNProperties checks, for random PSNs and distances, that Add and Diff
// agree and that order follows the serial-number rule (rxe psn_compare).
func TestPSNProperties(t *testing.T) {
	r := newRand(t)
	for range 100000 {
		p := wire.PSN(r.Uint32() & wire.PSNMask)
		d := int32(r.IntN(1<<24)) - 1<<23 // [-2^23, 2^23)
		q := p.Add(uint32(d))             // q = p + d mod 2^24
		if q > wire.PSNMask {
			t.Fatalf("PSN(%#x).Add(%d) = %#x, not 24 bits", uint32(p), d, uint32(q))
		}
		if got := q.Sub(uint32(d)); got != p {
			t.Fatalf("PSN(%#x).Sub(%d) = %#x, want %#x", uint32(q), d, uint32(got), uint32(p))
		}
		if got := q.Diff(p); got != d {
			t.Fatalf("PSN(%#x).Diff(%#x) = %d, want %d", uint32(q), uint32(p), got, d)
		}
		wantAfter := d > 0
		wantBefore := d < 0
		if got := q.After(p); got != wantAfter {
			t.Fatalf("PSN(%#x).After(%#x) = %v, want %v (distance %d)", uint32(q), uint32(p), got, wantAfter, d)
		}
		if got := q.Before(p); got != wantBefore {
			t.Fatalf("PSN(%#x).Before(%#x) = %v, want %v (distance %d)", uint32(q), uint32(p), got, wantBefore, d)
		}
		if d != -1<<23 { // at exactly half both directions are "before"
			if got, want := sign(p.Compare(q)), -sign(q.Compare(p)); got != want {
				t.Fatalf("PSN(%#x).Compare(%#x) sign %d, want %d", uint32(p), uint32(q), got, want)
			}
		}
	}
}

func TestPSNInWindow(t *testing.T) {
	tests := []struct {
		p, start wire.PSN
		n        uint32
		want     bool
	}{
		{0, 0, 0, false},
		{0, 0, 1, true},
		{1, 0, 1, false},
		{5, 3, 3, true},
		{6, 3, 3, false},
		{2, 3, 3, false},
		{0xFFFFFE, 0xFFFFFE, 4, true},
		{0xFFFFFF, 0xFFFFFE, 4, true},
		{0, 0xFFFFFE, 4, true}, // window across the wrap
		{1, 0xFFFFFE, 4, true},
		{2, 0xFFFFFE, 4, false},
		{0xFFFFFD, 0xFFFFFE, 4, false},
		{0x7FFFFF, 0, 1 << 23, true},
		{0x800000, 0, 1 << 23, false},
		{0xABCDEF, 0x123456, 1 << 24, true}, // the whole space
	}
	for _, tt := range tests {
		if got := tt.p.InWindow(tt.start, tt.n); got != tt.want {
			t.Errorf("PSN(%#x).InWindow(%#x, %d) = %v, want %v", uint32(tt.p), uint32(tt.start), tt.n, got, tt.want)
		}
	}
}
