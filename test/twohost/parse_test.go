package twohost

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The parsers of the tools' output that the matrix (twohost_test.go, tag
// twohost) uses; they are plain functions, tested here without the bed.

var (
	// rdma-core's pingpong result lines (pp_print_results)
	ppBytes = regexp.MustCompile(`(?m)^\d+ bytes in [\d.]+ seconds = ([\d.]+|inf) Mbit/sec$`)
	ppIters = regexp.MustCompile(`(?m)^\d+ iters in [\d.]+ seconds = [\d.]+ usec/iter$`)
	// perftest's result row: #bytes #iterations, then the figures
	perftestRow = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)`)
	// devinfo's port MTU line: "active_mtu:		1024 (3)"
	activeMTU = regexp.MustCompile(`(?m)^\s*active_mtu:\s+(\d+)`)
)

// tm_pingpong's counts of what a side received (tools/tmpingpong
// ResultLines).
var tmReceived = regexp.MustCompile(`(?m)^received: (\d+) matched, (\d+) unexpected \((\d+) posted late\), (\d+) eager, (\d+) rendezvous, \d+ syncs$`)

type tmCounts struct{ matched, unexpected, late, eager, rndv int }

// xsrq_pingpong's address lines (xsrq_pingpong.c ADDR_FORMAT).
var xsrqLine = regexp.MustCompile(`(?m)^ *(local|remote): LID [0-9a-f]{4}, QPN RECV ([0-9a-f]{6}) SEND ([0-9a-f]{6}), PSN ([0-9a-f]{6}), SRQN ([0-9a-f]{6}), GID \S+$`)

// xsrqDest is what an address line says: the QPNs, PSN and SRQ number.
type xsrqDest struct{ recvQPN, sendQPN, psn, srqn string }

// xsrqDests returns a side's local and remote address lines; ok is false
// unless both are there and the output ends in "success".
func xsrqDests(out string) (local, remote xsrqDest, ok bool) {
	m := xsrqLine.FindAllStringSubmatch(out, -1)
	if len(m) != 2 || m[0][1] == m[1][1] || !strings.HasSuffix(out, "success\n") {
		return local, remote, false
	}
	for _, l := range m {
		d := xsrqDest{l[2], l[3], l[4], l[5]}
		if l[1] == "local" {
			local = d
		} else {
			remote = d
		}
	}
	return local, remote, true
}

func tmReceivedCounts(out string) (tmCounts, bool) {
	m := tmReceived.FindStringSubmatch(out)
	if m == nil {
		return tmCounts{}, false
	}
	var v [5]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return tmCounts{v[0], v[1], v[2], v[3], v[4]}, true
}

// bwAverage returns the BW average column (MB/s) of a perftest BW run's
// result row, false without one.
func bwAverage(out string) (float64, bool) {
	m := perftestRow.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[4], 64)
	return v, err == nil
}

// latTypical returns the t_typical column (µs) of a perftest latency run's
// result row: #bytes #iterations t_min t_max t_typical ...
var latRow = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)`)

func latTypical(out string) (float64, bool) {
	m := latRow.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[5], 64)
	return v, err == nil
}

// lastError returns the line of a tool's error output that says why it
// failed: a Go runtime panic's first line when it crashed, else its last
// line that is not a perftest separator.
func lastError(stderr string) string {
	lines := strings.Split(stderr, "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return strings.TrimSpace(l)
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && strings.Trim(l, "-*") != "" {
			return l
		}
	}
	return ""
}

func TestParsers(t *testing.T) {
	bw := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 65536      2000             973.41             909.36 \t\t   0.014550\n" +
		"---------------------------------------------------------------------------------------\n"
	if got, ok := bwAverage(bw); !ok || got != 909.36 {
		t.Errorf("bwAverage: got %v, %v, want 909.36", got, ok)
	}
	lat := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 8       1000          35.24          1656.30      126.17   \t       175.83      \t169.81 \t\t828.81  \t\t1656.30\n"
	if got, ok := latTypical(lat); !ok || got != 126.17 {
		t.Errorf("latTypical: got %v, %v, want 126.17", got, ok)
	}
	if _, ok := bwAverage(" #bytes     #iterations    BW peak[MB/sec]\n"); ok {
		t.Error("bwAverage found a row in a header")
	}
	if _, ok := latTypical("nothing\n"); ok {
		t.Error("latTypical found a row in nothing")
	}
	if m := activeMTU.FindStringSubmatch("\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t1024 (3)\n"); m == nil || m[1] != "1024" {
		t.Errorf("activeMTU: got %q", m)
	}
	pp := "1638400 bytes in 0.04 seconds = 319.31 Mbit/sec\n200 iters in 0.04 seconds = 205.24 usec/iter\n"
	if !ppBytes.MatchString(pp) || !ppIters.MatchString(pp) {
		t.Error("pingpong result lines not matched")
	}
	for _, c := range []struct{ in, want string }{
		{"softnic write_bw: out-of-band exchange (keys): the peer closed the connection\n", "softnic write_bw: out-of-band exchange (keys): the peer closed the connection"},
		{"x\npanic: runtime error: index out of range [-1]\n\ngoroutine 8 [running]:\nnic.f()\n", "panic: runtime error: index out of range [-1]"},
		{"softnic: failed\n------------\n\n", "softnic: failed"},
		{"", ""},
	} {
		if got := lastError(c.in); got != c.want {
			t.Errorf("lastError(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestXSRQDests(t *testing.T) {
	out := "   local: LID 0000, QPN RECV 000011 SEND 000012, PSN 9d5e1c, SRQN 000001, GID ::ffff:10.77.0.1\n" +
		"  remote: LID 0000, QPN RECV 000013 SEND 000014, PSN 0a0b0c, SRQN 000002, GID ::ffff:10.77.0.2\n" +
		"success\n"
	l, r, ok := xsrqDests(out)
	if !ok || l != (xsrqDest{"000011", "000012", "9d5e1c", "000001"}) || r != (xsrqDest{"000013", "000014", "0a0b0c", "000002"}) {
		t.Errorf("xsrqDests: %+v %+v %v", l, r, ok)
	}
	for _, bad := range []string{strings.TrimSuffix(out, "success\n"), out[strings.Index(out, "  remote"):]} {
		if _, _, ok := xsrqDests(bad); ok {
			t.Errorf("xsrqDests took %q", bad)
		}
	}
}

func TestTMReceivedCounts(t *testing.T) {
	out := "  local address:  LID 0x0000, QPN 0x000011, PSN 0x455c52, GID ::ffff:10.78.0.1\n" +
		"received: 726 matched, 1274 unexpected (126 posted late), 1000 eager, 1000 rendezvous, 109 syncs\n"
	got, ok := tmReceivedCounts(out)
	if want := (tmCounts{726, 1274, 126, 1000, 1000}); !ok || got != want {
		t.Errorf("got %+v %v, want %+v", got, ok, want)
	}
	if _, ok := tmReceivedCounts("received: 3 matched\n"); ok {
		t.Error("a partial line parsed")
	}
}
