package pingpong

import (
	"math"
	"testing"
	"time"

	"github.com/softnic/softnic/verbs"
)

func TestAddressLine(t *testing.T) {
	d := Dest{QPN: 0x11, PSN: 0x87c0ac, GID: gid("10.77.0.3")}
	for _, tt := range []struct {
		local, ud bool
		want      string
	}{
		{true, false, "  local address:  LID 0x0000, QPN 0x000011, PSN 0x87c0ac, GID ::ffff:10.77.0.3\n"},
		{false, false, "  remote address: LID 0x0000, QPN 0x000011, PSN 0x87c0ac, GID ::ffff:10.77.0.3\n"},
		// ud_pingpong.c prints "PSN 0x%06x: GID" on its local line.
		{true, true, "  local address:  LID 0x0000, QPN 0x000011, PSN 0x87c0ac: GID ::ffff:10.77.0.3\n"},
	} {
		if got := AddressLine(tt.local, d, tt.ud); got != tt.want {
			t.Errorf("AddressLine(%v, %v): got %q, want %q", tt.local, tt.ud, got, tt.want)
		}
	}
	if got, want := AddressLine(true, Dest{QPN: 0x14, PSN: 0xef5f64}, false), "  local address:  LID 0x0000, QPN 0x000014, PSN 0xef5f64, GID ::\n"; got != want {
		t.Errorf("zero GID: got %q, want %q", got, want)
	}
}

func TestInetNtop6(t *testing.T) {
	// What glibc's inet_ntop(AF_INET6) prints for these.
	for in, want := range map[string]string{
		"::":                      "::",
		"::1":                     "::1",
		"::ffff:10.77.0.2":        "::ffff:10.77.0.2",
		"fe80::5054:ff:fe4d:7702": "fe80::5054:ff:fe4d:7702",
		"1:0:0:2:0:0:0:3":         "1:0:0:2::3",
		"1:0:0:2:0:0:3:4":         "1::2:0:0:3:4",
		"::2:3":                   "::0.2.0.3",
		"2001:db8::":              "2001:db8::",
		"1:2:3:4:5:6:7:8":         "1:2:3:4:5:6:7:8",
		"1:0:2:3:4:5:6:7":         "1:0:2:3:4:5:6:7",
		"::ffff:0:1":              "::ffff:0.0.0.1",
	} {
		var g verbs.GID
		copy(g[:], mustAddr16(in))
		if got := InetNtop6(g); got != want {
			t.Errorf("InetNtop6(%s): got %q, want %q", in, got, want)
		}
	}
}

func mustAddr16(s string) []byte {
	a := gid(s)
	return a[:]
}

func TestResultLines(t *testing.T) {
	// The client and server of rxe-peer's rc_pingpong_5000.txt capture
	// (ibv_rc_pingpong -n 5 -s 5000): 28509 and 31971 microseconds.
	for _, tt := range []struct {
		size, iters int
		usec        float32
		want        string
	}{
		{5000, 5, 28509, "50000 bytes in 0.03 seconds = 14.03 Mbit/sec\n5 iters in 0.03 seconds = 5701.80 usec/iter\n"},
		{5000, 5, 31971, "50000 bytes in 0.03 seconds = 12.51 Mbit/sec\n5 iters in 0.03 seconds = 6394.20 usec/iter\n"},
		{512, 5, 9115, "5120 bytes in 0.01 seconds = 4.49 Mbit/sec\n5 iters in 0.01 seconds = 1823.00 usec/iter\n"},
		{4096, 1000, 123456789, "8192000 bytes in 123.46 seconds = 0.53 Mbit/sec\n1000 iters in 123.46 seconds = 123456.79 usec/iter\n"},
		{1, 1, 0, "2 bytes in 0.00 seconds = inf Mbit/sec\n1 iters in 0.00 seconds = 0.00 usec/iter\n"},
	} {
		if got := ResultLines(tt.size, tt.iters, tt.usec); got != tt.want {
			t.Errorf("ResultLines(%d, %d, %v):\ngot  %q\nwant %q", tt.size, tt.iters, tt.usec, got, tt.want)
		}
	}
	if got := Usec(1500 * time.Microsecond); got != 1500 {
		t.Errorf("Usec: got %v", got)
	}
	if F2(math.NaN()) != "-nan" || F2(math.Inf(-1)) != "-inf" || F2(1.005) != "1.00" {
		t.Errorf("F2: got %q %q %q", F2(math.NaN()), F2(math.Inf(-1)), F2(1.005))
	}
	if got, want := InvalidPageLine(3), "invalid data in page 3\n"; got != want {
		t.Errorf("InvalidPageLine: got %q, want %q", got, want)
	}
}

func TestCheckPattern(t *testing.T) {
	const page = 4096
	b := make([]byte, 3*page+100)
	fillPattern(b, page)
	if bad := checkPattern(b, page, 0x7b); len(bad) != 0 {
		t.Errorf("softnic pattern: got bad pages %v", bad)
	}
	b[page+5] ^= 1
	b[3*page+99] ^= 1
	if bad := checkPattern(b, page, 0x7b); len(bad) != 2 || bad[0] != 1 || bad[1] != 3 {
		t.Errorf("corrupted pattern: got bad pages %v, want [1 3]", bad)
	}
	// What a C client leaves: 0x7b everywhere but the page starts.
	for i := range b {
		b[i] = 0x7b
		if i%page == 0 {
			b[i] = 0
		}
	}
	if bad := checkPattern(b, page, 0x7b); len(bad) != 0 {
		t.Errorf("C client's fill: got bad pages %v", bad)
	}
	b[2*page] = 0x7b // the C tools' own check: the first byte of page 2
	if bad := checkPattern(b, page, 0x7b); len(bad) != 1 || bad[0] != 2 {
		t.Errorf("C client's fill, page 2 broken: got %v, want [2]", bad)
	}
}
