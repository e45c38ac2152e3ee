package toolnic

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"
)

// TestEnvDefaults: what a tool leaves unset gets its default, what it
// sets stays.
func TestEnvDefaults(t *testing.T) {
	e := Env{}.WithDefaults()
	if e.Out != io.Discard || e.Err != io.Discard || e.Stall != DefaultStall || e.PSN == nil || e.PageSize != os.Getpagesize() {
		t.Errorf("Env{}.WithDefaults() = %+v, want discarded output, stall %v, a PSN source, page size %d", e, DefaultStall, os.Getpagesize())
	}
	for i := 0; i < 100; i++ {
		if psn := e.PSN(); psn > 0xffffff {
			t.Fatalf("PSN() = %#x, want 24 bits", psn)
		}
	}
	if got := (Env{Stall: -1}).WithDefaults().Stall; got != DefaultStall {
		t.Errorf("a negative stall: %v, want %v", got, DefaultStall)
	}
	var out bytes.Buffer
	set := Env{Out: &out, Err: &out, Stall: time.Second, PSN: func() uint32 { return 7 }, PageSize: 1024}.WithDefaults()
	if set.Out != &out || set.Err != &out || set.Stall != time.Second || set.PSN() != 7 || set.PageSize != 1024 {
		t.Errorf("WithDefaults changed what was set: %+v", set)
	}
}
