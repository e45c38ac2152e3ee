package transport

import "testing"

func TestStoreAttrs(t *testing.T) {
	var a QPAttr
	attr := QPAttr{QKey: 7, DestQPN: 0xAB123456, MaxRdAtomic: 3, MaxDestRdAtomic: 200,
		PKeyIndex: 1, RetryCnt: 5, SQPSN: 0x1FFFFFF}
	StoreAttrs(&a, &attr, AttrQKey|AttrDestQPN|AttrMaxQPRdAtomic|AttrMaxDestRdAtomic|AttrSQPSN)
	if a.QKey != 7 || a.DestQPN != 0x123456 || a.MaxRdAtomic != 4 || a.MaxDestRdAtomic != 255 || a.SQPSN != 0x1FFFFFF {
		t.Errorf("stored %+v; want QKey 7, DestQPN 0x123456, max_rd_atomic 4, max_dest_rd_atomic 255, SQPSN as given", a)
	}
	if a.PKeyIndex != 0 || a.RetryCnt != 0 {
		t.Errorf("attributes outside the mask stored: pkey_index %d, retry_cnt %d", a.PKeyIndex, a.RetryCnt)
	}
	for n, want := range map[uint8]uint8{0: 0, 1: 1, 2: 2, 5: 8, 16: 16, 129: 255} {
		if got := roundUpPow2(n); got != want {
			t.Errorf("roundUpPow2(%d) = %d, want %d", n, got, want)
		}
	}
}
