package perftest

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/verbs"
)

func gid(s string) verbs.GID { return verbs.GIDFromAddr(netip.MustParseAddr(s)) }

// The addresses of rxe-peer's ib_write_bw_5000 capture (client side).
var captured = Dest{QPN: 0x15, PSN: 0xb8f5be, RKey: 0x654, VAddr: 0x56390d5f8388, OutReads: 1, GID: gid("10.77.0.3")}

func TestKeysMarshal(t *testing.T) {
	b := MarshalKeys(captured, true)
	want := "0000:0001:000015:b8f5be:00000654:000056390d5f8388:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:"
	if len(b) != KeyMsgSizeGID || string(bytes.TrimRight(b, "\x00")) != want || len(want) != KeyMsgSizeGID-1 {
		t.Errorf("MarshalKeys(GID): got %q (%d bytes), want %q", b, len(b), want)
	}
	d, err := ParseKeys(b, true)
	if err != nil || d != captured {
		t.Errorf("ParseKeys(MarshalKeys): got %+v, %v", d, err)
	}
	b = MarshalKeys(captured, false)
	want = "0000:0001:000015:b8f5be:00000654:000056390d5f8388:00000000"
	if len(b) != KeyMsgSize || string(bytes.TrimRight(b, "\x00")) != want || len(want) != KeyMsgSize-1 {
		t.Errorf("MarshalKeys(no GID): got %q, want %q", b, want)
	}
	d, err = ParseKeys(b, false)
	if want := captured; err != nil || d.QPN != want.QPN || d.VAddr != want.VAddr || d.GID != (verbs.GID{}) {
		t.Errorf("ParseKeys(no GID): got %+v, %v", d, err)
	}
	// What perftest's sprintf writes for a READ test's 128 outstanding reads.
	r := MarshalKeys(Dest{OutReads: 0x80, QPN: 0x17, PSN: 0x17e92c, RKey: 0x804, VAddr: 0x55d24eaf5388, GID: gid("10.77.0.3"), SRQN: 0xabc}, true)
	if !strings.HasPrefix(string(r), "0000:0080:000017:17e92c:00000804:000055d24eaf5388:") || !strings.HasSuffix(string(bytes.TrimRight(r, "\x00")), ":00000abc:") {
		t.Errorf("READ keys: got %q", r)
	}
}

func TestParseKeysErrors(t *testing.T) {
	for _, msg := range []string{"", "0000:000012:5fd283:00000000000000000000ffff0a4d0003\x00", "6.06", strings.Repeat("z", 108)} {
		_, err := ParseKeys([]byte(msg), true)
		var fe *ErrFormat
		if !errors.As(err, &fe) {
			t.Errorf("ParseKeys(%q): got %v, want an ErrFormat", msg, err)
		}
	}
	_, err := ParseKeys([]byte("0000:000012:5fd283:00000000000000000000ffff0a4d0003\x00"), true)
	if !strings.Contains(err.Error(), "pingpong") {
		t.Errorf("a pingpong address: got %v, want a hint naming pingpong", err)
	}
}

func TestVersion(t *testing.T) {
	b := MarshalVersion(Version)
	if len(b) != 16 || string(bytes.TrimRight(b, "\x00")) != "6.06" {
		t.Errorf("MarshalVersion: got %q", b)
	}
	for in, want := range map[string]float64{"6.06\x00": 6.06, "5.70": 5.70, "6.29-rc1": 6.29, "4.6": 4.6} {
		_, v, err := ParseVersion([]byte(in))
		if err != nil || v != want {
			t.Errorf("ParseVersion(%q): got %v, %v, want %v", in, v, err, want)
		}
	}
	if _, _, err := ParseVersion([]byte("0000:000011:87c0")); err == nil || !strings.Contains(err.Error(), "pingpong") {
		t.Errorf("pingpong bytes: got %v, want an error naming pingpong", err)
	}
	if _, _, err := ParseVersion([]byte("GET / HTTP/1.1\r\n")); err == nil {
		t.Error("HTTP: got no error")
	}
}

func TestSmallMessages(t *testing.T) {
	if got := Int32(4096); !bytes.Equal(got, []byte{0, 0, 0x10, 0}) || ParseInt32(got) != 4096 {
		t.Errorf("Int32: got %x", got)
	}
	if got := MTUMessage(ibv.MTU1024, 6.06); string(got) != "3\x00" {
		t.Errorf("MTUMessage: got %q, want \"3\\x00\"", got)
	}
	if got := MTUMessage(ibv.MTU4096, 5.0); string(got) != "5\x00\x00\x00" {
		t.Errorf("MTUMessage(old peer): got %q", got)
	}
	if ParseMTUMessage([]byte("3\x00")) != ibv.MTU1024 || ParseMTUMessage([]byte("9\x00")) != 0 {
		t.Error("ParseMTUMessage")
	}
	r := Report{Size: 5000, Iters: 5, BWPeak: 6.98, BWAvg: 6.33, MsgRate: 0.001328}
	m := ReportMessages(r, 6.06)
	if len(m) != 5 || !bytes.Equal(m[0], []byte{0, 0, 0, 0, 0, 0, 0x13, 0x88}) || len(m[1]) != 8 || ParseReport(m) != r {
		t.Errorf("ReportMessages: got %x", m)
	}
	if m := ReportMessages(r, 5.0); len(m[1]) != 4 || ParseReport(m) != r {
		t.Errorf("ReportMessages(old peer): got %x", m)
	}
}

func TestFormatDest(t *testing.T) {
	for _, tt := range []struct {
		local bool
		d     Dest
		v     Verb
		want  string
	}{
		{true, captured, Write, " local address: LID 0000 QPN 0x0015 PSN 0xb8f5be RKey 0x000654 VAddr 0x0056390d5f8388\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:03\n"},
		{false, Dest{QPN: 0x15, PSN: 0x4e74e, RKey: 0x6b2, VAddr: 0x56310fb6b388, GID: gid("10.77.0.2")}, Write,
			" remote address: LID 0000 QPN 0x0015 PSN 0x4e74e RKey 0x0006b2 VAddr 0x0056310fb6b388\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:02\n"},
		{true, Dest{QPN: 0x17, PSN: 0x17e92c, OutReads: 128, RKey: 0x804, VAddr: 0x55d24eaf5388, GID: gid("10.77.0.3")}, Read,
			" local address: LID 0000 QPN 0x0017 PSN 0x17e92c OUT 0x80 RKey 0x000804 VAddr 0x0055d24eaf5388\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:03\n"},
		{true, Dest{QPN: 0x1b, PSN: 0xb2437b, GID: gid("10.77.0.3")}, Atomic,
			" local address: LID 0000 QPN 0x001b PSN 0xb2437b\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:03\n"},
		{true, Dest{QPN: 0x18, PSN: 0xd9cbfd, GID: gid("10.77.0.3")}, Send,
			" local address: LID 0000 QPN 0x0018 PSN 0xd9cbfd\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:03\n"},
	} {
		if got := FormatDest(tt.local, tt.d, tt.v); got != tt.want {
			t.Errorf("FormatDest(%v):\ngot  %q\nwant %q", tt.v, got, tt.want)
		}
	}
}

// The client's test information block of rxe-peer's ib_write_bw_5000
// capture (ib_write_bw -d rxe0 -n 5 -m 1024 -F -x 1 -s 5000 10.77.0.2).
const writeBWInfo = `---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF		Device         : rxe0
 Number of qps   : 1		Transport type : IB
 Connection type : RC		Using SRQ      : OFF
 PCIe relax order: ON
 ibv_wr* API     : OFF
 TX depth        : 5
 CQ Moderation   : 5
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 1
 Max inline data : 0[B]
 rdma_cm QPs	 : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
`

// The server's block of the ib_atomic_bw_cas capture.
const atomicBWServerInfo = `---------------------------------------------------------------------------------------
                    Atomic CMP_AND_SWAP BW Test
 Dual-port       : OFF		Device         : rxe0
 Number of qps   : 1		Transport type : IB
 Connection type : RC		Using SRQ      : OFF
 PCIe relax order: ON
 ibv_wr* API     : OFF
 CQ Moderation   : 5
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 1
 Outstand reads  : 128
 rdma_cm QPs	 : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
`

// The client's block of the ib_write_lat_64 capture.
const writeLatInfo = `---------------------------------------------------------------------------------------
                    RDMA_Write Latency Test
 Dual-port       : OFF		Device         : rxe0
 Number of qps   : 1		Transport type : IB
 Connection type : RC		Using SRQ      : OFF
 PCIe relax order: OFF
 ibv_wr* API     : OFF
 TX depth        : 1
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 1
 Max inline data : 0[B]
 rdma_cm QPs	 : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
`

func TestFormatTestInfo(t *testing.T) {
	c := Defaults(Write, BW)
	c.Iters, c.Size, c.ServerName = 5, 5000, "10.77.0.2"
	if _, err := c.resolve(); err != nil {
		t.Fatal(err)
	}
	if got := FormatTestInfo(&c, TestInfo{Device: "rxe0", MTU: 1024, GIDIndex: 1}); got != writeBWInfo {
		t.Errorf("write_bw client:\ngot\n%s\nwant\n%s", got, writeBWInfo)
	}
	c = Defaults(Atomic, BW)
	c.Iters, c.Atomic = 5, CmpAndSwap
	if _, err := c.resolve(); err != nil {
		t.Fatal(err)
	}
	if got := FormatTestInfo(&c, TestInfo{Device: "rxe0", MTU: 1024, GIDIndex: 1, OutReads: 128}); got != atomicBWServerInfo {
		t.Errorf("atomic_bw server:\ngot\n%s\nwant\n%s", got, atomicBWServerInfo)
	}
	c = Defaults(Write, Lat)
	c.Iters, c.Size, c.ServerName = 5, 64, "10.77.0.2"
	if _, err := c.resolve(); err != nil {
		t.Fatal(err)
	}
	if got := FormatTestInfo(&c, TestInfo{Device: "rxe0", MTU: 1024, GIDIndex: 1}); got != writeLatInfo {
		t.Errorf("write_lat client:\ngot\n%s\nwant\n%s", got, writeLatInfo)
	}
}

func TestFormatResults(t *testing.T) {
	c := Defaults(Write, BW)
	if got, want := Header(&c), resultLine+" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"; got != want {
		t.Errorf("Header: got %q, want %q", got, want)
	}
	// ib_write_bw_5000 capture: " 5000       5                6.98               6.33   \t\t   0.001328"
	r := BWResult{Size: 5000, Iters: 5, BWPeak: 6.98, BWAvg: 6.33, MsgRate: 0.001328}
	if got, want := FormatBW(&c, r), " 5000       5                6.98               6.33   \t\t   0.001328\n"; got != want {
		t.Errorf("FormatBW:\ngot  %q\nwant %q", got, want)
	}
	c.ReportGbit = true
	if got, want := Header(&c), resultLine+" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"; got != want {
		t.Errorf("Header(gbits): got %q", got)
	}
	if got, want := FormatBW(&c, BWResult{Size: 8, Iters: 5, BWPeak: 0.03, BWAvg: 0.02, MsgRate: 0.00249}), " 8          5           0.030000            0.020000            0.002490\n"; got != want {
		t.Errorf("FormatBW(small gbits):\ngot  %q\nwant %q", got, want)
	}
	c.Output = OutputBW
	if got := FormatBW(&c, r); got != "6.330000\n" {
		t.Errorf("--output=bandwidth: got %q", got)
	}

	// The ib_write_lat_64 client: 5 iterations whose three kept
	// differences are 1938680, 2433440 and 2549820 ns.
	l := Defaults(Write, Lat)
	posted := []int64{0, 1938680, 1938680 + 2433440, 1938680 + 2433440 + 2549820, 1938680 + 2433440 + 2549820 + 3000000}
	got := FormatLat(&l, ComputeLat(&l, posted, 64))
	want := " 64      5          969.34         1274.91      1093.03  \t       1093.03     \t123.00 \t\t1274.91 \t\t1274.91\n"
	if got != want {
		t.Errorf("FormatLat:\ngot  %q\nwant %q", got, want)
	}
	if r := ComputeLat(&l, posted, 64); r.Samples != nil {
		t.Errorf("Samples without -H: %v", r.Samples)
	}
	h := l
	h.Histogram = true
	if r := ComputeLat(&h, posted, 64); !slices.Equal(r.Samples, []float64{969.34, 1216.72}) {
		t.Errorf("Samples with -H: got %v, want the two kept half round trips, sorted", r.Samples)
	}
	h.Cycles = true
	if r := ComputeLat(&h, posted, 64).inUsec(&h); !slices.Equal(r.Samples, []float64{969.34, 1216.72}) || r.Typical != 1093.03 {
		t.Errorf("Samples with -H -C in Result: got %v (typical %v), want microseconds", r.Samples, r.Typical)
	}
	if got, want := Header(&l), resultLine+" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"; got != want {
		t.Errorf("Header(lat): got %q", got)
	}
	l.Duration = 5e9
	if got, want := FormatLat(&l, ComputeLatDuration(&l, 1000, 4e9, 2)), " 2             1000            2000.00        250.00 \n"; got != want {
		t.Errorf("FormatLat(duration):\ngot  %q\nwant %q", got, want)
	}
}

func TestComputeBW(t *testing.T) {
	c := Defaults(Write, BW)
	c.CQMod = 2
	// 4 WRs of 1 MiB posted every 1 ms, completions signalled on the 2nd
	// and 4th at 2 ms and 4 ms: 1 MiB per ms on average and at peak.
	tm := BWTimes{Posted: []int64{0, 1e6, 2e6, 3e6}, Completed: []int64{0, 2e6, 0, 4e6}}
	r := ComputeBW(&c, tm, 1<<20, 4)
	if pingpong.CFloat(r.BWAvg, 2) != "1000.00" || pingpong.CFloat(r.BWPeak, 2) != "1000.00" || pingpong.CFloat(r.MsgRate, 6) != "0.001000" {
		t.Errorf("ComputeBW: got %+v", r)
	}
	if altHex(0, 4) != "0000" || altHex(0x15, 6) != "0x0015" || altHex(0x4e74e, 6) != "0x4e74e" || altHex(0x56390d5f8388, 16) != "0x0056390d5f8388" {
		t.Error("altHex")
	}
	if cg(1e6) != "1e+06" || cg(123.456) != "123.456" || cg(1.5e-7) != "1.5e-07" {
		t.Errorf("cg: %s %s %s", cg(1e6), cg(123.456), cg(1.5e-7))
	}
}

// perftest measures a bandwidth run's peak only up to 20000 iterations
// (force_dependecies): beyond, ComputeBW's search, quadratic in the
// iterations, took 47 s of CPU at 2 M, while the server, done at once,
// gave up waiting for the end of the run.
func TestNoPeakBeyond20000(t *testing.T) {
	for _, tc := range []struct {
		test   TestKind
		iters  int
		noPeak bool
	}{
		{BW, 20000, false},
		{BW, 20001, true},
		{BW, 2000000, true},
		{Lat, 2000000, false}, // latency tests have no peak
	} {
		c := Defaults(Write, tc.test)
		c.Iters, c.ServerName = tc.iters, "10.77.0.2"
		if _, err := c.resolve(); err != nil {
			t.Fatal(err)
		}
		if c.NoPeak != tc.noPeak {
			t.Errorf("%v with %d iterations: NoPeak %v, want %v", c.Tool(), tc.iters, c.NoPeak, tc.noPeak)
		}
	}
}
